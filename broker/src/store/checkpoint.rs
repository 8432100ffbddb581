//! Checkpoints off the writer thread, and the bound on the write-ahead log.
//!
//! SQLite's auto-checkpoint runs inside the commit that crosses 1000 pages
//! of write-ahead log, on the committing connection: the writer thread
//! (6 % of its time in a profile of the writer, and the calls of that
//! batch wait for it). Instead the writer connection's auto-checkpoint is
//! off, and this thread, on its own connection to the same file, runs a
//! `PASSIVE` checkpoint (it never waits for nor blocks the writer) when the
//! writer says it committed, at most once per [`INTERVAL`].
//!
//! A passive checkpoint alone does not bound the log (measured: 9.4 GB of
//! `-wal` after 60 s of fan-out). SQLite writes the log from its start again
//! only when a write transaction begins on a log checkpointed to its end;
//! a writer that commits back to back never leaves the thread that moment,
//! so the log grew by every commit for as long as the load lasted. Hence
//! the bound, in two steps, between two commit groups
//! ([`Checkpointer::committed`]; the writer learns the log's length from
//! each commit through SQLite's WAL hook):
//!
//! 1. Past [`RESTART_BYTES`], the writer asks the thread for a checkpoint
//!    at once (no [`INTERVAL`] wait) and goes on committing.
//! 2. Once that checkpoint is done, the writer checkpoints itself: it
//!    copies only the frames committed since (the thread copied and synced
//!    the rest), and with the whole log in the database file its next
//!    commit writes the log from its start. This checkpoint is `PASSIVE`:
//!    a reader in the middle of a statement on an older snapshot is not
//!    waited for (SQLite's busy handler sleeps a millisecond at least);
//!    the log then goes on from its end and the next commit tries again.
//! 3. Past [`RESTART_BYTES`] + [`RESTART_BYTES`] / 2 the writer runs a
//!    `RESTART` checkpoint, which does wait for such readers (one statement
//!    of one call each), whether or not the thread has caught up: neither
//!    a thread that cannot keep up nor readers that never pause unbound
//!    the log.
//!
//! `journal_size_limit` cuts a file that had grown past [`RESTART_BYTES`]
//! back to it. The log is thus never longer than 1.5 × [`RESTART_BYTES`]
//! plus one commit group. The writer's pause is the copy of that tail and
//! two syncs (the log's, the database's): measured in BENCHMARKS.md
//! ("Sustained load").
//!
//! A checkpoint only copies committed pages into the database file: a
//! crash at any point of one loses nothing (SQLite's own guarantee), so
//! none of this changes a durability rule. The clean exit's `TRUNCATE`
//! checkpoint stays on the writer (`store::close`), after this thread has
//! stopped.

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use rusqlite::hooks::Wal;
use rusqlite::{Connection, OpenFlags};
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The least time between two of the thread's checkpoints: each one also
/// syncs the database file, and copies again every page written since the
/// last one (the same hot pages, commit after commit), so they are batched
/// rather than run per commit.
pub const INTERVAL: Duration = Duration::from_millis(50);

/// Log length past which the log is restarted (see the module doc), and
/// the length `journal_size_limit` cuts the file back to.
pub const RESTART_BYTES: i64 = 32 * 1024 * 1024;

thread_local! {
    /// Frames in the log after this thread's last commit, as SQLite's WAL
    /// hook reports them. Only the writer thread commits on the writer
    /// connection, so the count it reads is its own connection's.
    static LOG_FRAMES: Cell<i64> = const { Cell::new(0) };
}

fn count_frames(_: &Wal, frames: std::ffi::c_int) -> rusqlite::Result<()> {
    LOG_FRAMES.with(|f| f.set(i64::from(frames)));
    Ok(())
}

/// What the writer and the thread share.
#[derive(Default)]
struct Shared {
    /// Held by whichever of the thread and the writer checkpoints: SQLite
    /// refuses a second checkpointer at once without waiting (`SQLITE_BUSY`,
    /// no busy handler), so the writer's restart waits here for the
    /// thread's checkpoint to end instead of failing.
    turn: Mutex<()>,
    /// The writer asked for a checkpoint at once (step 1).
    urgent: AtomicBool,
    /// A checkpoint asked for by step 1 is done: the tail left is short.
    caught_up: AtomicBool,
}

/// The checkpoint thread; [`Checkpointer::stop`] ends it.
pub struct Checkpointer {
    nudge: Sender<()>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
    /// [`RESTART_BYTES`] in frames of this database's page size.
    restart_frames: i64,
}

