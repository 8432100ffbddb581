//! The two framings of docs/protocol.md §1 as one trait: how a request is
//! encoded, how frames are split off the front of a buffer, and how one
//! frame reads as an answer or an event.

use super::json;
use super::WireError;
use crate::error::ClientError;
use a2a_proto::binary::{decode_server_payload, encode_frame, next_frame, ServerFrame};
use a2a_proto::call::{Call, Outcome};
use a2a_proto::error::RpcError;
use a2a_proto::limits::MAX_FRAME_BYTES;
use a2a_proto::types::Notification;
use std::ops::Range;

/// One framing of the broker's protocol. The methods are associated
/// functions: a codec has no state (the [`super::Framer`] keeps the
/// bytes, the [`super::Calls`] the calls).
pub trait Codec {
    /// What one frame the broker sent reads as.
    type Inbound<'a>;

    /// The bytes a client writes first on a new connection (none for
    /// NDJSON: the first request's `{` tells the broker).
    const PREAMBLE: &'static [u8];

    /// Appends the request of `call` under `id` to `out`. A request over
    /// the bound a broker reads (`MAX_FRAME_BYTES`) is refused and leaves
    /// `out` as it was.
    fn encode_request(id: u64, call: &Call, out: &mut Vec<u8>) -> Result<(), ClientError>;

    /// The first whole frame at the front of `buf`: the frame's range and
    /// the bytes it used (with its prefix or line end). `scanned` is how
    /// much of `buf` an earlier call already searched (0 for a new frame;
    /// it is updated, so a long line arriving in pieces is searched once).
    /// A frame longer than `max` is an error as soon as that is known.
    fn split(
        buf: &[u8],
        scanned: &mut usize,
        max: usize,
    ) -> Result<Option<(Range<usize>, usize)>, WireError>;

    /// A frame that carries nothing and is skipped (a blank NDJSON line).
    fn is_filler(_frame: &[u8]) -> bool {
        false
    }

    /// Reads one frame.
    fn decode(frame: &[u8]) -> Result<Self::Inbound<'_>, WireError>;

    /// The id of the call a frame answers (`None`: an event, or an answer
    /// to no call of ours).
    fn answer_id(inbound: &Self::Inbound<'_>) -> Option<u64>;
}

/// Binary frames: a `u32` little-endian length and a bincode payload.
#[derive(Debug, Clone, Copy, Default)]
pub struct Binary;

/// A binary frame the broker sent, decoded. (Its error frame is not one:
/// it ends the connection, [`WireError::Fatal`].)
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    Answer {
        id: u64,
        result: Result<Outcome, RpcError>,
    },
    Event(Notification),
}

impl Codec for Binary {
    type Inbound<'a> = Inbound;

    const PREAMBLE: &'static [u8] = &[b'A', b'2', b'A', b'B', 1, 0];

    fn encode_request(id: u64, call: &Call, out: &mut Vec<u8>) -> Result<(), ClientError> {
        let start = out.len();
        // `ClientFrame::Request { id, call }` as bincode writes it (the
        // variant's number, then its fields), without moving the call into
        // a frame value; a test holds the two to the same bytes.
        let request = (REQUEST_VARIANT, id, call);
        if let Err(e) = encode_frame(&request, out) {
            out.truncate(start);
            return Err(ClientError::Protocol(format!(
                "cannot encode the request: {e}"
            )));
        }
        let bytes = out.len() - start - 4;
        within_bound(out, start, bytes)
    }

    fn split(
        buf: &[u8],
        _scanned: &mut usize,
        max: usize,
    ) -> Result<Option<(Range<usize>, usize)>, WireError> {
        Ok(next_frame(buf, max)?.map(|r| {
            let used = r.end;
            (r, used)
        }))
    }

    // Inlined into the drivers (the gateway's is another crate): on the
    // reader's hot path, a call here and the move of its result cost as
    // much as a sixth of decoding an answer (measured).
    #[inline]
    fn decode(frame: &[u8]) -> Result<Inbound, WireError> {
        match decode_server_payload::<ServerFrame>(frame)? {
            ServerFrame::Response { id, result } => Ok(Inbound::Answer { id, result }),
            ServerFrame::Notification(n) => Ok(Inbound::Event(n)),
            ServerFrame::Fatal(e) => Err(WireError::Fatal(e)),
        }
    }

    fn answer_id(inbound: &Inbound) -> Option<u64> {
        match inbound {
            Inbound::Answer { id, .. } => Some(*id),
            Inbound::Event(_) => None,
        }
    }
}

/// bincode's number of `ClientFrame::Request`.
const REQUEST_VARIANT: u32 = 0;

/// NDJSON lines: one JSON-RPC value per `\n`-terminated line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ndjson;

/// An NDJSON line the broker sent, its values as their bytes (found by
/// [`json::envelope`], parsed by whoever takes them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Line<'a> {
    /// A response: `result` is `Ok(the result value)` or `Err(the error
    /// object)`. `id` is `None` when the broker could not read a request's
    /// id (`"id": null`) or the id is not a number this core gave out.
    Answer {
        id: Option<u64>,
        id_raw: &'a [u8],
        result: Result<&'a [u8], &'a [u8]>,
    },
    /// A notification: its method (without quotes) and params (`null`
    /// when it has none).
    Event { method: &'a str, params: &'a [u8] },
    /// A batch's answers (a JSON array), for a driver that sent a batch.
    Batch(&'a [u8]),
}

