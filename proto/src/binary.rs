//! Binary frames (ext, PROTOCOL.md §1.2): after the client's 4-byte magic
//! `A2AB` and a `u16` little-endian codec version, each frame is a `u32`
//! little-endian payload length and a bincode-2 payload (standard config).
//!
//! The payloads mirror the JSON methods one for one: a request carries a
//! [`Call`], a response an [`Outcome`] or the same error object, a
//! notification the same [`Notification`]. bincode is used only here, so a
//! bincode-compatible successor can replace it in one module.

use crate::call::{Call, Outcome};
use crate::error::RpcError;
use crate::limits::MAX_FRAME_BYTES;
use crate::types::Notification;
use bincode::{Decode, Encode};

/// The first bytes a binary client sends.
pub const MAGIC: &[u8; 4] = b"A2AB";
/// The codec version this crate speaks.
pub const CODEC_VERSION: u16 = 1;

/// The 6-byte preamble: magic and codec version.
pub fn preamble() -> [u8; 6] {
    let mut p = [0u8; 6];
    p[..4].copy_from_slice(MAGIC);
    p[4..].copy_from_slice(&CODEC_VERSION.to_le_bytes());
    p
}

/// What a client sends.
#[derive(Debug, Clone, PartialEq, Encode, Decode)]
pub enum ClientFrame {
    /// A call expecting a response under `id`.
    Request { id: u64, call: Call },
    /// A call without a response.
    Notify { call: Call },
}

/// What the broker sends.
#[derive(Debug, Clone, PartialEq, Encode, Decode)]
pub enum ServerFrame {
    Response {
        id: u64,
        result: Result<Outcome, RpcError>,
    },
    Notification(Notification),
    /// A frame that could not be read; the connection closes after it.
    Fatal(RpcError),
}

/// Why a frame could not be read.
#[derive(Debug, PartialEq)]
pub enum FrameError {
    /// The length prefix exceeds `MAX_FRAME_BYTES`.
    TooLarge(usize),
    /// The payload is not a valid frame.
    Malformed(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLarge(n) => write!(
                f,
                "frame of {n} bytes exceeds the {MAX_FRAME_BYTES}-byte limit"
            ),
            FrameError::Malformed(e) => write!(f, "malformed frame: {e}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// The standard configuration, with decoding limited to one frame's size:
/// a forged length inside a payload cannot make the decoder reserve more
/// memory than a frame may hold.
fn config() -> bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<MAX_FRAME_BYTES>,
> {
    bincode::config::standard().with_limit::<MAX_FRAME_BYTES>()
}

/// Appends one frame (length prefix + payload) to `out`.
pub fn encode_frame<T: Encode>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), bincode::error::EncodeError> {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    bincode::encode_into_std_write(value, out, bincode::config::standard())?;
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    Ok(())
}

/// Reads a length prefix: the payload length, refused past the limit.
pub fn payload_len(prefix: [u8; 4]) -> Result<usize, FrameError> {
    let n = u32::from_le_bytes(prefix) as usize;
    if n > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge(n));
    }
    Ok(n)
}

/// Decodes one payload; trailing bytes are an error.
pub fn decode_payload<T: Decode<()>>(payload: &[u8]) -> Result<T, FrameError> {
    let (v, used) = bincode::decode_from_slice(payload, config())
        .map_err(|e| FrameError::Malformed(e.to_string()))?;
    if used != payload.len() {
        return Err(FrameError::Malformed(format!(
            "{} bytes left over after the frame",
            payload.len() - used
        )));
    }
    Ok(v)
}

/// Splits complete frames off the front of `buf`: returns the payloads'
/// ranges and how many bytes they used.
pub fn split_frames(buf: &[u8]) -> Result<(Vec<std::ops::Range<usize>>, usize), FrameError> {
    let mut at = 0;
    let mut out = Vec::new();
    while buf.len() - at >= 4 {
        let n = payload_len(buf[at..at + 4].try_into().expect("4 bytes"))?;
        if buf.len() - at - 4 < n {
            break;
        }
        out.push(at + 4..at + 4 + n);
        at += 4 + n;
    }
    Ok((out, at))
}
