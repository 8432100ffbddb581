//! The database file is the broker's alone (docs/protocol.md §10 Durability): who may own it,
//! who may read it, and noticing when it is removed or replaced under a
//! running broker.
//!
//! - Before anything is opened: ownership of the database and its `-wal` and
//!   `-shm` (another user's file is refused), then, once the file is known
//!   to be usable, group and other permission bits are removed.
//! - While the broker runs: a [`FileGuard`] remembers which file (device and
//!   inode) the write connection opened, and refuses every commit once the
//!   path no longer names that file, so that no write is acknowledged into a
//!   file nobody can find again.

use super::lock::DbLock;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

// The owner-only rule is shared with the gateway's state file.
pub use a2a_proto::private_file::{family, tighten};

/// The broker's effective uid.
#[allow(unsafe_code)]
pub fn own_uid() -> u32 {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// The first of `files` that exists and belongs to another user, with its owner.
pub fn foreign_owner(files: &[PathBuf]) -> Option<(PathBuf, u32)> {
    let me = own_uid();
    files.iter().find_map(|f| {
        let m = std::fs::metadata(f).ok()?;
        (m.uid() != me).then(|| (f.clone(), m.uid()))
    })
}

/// Which file a path named when it was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    dev: u64,
    ino: u64,
}

impl Identity {
    /// What `path` names now (following symlinks, as SQLite does).
    pub fn of(path: &Path) -> std::io::Result<Identity> {
        let m = std::fs::metadata(path)?;
        Ok(Identity {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// The write connection's claim on its file: the lock, and the file's identity.
pub struct FileGuard {
    path: PathBuf,
    identity: Identity,
    removed: AtomicBool,
    on_removed: parking_lot::Mutex<Option<crossbeam_channel::Sender<()>>>,
    /// Held for as long as the guard lives (the write connection's life).
    _lock: DbLock,
}

impl FileGuard {
    pub fn new(path: PathBuf, identity: Identity, lock: DbLock) -> Self {
        Self {
            path,
            identity,
            removed: AtomicBool::new(false),
            on_removed: parking_lot::Mutex::new(None),
            _lock: lock,
        }
    }

    /// Has a commit found the file gone or replaced?
    pub fn removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// `tx` gets one message when the file is first found gone.
    pub fn on_removed(&self, tx: crossbeam_channel::Sender<()>) {
        *self.on_removed.lock() = Some(tx);
    }

    /// Called by SQLite before every commit of the write connection: `true`
    /// turns the commit into a rollback. One `stat` of the path, compared
    /// with the file the connection opened: 0.39 µs against 11.5 µs for a
    /// one-row commit without fsync (`synchronous=NORMAL`), best of five
    /// rounds, in `tests::the_check_costs_a_small_fraction_of_a_commit`
    /// (debug build, this machine's ext4); with `synchronous=FULL` the
    /// fsync alone takes 37–65 µs (BENCHMARKS.md, "Group commit vs raw SQLite"), and one
    /// commit holds up to `batch_max` calls. Once the file is gone it stays
    /// refused: the broker is stopping. A database a read found damaged
    /// (`store::check::note`) is refused too, for good.
    pub fn refuse_commit(&self) -> bool {
        if self.removed() || super::check::damaged().is_some() {
            return true;
        }
        if Identity::of(&self.path).is_ok_and(|now| now == self.identity) {
            return false;
        }
        self.removed.store(true, Ordering::Release);
        if let Some(tx) = self.on_removed.lock().take() {
            let _ = tx.try_send(());
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn guard(dir: &Path) -> (PathBuf, FileGuard) {
        let db = dir.join("g.db");
        std::fs::write(&db, b"").unwrap();
        let lock = DbLock::acquire(super::super::lock::lock_path(&db)).unwrap();
        let id = Identity::of(&db).unwrap();
        (db.clone(), FileGuard::new(db, id, lock))
    }

    #[test]
    fn a_removed_or_replaced_file_is_refused_for_good_and_reported_once() {
        let dir = tempfile::tempdir().unwrap();
        let (db, g) = guard(dir.path());
        let (tx, rx) = crossbeam_channel::bounded(4);
        g.on_removed(tx);
        assert!(!g.refuse_commit());
        // Replaced: same name, another file.
        std::fs::rename(&db, dir.path().join("old.db")).unwrap();
        std::fs::write(&db, b"").unwrap();
        assert!(g.refuse_commit());
        assert!(g.removed());
        assert!(rx.try_recv().is_ok());
        // Put back: still refused (the broker is stopping), and no second report.
        std::fs::rename(dir.path().join("old.db"), &db).unwrap();
        assert!(g.refuse_commit());
        assert!(rx.try_recv().is_err());
    }

    /// The check runs inside every commit: it must cost a small fraction
    /// of one. Measured against a commit of one row on the same disk, WAL,
    /// `synchronous=NORMAL` (no fsync per commit: the cheapest commit the
    /// broker makes), in the same run.
    #[test]
    fn the_check_costs_a_small_fraction_of_a_commit() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, g) = guard(dir.path());
        let conn = rusqlite::Connection::open(dir.path().join("c.db")).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; CREATE TABLE t (x);",
        )
        .unwrap();
        // The best of several interleaved rounds: the machine is shared,
        // and load only ever adds time.
        let (mut commit, mut check) = (Duration::MAX, Duration::MAX);
        for round in 0..5 {
            let n = 100;
            let t = Instant::now();
            for i in 0..n {
                conn.execute_batch(&format!(
                    "BEGIN; INSERT INTO t VALUES ({round}{i}); COMMIT;"
                ))
                .unwrap();
            }
            commit = commit.min(t.elapsed() / n);
            let m = 2000;
            let t = Instant::now();
            for _ in 0..m {
                assert!(!g.refuse_commit());
            }
            check = check.min(t.elapsed() / m);
        }
        eprintln!("file check {check:?} per commit, a one-row commit {commit:?}");
        assert!(check * 4 < commit, "check {check:?} vs commit {commit:?}");
    }
}
