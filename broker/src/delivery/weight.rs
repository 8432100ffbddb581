//! About how many bytes a queued item holds, for the byte bounds of the
//! queues a slow reader fills (a connection's outbox, a pull agent's
//! queue): a count bound alone lets a few large events or replies each
//! pin megabytes.
//!
//! An event's estimate is about its JSON size, summed over its structure
//! (the lengths of its strings, a few bytes per field and JSON node)
//! without rendering it: the writer thread queues every event, and a data
//! part's tree would otherwise be serialized once more just to be
//! measured. A reply counts a task's stored messages and artifacts (what
//! its rendering carries) and the binary encoding of anything else, which
//! is small. Each item adds a fixed part for its allocations and envelope.

use super::outbox::{Outgoing, Response};
use crate::reply::Reply;
use a2a_proto::error::RpcError;
use a2a_proto::types::{Artifact, Message, Notification, Object, Part, StreamEvent, TaskStatus};
use bincode::enc::write::SizeWriter;
use serde_json::Value;

/// What every queued item costs besides its content: the queue entry, the
/// allocation headers, the envelope it is written in.
const ITEM_OVERHEAD: usize = 128;

/// What one field or JSON node adds besides its strings: its name, quotes
/// and separators.
const FIELD: usize = 16;

/// The bytes of `value`'s binary encoding, counted without encoding it.
fn encoded<T: bincode::Encode>(value: &T) -> usize {
    let mut size = SizeWriter::default();
    // Counting cannot fail: a value past bincode's own limits counts as
    // what it had reached.
    let _ = bincode::encode_into_writer(value, &mut size, bincode::config::standard());
    size.bytes_written
}

fn sum<T>(items: &[T], f: impl Fn(&T) -> usize) -> usize {
    items.iter().map(f).fold(0, usize::saturating_add)
}

fn text(s: &str) -> usize {
    s.len() + FIELD
}

fn opt_text(s: &Option<String>) -> usize {
    s.as_deref().map_or(0, text)
}

/// A JSON tree's size, node by node (its depth is bounded by the parser's).
fn json(v: &Value) -> usize {
    match v {
        Value::String(s) => text(s),
        Value::Array(items) => sum(items, json) + FIELD,
        Value::Object(map) => json_map(map),
        Value::Null | Value::Bool(_) | Value::Number(_) => FIELD,
    }
}

fn object(o: &Option<Object>) -> usize {
    o.as_ref().map_or(0, |o| json_map(o))
}

/// A JSON object's size (an `Object` is one, through its `Deref`).
fn json_map(o: &serde_json::Map<String, Value>) -> usize {
    o.iter()
        .map(|(k, v)| text(k).saturating_add(json(v)))
        .fold(FIELD, usize::saturating_add)
}

fn part(p: &Part) -> usize {
    match p {
        Part::Text { text: t, metadata } => text(t) + object(metadata),
        Part::File { file, metadata } => {
            opt_text(&file.name)
                + opt_text(&file.mime_type)
                + opt_text(&file.uri)
                + opt_text(&file.bytes)
                + object(metadata)
        }
        Part::Data { data, metadata } => json_map(data).saturating_add(object(metadata)),
    }
}

fn message(m: &Message) -> usize {
    sum(&m.parts, part)
        .saturating_add(text(&m.message_id))
        .saturating_add(opt_text(&m.task_id) + opt_text(&m.context_id))
        .saturating_add(opt_text(&m.from) + opt_text(&m.to))
        .saturating_add(object(&m.metadata))
}

fn status(s: &TaskStatus) -> usize {
    s.message
        .as_deref()
        .map_or(0, message)
        .saturating_add(text(&s.timestamp) + FIELD)
}

fn artifact(a: &Artifact) -> usize {
    sum(&a.parts, part)
        .saturating_add(text(&a.artifact_id))
        .saturating_add(opt_text(&a.name) + opt_text(&a.description))
        .saturating_add(object(&a.metadata))
}

/// The bytes an event holds while it waits for its reader.
pub fn event(n: &Notification) -> usize {
    let (recipient, ctx) = n.recipient();
    let content = match n {
        Notification::TaskEvent(p) => {
            text(&p.context_id)
                + match &p.event {
                    StreamEvent::Status(u) => {
                        text(&u.task_id) + text(&u.context_id) + status(&u.status)
                    }
                    StreamEvent::Artifact(u) => {
                        text(&u.task_id) + text(&u.context_id) + artifact(&u.artifact)
                    }
                }
        }
        Notification::Push(p) => {
            text(&p.context_id) + text(&p.task_id) + opt_text(&p.token) + status(&p.status)
        }
        Notification::Lagged(_) => 0,
        Notification::LeaseReleased(p) => encoded(&p.lease),
    };
    content
        .saturating_add(text(recipient) + text(ctx))
        .saturating_add(ITEM_OVERHEAD)
}

