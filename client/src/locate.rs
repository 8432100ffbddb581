//! Finding a running broker from what a user typed: one locator for every
//! front end (the `a2a-broker call`/`watch` commands, the load generator,
//! the Node addon, the C ABI, the gateway), so that each takes a NAME or a
//! path alike, reads the secret alike, and says alike what is wrong.
//!
//! - Where: [`socket_path`], the broker's own rule (a path as given, a NAME
//!   in `$XDG_RUNTIME_DIR/a2a-broker/`, else `/tmp/a2a-broker-UID/`).
//! - The secret: the caller's, else `A2A_BROKER_SECRET`, else the
//!   owner-only file the broker wrote beside the socket.
//! - What is wrong, told apart: nothing listening there
//!   ([`ClientError::NoBroker`]: no socket file, or one a dead broker left)
//!   is a different error from a secret that cannot be read or that the
//!   broker refuses ([`ClientError::Secret`]).
//!
//! ```no_run
//! # fn main() -> Result<(), a2a_client::ClientError> {
//! let client = a2a_client::locate("main").connect(None, Default::default())?;
//! # Ok(()) }
//! ```

use crate::client::{secret_file, Client, ClientOptions, SECRET_ENV};
use crate::error::ClientError;
/// The locator's errors, defined with the crate's other errors.
pub use crate::error::{NoBroker, SecretError, SecretFrom, SecretProblem};
use a2a_proto::error::RpcError;
pub use a2a_proto::socket_path::{default_dir, socket_path};
use std::path::PathBuf;

/// A broker as a user named it: the `--socket` argument and the socket
/// path it names. Made by [`locate`]; nothing is checked until
/// [`Located::secret`] or [`Located::connect`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// What was given: a NAME or a path.
    pub given: String,
    /// The socket it names.
    pub socket: PathBuf,
}

/// The broker named by `name_or_path` (a `--socket` argument).
pub fn locate(name_or_path: &str) -> Located {
    Located {
        given: name_or_path.to_owned(),
        socket: socket_path(name_or_path),
    }
}

impl Located {
    /// The secret to present: `A2A_BROKER_SECRET` if set, else the file
    /// beside the socket. When it cannot be read and nothing listens at the
    /// socket either, the error is [`ClientError::NoBroker`] (a broker that
    /// is gone removed its file); else [`ClientError::Secret`].
    pub fn secret(&self) -> Result<(String, SecretFrom), ClientError> {
        if let Some(s) = std::env::var_os(SECRET_ENV)
            .and_then(|s| s.into_string().ok())
            .filter(|s| !s.is_empty())
        {
            return Ok((s, SecretFrom::Env));
        }
        let file = secret_file(&self.socket);
        match std::fs::read_to_string(&file) {
            Ok(s) => Ok((s.trim().to_owned(), SecretFrom::File(file))),
            Err(e) => {
                self.check_listening()?;
                Err(ClientError::Secret(SecretError {
                    socket: self.socket.clone(),
                    from: SecretFrom::File(file),
                    problem: SecretProblem::Unreadable(e),
                }))
            }
        }
    }

    /// `Ok` when something accepts connections at the socket, else
    /// [`ClientError::NoBroker`] (a connection it accepts is closed at
    /// once: the broker drops it before any handshake).
    pub fn check_listening(&self) -> Result<(), ClientError> {
        match std::os::unix::net::UnixStream::connect(&self.socket) {
            Ok(_) => Ok(()),
            Err(e) if nobody_listens(&e) => Err(self.no_broker()),
            // Listening, but not for us (permissions): the connect reports it.
            Err(_) => Ok(()),
        }
    }

    /// Connects and shakes hands with `secret` (with where it came from),
    /// or with [`Located::secret`] when `None`. Nothing listening is
    /// [`ClientError::NoBroker`]; a secret the broker refuses is
    /// [`ClientError::Secret`]; every other failure is as
    /// [`Client::connect_with`] reports it.
    pub fn connect(
        &self,
        secret: Option<(&str, SecretFrom)>,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let (secret, from) = match secret {
            Some((s, from)) => (s.to_owned(), from),
            None => self.secret()?,
        };
        match Client::connect_with(&self.socket, &secret, options) {
            Ok(c) => Ok(c),
            Err(ClientError::Io(e)) if nobody_listens(&e) => Err(self.no_broker()),
            Err(ClientError::Rpc(e)) if is_bad_secret(&e) => {
                Err(ClientError::Secret(SecretError {
                    socket: self.socket.clone(),
                    from,
                    problem: SecretProblem::Refused(e),
                }))
            }
            Err(e) => Err(e),
        }
    }

    fn no_broker(&self) -> ClientError {
        ClientError::NoBroker(NoBroker {
            given: self.given.clone(),
            socket: self.socket.clone(),
        })
    }
}

/// A connect error meaning no broker is there: no socket file (or no
/// directory), or a socket file nobody listens on.
fn nobody_listens(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(e.kind(), K::NotFound | K::ConnectionRefused)
}

/// The broker's answer to a handshake with a wrong secret (ext, local
/// socket: docs/protocol.md §2 Opening a connection): `-32600` with `data.reason = "bad secret"`.
fn is_bad_secret(e: &RpcError) -> bool {
    e.code == a2a_proto::error::INVALID_REQUEST
        && e.data
            .as_ref()
            .and_then(|d| d.get("reason"))
            .and_then(|r| r.as_str())
            == Some("bad secret")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_broker_names_the_path_and_where_it_came_from() {
        let e = NoBroker {
            given: "main".into(),
            socket: PathBuf::from("/tmp/a2a-broker-1/main.sock"),
        };
        assert_eq!(
            e.to_string(),
            "no broker is listening at /tmp/a2a-broker-1/main.sock (from main): \
             start one with `a2a-broker serve --socket main`"
        );
        let e = NoBroker {
            given: "/x/b.sock".into(),
            socket: PathBuf::from("/x/b.sock"),
        };
        assert_eq!(
            e.to_string(),
            "no broker is listening at /x/b.sock: start one with `a2a-broker serve --socket /x/b.sock`"
        );
    }
}