impl Codec for Ndjson {
    type Inbound<'a> = Line<'a>;

    const PREAMBLE: &'static [u8] = b"";

    fn encode_request(id: u64, call: &Call, out: &mut Vec<u8>) -> Result<(), ClientError> {
        let start = out.len();
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        push_u64(out, id);
        out.extend_from_slice(b",\"method\":\"");
        out.extend_from_slice(call.method().as_bytes());
        out.extend_from_slice(b"\",\"params\":");
        if let Err(e) = call.write_params_json(&mut *out) {
            out.truncate(start);
            return Err(ClientError::Protocol(format!(
                "cannot encode the request: {e}"
            )));
        }
        out.extend_from_slice(b"}\n");
        // The bound is the line's, without its `\n` (as the broker counts).
        let bytes = out.len() - start - 1;
        within_bound(out, start, bytes)
    }

    fn split(
        buf: &[u8],
        scanned: &mut usize,
        max: usize,
    ) -> Result<Option<(Range<usize>, usize)>, WireError> {
        let from = (*scanned).min(buf.len());
        let Some(i) = memchr::memchr(b'\n', &buf[from..]).map(|i| from + i) else {
            *scanned = buf.len();
            // No end yet: a line already past the bound will not fit
            // whatever follows (a trailing `\r` may still come off).
            if buf.len() > max + 1 {
                return Err(WireError::TooLarge {
                    bytes: buf.len(),
                    max,
                });
            }
            return Ok(None);
        };
        let mut end = i;
        if end > 0 && buf[end - 1] == b'\r' {
            end -= 1;
        }
        if end > max {
            return Err(WireError::TooLarge { bytes: end, max });
        }
        *scanned = 0;
        Ok(Some((0..end, i + 1)))
    }

    fn is_filler(frame: &[u8]) -> bool {
        // Blank lines carry nothing (§1).
        frame.iter().all(|b| b.is_ascii_whitespace())
    }

    fn decode(line: &[u8]) -> Result<Line<'_>, WireError> {
        let first = line.iter().find(|b| !b.is_ascii_whitespace());
        if first == Some(&b'[') {
            return Ok(Line::Batch(line));
        }
        let e = json::envelope(line).map_err(|e| WireError::Malformed(e.to_owned()))?;
        match (e.result, e.error, e.method) {
            (Some(r), None, _) => Ok(Line::Answer {
                id: e.id,
                id_raw: e.id_raw.unwrap_or(b"null"),
                result: Ok(r),
            }),
            (None, Some(err), _) => Ok(Line::Answer {
                id: e.id,
                id_raw: e.id_raw.unwrap_or(b"null"),
                result: Err(err),
            }),
            (None, None, Some(m)) if e.id_raw.is_none() => {
                let method = m
                    .strip_prefix(b"\"")
                    .and_then(|m| m.strip_suffix(b"\""))
                    .and_then(|m| std::str::from_utf8(m).ok())
                    .ok_or_else(|| WireError::Malformed("a method is not a string".into()))?;
                Ok(Line::Event {
                    method,
                    params: e.params.unwrap_or(b"null"),
                })
            }
            _ => Err(WireError::Malformed(
                "a line is neither a response nor a notification".into(),
            )),
        }
    }

    fn answer_id(inbound: &Line<'_>) -> Option<u64> {
        match inbound {
            Line::Answer { id, .. } => *id,
            _ => None,
        }
    }
}

impl Ndjson {
    /// Appends a request line for any method: `params` is its JSON value
    /// as bytes (an object, or `None` for none), `id` `None` for a
    /// notification (no answer). The same bound as
    /// [`Codec::encode_request`]; `params` is written as given (the caller
    /// made it JSON).
    pub fn encode_raw(
        id: Option<u64>,
        method: &str,
        params: Option<&[u8]>,
        out: &mut Vec<u8>,
    ) -> Result<(), ClientError> {
        let start = out.len();
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\"");
        if let Some(id) = id {
            out.extend_from_slice(b",\"id\":");
            push_u64(out, id);
        }
        out.extend_from_slice(b",\"method\":");
        if let Err(e) = serde_json::to_writer(&mut *out, method) {
            out.truncate(start);
            return Err(ClientError::Protocol(format!(
                "cannot encode the request: {e}"
            )));
        }
        if let Some(p) = params {
            out.extend_from_slice(b",\"params\":");
            out.extend_from_slice(p);
        }
        out.extend_from_slice(b"}\n");
        let bytes = out.len() - start - 1;
        within_bound(out, start, bytes)
    }
}

/// Appends `n` in decimal (without `fmt`'s machinery: once per call).
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Keeps a request of `bytes` (as the broker counts them) that `out` holds
/// from `start`, or takes it back out and refuses it past the frame bound.
fn within_bound(out: &mut Vec<u8>, start: usize, bytes: usize) -> Result<(), ClientError> {
    if bytes > MAX_FRAME_BYTES {
        out.truncate(start);
        return Err(ClientError::FrameTooLarge {
            bytes,
            max: MAX_FRAME_BYTES,
        });
    }
    Ok(())
}
