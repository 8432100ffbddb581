//! The local socket's two codecs for the benches' minimal clients and raw
//! servers, on the client's wire core (`a2a_client::wire`):
//!
//! - [`Codec`]: NDJSON lines or binary frames (docs/protocol.md §1):
//!   encoding requests (the core's encoders), telling responses from
//!   notifications by their first bytes (a sniff, not a decode: the timed
//!   loops pay no more than a raw client would), decoding frames to JSON
//!   for the untimed setup (the core's reading of a frame).
//! - [`FrameReader`]: whole frames out of a byte stream, in place, where
//!   each ends told by the core ([`WireCodec::split`]).

use crate::workload::RESPONSE_PREFIX;
use a2a_client::wire::{Binary, Codec as WireCodec, Inbound, Ndjson};
use a2a_proto::binary::{encode_frame, ClientFrame};
use a2a_proto::call::Call;
use a2a_proto::limits::A2A_MAX_OUT_FRAME_BYTES;
use serde_json::{json, Value};
use std::io::{self, Read};

/// The two codecs of the local socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Ndjson,
    Binary,
}

/// What a frame from the server is, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Response,
    Notification,
    Fatal,
}

/// How an NDJSON notification starts.
const NOTIFICATION_PREFIX: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":";

impl Codec {
    pub fn label(self) -> &'static str {
        match self {
            Codec::Ndjson => "ndjson",
            Codec::Binary => "binary",
        }
    }

    /// Bytes of framing around a frame's content (`\n`, or the length prefix).
    pub fn overhead(self) -> usize {
        match self {
            Codec::Ndjson => 1,
            Codec::Binary => 4,
        }
    }

    /// The bytes a client writes first on a new connection.
    pub fn preamble(self) -> &'static [u8] {
        match self {
            Codec::Ndjson => Ndjson::PREAMBLE,
            Codec::Binary => Binary::PREAMBLE,
        }
    }

    /// A request (`id` given: encoded by the wire core) or a notification,
    /// in this codec.
    pub fn encode(self, id: Option<u64>, method: &str, params: &Value) -> Vec<u8> {
        let call = Call::from_json(method, &params.to_string())
            .unwrap_or_else(|e| panic!("{method} params: {e:?}"));
        let mut out = Vec::new();
        match (self, id) {
            (Codec::Ndjson, Some(id)) => {
                Ndjson::encode_request(id, &call, &mut out).expect("encode request")
            }
            (Codec::Binary, Some(id)) => {
                Binary::encode_request(id, &call, &mut out).expect("encode request")
            }
            // A notification (docs/protocol.md §1): no id, no answer.
            (Codec::Ndjson, None) => {
                let params = serde_json::to_vec(&call.params_json()).expect("params");
                Ndjson::encode_raw(None, method, Some(&params), &mut out).expect("encode")
            }
            (Codec::Binary, None) => {
                encode_frame(&ClientFrame::Notify { call }, &mut out).expect("encode frame")
            }
        }
        out
    }

    /// Tells a frame's kind from its first bytes (binary: the `ServerFrame`
    /// variant index, one varint byte).
    pub fn kind(self, frame: &[u8]) -> Kind {
        match self {
            Codec::Ndjson if frame.starts_with(NOTIFICATION_PREFIX) => Kind::Notification,
            Codec::Ndjson if frame.starts_with(RESPONSE_PREFIX) => Kind::Response,
            Codec::Ndjson => Kind::Fatal,
            Codec::Binary => match frame.first() {
                Some(0) => Kind::Response,
                Some(1) => Kind::Notification,
                _ => Kind::Fatal,
            },
        }
    }

    /// Is this response a success? (binary: `Response { id < 251, Ok }`,
    /// so the id is one varint byte and the result tag the next).
    pub fn is_ok_response(self, frame: &[u8]) -> bool {
        match self {
            Codec::Ndjson => {
                let mut line = frame.to_vec();
                line.push(b'\n');
                crate::workload::is_ok_response(&line)
            }
            Codec::Binary => frame.len() > 2 && frame[0] == 0 && frame[1] < 251 && frame[2] == 0,
        }
    }

    /// A frame as JSON (setup and checks only): `{"id", "result"|"error"}`
    /// for a response, `{"method", "params"}` for a notification, read by
    /// the wire core.
    pub fn to_json(self, frame: &[u8]) -> Value {
        match self {
            Codec::Ndjson => serde_json::from_slice(frame).expect("a JSON line"),
            Codec::Binary => match Binary::decode(frame) {
                Ok(Inbound::Answer { id, result }) => match result {
                    Ok(o) => json!({"id": id, "result": o.to_json()}),
                    Err(e) => json!({"id": id, "error": e}),
                },
                Ok(Inbound::Event(n)) => serde_json::to_value(n).expect("notification"),
                Err(e) => json!({"fatal": e.to_string()}),
            },
        }
    }
}

/// Whole frames out of a byte stream: an NDJSON line without its `\n`, or
/// a binary frame's payload without its length prefix, found in place in
/// one buffer (no copy unless a frame spans reads). Where a frame ends is
/// the client's wire core's call ([`WireCodec::split`], with its bound),
/// the same both ways, so the raw server reads requests with it too.
pub struct FrameReader<R> {
    inner: R,
    codec: Codec,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// How much of `buf[start..end]` the core already searched.
    scanned: usize,
}

impl<R: Read> FrameReader<R> {
    pub fn new(inner: R, codec: Codec) -> Self {
        FrameReader {
            inner,
            codec,
            buf: vec![0; 256 * 1024],
            start: 0,
            end: 0,
            scanned: 0,
        }
    }

    /// The codec it reads.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Bytes read but not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// (content start, content end, bytes used) of the next whole frame.
    fn find(&mut self) -> io::Result<Option<(usize, usize, usize)>> {
        loop {
            let avail = &self.buf[self.start..self.end];
            let max = A2A_MAX_OUT_FRAME_BYTES;
            let (found, filler) = match self.codec {
                Codec::Ndjson => {
                    let f = Ndjson::split(avail, &mut self.scanned, max);
                    let filler =
                        matches!(&f, Ok(Some((r, _))) if Ndjson::is_filler(&avail[r.clone()]));
                    (f, filler)
                }
                Codec::Binary => (Binary::split(avail, &mut self.scanned, max), false),
            };
            let found = found.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            match found {
                // A blank line carries nothing (§1).
                Some((_, used)) if filler => self.start += used,
                Some((r, used)) => {
                    return Ok(Some((self.start + r.start, self.start + r.end, used)));
                }
                None => return Ok(None),
            }
        }
    }

    /// The next frame; `Ok(None)` at a clean end of input.
    pub fn next_frame(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            if let Some((s, e, used)) = self.find()? {
                self.start += used;
                return Ok(Some(&self.buf[s..e]));
            }
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                let len = self.buf.len() * 2;
                self.buf.resize(len, 0);
            }
            let n = match self.inner.read(&mut self.buf[self.end..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                return if self.end == 0 {
                    Ok(None)
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                };
            }
            self.end += n;
        }
    }

    /// The next frame, which must come.
    pub fn expect_frame(&mut self) -> &[u8] {
        match self.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => panic!("the server closed the connection"),
            Err(e) => panic!("reading a frame: {e}"),
        }
    }
}
