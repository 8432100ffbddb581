//! What can go wrong for a caller of this crate: one variant per failure a
//! caller can see and act on differently. Broker errors keep their JSON-RPC
//! code and `data` intact, so a caller can branch on `data.errorCode`.
//!
//! Two flat views are made for the layers that cannot match on a Rust enum
//! with payloads: [`ClientError::kind`] (an [`ErrorKind`], one to one with
//! the C ABI's status codes and the Node error `code`) and
//! [`ClientError::a2a_code`] (the typed `A2A_*` code of a domain error).

pub use a2a_proto::error::A2aErrorCode;
use a2a_proto::error::RpcError;
use a2a_proto::secret::SECRET_ENV;
use std::fmt;
use std::path::{Path, PathBuf};

/// Why the connection is gone; carried by [`ClientError::Closed`] so that a
/// call failing long after the cause still says what the cause was.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CloseReason {
    /// The broker closed the socket (it exited, or it dropped this
    /// connection, e.g. after a bad secret).
    ByBroker,
    /// The broker answered a frame it could not read with an error frame,
    /// then closed the connection (binary framing cannot resynchronise).
    Fatal(RpcError),
    /// The broker sent bytes that are not a valid frame.
    BadFrame(String),
    /// Reading or writing the socket failed.
    Io(String),
    /// The shared-memory event ring became unusable (another process wrote
    /// something no broker writes into it): its events cannot be
    /// delivered, and the protocol has no way to move them back to the
    /// socket, so this client closed the connection (docs/protocol.md §1 Framing, the event ring).
    EventRing(String),
    /// This side closed it ([`crate::Client::close`], or the last handle
    /// was dropped).
    Shutdown,
}

impl CloseReason {
    /// Why a failed write to the broker ended the connection: a broker
    /// that went away (broken pipe, reset) or another I/O failure. Every
    /// connection of ours (this crate's, the gateway's, the Node addon's
    /// calls) reads a write failure this way.
    pub fn of_write(e: &std::io::Error) -> CloseReason {
        use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
        if matches!(e.kind(), BrokenPipe | ConnectionReset) {
            CloseReason::ByBroker
        } else {
            CloseReason::Io(e.to_string())
        }
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::ByBroker => write!(f, "closed by the broker"),
            CloseReason::Fatal(e) => write!(f, "closed by the broker after a fatal error: {e}"),
            CloseReason::BadFrame(e) => write!(f, "the broker sent a bad frame: {e}"),
            CloseReason::Io(e) => write!(f, "socket error: {e}"),
            CloseReason::EventRing(e) => write!(
                f,
                "the event ring is unusable ({e}); its events cannot be delivered, so the connection was closed"
            ),
            CloseReason::Shutdown => write!(f, "closed by this client"),
        }
    }
}

/// A failed client call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The broker answered with an error (code, message and `data` as sent;
    /// A2A errors have code 1400 and `data.errorCode`).
    #[error("broker error: {0}")]
    Rpc(RpcError),
    /// Connecting to the socket, or writing to it, failed.
    #[error("socket i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The connection is gone; every call pending on it fails with this,
    /// and so does every later call.
    #[error("connection closed: {0}")]
    Closed(CloseReason),
    /// No answer came within the call's timeout (the connection stays
    /// usable; a late answer is discarded).
    #[error("no answer within {0:?}")]
    Timeout(std::time::Duration),
    /// A request would exceed the broker's frame limit; it was not sent
    /// (sending it would make the broker close the connection).
    #[error("request frame of {bytes} bytes exceeds the {max}-byte limit")]
    FrameTooLarge { bytes: usize, max: usize },
    /// The broker answered with something this method does not return, or
    /// a value could not be encoded or read.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The agent was deregistered: its token is dead and its queue closed.
    #[error("agent {0} is deregistered")]
    Deregistered(String),
    /// A blocking wait was asked of this connection's reader thread (from
    /// an event handler or an `on_complete` callback): the reader is the
    /// thread that would deliver the answer, so waiting would deadlock.
    /// Use the `_async` form and `on_complete` there instead.
    #[error("a blocking call on the connection's own reader thread would deadlock")]
    WouldDeadlock,
    /// Nothing listens at the broker's socket ([`crate::locate`]): no
    /// socket file there, or one a broker that is gone left. Kind
    /// [`ErrorKind::Io`].
    #[error("{0}")]
    NoBroker(NoBroker),
    /// The broker's secret could not be read, or the broker refused it
    /// ([`crate::locate`]). Kind [`ErrorKind::Io`] when unreadable,
    /// [`ErrorKind::Rpc`] when refused (then [`ClientError::rpc`] has the
    /// broker's answer).
    #[error("{0}")]
    Secret(SecretError),
}

