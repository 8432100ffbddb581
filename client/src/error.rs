//! What can go wrong for a caller of this crate: one variant per failure a
//! caller can see and act on differently. Broker errors keep their JSON-RPC
//! code and `data` intact, so a caller can branch on `data.errorCode`.

use a2a_proto::error::RpcError;
use std::fmt;

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
    /// This side closed it ([`crate::Client::close`], or the last handle
    /// was dropped).
    Shutdown,
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::ByBroker => write!(f, "closed by the broker"),
            CloseReason::Fatal(e) => write!(f, "closed by the broker after a fatal error: {e}"),
            CloseReason::BadFrame(e) => write!(f, "the broker sent a bad frame: {e}"),
            CloseReason::Io(e) => write!(f, "socket error: {e}"),
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
}

impl ClientError {
    /// The broker's error object, if the broker answered with one.
    pub fn rpc(&self) -> Option<&RpcError> {
        match self {
            ClientError::Rpc(e) => Some(e),
            ClientError::Closed(CloseReason::Fatal(e)) => Some(e),
            _ => None,
        }
    }

    /// `data.errorCode` of an A2A error (e.g. `A2A_UNKNOWN_AGENT`).
    pub fn a2a_code(&self) -> Option<&str> {
        self.rpc()?.a2a_code()
    }
}

impl From<RpcError> for ClientError {
    fn from(e: RpcError) -> Self {
        ClientError::Rpc(e)
    }
}
