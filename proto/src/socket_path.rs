//! Where `--socket NAME` lives (docs/protocol.md §2, the secret on the local socket): the one
//! rule the broker listens by and every front end (the CLI, the client
//! crate, the C ABI, the Node addon, the gateway, the load generator)
//! connects by, so that a NAME means the same socket everywhere.

use std::path::PathBuf;

/// The broker's socket directory's name under `$XDG_RUNTIME_DIR`; under
/// the temporary directory it is suffixed with the user id.
pub const SOCKET_DIR: &str = "a2a-broker";

/// The socket a `--socket` argument names: the argument itself if it is a
/// path (it contains a `/`), else `NAME.sock` (`.sock` added unless given)
/// in `$XDG_RUNTIME_DIR/a2a-broker/`, or in `/tmp/a2a-broker-UID/` when
/// `XDG_RUNTIME_DIR` is unset or empty.
pub fn socket_path(name: &str) -> PathBuf {
    if is_path(name) {
        return PathBuf::from(name);
    }
    let file = if name.ends_with(".sock") {
        name.to_owned()
    } else {
        format!("{name}.sock")
    };
    default_dir().join(file)
}

/// Is this `--socket` argument a path (used as given) rather than a name?
pub fn is_path(name: &str) -> bool {
    name.contains('/')
}

/// The directory where named sockets live (see [`socket_path`]).
pub fn default_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join(SOCKET_DIR),
        None => std::env::temp_dir().join(format!("{SOCKET_DIR}-{}", own_uid())),
    }
}

/// This process's user id (the owner of `/proc/self`; std has no getuid).
pub fn own_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_taken_as_given_and_a_name_lands_in_the_default_dir() {
        assert_eq!(socket_path("./b.sock"), PathBuf::from("./b.sock"));
        assert_eq!(socket_path("/run/x/main"), PathBuf::from("/run/x/main"));
        assert_eq!(socket_path("main"), default_dir().join("main.sock"));
        assert_eq!(socket_path("main.sock"), default_dir().join("main.sock"));
    }
}
