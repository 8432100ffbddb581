//! The local socket's secret (docs/protocol.md §2, the secret on the local socket): where a
//! starter passes it and where a broker that minted it writes it. The
//! broker and its clients name both from here.

use std::path::{Path, PathBuf};

/// The environment variable a broker's starter passes the secret in.
pub const SECRET_ENV: &str = "A2A_BROKER_SECRET";

/// Where a broker that minted its secret writes it: beside the socket, with
/// the extension `.secret` (owner-only).
pub fn secret_file(socket: &Path) -> PathBuf {
    socket.with_extension("secret")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_file_sits_beside_the_socket() {
        assert_eq!(
            secret_file(Path::new("/run/a2a-broker/main.sock")),
            Path::new("/run/a2a-broker/main.secret")
        );
    }
}
