//! Where the real `a2a-broker` binary is, built on demand.
//!
//! One rule for every user of the kit: `A2A_BROKER_BIN` wins; else an
//! `a2a-broker` beside the caller's own executable (an installed
//! `a2a-fanout` uses the broker installed with it); else the
//! binary of the profile the caller was built in, in the workspace's target
//! directory (`target/<profile>/a2a-broker`), built with
//! `cargo build -p a2a-cli --bin a2a-broker` when it is missing
//! ([`Build::IfMissing`], what tests want: `cargo test --workspace` builds it
//! already, and a rebuild from a test would fight the outer build's feature
//! set) or every time ([`Build::Always`], what benchmarks want: `cargo bench`
//! never builds another package's binaries, and a stale binary would measure
//! old code; an up-to-date build is a no-op).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The variable naming a broker binary to use instead of a built one.
pub const BIN_ENV: &str = "A2A_BROKER_BIN";

/// Which cargo profile's binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// `target/debug` (tests).
    Debug,
    /// `target/release` (benchmarks, measured figures).
    Release,
}

impl Profile {
    /// The profile the running executable was built in, read from its path
    /// (`target/<profile>/deps/<exe>`); `Debug` when that says nothing.
    pub fn current() -> Profile {
        let exe = std::env::current_exe().ok();
        let dir = exe
            .as_deref()
            .and_then(Path::parent)
            .filter(|d| d.ends_with("deps"))
            .and_then(Path::parent)
            .or_else(|| exe.as_deref().and_then(Path::parent));
        match dir.and_then(Path::file_name) {
            Some(n) if n == "release" => Profile::Release,
            _ => Profile::Debug,
        }
    }

    fn dir(self) -> &'static str {
        match self {
            Profile::Debug => "debug",
            Profile::Release => "release",
        }
    }
}

/// When to run `cargo build` for the binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// Only when the binary is not there.
    IfMissing,
    /// Every time (a no-op when it is up to date).
    Always,
}

/// Why the broker binary cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum BinError {
    /// `cargo` could not be run.
    #[error("cannot run cargo to build a2a-broker: {0}")]
    Cargo(#[from] std::io::Error),
    /// `cargo build` ran and failed.
    #[error("`cargo build -p a2a-cli --bin a2a-broker` failed ({0})")]
    BuildFailed(std::process::ExitStatus),
    /// Nothing at the path after the build (or at `A2A_BROKER_BIN`).
    #[error(
        "no broker binary at {0} (build it with `cargo build -p a2a-cli`, or set A2A_BROKER_BIN)"
    )]
    Missing(PathBuf),
}

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new(env!("CARGO_MANIFEST_DIR")))
}

/// The workspace's target directory (`CARGO_TARGET_DIR`, relative to the
/// root when relative, else `<root>/target`).
pub fn target_dir() -> PathBuf {
    let root = workspace_root();
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_relative() { root.join(t) } else { t })
        .unwrap_or_else(|| root.join("target"))
}

/// The directory of `profile`'s binaries: the one the running executable
/// sits in (`<target>/<profile>/deps/<exe>`) when it is of that profile,
/// which holds however the target directory was chosen; else
/// `<target_dir>/<profile>`.
pub fn profile_dir(profile: Profile) -> PathBuf {
    let exe = std::env::current_exe().ok();
    let beside = exe
        .as_deref()
        .and_then(Path::parent)
        .filter(|d| d.ends_with("deps"))
        .and_then(Path::parent)
        .filter(|d| d.file_name().is_some_and(|n| n == profile.dir()));
    match beside {
        Some(d) => d.to_path_buf(),
        None => target_dir().join(profile.dir()),
    }
}

/// Finds (and builds, as `build` says) the broker binary of `profile`.
pub fn locate(profile: Profile, build: Build) -> Result<PathBuf, BinError> {
    if let Some(p) = std::env::var_os(BIN_ENV) {
        let p = PathBuf::from(p);
        return if p.exists() {
            Ok(p)
        } else {
            Err(BinError::Missing(p))
        };
    }
    if let Some(bin) = sibling() {
        return Ok(bin);
    }
    let bin = profile_dir(profile).join("a2a-broker");
    if build == Build::Always || !bin.exists() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", "a2a-cli", "--bin", "a2a-broker"]);
        if profile == Profile::Release {
            cmd.arg("--release");
        }
        eprintln!("a2a-testkit: {cmd:?}");
        let status = cmd.current_dir(workspace_root()).status()?;
        if !status.success() {
            return Err(BinError::BuildFailed(status));
        }
    }
    if bin.exists() {
        Ok(bin)
    } else {
        Err(BinError::Missing(bin))
    }
}

/// An `a2a-broker` beside the running executable (an installed tool, or
/// one run from its target directory, whatever that directory is): the
/// broker it was installed or built with. Test and bench executables live
/// in `deps/`, where no `a2a-broker` is, so they never take this path.
fn sibling() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.join("a2a-broker");
    (bin != exe && bin.is_file()).then_some(bin)
}

/// The broker binary for tests: of the caller's own profile, built if
/// missing, looked up once per process. Panics with the reason: a test
/// cannot run without it.
pub fn broker_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        locate(Profile::current(), Build::IfMissing).unwrap_or_else(|e| panic!("{e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_build_is_of_the_debug_profile_and_finds_its_directory() {
        // `cargo test` builds this unit test in the dev profile, into
        // `<target>/debug/deps`.
        assert_eq!(Profile::current(), Profile::Debug);
        let dir = profile_dir(Profile::Debug);
        assert!(dir.ends_with("debug"), "{}", dir.display());
        let exe = std::env::current_exe().expect("current_exe");
        assert!(
            exe.starts_with(&dir),
            "{} not under {}",
            exe.display(),
            dir.display()
        );
        assert!(profile_dir(Profile::Release).ends_with("release"));
    }
}
