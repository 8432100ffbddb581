//! Where the real `a2a-broker` binary is, built on demand.
//!
//! The stdio benchmarks spawn the release binary a user runs, not a test
//! build. `cargo bench` does not build another package's binaries, so the
//! first call runs `cargo build --release -p a2a-broker` (a no-op when it is
//! up to date, and it keeps the binary in step with the sources being
//! edited). `A2A_BROKER_BIN=/path/to/a2a-broker` skips the build.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("benches/ sits inside the workspace")
}

/// The release `a2a-broker`, built first if needed. Panics with the build's
/// failure: a benchmark cannot run without it.
pub fn broker_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("A2A_BROKER_BIN") {
            return PathBuf::from(p);
        }
        let root = workspace_root();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        eprintln!("benches: cargo build --release -p a2a-broker");
        let status = Command::new(cargo)
            .args([
                "build",
                "--release",
                "-p",
                "a2a-broker",
                "--bin",
                "a2a-broker",
            ])
            .current_dir(root)
            .status()
            .expect("run cargo build for the broker binary");
        assert!(
            status.success(),
            "cargo build --release -p a2a-broker failed"
        );
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .map(|t| if t.is_relative() { root.join(t) } else { t })
            .unwrap_or_else(|| root.join("target"));
        let bin = target.join("release").join("a2a-broker");
        assert!(bin.exists(), "no broker binary at {}", bin.display());
        bin
    })
}