/// The bytes a reply holds while it waits for its reader.
fn reply(r: &Reply) -> usize {
    let task =
        |v: &crate::reply::TaskView| usize::try_from(v.rec.stored_bytes).unwrap_or(usize::MAX);
    match r {
        Reply::Ok => 0,
        Reply::Handshake(h) => encoded(h),
        Reply::Registered(r) => encoded(r),
        Reply::Agents(cards) => cards.iter().map(encoded).fold(0, usize::saturating_add),
        Reply::Task(v) => task(v),
        Reply::Tasks(vs) | Reply::TaskList { tasks: vs, .. } => {
            vs.iter().map(task).fold(0, usize::saturating_add)
        }
        Reply::Config(c) => c.as_ref().map_or(0, encoded),
        Reply::Events { events, .. } => events
            .iter()
            .map(|n| event(n))
            .fold(0, usize::saturating_add),
        Reply::Lease(l) => encoded(l),
        Reply::Leases(ls) => ls.iter().map(encoded).fold(0, usize::saturating_add),
    }
}

fn error(e: &RpcError) -> usize {
    // The data is small, bounded JSON (a reason, a limit, a method name).
    e.message.len() + e.data.as_ref().map_or(0, |d| d.to_string().len())
}

fn response(r: &Response) -> usize {
    let content = match &r.result {
        Ok(rep) => reply(rep),
        Err(e) => error(e),
    };
    content.saturating_add(ITEM_OVERHEAD)
}

/// The bytes an outbox item holds while it waits for its reader.
pub fn outgoing(item: &Outgoing) -> usize {
    match item {
        Outgoing::Response(r) => response(r),
        Outgoing::Batch(rs) => rs
            .iter()
            .map(response)
            .fold(ITEM_OVERHEAD, usize::saturating_add),
        Outgoing::Event(n) => event(n),
        Outgoing::Fatal(e) => error(e).saturating_add(ITEM_OVERHEAD),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_proto::types::LaggedParams;

    #[test]
    fn an_event_weighs_its_strings() {
        let small = Notification::Lagged(LaggedParams {
            recipient: "r".into(),
            recipient_context_id: "c".into(),
            dropped: 1,
        });
        let large = Notification::Lagged(LaggedParams {
            recipient: "r".repeat(1 << 20),
            recipient_context_id: "c".into(),
            dropped: 1,
        });
        assert!(event(&small) < 256, "{}", event(&small));
        let grew = event(&large) - event(&small);
        assert!(((1 << 20) - 1..(1 << 20) + 16).contains(&grew), "{grew}");
    }

    /// A large event's estimate is close to its JSON rendering, whether
    /// its bytes are in a data part's tree, a file or text.
    #[test]
    fn a_large_event_weighs_about_its_json() {
        use a2a_proto::types::{FileContent, Role, State};
        let mut data = serde_json::Map::new();
        data.insert("blob".into(), Value::String("x".repeat(1 << 20)));
        data.insert(
            "rows".into(),
            Value::Array(
                (0..1000)
                    .map(|i| serde_json::json!({"i": i, "s": "abc"}))
                    .collect(),
            ),
        );
        let parts = vec![
            Part::Data {
                data: Object::from(data),
                metadata: None,
            },
            Part::File {
                file: FileContent {
                    name: Some("f".into()),
                    bytes: Some("QUJD".repeat(1 << 16)),
                    ..FileContent::default()
                },
                metadata: None,
            },
            Part::Text {
                text: "t".repeat(16_000),
                metadata: None,
            },
        ];
        let message = Message {
            role: Role::Agent,
            parts,
            message_id: "m".into(),
            ..Message::default()
        };
        let n = a2a_proto::sample::status_event("r", State::Working, message);
        let rendered = serde_json::to_vec(&n).unwrap().len();
        let estimated = event(&n);
        assert!(
            estimated > rendered * 9 / 10 && estimated < rendered * 11 / 10,
            "estimated {estimated} bytes for a {rendered}-byte event"
        );
    }
}
