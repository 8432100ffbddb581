//! The release `a2a-broker` binary the stdio benchmarks spawn: the one a
//! user runs, not a test build. Located by the test kit's one rule
//! (`A2A_BROKER_BIN`, else `target/release/a2a-broker`), built every time
//! (`cargo bench` does not build another package's binaries, and a stale
//! binary would measure old code; an up-to-date build is a no-op).

use a2a_testkit::bin::{locate, Build, Profile};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The release `a2a-broker`, built first if needed. Panics with the build's
/// failure: a benchmark cannot run without it.
pub fn broker_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| locate(Profile::Release, Build::Always).unwrap_or_else(|e| panic!("{e}")))
}
