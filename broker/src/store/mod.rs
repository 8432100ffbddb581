//! The durable store: SQLite with WAL, one write connection (owned by the
//! writer thread) and read-only connections for readers.
//!
//! Opening is ordered so that a database the broker refuses is never
//! written: path checks and the one-broker lock ([`lock`]), then ownership
//! ([`file_guard`]), then a read-only look at the version and the pages,
//! and only then permission fixes, creation, WAL mode and migration.
//!
//! - [`lock`]: one broker per database (`DB-lock`).
//! - [`file_guard`]: ownership, permission bits, and the per-commit check
//!   that the file is still there.
//! - [`migrate`]: the numbered migrations under `migrations/`, embedded.
//! - [`write`]: the rows each call writes (inside the writer's transaction).
//! - [`read`]: loading tasks, listing, the task log.
//! - [`checkpoint`]: the thread that moves the write-ahead log into the
//!   database file, off the writer thread.
//! - [`check`]: what a start checks (every page only after a run that did
//!   not end cleanly, or before a migration), `a2a-broker check`, and the
//!   damaged flag a bad page found at run time sets.

pub mod check;
pub mod checkpoint;
pub mod file_guard;
pub mod lock;
pub mod migrate;
pub mod read;
pub mod write;

use crate::core::StoreError;
use file_guard::{FileGuard, Identity};
use lock::{DbLock, LockError};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How much a commit promises (`--durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: a committed call survives power loss.
    #[default]
    Full,
    /// `synchronous=NORMAL` (WAL): survives a crash of the broker, may lose
    /// the last commits on power loss; never corrupts.
    Normal,
}

/// Why the store cannot open. Each names the file; none has written to it.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("database {path}: {source}")]
    Sqlite {
        path: String,
        source: rusqlite::Error,
    },
    #[error("database {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("database {path} has schema version {found}, newer than this broker's {supported}; refusing to touch it")]
    TooNew {
        path: String,
        found: i64,
        supported: i64,
    },
    #[error("database {path} has schema version {found}; only a fresh database (0), a host-core v11 database or a v12 database can be opened")]
    Unsupported { path: String, found: i64 },
    #[error("database {path} is a directory: --db takes a file (it is created if missing)")]
    IsDirectory { path: String },
    #[error("database {path} is not a regular file")]
    NotAFile { path: String },
    #[error("database {path}: directory {dir} does not exist")]
    NoDirectory { path: String, dir: String },
    #[error("database {path}: {dir} is not a directory")]
    ParentNotDirectory { path: String, dir: String },
    /// Another broker runs on it (docs/protocol.md §10 Durability: one broker per database).
    #[error(
        "database {path} is in use by another broker ({holder}, lock file {lock}); stop it first"
    )]
    Locked {
        path: String,
        holder: String,
        lock: String,
    },
    #[error("database {path}: {file} belongs to uid {owner}, not to this broker's user (uid {me}); refusing to use it")]
    NotOwned {
        path: String,
        file: String,
        owner: u32,
        me: u32,
    },
    #[error("database {path} is damaged ({detail}); refusing to touch it")]
    Corrupt { path: String, detail: String },
    #[error("database {path} does not exist but {wal} does (another database's write-ahead log, which a new database would take for its own): move it away")]
    OrphanWal { path: String, wal: String },
    #[error("database {path} was replaced while it was being opened")]
    Replaced { path: String },
}

/// The write connection and its claim on the file.
pub struct Store {
    pub conn: Connection,
    /// The lock and the file's identity; the commit hook holds it too, so
    /// the lock lives as long as the connection.
    pub guard: Arc<FileGuard>,
    /// Lines to print: permission bits removed.
    pub notes: Vec<String>,
    /// The files this open created (none if the database existed): a start
    /// that fails later removes them.
    pub created: Vec<PathBuf>,
}

/// A database path checked and locked for this broker, not yet opened.
pub struct Locked {
    path: PathBuf,
    /// `path` with symlinks resolved: where SQLite puts the -wal and -shm.
    real: PathBuf,
    lock: DbLock,
    exists: bool,
}

/// Checks what `path` is and takes the one-broker lock. Creates nothing
/// but the lock file (removed again when the lock is dropped).
pub fn lock(path: &Path) -> Result<Locked, OpenError> {
    let p = path.display().to_string();
    let io = |source| OpenError::Io {
        path: p.clone(),
        source,
    };
    let exists = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Err(OpenError::IsDirectory { path: p }),
        Ok(m) if !m.is_file() => return Err(OpenError::NotAFile { path: p }),
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = parent(path);
            let d = dir.display().to_string();
            match std::fs::metadata(&dir) {
                Ok(m) if m.is_dir() => false,
                Ok(_) => return Err(OpenError::ParentNotDirectory { path: p, dir: d }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(OpenError::NoDirectory { path: p, dir: d })
                }
                Err(e) => return Err(io(e)),
            }
        }
        Err(e) => return Err(io(e)),
    };
    // The lock is named after the real path: two spellings of one
    // database (a symlink, `./`) must meet on one lock.
    let real = if exists {
        std::fs::canonicalize(path).map_err(io)?
    } else {
        let name = path
            .file_name()
            .ok_or_else(|| OpenError::IsDirectory { path: p.clone() })?;
        std::fs::canonicalize(parent(path)).map_err(io)?.join(name)
    };
    let lock_file = lock::lock_path(&real);
    let lock = DbLock::acquire(lock_file.clone()).map_err(|e| match e {
        LockError::Held { .. } => OpenError::Locked {
            path: p.clone(),
            holder: e.to_string(),
            lock: lock_file.display().to_string(),
        },
        LockError::Io(source) => OpenError::Io {
            path: lock_file.display().to_string(),
            source,
        },
    })?;
    Ok(Locked {
        path: path.to_path_buf(),
        real,
        lock,
        exists,
    })
}

fn parent(path: &Path) -> PathBuf {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// Locks, checks, creates or migrates, and opens the write connection.
pub fn open(path: &Path, durability: Durability) -> Result<Store, OpenError> {
    lock(path)?.open(durability)
}

/// Opens (creating and migrating if needed) the write connection; the lock
/// lives as long as it does. (The benchmarks' raw writer opens its database
/// so.)
#[cfg(feature = "bench")]
pub fn open_writer(path: &Path, durability: Durability) -> Result<Connection, OpenError> {
    open(path, durability).map(|s| s.conn)
}

impl Locked {
    /// Opens the locked database. Everything that can refuse it runs
    /// before the first write: a refused database stays byte-identical, and
    /// a database this call created is removed again if it fails.
    pub fn open(self, durability: Durability) -> Result<Store, OpenError> {
        let p = self.path.display().to_string();
        let files = file_guard::family(&self.real);
        if let Some((file, owner)) = file_guard::foreign_owner(&files) {
            return Err(OpenError::NotOwned {
                path: p,
                file: file.display().to_string(),
                owner,
                me: file_guard::own_uid(),
            });
        }
        if self.exists {
            check_read_only(&self.path, &files[1])?.log(&p);
        } else if std::fs::metadata(&files[1]).is_ok_and(|m| m.len() > 0) {
            return Err(OpenError::OrphanWal {
                path: p,
                wal: files[1].display().to_string(),
            });
        }
        let io = |source| OpenError::Io {
            path: p.clone(),
            source,
        };
        let notes = file_guard::tighten(&files).map_err(io)?;
        // What this start creates, and removes again if it fails: the
        // database and those of its -wal and -shm not there before.
        let created: Vec<PathBuf> = if self.exists {
            Vec::new()
        } else {
            files.iter().filter(|f| !f.exists()).cloned().collect()
        };
        if !self.exists {
            // A new database holds every delegate's messages: owner-only
            // from the first byte (SQLite gives its -wal and -shm the same mode).
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&self.path)
                .map_err(io)?;
        }
        let opened = self.open_writable(durability, notes, created.clone());
        if opened.is_err() {
            remove_created(&created);
        }
        opened
    }

    fn open_writable(
        self,
        durability: Durability,
        notes: Vec<String>,
        created: Vec<PathBuf>,
    ) -> Result<Store, OpenError> {
        let p = self.path.display().to_string();
        let sql = |source| OpenError::Sqlite {
            path: p.clone(),
            source,
        };
        let io = |source| OpenError::Io {
            path: p.clone(),
            source,
        };
        let before = Identity::of(&self.path).map_err(io)?;
        let mut conn = Connection::open(&self.path).map_err(sql)?;
        if Identity::of(&self.path).ok() != Some(before) {
            return Err(OpenError::Replaced { path: p });
        }
        let guard = Arc::new(FileGuard::new(self.path.clone(), before, self.lock));
        let hook = guard.clone();
        conn.commit_hook(Some(move || hook.refuse_commit()))
            .map_err(sql)?;
        // Before anything writes: a new database's page size (a no-op on
        // one that has pages, see [`PAGE_SIZE`]).
        conn.execute_batch(&format!("PRAGMA page_size = {PAGE_SIZE};"))
            .map_err(sql)?;
        conn.execute_batch(
            // temp_store: the per-call savepoints' sub-journal stays in memory.
            "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000; PRAGMA temp_store = MEMORY;",
        )
        .map_err(sql)?;
        let sync = match durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        conn.execute_batch(&format!("PRAGMA synchronous = {sync};"))
            .map_err(sql)?;
        migrate::migrate(&mut conn, &p)?;
        conn.execute_batch(START_INDEXES).map_err(sql)?;
        migrate::ext_tables(&conn).map_err(sql)?;
        // Every check has passed: from this first write on, a kill leaves
        // no clean-exit record, and the next start reads every page.
        conn.execute_batch(check::CLEAN_EXIT_TABLE)
            .and_then(|()| conn.execute_batch(check::MARK_RUNNING))
            .map_err(sql)?;
        // Leases die with their holders' tokens, which died with the last
        // run: each open one is ended, its record kept (§11 Leases).
        write::end_open_leases(&conn, &crate::clock::now()).map_err(sql)?;
        // Checkpoints: the writer's own auto-checkpoint (1000 pages) until
        // the engine starts its checkpoint thread ([`checkpoint`]), and one
        // at a clean exit ([`close`]).
        Ok(Store {
            conn,
            guard,
            notes,
            created,
        })
    }
}

/// The page size of a database this broker creates (it sets the bytes
/// written per job). Every commit group writes each page it changed whole
/// into the write-ahead log, and the rows of a fan-out's calls are keyed by
/// their task, so a group changes about one leaf per call in each of the
/// message, task-log and task B-trees: smaller pages write fewer bytes for
/// the same rows (BENCHMARKS.md, "Sustained load":
/// 0.75x at 2048 against 4096). Not 1024: there a row of more than 230
/// bytes (most stored messages) spills into an overflow page of its own,
/// 1.7x the disk per task of a fan-out. The cost at 2048 is a band of
/// message sizes: a row of 488 bytes to about 1 KB (a text of ~400 to
/// ~900 characters) overflows at 2048 but not at 4096 (2.3-4x its disk);
/// from ~1 KB to ~2 KB it is the other way round (0.5x).
///
/// SQLite sets it only on a database without pages; an existing database
/// (a v12 one of an earlier broker, a host-core v11 one) keeps its own, and
/// the broker works the same on either (it would change only at a
/// `VACUUM`, which the broker never runs, and not at all in WAL mode).
pub const PAGE_SIZE: u32 = 2048;

/// Indexes for what start-up reads, created at every open (a no-op once
/// they exist; built once on a database from before them, schema 12
/// either way): the open tasks per context (a partial index: it holds only
/// non-terminal tasks, so it stays small however many tasks are stored) and
/// the highest creation sequence. Without them start-up read every task
/// ever stored.
pub(crate) const START_INDEXES: &str = "
    CREATE INDEX IF NOT EXISTS a2a_tasks_open ON a2a_tasks (context_id)
        WHERE state NOT IN ('completed', 'canceled', 'failed', 'rejected');
    CREATE INDEX IF NOT EXISTS a2a_tasks_seq ON a2a_tasks (seq);";

/// Refuses, before anything writes, a database this broker cannot use:
/// not SQLite, damaged, or of another schema version. Reads every page
/// only when the last run did not end cleanly or a migration follows
/// ([`check`]'s rule); says which it did.
fn check_read_only(path: &Path, wal: &Path) -> Result<check::StartCheck, OpenError> {
    let began = std::time::Instant::now();
    let p = path.display().to_string();
    let sql = |source: rusqlite::Error| match source.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt) => {
            OpenError::Corrupt {
                path: p.clone(),
                detail: source.to_string(),
            }
        }
        _ => OpenError::Sqlite {
            path: p.clone(),
            source,
        },
    };
    // With no write-ahead log to read, `immutable` reads the file without
    // creating a -shm beside it or taking SQLite's locks (the broker lock
    // keeps other brokers out).
    let wal_len = std::fs::metadata(wal).map_or(0, |m| m.len());
    let uri = format!(
        "file:{}?mode=ro{}",
        uri_path(path),
        if wal_len == 0 { "&immutable=1" } else { "" }
    );
    let ro = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql)?;
    // The header: SQLite reads and checks it here.
    let v: i64 = ro
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql)?;
    migrate::check_version(&p, v)?;
    if v == a2a_proto::SCHEMA_VERSION {
        if let Some(detail) = check::schema_problem(&ro).map_err(sql)? {
            return Err(OpenError::Corrupt { path: p, detail });
        }
    }
    let clean = check::clean_exit_at(&ro);
    let full = check::full_check_reason(wal_len, v, clean.as_deref());
    if full.is_some() {
        // Every page once (2.2 s at 1,000,000 tasks): a damaged page found
        // later would be found by a write that has already changed the file.
        check::read_every_page(&ro, false)
            .map_err(|detail| OpenError::Corrupt { path: p, detail })?;
    }
    Ok(check::StartCheck {
        full,
        took: began.elapsed(),
    })
}

/// A path as the path of a `file:` URI (RFC 3986: only unreserved bytes
/// and `/` stay as they are).
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A clean exit: records it ([`check::record_clean_exit`]), then moves the
/// write-ahead log into the database file and empties it (`TRUNCATE`), so
/// that the file alone holds every commit, then closes. Waits for readers
/// through the busy timeout. A log left non-empty (a reader outlasted the
/// timeout) makes the next start read every page, as after a crash.
pub fn close(conn: Connection) {
    match check::record_clean_exit(&conn, &crate::clock::now()) {
        // Refused by the file guard: the file is gone or damaged, which the
        // broker reports itself.
        Err(rusqlite::Error::SqliteFailure(f, _))
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_COMMITHOOK => {}
        Err(e) => {
            tracing::warn!(error = %e, "the clean exit could not be recorded: the next start reads every page")
        }
        Ok(()) => {}
    }
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    let _ = conn.close();
}

/// What a failed COMMIT tells the calls it held.
pub fn commit_error(e: &rusqlite::Error) -> StoreError {
    check::note(e);
    let refused = matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_COMMITHOOK);
    if refused && check::damaged().is_some() {
        StoreError::Damaged
    } else if refused {
        // Only the file guard's hook refuses commits.
        StoreError::Removed
    } else {
        StoreError::Commit(e.to_string())
    }
}

pub use crate::core::error::REMOVED_REASON;

/// Removes the files a failed start created ([`Store::created`]), once
/// the connection is closed.
pub fn remove_created(files: &[PathBuf]) {
    for f in files {
        let _ = std::fs::remove_file(f);
    }
}

/// Opens a read-only connection for a reader thread.
pub fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.execute_batch("PRAGMA busy_timeout = 10000;")?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_size(c: &Connection) -> i64 {
        c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap()
    }

    /// A database the broker creates has [`PAGE_SIZE`] pages, in the file
    /// itself (read back after a clean exit, without the broker).
    #[test]
    fn a_new_database_gets_the_smaller_pages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        let store = open(&path, Durability::Normal).unwrap();
        assert_eq!(page_size(&store.conn), i64::from(PAGE_SIZE));
        close(store.conn);
        let ro = open_reader(&path).unwrap();
        assert_eq!(page_size(&ro), i64::from(PAGE_SIZE));
        let ok: String = ro
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
    }

    /// An existing database keeps its page size (here SQLite's default, a
    /// host-core v11 database with rows of its own): it is migrated and
    /// written as before, and opens again the same way.
    #[test]
    fn an_existing_database_keeps_its_page_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "PRAGMA page_size = 4096; PRAGMA journal_mode = WAL;
                 CREATE TABLE plans (id INTEGER PRIMARY KEY, body TEXT);
                 PRAGMA user_version = 11;",
            )
            .unwrap();
            for i in 0..100 {
                c.execute(
                    "INSERT INTO plans (body) VALUES (?1)",
                    [format!("{i:0>300}")],
                )
                .unwrap();
            }
        }
        for round in 0..2 {
            let store = open(&path, Durability::Normal).unwrap();
            let c = &store.conn;
            assert_eq!(page_size(c), 4096, "round {round}");
            let v: i64 = c
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .unwrap();
            assert_eq!(v, a2a_proto::SCHEMA_VERSION);
            c.execute(
                "INSERT INTO a2a_agents (context_id, peer_id, kind, delivery, card, registered_at)
                 VALUES ('ctx', ?1, 'worker', 'push', '{}', 'now')",
                [format!("p{round}")],
            )
            .unwrap();
            let (plans, agents): (i64, i64) = c
                .query_row(
                    "SELECT (SELECT count(*) FROM plans), (SELECT count(*) FROM a2a_agents)",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            assert_eq!((plans, agents), (100, round + 1));
            close(store.conn);
        }
        let ro = open_reader(&path).unwrap();
        assert_eq!(page_size(&ro), 4096);
        let ok: String = ro
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
    }

    /// A schema 12 database of an earlier broker (4096-byte pages, made by
    /// the same migration) opens as it is, and keeps its rows.
    #[test]
    fn a_v12_database_of_an_earlier_broker_keeps_its_page_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v12.db");
        {
            let mut c = Connection::open(&path).unwrap();
            c.execute_batch("PRAGMA page_size = 4096; PRAGMA journal_mode = WAL;")
                .unwrap();
            migrate::migrate(&mut c, "v12.db").unwrap();
            c.execute(
                "INSERT INTO a2a_agents (context_id, peer_id, kind, delivery, card, registered_at)
                 VALUES ('ctx', 'old', 'worker', 'push', '{}', 'then')",
                [],
            )
            .unwrap();
        }
        let store = open(&path, Durability::Normal).unwrap();
        assert_eq!(page_size(&store.conn), 4096);
        let n: i64 = store
            .conn
            .query_row(
                "SELECT count(*) FROM a2a_agents WHERE peer_id = 'old'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 1);
        close(store.conn);
        assert_eq!(page_size(&open_reader(&path).unwrap()), 4096);
    }
}