/// The kind of a [`ClientError`], without its payload: a small `Copy` value
/// that maps one to one onto the C ABI's status codes and the Node error
/// `code` ([`ErrorKind::as_str`]). New kinds come only with new
/// [`ClientError`] variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// [`ClientError::Rpc`]: the broker answered with an error; see
    /// [`ClientError::a2a_code`] and [`ClientError::rpc`].
    Rpc,
    /// [`ClientError::Io`]: connecting or the socket failed.
    Io,
    /// [`ClientError::Closed`]: the connection is gone.
    Closed,
    /// [`ClientError::Timeout`]: no answer in time.
    Timeout,
    /// [`ClientError::FrameTooLarge`]: the request was not sent.
    FrameTooLarge,
    /// [`ClientError::Protocol`]: an answer or value this client cannot use.
    Protocol,
    /// [`ClientError::Deregistered`]: the agent's token is dead.
    Deregistered,
    /// [`ClientError::WouldDeadlock`]: a blocking call on the reader thread.
    WouldDeadlock,
}

impl ErrorKind {
    /// Every kind, in declaration order (for tables in the layers above).
    pub const ALL: [ErrorKind; 8] = [
        ErrorKind::Rpc,
        ErrorKind::Io,
        ErrorKind::Closed,
        ErrorKind::Timeout,
        ErrorKind::FrameTooLarge,
        ErrorKind::Protocol,
        ErrorKind::Deregistered,
        ErrorKind::WouldDeadlock,
    ];

    /// A stable name, e.g. `"closed"`, for error codes outside Rust.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Rpc => "rpc",
            ErrorKind::Io => "io",
            ErrorKind::Closed => "closed",
            ErrorKind::Timeout => "timeout",
            ErrorKind::FrameTooLarge => "frame_too_large",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Deregistered => "deregistered",
            ErrorKind::WouldDeadlock => "would_deadlock",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ClientError {
    /// The error for an answer of the wrong kind to `method`.
    pub fn unexpected(method: &str, got: &a2a_proto::call::Outcome) -> ClientError {
        ClientError::Protocol(format!("unexpected result for {method}: {}", got.to_json()))
    }

    /// The broker's error object, if the broker answered with one.
    pub fn rpc(&self) -> Option<&RpcError> {
        match self {
            ClientError::Rpc(e) => Some(e),
            ClientError::Closed(CloseReason::Fatal(e)) => Some(e),
            ClientError::Secret(SecretError {
                problem: SecretProblem::Refused(e),
                ..
            }) => Some(e),
            _ => None,
        }
    }

    /// What kind of failure this is (the C ABI status, the Node `code`).
    pub fn kind(&self) -> ErrorKind {
        match self {
            ClientError::Rpc(_) => ErrorKind::Rpc,
            ClientError::Io(_) => ErrorKind::Io,
            ClientError::Closed(_) => ErrorKind::Closed,
            ClientError::Timeout(_) => ErrorKind::Timeout,
            ClientError::FrameTooLarge { .. } => ErrorKind::FrameTooLarge,
            ClientError::Protocol(_) => ErrorKind::Protocol,
            ClientError::Deregistered(_) => ErrorKind::Deregistered,
            ClientError::WouldDeadlock => ErrorKind::WouldDeadlock,
            ClientError::NoBroker(_) => ErrorKind::Io,
            ClientError::Secret(e) => match e.problem {
                SecretProblem::Unreadable(_) => ErrorKind::Io,
                SecretProblem::Refused(_) => ErrorKind::Rpc,
            },
        }
    }

    /// The `data.errorCode` of an A2A domain error (code 1400), typed;
    /// `None` for every other error, and for a code this client does not
    /// know (a newer broker's; [`ClientError::rpc`] still has it as sent).
    pub fn a2a_code(&self) -> Option<A2aErrorCode> {
        let code = self.rpc()?.a2a_code()?;
        serde_json::from_value(serde_json::Value::String(code.to_owned())).ok()
    }
}

impl Clone for ClientError {
    /// A copy for a second taker (an `io::Error` is copied by kind and
    /// message, the rest exactly).
    fn clone(&self) -> Self {
        match self {
            ClientError::Rpc(e) => ClientError::Rpc(e.clone()),
            ClientError::Io(e) => ClientError::Io(std::io::Error::new(e.kind(), e.to_string())),
            ClientError::Closed(r) => ClientError::Closed(r.clone()),
            ClientError::Timeout(d) => ClientError::Timeout(*d),
            ClientError::FrameTooLarge { bytes, max } => ClientError::FrameTooLarge {
                bytes: *bytes,
                max: *max,
            },
            ClientError::Protocol(m) => ClientError::Protocol(m.clone()),
            ClientError::Deregistered(a) => ClientError::Deregistered(a.clone()),
            ClientError::WouldDeadlock => ClientError::WouldDeadlock,
            ClientError::NoBroker(e) => ClientError::NoBroker(e.clone()),
            ClientError::Secret(e) => ClientError::Secret(e.clone()),
        }
    }
}

impl From<RpcError> for ClientError {
    fn from(e: RpcError) -> Self {
        ClientError::Rpc(e)
    }
}

// ---- The locator's errors ([`crate::locate`]) ----

/// Where the secret a client presents came from (said in errors, so a user
/// knows which one to fix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretFrom {
    /// The caller passed it.
    Given,
    /// The `A2A_BROKER_SECRET` environment variable.
    Env,
    /// This file (the one beside the socket, or one the caller named).
    File(PathBuf),
}

