//! Temporary directories for a broker's files: a database path whose
//! directory is removed when the test ends.

use std::path::PathBuf;

/// A temporary directory holding a database path (the file itself is created
/// by the broker). Removed on drop.
#[derive(Debug)]
pub struct TestDb {
    /// Kept alive so the directory outlives the test.
    pub dir: tempfile::TempDir,
    /// `<dir>/broker.db`.
    pub path: PathBuf,
}

impl TestDb {
    /// A fresh directory and the database path in it.
    pub fn new() -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("broker.db");
        TestDb { dir, path }
    }

    /// Another path in the same directory.
    pub fn sibling(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Default for TestDb {
    fn default() -> Self {
        Self::new()
    }
}
