//! The compact event batch: how events cross into JS by default.
//!
//! Measured (BENCHMARKS.md, "Node addon"): V8's `JSON.parse` of a
//! ~340-byte status event costs the JS thread more than splitting one
//! string and building the same object from an object literal, because the
//! literal's shape is known to the JIT while the parser must scan every
//! key and build every string. So a batch is one string of fields
//! separated by U+0001, written here on the reader thread; `index.js`
//! (`decodeCompact`) rebuilds the `{method, params}` objects, the same
//! shapes as the JSON form, field for field.
//!
//! Per event, first field is a tag:
//! - `S`: a status-update `a2a.task.event`, then `recipient`,
//!   `recipientContextId`, `contextId`, `seq`, `taskVersion`, `taskId`,
//!   the event's `contextId`, `state`, `timestamp`, `final` (`1`/`0`), and
//!   the status message as JSON (empty when there is none).
//! - `J`: anything else, then the event as JSON.
//!
//! A field containing U+0001 would break the split: such an event travels
//! as `J` (JSON escapes the character, so JSON text never contains it raw).

use a2a_client::proto::types::StreamEvent;
use a2a_client::{Event, Notification};
use std::fmt::Write;

/// The field separator.
const SEP: char = '\u{1}';

/// Appends `ev` to `out` (a batch; fields of consecutive events are
/// separated by [`SEP`] too).
pub(crate) fn push_event(out: &mut String, ev: &Event) {
    if !out.is_empty() {
        out.push(SEP);
    }
    if let Notification::TaskEvent(p) = ev {
        if let StreamEvent::Status(u) = &p.event {
            let texts = [
                p.recipient.as_str(),
                &p.recipient_context_id,
                &p.context_id,
                &u.task_id,
                &u.context_id,
                &u.status.timestamp,
            ];
            if texts.iter().all(|s| !s.contains(SEP)) {
                // Writing to a String cannot fail.
                let _ = write!(
                    out,
                    "S{SEP}{}{SEP}{}{SEP}{}{SEP}{}{SEP}{}{SEP}{}{SEP}{}{SEP}{}{SEP}{}{SEP}{}{SEP}",
                    p.recipient,
                    p.recipient_context_id,
                    p.context_id,
                    p.seq,
                    p.task_version,
                    u.task_id,
                    u.context_id,
                    u.status.state.as_str(),
                    u.status.timestamp,
                    if u.is_final { '1' } else { '0' },
                );
                if let Some(m) = &u.status.message {
                    json_into(out, m);
                }
                return;
            }
        }
    }
    out.push('J');
    out.push(SEP);
    json_into(out, ev);
}

fn json_into<T: serde::Serialize>(out: &mut String, v: &T) {
    let mut buf = std::mem::take(out).into_bytes();
    // Serializing these types into memory cannot fail, and JSON is UTF-8.
    let _ = serde_json::to_writer(&mut buf, v);
    *out = String::from_utf8(buf).unwrap_or_default();
}

/// A whole batch (for `wait`).
pub(crate) fn batch(events: &[Event]) -> String {
    let mut out = String::with_capacity(events.len() * 200);
    for ev in events {
        push_event(&mut out, ev);
    }
    out
}