impl Checkpointer {
    /// Opens a second connection to the writer's database and starts the
    /// thread, then turns the writer's own auto-checkpoint off and bounds
    /// its log. `None` (and the writer keeps checkpointing itself) if that
    /// connection cannot be had.
    pub fn start(writer: &Connection) -> Option<Checkpointer> {
        let path = writer.path().filter(|p| !p.is_empty())?.to_owned();
        let conn = Connection::open_with_flags(
            Path::new(&path),
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .ok()?;
        conn.execute_batch("PRAGMA busy_timeout = 10000;").ok()?;
        let page: i64 = writer
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .ok()?;
        let (nudge, rx) = crossbeam_channel::bounded(1);
        let shared = Arc::new(Shared::default());
        let on_thread = shared.clone();
        let thread = std::thread::Builder::new()
            .name("a2a-checkpoint".into())
            .spawn(move || run(conn, rx, on_thread))
            .ok()?;
        let limited = writer.execute_batch(&format!(
            "PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = {RESTART_BYTES};"
        ));
        if limited.is_err() {
            drop(nudge);
            let _ = thread.join();
            return None;
        }
        // After `wal_autocheckpoint`, which installs a hook of its own.
        writer.wal_hook(Some(count_frames));
        LOG_FRAMES.with(|f| f.set(0));
        Some(Checkpointer {
            nudge,
            thread: Some(thread),
            shared,
            restart_frames: (RESTART_BYTES / (page.max(512) + 24)).max(1),
        })
    }

    /// The writer committed on `writer` (the connection given to
    /// [`Checkpointer::start`], on the thread that committed): a checkpoint
    /// is due (at most one waits); past the bound, the steps of the module
    /// doc.
    pub fn committed(&self, writer: &Connection) {
        let frames = LOG_FRAMES.with(Cell::get);
        if frames >= self.restart_frames + self.restart_frames / 2 {
            self.restart(writer, "RESTART");
            return;
        }
        if frames >= self.restart_frames {
            if self.shared.caught_up.load(Ordering::Acquire) {
                self.restart(writer, "PASSIVE");
                return;
            }
            self.shared.urgent.store(true, Ordering::Release);
        }
        // Full: a checkpoint is already due; disconnected: the thread is
        // stopping. Neither is the writer's concern.
        let _ = self.nudge.try_send(());
    }

    /// Checkpoints the log on the writer (`mode`: `PASSIVE`, or `RESTART`
    /// which waits for readers), so that the next commit writes it from
    /// its start. Whatever stops that (a reader; past the busy timeout for
    /// `RESTART`) leaves the log as it is: a later commit tries again.
    fn restart(&self, writer: &Connection, mode: &str) {
        let began = Instant::now();
        let _turn = self.shared.turn.lock();
        // The thread's catch-up, if any, is used up: step 1 starts again
        // if this does not let the log start over.
        self.shared.urgent.store(false, Ordering::Release);
        self.shared.caught_up.store(false, Ordering::Release);
        let done = writer.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        });
        match done {
            Ok((0, log, copied)) if log == copied => {
                if mode == "RESTART" {
                    LOG_FRAMES.with(|f| f.set(0));
                }
                tracing::debug!(
                    mode,
                    frames = log,
                    took_us = began.elapsed().as_micros() as u64,
                    "log checkpointed to its end"
                );
            }
            Ok((_, log, copied)) => {
                tracing::debug!(
                    mode,
                    log,
                    copied,
                    "a reader kept part of the log; a later commit retries"
                )
            }
            Err(e) => {
                tracing::debug!(error = %e, "log checkpoint failed; a later commit retries")
            }
        }
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

fn run(conn: Connection, rx: Receiver<()>, shared: Arc<Shared>) {
    let mut last = Instant::now() - INTERVAL;
    while rx.recv().is_ok() {
        // Wait out the interval, unless the writer asks for a checkpoint now.
        loop {
            let wait = INTERVAL.saturating_sub(last.elapsed());
            if wait.is_zero() || shared.urgent.load(Ordering::Acquire) {
                break;
            }
            std::thread::sleep(wait.min(Duration::from_millis(2)));
        }
        // Whatever commits came in the meantime are covered by this one.
        let _ = rx.try_recv();
        let _turn = shared.turn.lock();
        let urgent = shared.urgent.swap(false, Ordering::AcqRel);
        match conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            Ok(()) if urgent => shared.caught_up.store(true, Ordering::Release),
            Ok(()) => {}
            Err(e) => tracing::debug!(error = %e, "checkpoint failed; the next commit retries it"),
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
        cp.committed(&w);
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

    /// A writer that commits back to back, with readers reading all along:
    /// the log file never grows past the bound plus one commit group
    /// (before this bound it grew by every commit: 6 times the bound here).
    #[test]
    fn the_log_stays_bounded_under_a_writer_that_never_pauses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let w = Connection::open(&path).unwrap();
        w.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
             CREATE TABLE t (k INTEGER PRIMARY KEY, x BLOB);",
        )
        .unwrap();
        let cp = Checkpointer::start(&w).expect("started");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (path, stop) = (path.clone(), stop.clone());
                std::thread::spawn(move || {
                    let r = crate::store::open_reader(&path).unwrap();
                    let mut reads = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let _: i64 = r
                            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                            .unwrap();
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        let wal = dir.path().join("c.db-wal");
        // 64 rows of 4 KB per commit (about 256 KB of log), rewritten in
        // place: the database stays small, the log would not.
        let group = 64;
        let total_bytes = 6 * RESTART_BYTES;
        let commits = total_bytes / (group * 4096);
        let mut largest = 0;
        for c in 0..commits {
            w.execute_batch("BEGIN IMMEDIATE").unwrap();
            for i in 0..group {
                w.execute(
                    "INSERT OR REPLACE INTO t VALUES (?1, zeroblob(4000))",
                    [(c * group + i) % 1024],
                )
                .unwrap();
            }
            w.execute_batch("COMMIT").unwrap();
            cp.committed(&w);
            largest = largest.max(std::fs::metadata(&wal).unwrap().len());
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0, "the readers read all along");
        }
        cp.stop();
        let bound = (RESTART_BYTES + RESTART_BYTES / 2) as u64 + 2 * (group as u64) * 4200;
        assert!(
            largest <= bound,
            "the log reached {largest} bytes, past its bound {bound}"
        );
        let n: i64 = w
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1024);
    }
}
