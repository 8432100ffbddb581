//! Why the wire core refused what the broker sent.

use crate::error::CloseReason;
use a2a_proto::error::RpcError;

/// What ends a connection at the wire: the bytes cannot be framed or read,
/// or the broker said it could not read ours. Neither framing can resume
/// after one of these on a client's side, so a driver closes with
/// [`WireError::close_reason`].
#[derive(Debug, Clone, PartialEq)]
pub enum WireError {
    /// A frame (binary payload or NDJSON line) longer than the bound.
    TooLarge { bytes: usize, max: usize },
    /// Bytes that are not a frame of this codec.
    Malformed(String),
    /// The broker's error frame: it could not read a frame of ours and
    /// closes the connection after it (binary framing).
    Fatal(RpcError),
}

impl WireError {
    /// The reason a driver closes the connection with.
    pub fn close_reason(&self) -> CloseReason {
        match self {
            WireError::Fatal(e) => CloseReason::Fatal(e.clone()),
            other => CloseReason::BadFrame(other.to_string()),
        }
    }
}

impl From<WireError> for CloseReason {
    fn from(e: WireError) -> CloseReason {
        match e {
            WireError::Fatal(e) => CloseReason::Fatal(e),
            other => CloseReason::BadFrame(other.to_string()),
        }
    }
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The same words as a2a-proto's FrameError, which close reasons
            // carried before the core existed.
            WireError::TooLarge { bytes, max } => {
                write!(f, "frame of {bytes} bytes exceeds the {max}-byte limit")
            }
            WireError::Malformed(e) => write!(f, "malformed frame: {e}"),
            WireError::Fatal(e) => write!(f, "the broker could not read a frame: {e}"),
        }
    }
}

impl std::error::Error for WireError {}

impl From<a2a_proto::binary::FrameError> for WireError {
    fn from(e: a2a_proto::binary::FrameError) -> WireError {
        match e {
            a2a_proto::binary::FrameError::TooLarge(bytes, max) => {
                WireError::TooLarge { bytes, max }
            }
            a2a_proto::binary::FrameError::Malformed(m) => WireError::Malformed(m),
        }
    }
}
