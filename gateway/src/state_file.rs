//! The gateway's state file is the gateway's alone, as the broker's
//! database is the broker's (SECURITY.md): it holds every task's identity
//! and context, push configs with their webhook tokens and credentials, and
//! the remote task ids of `remote add`. Before SQLite opens it:
//!
//! - a new file is created owner-only (0600) from its first byte, so its
//!   `-wal` and `-shm` are too (SQLite gives them the database's mode);
//! - group and other permission bits are removed from the file, its `-wal`
//!   and its `-shm` if they exist (a file left readable by an older
//!   gateway, or made by hand), with one line per file changed.

// The broker's database keeps the same rule: one copy, in a2a-proto.
pub use a2a_proto::private_file::{family, tighten};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Creates `path` owner-only if it does not exist (an existing file is
/// left as it is: see [`tighten`]).
pub fn create_private(path: &Path) -> std::io::Result<()> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Makes the state file at `path` and its siblings owner-only before
/// SQLite opens it: creates it 0600 if new, tightens what exists. Returns
/// the lines of the files changed.
pub fn make_private(path: &Path) -> std::io::Result<Vec<String>> {
    let files = family(path);
    let notes = tighten(&files)?;
    create_private(path)?;
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_file_is_owner_only_and_loose_ones_are_tightened_with_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("g.db");
        assert!(make_private(&db).unwrap().is_empty());
        assert_eq!(mode(&db), 0o600);
        // Loose bits on every member of the family are removed, each
        // with its line; the owner's bits are kept as they were.
        for (f, m) in family(&db).iter().zip([0o644, 0o666, 0o740]) {
            std::fs::write(f, b"").unwrap();
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(m)).unwrap();
        }
        let notes = make_private(&db).unwrap();
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[0].ends_with("was readable by other users (mode 0644): changed to 0600"),
            "{notes:?}"
        );
        let modes: Vec<u32> = family(&db).iter().map(|f| mode(f)).collect();
        assert_eq!(modes, [0o600, 0o600, 0o700]);
        // Already tight: nothing to say.
        assert!(make_private(&db).unwrap().is_empty());
    }
}
