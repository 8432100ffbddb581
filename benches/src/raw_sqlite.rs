//! The raw baseline of the commit benchmark: the rows one task creation
//! writes (one `a2a_tasks` row, one `a2a_messages` row, one `a2a_task_log`
//! row, as `store::write::{insert_task, insert_message, append_log}` write
//! them), inserted by plain rusqlite with cached statements on a database
//! opened by the broker's own `open_writer` (same schema, WAL, same
//! `synchronous`). Values have the broker's shapes and sizes: task ids
//! from the broker's own minting (`a2a_broker::bench::uuid`; time-ordered,
//! UUIDv7, since broker 6aea4da; the baseline used random v4 ids before, as
//! the broker did), the stamped message JSON, the status JSON holding it, the
//! status-update event JSON of the log; a new requester context every
//! [`CREATIONS_PER_REQUESTER`] creations, as in the broker runs.

use crate::workload::{CREATIONS_PER_REQUESTER, TASK_TEXT};
use a2a_broker::bench as clock;
use a2a_broker::bench::open_writer;
use a2a_broker::Durability;
use rusqlite::{params, Connection};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Departures from the broker's way, for diagnosis only (see BENCHMARKS.md).
#[derive(Debug, Clone, Copy, Default)]
pub struct Variant {
    /// Random v4-style task ids (the broker's ids before 6aea4da) instead
    /// of time-ordered ones: each new row lands on a random leaf of every
    /// B-tree keyed by the task id, instead of at its right edge.
    pub random_ids: bool,
    /// `PRAGMA cache_size = -KIB` instead of SQLite's default 2 MiB.
    pub cache_kib: Option<u32>,
    /// A `SAVEPOINT call` / `RELEASE call` around each creation, as the
    /// broker's writer puts around each call (so a refused call rolls
    /// back alone).
    pub savepoints: bool,
    /// `PRAGMA temp_store = MEMORY`: the savepoints' sub-journal stays in
    /// memory instead of spilling to a temporary file.
    pub temp_store_memory: bool,
}

/// A database written the raw way.
pub struct RawStore {
    conn: Connection,
    /// The database file.
    pub db: PathBuf,
    calls: u64,
    variant: Variant,
    /// State of the generator of [`Variant::random_ids`].
    rng: u64,
    _dir: tempfile::TempDir,
}

impl RawStore {
    /// A fresh database with the broker's schema and pragmas.
    pub fn open(durability: Durability) -> RawStore {
        RawStore::open_variant(durability, Variant::default())
    }

    /// A fresh database, written with a [`Variant`].
    pub fn open_variant(durability: Durability, variant: Variant) -> RawStore {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("raw.db");
        let conn = open_writer(&db, durability).expect("open the store");
        if variant.temp_store_memory {
            conn.execute_batch("PRAGMA temp_store = MEMORY;")
                .expect("temp store");
        }
        if let Some(kib) = variant.cache_kib {
            conn.execute_batch(&format!("PRAGMA cache_size = -{kib};"))
                .expect("cache size");
        }
        RawStore {
            conn,
            db,
            calls: 0,
            variant,
            // Seeded from the random bits of a fresh id.
            rng: u64::from_str_radix(&clock::uuid()[24..], 16).unwrap_or(1),
            _dir: dir,
        }
    }

    /// Writes the rows of one task creation (inside the caller's transaction).
    fn create_task(&mut self) -> rusqlite::Result<()> {
        self.calls += 1;
        let n = self.calls;
        let k = (n - 1) / CREATIONS_PER_REQUESTER + 1;
        let ctx = format!("bench-ctx-{k}");
        let requester = format!("req{k}");
        let id = if self.variant.random_ids {
            random_v4(&mut self.rng)
        } else {
            clock::uuid()
        };
        let now = clock::now();
        let message_id = format!("m{n}");
        let message = format!(
            r#"{{"role":"user","parts":[{{"kind":"text","text":"{TASK_TEXT}"}}],"messageId":"{message_id}","taskId":"{id}","contextId":"{ctx}","from":"{requester}","to":"wrk"}}"#
        );
        let status = format!(r#"{{"state":"submitted","message":{message},"timestamp":"{now}"}}"#);
        let event = format!(
            r#"{{"kind":"status-update","taskId":"{id}","contextId":"{ctx}","status":{status},"final":false}}"#
        );
        self.conn
            .prepare_cached(
                "INSERT INTO a2a_tasks (id, seq, context_id, requester_peer, worker_ctx, worker_peer,
                   state, status, version, create_message_id, broadcast, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            )?
            .execute(params![
                id,
                n as i64,
                ctx,
                requester,
                "bench-workers",
                "wrk",
                "submitted",
                status,
                1i64,
                message_id,
                false,
                now,
                now
            ])?;
        self.conn
            .prepare_cached(
                "INSERT INTO a2a_messages (task_id, message_id, pos, from_peer, body) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![id, message_id, 0i64, requester, message])?;
        self.conn
            .prepare_cached(
                "INSERT INTO a2a_task_log (task_id, version, kind, actor, payload, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![id, 1i64, "status-update", requester, event, now])?;
        Ok(())
    }

    /// `n` task creations, `per_tx` to a transaction (`BEGIN IMMEDIATE` ..
    /// `COMMIT`, as the broker's writer does); the time they took.
    pub fn run(&mut self, n: u64, per_tx: u64) -> Duration {
        let per_tx = per_tx.max(1);
        let start = Instant::now();
        let mut left = n;
        while left > 0 {
            let k = left.min(per_tx);
            self.conn.execute_batch("BEGIN IMMEDIATE").expect("begin");
            for _ in 0..k {
                if self.variant.savepoints {
                    self.conn
                        .execute_batch("SAVEPOINT call")
                        .expect("savepoint");
                }
                self.create_task().expect("insert the rows of a task");
                if self.variant.savepoints {
                    self.conn.execute_batch("RELEASE call").expect("release");
                }
            }
            self.conn.execute_batch("COMMIT").expect("commit");
            left -= k;
        }
        start.elapsed()
    }
}

/// A random version-4-shaped UUID from a splitmix64 generator: the shape
/// and the scatter of the broker's old ids, without the OS random source.
fn random_v4(state: &mut u64) -> String {
    let mut next = || {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let (a, b) = (next(), next());
    let h = format!(
        "{a:016x}{:016x}",
        (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000
    );
    format!(
        "{}-{}-4{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[13..16],
        &h[16..20],
        &h[20..]
    )
}
