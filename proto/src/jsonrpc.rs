//! The JSON-RPC 2.0 envelope on NDJSON lines (docs/protocol.md §1).
//!
//! Only the envelope is parsed here (method name and raw params), so the hot
//! path never builds a `serde_json::Value` tree; each handler then parses its
//! params into its own typed struct.

use crate::error::RpcError;
use crate::limits::A2A_MAX_BATCH;
use serde::de::DeserializeSeed;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};

/// A request id: a string, a number, or `null`.
#[derive(Debug, Clone, PartialEq)]
pub enum Id {
    Null,
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Null => s.serialize_unit(),
            Id::Int(i) => s.serialize_i64(*i),
            Id::Uint(u) => s.serialize_u64(*u),
            Id::Float(f) => s.serialize_f64(*f),
            Id::Str(st) => s.serialize_str(st),
        }
    }
}

struct IdVisitor;

impl<'de> Visitor<'de> for IdVisitor {
    type Value = Id;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, a number or null")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Id, E> {
        Ok(Id::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id, E> {
        Ok(Id::Uint(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Id, E> {
        Ok(Id::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Id, E> {
        Ok(Id::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Id, E> {
        Ok(Id::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Id, E> {
        Ok(Id::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Id, E> {
        Ok(Id::Null)
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Id, D::Error> {
        d.deserialize_any(IdVisitor)
    }
}

/// Distinguishes an absent `id` (a notification) from `"id": null`.
fn present_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Id>, D::Error> {
    Id::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present_id")]
    id: Option<Id>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// A well-formed request or notification.
#[derive(Debug)]
pub struct Request<'a> {
    /// `None` for a notification.
    pub id: Option<Id>,
    pub method: Cow<'a, str>,
    /// Raw params text; `None` when absent or `null`.
    pub params: Option<&'a RawValue>,
}

impl Request<'_> {
    /// The params text, `{}` when absent.
    pub fn params_str(&self) -> &str {
        self.params.map(|p| p.get()).unwrap_or("{}")
    }
}

/// A request that could not be accepted, with the id to answer it under.
#[derive(Debug)]
pub struct Rejected {
    pub id: Id,
    pub error: RpcError,
}

/// What one line holds.
#[derive(Debug)]
pub enum Incoming<'a> {
    /// A blank line: ignored.
    Blank,
    /// A single request (or its rejection).
    Single(Result<Request<'a>, Rejected>),
    /// A non-empty batch.
    Batch(Vec<Result<Request<'a>, Rejected>>),
}

/// Parses one line (without its `\n`; a trailing `\r` is tolerated).
pub fn parse_line(line: &[u8]) -> Incoming<'_> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(e) => return Incoming::Single(Err(reject(Id::Null, RpcError::parse(e)))),
    };
    let trimmed = text.trim_start_matches([' ', '\t', '\r', '\n']);
    if trimmed.trim_end().is_empty() {
        return Incoming::Blank;
    }
    if trimmed.starts_with('[') {
        let over = std::cell::Cell::new(false);
        let mut de = serde_json::Deserializer::from_str(text);
        let parsed = BoundedBatch(&over)
            .deserialize(&mut de)
            .and_then(|items| de.end().map(|()| items));
        return match parsed {
            Ok(items) if items.is_empty() => Incoming::Single(Err(reject(
                Id::Null,
                RpcError::invalid_request("empty batch"),
            ))),
            Ok(items) => Incoming::Batch(items.into_iter().map(|r| parse_one(r.get())).collect()),
            Err(_) if over.get() => Incoming::Single(Err(reject(
                Id::Null,
                RpcError::new(
                    crate::error::INVALID_REQUEST,
                    "invalid request: a batch holds at most 256 entries",
                    Some(serde_json::json!({
                        "reason": "batch too large",
                        "limit": "A2A_MAX_BATCH",
                        "max": A2A_MAX_BATCH,
                    })),
                ),
            ))),
            Err(e) => Incoming::Single(Err(reject(Id::Null, RpcError::parse(e)))),
        };
    }
    Incoming::Single(parse_one(text))
}

/// Reads a batch's entries as raw JSON, giving up at the first entry past
/// `A2A_MAX_BATCH` (and flagging why): a 30 MB line of `[0,0,…]` costs the
/// parse of 257 entries, not an error object for each of millions.
struct BoundedBatch<'c>(&'c std::cell::Cell<bool>);

impl<'de> serde::de::DeserializeSeed<'de> for BoundedBatch<'_> {
    type Value = Vec<&'de RawValue>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for BoundedBatch<'_> {
    type Value = Vec<&'de RawValue>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a batch of requests")
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<&'de RawValue>()? {
            if items.len() == A2A_MAX_BATCH {
                self.0.set(true);
                return Err(de::Error::custom("batch too large"));
            }
            items.push(item);
        }
        Ok(items)
    }
}

fn reject(id: Id, error: RpcError) -> Rejected {
    Rejected { id, error }
}

fn parse_one(text: &str) -> Result<Request<'_>, Rejected> {
    let env: RawEnvelope = match serde_json::from_str(text) {
        Ok(env) => env,
        Err(e) if e.is_syntax() || e.is_eof() => return Err(reject(Id::Null, RpcError::parse(e))),
        Err(e) => {
            // Valid JSON, not a request object: answer with its id if one can be read.
            let id = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| v.get("id").cloned())
                .and_then(|v| serde_json::from_value::<Id>(v).ok())
                .unwrap_or(Id::Null);
            return Err(reject(
                id,
                RpcError::invalid_request(&format!("not a request object: {e}")),
            ));
        }
    };
    let id_for_error = env.id.clone().unwrap_or(Id::Null);
    if env.jsonrpc.as_deref() != Some("2.0") {
        return Err(reject(
            id_for_error,
            RpcError::invalid_request("jsonrpc must be \"2.0\""),
        ));
    }
    let Some(method) = env.method else {
        return Err(reject(
            id_for_error,
            RpcError::invalid_request("missing method"),
        ));
    };
    Ok(Request {
        id: env.id,
        method,
        params: env.params,
    })
}

/// Writes one response line (with its `\n`).
pub fn write_response<W: Write, R: Serialize + ?Sized>(
    w: &mut W,
    id: &Id,
    result: Result<&R, &RpcError>,
) -> io::Result<()> {
    write_response_body(w, id, result)?;
    w.write_all(b"\n")
}

/// Writes one response object without a line end (used inside batches).
pub fn write_response_body<W: Write, R: Serialize + ?Sized>(
    w: &mut W,
    id: &Id,
    result: Result<&R, &RpcError>,
) -> io::Result<()> {
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":")?;
    serde_json::to_writer(&mut *w, id)?;
    match result {
        Ok(r) => {
            w.write_all(b",\"result\":")?;
            serde_json::to_writer(&mut *w, r)?;
        }
        Err(e) => {
            w.write_all(b",\"error\":")?;
            serde_json::to_writer(&mut *w, e)?;
        }
    }
    w.write_all(b"}")
}

/// Writes one notification line: `{"jsonrpc":"2.0","method":..,"params":..}`.
pub fn write_notification<W: Write, P: Serialize + ?Sized>(
    w: &mut W,
    method: &str,
    params: &P,
) -> io::Result<()> {
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":")?;
    serde_json::to_writer(&mut *w, method)?;
    w.write_all(b",\"params\":")?;
    serde_json::to_writer(&mut *w, params)?;
    w.write_all(b"}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(line: &str) -> Result<Request<'_>, Rejected> {
        match parse_line(line.as_bytes()) {
            Incoming::Single(r) => r,
            other => panic!("expected a single request, got {other:?}"),
        }
    }

    #[test]
    fn parses_request_and_notification() {
        let r = single(r#"{"jsonrpc":"2.0","id":7,"method":"a2a.tasks.get","params":{"id":"x"}}"#)
            .unwrap();
        assert_eq!(r.id, Some(Id::Uint(7)));
        assert_eq!(r.method, "a2a.tasks.get");
        assert_eq!(r.params_str(), r#"{"id":"x"}"#);
        let n = single(r#"{"jsonrpc":"2.0","method":"x"}"#).unwrap();
        assert_eq!(n.id, None);
        let null_id = single(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#).unwrap();
        assert_eq!(null_id.id, Some(Id::Null));
    }

    #[test]
    fn classifies_bad_lines() {
        let e = single("{nope").unwrap_err();
        assert_eq!((e.id, e.error.code), (Id::Null, -32700));
        let e = single(r#"{"jsonrpc":"2.0","id":"a","method":5}"#).unwrap_err();
        assert_eq!((e.id, e.error.code), (Id::Str("a".into()), -32600));
        let e = single(r#"{"id":3,"method":"x"}"#).unwrap_err();
        assert_eq!((e.id, e.error.code), (Id::Uint(3), -32600));
        let e = single("42").unwrap_err();
        assert_eq!(e.error.code, -32600);
        let e = single(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#).unwrap_err();
        assert_eq!((e.id, e.error.code), (Id::Null, -32600));
        assert!(matches!(parse_line(b"  \r"), Incoming::Blank));
        assert!(matches!(parse_line(b"[]"), Incoming::Single(Err(_))));
        let full = format!("[{}]", vec!["0"; A2A_MAX_BATCH].join(","));
        assert!(
            matches!(parse_line(full.as_bytes()), Incoming::Batch(b) if b.len() == A2A_MAX_BATCH)
        );
        let over = format!("[{}]", vec!["0"; 3_000_000].join(","));
        match parse_line(over.as_bytes()) {
            Incoming::Single(Err(e)) => {
                assert_eq!(e.error.code, -32600);
                assert_eq!(e.error.data.unwrap()["reason"], "batch too large");
            }
            other => panic!("{other:?}"),
        }
        match parse_line(br#"[{"jsonrpc":"2.0","id":1,"method":"a"}, 5]"#) {
            Incoming::Batch(items) => {
                assert!(items[0].is_ok());
                assert_eq!(items[1].as_ref().unwrap_err().error.code, -32600);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn separators_in_strings_are_not_line_breaks() {
        let line = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\u{2028}b\"}\r";
        assert_eq!(single(line).unwrap().method, "a\u{2028}b");
    }

    #[test]
    fn writes_envelopes() {
        let mut out = Vec::new();
        write_response::<_, serde_json::Value>(
            &mut out,
            &Id::Str("q".into()),
            Ok(&serde_json::json!({"ok": true})),
        )
        .unwrap();
        assert_eq!(
            out,
            b"{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"result\":{\"ok\":true}}\n"
        );
    }
}
