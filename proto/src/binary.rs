//! Binary frames (ext, docs/protocol.md §1): after the client's 4-byte magic
//! `A2AB` and a `u16` little-endian codec version, each frame is a `u32`
//! little-endian payload length and a bincode-2 payload (standard config).
//!
//! The payloads mirror the JSON methods one for one: a request carries a
//! [`Call`], a response an [`Outcome`] or the same error object, a
//! notification the same [`Notification`]. bincode is used only here, so a
//! bincode-compatible successor can replace it in one module.

use crate::call::{Call, Outcome};
use crate::error::RpcError;
use crate::limits::{A2A_MAX_OUT_FRAME_BYTES, MAX_FRAME_BYTES};
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

/// bincode's numbers for [`ServerFrame`]'s variants and a response's
/// `Result`, for encoders that write a frame without building a
/// `ServerFrame` (the broker's borrowed replies; with
/// [`crate::call::OutcomeKind`] for the result's own variant). A test holds
/// them to the types.
pub mod index {
    /// [`super::ServerFrame::Response`].
    pub const RESPONSE: u32 = 0;
    /// [`super::ServerFrame::Notification`].
    pub const NOTIFICATION: u32 = 1;
    /// A response's `Ok` result.
    pub const RESULT_OK: u32 = 0;
    /// A response's `Err` result.
    pub const RESULT_ERR: u32 = 1;
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
    /// The length prefix (first) exceeds the bound in force (second).
    TooLarge(usize, usize),
    /// The payload is not a valid frame.
    Malformed(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLarge(n, max) => {
                write!(f, "frame of {n} bytes exceeds the {max}-byte limit")
            }
            FrameError::Malformed(e) => write!(f, "malformed frame: {e}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// The standard configuration, with decoding limited to one frame's size:
/// a forged length inside a payload cannot make the decoder reserve more
/// memory than a frame may hold.
fn config<const N: usize>() -> bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<N>,
> {
    bincode::config::standard().with_limit::<N>()
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

/// Reads a length prefix: the payload length, refused past the limit of
/// frames a client sends (`MAX_FRAME_BYTES`).
pub fn payload_len(prefix: [u8; 4]) -> Result<usize, FrameError> {
    payload_len_within(prefix, MAX_FRAME_BYTES)
}

fn payload_len_within(prefix: [u8; 4], max: usize) -> Result<usize, FrameError> {
    let n = u32::from_le_bytes(prefix) as usize;
    if n > max {
        return Err(FrameError::TooLarge(n, max));
    }
    Ok(n)
}

/// Decodes one payload a client sent (at most `MAX_FRAME_BYTES`); trailing
/// bytes are an error.
pub fn decode_payload<T: Decode<()>>(payload: &[u8]) -> Result<T, FrameError> {
    decode_with(payload, config::<MAX_FRAME_BYTES>())
}

/// Decodes one payload the broker sent: its frames may reach
/// `A2A_MAX_OUT_FRAME_BYTES` (§1 Framing, §9 Bounds), which clients must accept.
pub fn decode_server_payload<T: Decode<()>>(payload: &[u8]) -> Result<T, FrameError> {
    decode_with(payload, config::<A2A_MAX_OUT_FRAME_BYTES>())
}

fn decode_with<T: Decode<()>, C: bincode::config::Config>(
    payload: &[u8],
    cfg: C,
) -> Result<T, FrameError> {
    let (v, used) = bincode::decode_from_slice(payload, cfg)
        .map_err(|e| FrameError::Malformed(e.to_string()))?;
    if used != payload.len() {
        return Err(FrameError::Malformed(format!(
            "{} bytes left over after the frame",
            payload.len() - used
        )));
    }
    Ok(v)
}

/// The first complete frame at the front of `buf` (its payload's range), if
/// all of it is there; a length prefix over `max` is an error at once.
pub fn next_frame(buf: &[u8], max: usize) -> Result<Option<std::ops::Range<usize>>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let n = payload_len_within(buf[..4].try_into().expect("4 bytes"), max)?;
    Ok((buf.len() - 4 >= n).then_some(4..4 + n))
}

/// Splits complete frames a client sent off the front of `buf`: returns the
/// payloads' ranges and how many bytes they used.
pub fn split_frames(buf: &[u8]) -> Result<(Vec<std::ops::Range<usize>>, usize), FrameError> {
    split_frames_within(buf, MAX_FRAME_BYTES)
}

/// [`split_frames`] with another bound: `A2A_MAX_OUT_FRAME_BYTES` for what a
/// client reads from the broker, a smaller one before the handshake.
pub fn split_frames_within(
    buf: &[u8],
    max: usize,
) -> Result<(Vec<std::ops::Range<usize>>, usize), FrameError> {
    let mut at = 0;
    let mut out = Vec::new();
    while buf.len() - at >= 4 {
        let n = payload_len_within(buf[at..at + 4].try_into().expect("4 bytes"), max)?;
        if buf.len() - at - 4 < n {
            break;
        }
        out.push(at + 4..at + 4 + n);
        at += 4 + n;
    }
    Ok((out, at))
}

#[cfg(test)]
mod index_tests {
    use super::*;
    use crate::params::OkResult;

    #[test]
    fn the_frame_indices_are_the_ones_bincode_writes() {
        let cfg = bincode::config::standard();
        let enc = |v: &ServerFrame| bincode::encode_to_vec(v, cfg).unwrap();
        let ok = enc(&ServerFrame::Response {
            id: 7,
            result: Ok(Outcome::Ok(OkResult { ok: true })),
        });
        assert_eq!(ok[..3], [index::RESPONSE as u8, 7, index::RESULT_OK as u8]);
        let err = enc(&ServerFrame::Response {
            id: 7,
            result: Err(RpcError::invalid_params("x")),
        });
        assert_eq!(
            err[..3],
            [index::RESPONSE as u8, 7, index::RESULT_ERR as u8]
        );
        let n = enc(&ServerFrame::Notification(Notification::Lagged(
            crate::types::LaggedParams {
                recipient: "a".into(),
                recipient_context_id: "c".into(),
                dropped: 1,
            },
        )));
        assert_eq!(n[0], index::NOTIFICATION as u8);
    }
}
