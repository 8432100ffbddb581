//! The durable store: SQLite with WAL, one write connection (owned by the
//! writer thread) and read-only connections for readers.
//!
//! - [`migrate`]: the numbered migrations under `migrations/`, embedded.
//! - [`write`]: the rows each call writes (inside the writer's transaction).
//! - [`read`]: loading tasks, listing, the task log.

pub mod migrate;
pub mod read;
pub mod write;

use rusqlite::{Connection, OpenFlags};
use std::path::Path;

/// How much a commit promises (`--durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Durability {
    /// `synchronous=FULL`: a committed call survives power loss.
    #[default]
    Full,
    /// `synchronous=NORMAL` (WAL): survives a crash of the broker, may lose
    /// the last commits on power loss; never corrupts.
    Normal,
}

/// Why the store cannot open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("database {path}: {source}")]
    Sqlite {
        path: String,
        source: rusqlite::Error,
    },
    #[error("database {path} has schema version {found}, newer than this broker's {supported}; refusing to touch it")]
    TooNew {
        path: String,
        found: i64,
        supported: i64,
    },
    #[error("database {path} has schema version {found}; only a fresh database (0), a host-core v11 database or a v12 database can be opened")]
    Unsupported { path: String, found: i64 },
}

/// Opens (creating and migrating if needed) the write connection.
pub fn open_writer(path: &Path, durability: Durability) -> Result<Connection, OpenError> {
    let p = path.display().to_string();
    let sql = |source| OpenError::Sqlite {
        path: p.clone(),
        source,
    };
    // Check the version read-only first: switching a file to WAL writes to
    // it, and a database we refuse must stay byte-identical.
    if !path.exists() {
        // A new database holds every delegate's messages: owner-only from
        // the first byte (SQLite gives its -wal and -shm files the same mode).
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| OpenError::Sqlite {
                path: p.clone(),
                source: rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                    Some(e.to_string()),
                ),
            })?;
    } else {
        let ro = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql)?;
        let v: i64 = ro
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql)?;
        migrate::check_version(&p, v)?;
    }
    let mut conn = Connection::open(path).map_err(sql)?;
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
    // Checkpoints are left to SQLite's auto-checkpoint (1000 pages).
    Ok(conn)
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
