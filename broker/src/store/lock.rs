//! One broker per database: an exclusive `flock` on `DB-lock`, held for the
//! broker's whole life, with the holder's pid written in it.
//!
//! A separate file, and `flock` rather than `fcntl`: SQLite locks the
//! database itself with POSIX `fcntl` locks, which belong to the process and
//! vanish when any descriptor of that file in the process closes; a `flock`
//! on a file SQLite never opens cannot disturb them (nor they it). The lock
//! dies with the process, so the file a killed broker leaves behind blocks
//! nobody; a broker that stops normally removes it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// Why the lock cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another live process holds it.
    #[error("{}", holder_text(*.pid))]
    Held { pid: Option<u32> },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

fn holder_text(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("pid {pid}"),
        None => "another process".into(),
    }
}

/// The held lock; dropping it removes the file and releases the lock.
#[derive(Debug)]
pub struct DbLock {
    file: File,
    path: PathBuf,
}

/// `DB-lock` beside the database (named after its real path, so that two
/// spellings of one file share one lock).
pub fn lock_path(db_real: &Path) -> PathBuf {
    let mut name = db_real.as_os_str().to_owned();
    name.push("-lock");
    PathBuf::from(name)
}

impl DbLock {
    /// Takes the lock without waiting.
    pub fn acquire(path: PathBuf) -> Result<DbLock, LockError> {
        // A stopping broker unlinks the file while still holding its lock:
        // a lock won on a file that is no longer at `path` guards nothing,
        // so try again on the new one (twice is already a race of three).
        for _ in 0..8 {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)?;
            if !try_flock(&file)? {
                return Err(LockError::Held {
                    pid: read_pid(&path),
                });
            }
            let held = file.metadata()?;
            match std::fs::metadata(&path) {
                Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => {
                    let mut lock = DbLock { file, path };
                    lock.write_pid()?;
                    return Ok(lock);
                }
                _ => continue,
            }
        }
        Err(LockError::Held { pid: None })
    }

    fn write_pid(&mut self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.file
            .write_all(format!("{}\n", std::process::id()).as_bytes())
    }
}

impl Drop for DbLock {
    fn drop(&mut self) {
        // Unlink first, release after (when `file` closes): see `acquire`.
        let _ = std::fs::remove_file(&self.path);
    }
}

fn read_pid(path: &Path) -> Option<u32> {
    let mut s = String::new();
    File::open(path).ok()?.read_to_string(&mut s).ok()?;
    s.trim().parse().ok()
}

/// `flock(LOCK_EX | LOCK_NB)`: `Ok(false)` if another open file holds it.
#[allow(unsafe_code)]
fn try_flock(f: &File) -> std::io::Result<bool> {
    // `File::try_lock` is newer than the workspace's rust-version.
    // SAFETY: flock takes a descriptor that `f` keeps open for the call.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_with_the_holders_pid_and_freed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path(&dir.path().join("a.db"));
        let first = DbLock::acquire(path.clone()).unwrap();
        match DbLock::acquire(path.clone()) {
            Err(LockError::Held { pid }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("second lock: {other:?}"),
        }
        drop(first);
        assert!(!path.exists(), "a released lock removes its file");
        let again = DbLock::acquire(path.clone()).unwrap();
        drop(again);
    }

    #[test]
    fn a_leftover_file_without_a_holder_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path(&dir.path().join("a.db"));
        std::fs::write(&path, "999999\n").unwrap();
        let lock = DbLock::acquire(path.clone()).unwrap();
        assert_eq!(read_pid(&path), Some(std::process::id()));
        drop(lock);
    }
}
