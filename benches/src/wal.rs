//! WAL bytes written per call.
//!
//! The `-wal` file's size alone does not tell: SQLite checkpoints every
//! 1000 pages and then rewrites the file from its start. So a probe first
//! truncates the WAL (`wal_checkpoint(TRUNCATE)`), lets the caller write a
//! little, and then holds a read transaction open: while a reader is inside
//! the WAL, SQLite can neither restart nor truncate it, so every frame
//! committed afterwards is appended and the file's growth is exactly the
//! bytes written (frames of `page_size + 24` bytes).

use rusqlite::Connection;
use std::path::{Path, PathBuf};

/// A read transaction pinning the WAL of a database.
pub struct WalProbe {
    conn: Connection,
    wal: PathBuf,
    start: u64,
}

/// Checkpoints the database and empties its WAL (the writer must be idle).
pub fn truncate(db: &Path) {
    let conn = Connection::open(db).expect("open for checkpoint");
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .expect("busy timeout");
    // The broker's checkpoint thread may be running a checkpoint of its
    // own (SQLite answers busy at once then, without waiting): try again.
    let mut busy = 1;
    for _ in 0..200 {
        let (b, _, _): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .expect("checkpoint");
        busy = b;
        if busy == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(busy, 0, "the WAL could not be truncated");
}

fn wal_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push("-wal");
    PathBuf::from(p)
}

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

impl WalProbe {
    /// Pins the WAL as it is now. Call after at least one commit since
    /// [`truncate`], so the reader really sits inside the WAL.
    pub fn pin(db: &Path) -> WalProbe {
        let conn = Connection::open(db).expect("open the probe");
        conn.execute_batch("BEGIN").expect("begin read");
        let _: i64 = conn
            .query_row("SELECT count(*) FROM a2a_agents", [], |r| r.get(0))
            .expect("start the read");
        let wal = wal_path(db);
        let start = size(&wal);
        assert!(start > 0, "pin the WAL after a commit");
        WalProbe { conn, wal, start }
    }

    /// Bytes appended to the WAL since [`WalProbe::pin`].
    pub fn grown(&self) -> u64 {
        size(&self.wal) - self.start
    }

    /// Ends the read transaction.
    pub fn release(self) {
        self.conn.execute_batch("COMMIT").expect("end read");
    }
}
