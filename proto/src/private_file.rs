//! Owner-only SQLite files: the broker's database and the gateway's state
//! file hold what other users must not read (task contents, secrets of
//! push configs), and both are a file with a `-wal` and a `-shm` beside it.
//! The two processes share no crate but this one, so the permission rule is
//! written here once; it touches only permission bits, never contents.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A file beside `path`: `PATH` + `suffix` (`-wal`, `-shm`).
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The database at `path`, its write-ahead log and its shared-memory index.
pub fn family(path: &Path) -> [PathBuf; 3] {
    [
        path.to_path_buf(),
        sibling(path, "-wal"),
        sibling(path, "-shm"),
    ]
}

/// Removes group and other permission bits from those of `files` that
/// exist (the owner's bits are kept); returns one line per file changed.
pub fn tighten(files: &[PathBuf]) -> std::io::Result<Vec<String>> {
    let mut lines = Vec::new();
    for f in files {
        let Ok(m) = std::fs::metadata(f) else {
            continue;
        };
        let mode = m.permissions().mode() & 0o7777;
        if mode & 0o077 == 0 {
            continue;
        }
        let new = mode & !0o077;
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(new))?;
        lines.push(format!(
            "{} was readable by other users (mode {mode:04o}): changed to {new:04o}",
            f.display()
        ));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loose_bits_are_removed_with_a_line_and_missing_files_skipped() {
        let dir = std::env::temp_dir().join(format!("a2a-private-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("x.db");
        let files = family(&db);
        assert_eq!(files[1], dir.join("x.db-wal"));
        // Nothing exists yet: nothing to say.
        assert!(tighten(&files).unwrap().is_empty());
        std::fs::write(&files[0], b"").unwrap();
        std::fs::set_permissions(&files[0], std::fs::Permissions::from_mode(0o744)).unwrap();
        let lines = tighten(&files).unwrap();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].ends_with("(mode 0744): changed to 0700"),
            "{lines:?}"
        );
        let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700);
        assert!(tighten(&files).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
