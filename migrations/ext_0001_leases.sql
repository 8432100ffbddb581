-- Leases (ext, docs/protocol.md §11 Leases): who held which paths, when,
-- and how each lease ended. Created at every open, beside schema 12's
-- tables (`CREATE ... IF NOT EXISTS`, like the start indexes and the
-- clean-exit record): `user_version` stays 12, as the contract fixes it, so
-- an older broker still opens the file and leaves this table alone.
CREATE TABLE IF NOT EXISTS a2a_ext_leases (
    id          TEXT PRIMARY KEY,
    context_id  TEXT NOT NULL,     -- the holder's context: leases live there
    holder_peer TEXT NOT NULL,
    paths       TEXT NOT NULL,     -- JSON array of the normalised paths
    exclusive   INTEGER NOT NULL,
    reason      TEXT,
    acquired_at TEXT NOT NULL,
    expires_at  TEXT NOT NULL,     -- the last TTL's end (acquire or renew)
    ended_at    TEXT,              -- NULL while held
    end_reason  TEXT               -- released | expired | deregistered | disconnected | restart
) WITHOUT ROWID;
-- The open leases, for the restart rule (every one is ended at start).
CREATE INDEX IF NOT EXISTS a2a_ext_leases_open ON a2a_ext_leases (id) WHERE ended_at IS NULL;
