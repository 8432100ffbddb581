//! Checkpoints off the writer thread.
//!
//! SQLite's auto-checkpoint runs inside the commit that crosses 1000 pages
//! of write-ahead log, on the committing connection: the writer thread
//! (6 % of its time in the profile of issue 13, and the calls of that
//! batch wait for it). Instead the writer connection's auto-checkpoint is
//! off, and this thread, on its own connection to the same file, runs a
//! `PASSIVE` checkpoint (it never waits for nor blocks the writer) when the
//! writer says it committed, at most once per [`INTERVAL`]. A checkpoint
//! only copies committed pages into the database file: a crash at any
//! point of one loses nothing (SQLite's own guarantee), so this changes no
//! durability rule. The clean exit's `TRUNCATE` checkpoint stays on the
//! writer (`store::close`), after this thread has stopped.

use crossbeam_channel::{Receiver, Sender};
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The least time between two checkpoints: each one also syncs the
/// database file, so they are batched rather than run per commit.
pub const INTERVAL: Duration = Duration::from_millis(50);

/// The checkpoint thread; [`Checkpointer::stop`] ends it.
pub struct Checkpointer {
    nudge: Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Opens a second connection to the writer's database and starts the
    /// thread, then turns the writer's own auto-checkpoint off. `None` (and
    /// the writer keeps checkpointing itself) if that connection cannot
    /// be had.
    pub fn start(writer: &Connection) -> Option<Checkpointer> {
        let path = writer.path().filter(|p| !p.is_empty())?.to_owned();
        let conn = Connection::open_with_flags(
            Path::new(&path),
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .ok()?;
        conn.execute_batch("PRAGMA busy_timeout = 10000;").ok()?;
        let (nudge, rx) = crossbeam_channel::bounded(1);
        let thread = std::thread::Builder::new()
            .name("a2a-checkpoint".into())
            .spawn(move || run(conn, rx))
            .ok()?;
        if writer
            .execute_batch("PRAGMA wal_autocheckpoint = 0;")
            .is_err()
        {
            drop(nudge);
            let _ = thread.join();
            return None;
        }
        Some(Checkpointer {
            nudge,
            thread: Some(thread),
        })
    }

    /// The writer committed: a checkpoint is due (at most one waits).
    pub fn committed(&self) {
        // Full: a checkpoint is already due; disconnected: the thread is
        // stopping. Neither is the writer's concern.
        let _ = self.nudge.try_send(());
    }

    /// Ends the thread after the checkpoint it may be running.
    pub fn stop(mut self) {
        self.join();
    }

    fn join(&mut self) {
        if let Some(t) = self.thread.take() {
            // Dropping the only sender ends the thread's wait.
            let (dead, _) = crossbeam_channel::bounded(1);
            drop(std::mem::replace(&mut self.nudge, dead));
            let _ = t.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.join();
    }
}

fn run(conn: Connection, rx: Receiver<()>) {
    let mut last = Instant::now() - INTERVAL;
    while rx.recv().is_ok() {
        let wait = INTERVAL.saturating_sub(last.elapsed());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        // Whatever commits came in the meantime are covered by this one.
        let _ = rx.try_recv();
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::debug!(error = %e, "checkpoint failed; the next commit retries it");
        }
        last = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wal_frames(c: &Connection) -> (i64, i64) {
        // (frames in the log, frames checkpointed) without copying any.
        c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get(1)?, r.get(2)?))
        })
        .unwrap()
    }

    #[test]
    fn the_thread_checkpoints_what_the_writer_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let w = Connection::open(&path).unwrap();
        w.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x TEXT);")
            .unwrap();
        let cp = Checkpointer::start(&w).expect("started");
        let auto: i64 = w
            .query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
            .unwrap();
        assert_eq!(auto, 0, "the writer no longer checkpoints itself");
        for i in 0..50 {
            w.execute("INSERT INTO t VALUES (?1)", [format!("{i:0>2000}")])
                .unwrap();
        }
        cp.committed();
        let deadline = Instant::now() + Duration::from_secs(10);
        let reader = Connection::open(&path).unwrap();
        loop {
            // The database file itself (read without the log) holds the rows.
            let ro = Connection::open_with_flags(
                format!("file:{}?immutable=1", path.display()),
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
            )
            .unwrap();
            let n: i64 = ro
                .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .unwrap_or(0);
            if n == 50 {
                break;
            }
            assert!(Instant::now() < deadline, "never checkpointed");
            std::thread::sleep(Duration::from_millis(10));
        }
        cp.stop();
        let (log, done) = wal_frames(&reader);
        assert_eq!(log, done);
    }
}