impl fmt::Display for SecretFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretFrom::Given => write!(f, "the secret given"),
            SecretFrom::Env => write!(f, "the secret in {SECRET_ENV}"),
            SecretFrom::File(p) => write!(f, "the secret in {}", p.display()),
        }
    }
}

/// Nothing listens at a broker's socket: no socket file there, or one a
/// broker that is gone left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoBroker {
    /// The `--socket` argument (a NAME or a path).
    pub given: String,
    /// The socket it names.
    pub socket: PathBuf,
}

impl fmt::Display for NoBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no broker is listening at {}", self.socket.display())?;
        if Path::new(&self.given) != self.socket {
            write!(f, " (from {})", self.given)?;
        }
        write!(
            f,
            ": start one with `a2a-broker serve --socket {}`",
            self.given
        )
    }
}

/// The secret for a broker's socket could not be read, or the broker
/// refused it.
#[derive(Debug)]
pub struct SecretError {
    /// The broker's socket.
    pub socket: PathBuf,
    /// Where the secret came from, or was to come from.
    pub from: SecretFrom,
    /// What went wrong with it.
    pub problem: SecretProblem,
}

/// What went wrong with a secret.
#[derive(Debug)]
pub enum SecretProblem {
    /// It could not be read (the file is missing or not ours).
    Unreadable(std::io::Error),
    /// The broker answered the handshake with this error (a wrong secret).
    Refused(RpcError),
}

impl Clone for SecretError {
    fn clone(&self) -> Self {
        SecretError {
            socket: self.socket.clone(),
            from: self.from.clone(),
            problem: match &self.problem {
                SecretProblem::Unreadable(e) => {
                    SecretProblem::Unreadable(std::io::Error::new(e.kind(), e.to_string()))
                }
                SecretProblem::Refused(e) => SecretProblem::Refused(e.clone()),
            },
        }
    }
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let socket = self.socket.display();
        match &self.problem {
            SecretProblem::Unreadable(e) => write!(
                f,
                "cannot read {} for the broker at {socket}: {e}; set {SECRET_ENV} or make the file readable",
                self.from
            ),
            SecretProblem::Refused(e) => {
                write!(
                    f,
                    "the broker at {socket} refused {}: it is not that broker's secret ({e})",
                    self.from
                )?;
                if self.from == SecretFrom::Env {
                    write!(f, "; unset {SECRET_ENV} to use the file beside the socket")?;
                }
                Ok(())
            }
        }
    }
}
