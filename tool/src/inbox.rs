//! What a session keeps of its agent's events until the model's next
//! `wait`: a queue filled by the agent's event handler as events arrive,
//! each kept slim (what a model reads of it, and no more) and all of them
//! held within [`INBOX_MAX_BYTES`].
//!
//! The client's own queue of an agent is unbounded on purpose (its reader
//! thread must never block on a slow agent), and a model reads it only
//! when it calls `wait`, maybe minutes later: 500 queued 1 MiB file parts
//! would sit there whole. So the session takes each event off the
//! connection as it arrives, and keeps of it:
//! - file parts: name, media type, URI and size, not their bytes;
//! - texts and data: at most [`QUOTE_MAX_CHARS`] characters per message or
//!   artifact (what a result shows), saying how much was left out;
//! - no metadata, no artifact description (never shown).
//!
//! Past [`INBOX_MAX_BYTES`] a new event keeps no text (the result says how
//! many characters were left out; the model reads them with `get`), and past
//! it even so the oldest events are dropped and counted, as the broker's
//! `a2a.lagged` is.

use crate::{INBOX_MAX_BYTES, LINE_MAX_CHARS, NAME_MAX_CHARS, QUOTE_MAX_CHARS};
use a2a_client::proto::types::{Object, StreamEvent};
use a2a_client::{Event, Message, Part};
use parking_lot::{Condvar, Mutex};
use serde_json::{json, Map};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// The metadata key under which a slim file part keeps its size in bytes.
pub const FILE_SIZE_KEY: &str = "a2a-tool.bytes";
/// The metadata key of the marker part that counts the characters a slim
/// event left out.
const CUT_KEY: &str = "a2a-tool.cut";

/// Bytes an event costs beside its strings (its structs, ids, states).
const EVENT_OVERHEAD: usize = 256;

#[derive(Default)]
struct State {
    /// Each event with the bytes it was counted at.
    events: VecDeque<(Event, usize)>,
    bytes: usize,
    /// Events dropped to stay within the bound, not yet reported.
    dropped: u64,
    /// The handler is gone (the agent deregistered, the connection closed,
    /// or another handler replaced it): nothing more arrives here.
    closed: bool,
}

/// The queue (see the module doc).
#[derive(Default)]
pub struct Inbox {
    st: Mutex<State>,
    cv: Condvar,
}

/// What [`Inbox::take`] hands over.
pub struct Taken {
    pub events: Vec<Event>,
    /// Events dropped (here, or by the broker) since the last take.
    pub dropped: u64,
}

impl Inbox {
    pub fn new() -> Arc<Inbox> {
        Arc::new(Inbox::default())
    }

    /// Keeps `ev`, slim, within the bound (the event handler's side: never
    /// blocks on anything but the lock).
    pub fn push(&self, ev: Event) {
        if matches!(ev, Event::Push(_)) {
            // Webhook pushes are not for the model.
            return;
        }
        let ev = slim(ev, true);
        let n = bytes(&ev);
        let mut st = self.st.lock();
        let (ev, n) = if st.bytes + n > INBOX_MAX_BYTES {
            let bare = slim(ev, false);
            let n = bytes(&bare);
            (bare, n)
        } else {
            (ev, n)
        };
        while st.bytes + n > INBOX_MAX_BYTES {
            let Some((old, m)) = st.events.pop_front() else {
                break;
            };
            st.bytes -= m;
            st.dropped += match old {
                Event::Lagged(l) => l.dropped,
                _ => 1,
            };
        }
        st.bytes += n;
        st.events.push_back((ev, n));
        drop(st);
        self.cv.notify_all();
    }

    /// Up to `max` events, oldest first, and the count dropped.
    pub fn take(&self, max: usize) -> Taken {
        let mut st = self.st.lock();
        let n = max.min(st.events.len());
        let mut events = Vec::with_capacity(n);
        let mut freed = 0;
        for (ev, b) in st.events.drain(..n) {
            freed += b;
            events.push(ev);
        }
        st.bytes -= freed;
        Taken {
            events,
            dropped: std::mem::take(&mut st.dropped),
        }
    }

    /// Puts back, at the front and in order, events taken but not shown.
    pub fn put_back(&self, events: Vec<Event>) {
        let mut st = self.st.lock();
        for ev in events.into_iter().rev() {
            let b = bytes(&ev);
            st.bytes += b;
            st.events.push_front((ev, b));
        }
    }

    /// Blocks until an event is queued, the inbox closes, or `deadline`.
    pub fn wait_until(&self, deadline: Instant) {
        let mut st = self.st.lock();
        while st.events.is_empty() && !st.closed {
            if self.cv.wait_until(&mut st, deadline).timed_out() {
                return;
            }
        }
    }

    /// Events queued now.
    pub fn len(&self) -> usize {
        self.st.lock().events.len()
    }

    /// Bytes held now (the estimate the bound is kept by).
    pub fn held_bytes(&self) -> usize {
        self.st.lock().bytes
    }

    pub fn close(&self) {
        self.st.lock().closed = true;
        self.cv.notify_all();
    }

    pub fn is_closed(&self) -> bool {
        self.st.lock().closed
    }
}

/// The event handler's hold on the inbox: when the client drops the
/// handler, no event can reach the inbox any more, and the session then
/// reads the agent's queue itself.
pub struct Feed(pub Arc<Inbox>);

impl Drop for Feed {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// `s` cut to `max` characters.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((b, _)) => s[..b].to_owned(),
        None => s.to_owned(),
    }
}

/// `ev` as the session keeps it (see the module doc); with `text` false,
/// texts and data are replaced by a note that `get` has them.
pub fn slim(ev: Event, text: bool) -> Event {
    match ev {
        Event::TaskEvent(mut p) => {
            match &mut p.event {
                StreamEvent::Status(s) => {
                    if let Some(m) = s.status.message.take() {
                        s.status.message = Some(Arc::new(slim_message(&m, text)));
                    }
                }
                StreamEvent::Artifact(a) => {
                    a.artifact.parts = slim_parts(&a.artifact.parts, text);
                    a.artifact.metadata = None;
                    a.artifact.description = None;
                    a.artifact.name = a
                        .artifact
                        .name
                        .as_deref()
                        .map(|n| cut(n, NAME_MAX_CHARS + 1));
                    a.artifact.artifact_id = cut(&a.artifact.artifact_id, NAME_MAX_CHARS + 1);
                }
            }
            Event::TaskEvent(p)
        }
        other => other,
    }
}

fn slim_message(m: &Message, text: bool) -> Message {
    Message {
        role: m.role,
        parts: slim_parts(&m.parts, text),
        message_id: m.message_id.clone(),
        task_id: m.task_id.clone(),
        context_id: m.context_id.clone(),
        from: m.from.clone(),
        to: m.to.clone(),
        metadata: None,
    }
}

/// Parts within [`QUOTE_MAX_CHARS`] characters together: file parts
/// without their bytes, data parts as JSON text once they must be cut.
fn slim_parts(parts: &[Part], text: bool) -> Vec<Part> {
    let mut left = QUOTE_MAX_CHARS;
    let mut cut_chars = 0usize;
    let mut out = Vec::new();
    for p in parts {
        match p {
            Part::File { file, .. } => {
                let size = file.bytes.as_deref().map(decoded_len);
                let mut meta = Map::new();
                if let Some(size) = size {
                    meta.insert(FILE_SIZE_KEY.into(), json!(size));
                }
                let mut file = file.clone();
                file.bytes = None;
                file.name = file.name.as_deref().map(|n| cut(n, NAME_MAX_CHARS + 1));
                file.mime_type = file
                    .mime_type
                    .as_deref()
                    .map(|n| cut(n, NAME_MAX_CHARS + 1));
                file.uri = file.uri.as_deref().map(|n| cut(n, LINE_MAX_CHARS + 1));
                out.push(Part::File {
                    file,
                    metadata: (!meta.is_empty()).then(|| meta.into()),
                });
            }
            Part::Text { text: t, .. } if text => {
                let n = t.chars().count();
                if n <= left {
                    left -= n;
                    out.push(Part::text(t.as_str()));
                } else {
                    out.push(Part::text(cut(t, left)));
                    cut_chars += n - left;
                    left = 0;
                }
            }
            Part::Data { data, .. } if text => {
                let json = serde_json::to_string(data).unwrap_or_default();
                let n = json.chars().count();
                if n <= left {
                    left -= n;
                    out.push(Part::Data {
                        data: data.clone(),
                        metadata: None,
                    });
                } else {
                    out.push(Part::text(cut(&json, left)));
                    cut_chars += n - left;
                    left = 0;
                }
            }
            Part::Text { text: t, .. } => cut_chars += t.chars().count(),
            Part::Data { data, .. } => {
                cut_chars += serde_json::to_string(data).map_or(0, |s| s.chars().count())
            }
        }
    }
    if cut_chars > 0 {
        out.push(cut_marker(cut_chars));
    }
    out
}

/// An empty text part that says `n` characters were left out here: the
/// renderer adds them to the count its note gives.
fn cut_marker(n: usize) -> Part {
    let mut meta = Map::new();
    meta.insert(CUT_KEY.into(), json!(n));
    Part::Text {
        text: String::new(),
        metadata: Some(meta.into()),
    }
}

/// Characters a slim part list left out (its cut marker's count), if
/// `p` is the marker.
pub fn cut_of(p: &Part) -> Option<usize> {
    match p {
        Part::Text { text, metadata } if text.is_empty() => {
            Some(metadata.as_ref()?.get(CUT_KEY)?.as_u64()? as usize)
        }
        _ => None,
    }
}

/// What `ev` holds, in bytes: its strings, and a fixed overhead.
pub fn bytes(ev: &Event) -> usize {
    fn parts(ps: &[Part]) -> usize {
        ps.iter()
            .map(|p| {
                32 + match p {
                    Part::Text { text, .. } => text.len(),
                    Part::Data { data, .. } => serde_json::to_string(data).map_or(0, |s| s.len()),
                    Part::File { file, .. } => {
                        [&file.name, &file.mime_type, &file.uri, &file.bytes]
                            .iter()
                            .map(|s| s.as_ref().map_or(0, String::len))
                            .sum()
                    }
                }
            })
            .sum()
    }
    EVENT_OVERHEAD
        + match ev {
            Event::TaskEvent(p) => {
                p.recipient.len()
                    + p.recipient_context_id.len()
                    + p.context_id.len()
                    + match &p.event {
                        StreamEvent::Status(s) => {
                            s.task_id.len()
                                + s.status.message.as_ref().map_or(0, |m| {
                                    parts(&m.parts)
                                        + m.message_id.len()
                                        + [&m.from, &m.to, &m.task_id, &m.context_id]
                                            .iter()
                                            .map(|s| s.as_ref().map_or(0, String::len))
                                            .sum::<usize>()
                                })
                        }
                        StreamEvent::Artifact(a) => {
                            a.task_id.len()
                                + a.artifact.artifact_id.len()
                                + a.artifact.name.as_ref().map_or(0, String::len)
                                + parts(&a.artifact.parts)
                        }
                    }
            }
            Event::LeaseReleased(p) => serde_json::to_string(p).map_or(0, |s| s.len()),
            Event::Lagged(_) | Event::Push(_) => 0,
        }
}

/// The bytes base64 text `b` decodes to.
pub fn decoded_len(b: &str) -> usize {
    let b = b.trim_end();
    (b.len() / 4 * 3).saturating_sub(b.bytes().rev().take_while(|&c| c == b'=').count())
}

/// A slim file part's size, if it had bytes.
pub fn file_size(metadata: &Option<Object>) -> Option<u64> {
    metadata.as_ref()?.get(FILE_SIZE_KEY)?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_client::State;

    fn status(text: &str) -> Event {
        let message = a2a_client::task_message("t", text);
        a2a_client::proto::sample::status_event("worker", State::Submitted, message)
    }

    fn parts(ev: &Event) -> Vec<Part> {
        match ev {
            Event::TaskEvent(p) => match &p.event {
                StreamEvent::Status(s) => s.status.message.as_ref().expect("message").parts.clone(),
                StreamEvent::Artifact(a) => a.artifact.parts.clone(),
            },
            _ => Vec::new(),
        }
    }

    #[test]
    fn texts_are_cut_with_a_count_and_files_lose_their_bytes() {
        let ev = slim(status(&"x".repeat(QUOTE_MAX_CHARS + 5)), true);
        let p = parts(&ev);
        assert_eq!(p[0].as_text().map(|t| t.len()), Some(QUOTE_MAX_CHARS));
        assert_eq!(cut_of(&p[1]), Some(5));
        let mut m = a2a_client::task_message("t", "see");
        m.parts.push(Part::File {
            file: a2a_client::proto::types::FileContent {
                name: Some("f.bin".into()),
                mime_type: None,
                uri: None,
                bytes: Some("aGVsbG8=".into()),
            },
            metadata: None,
        });
        let Event::TaskEvent(mut p) = status("") else {
            unreachable!()
        };
        if let StreamEvent::Status(s) = &mut p.event {
            s.status.message = Some(Arc::new(m));
        }
        let ev = slim(Event::TaskEvent(p), true);
        match &parts(&ev)[1] {
            Part::File { file, metadata } => {
                assert_eq!(file.bytes, None);
                assert_eq!(file_size(metadata), Some(5));
            }
            other => panic!("{other:?}"),
        }
    }

    /// However many updates arrive unread, the inbox holds at most
    /// INBOX_MAX_BYTES: past it new ones keep no text (their length is
    /// counted), and past it even so the oldest are dropped and counted.
    #[test]
    fn the_inbox_stays_within_its_byte_bound() {
        let inbox = Inbox::new();
        let text = "y".repeat(QUOTE_MAX_CHARS);
        let full = INBOX_MAX_BYTES / (QUOTE_MAX_CHARS + EVENT_OVERHEAD);
        for _ in 0..full * 2 {
            inbox.push(status(&text));
            assert!(inbox.held_bytes() <= INBOX_MAX_BYTES);
        }
        let first = inbox.take(1).events;
        assert_eq!(parts(&first[0])[0].as_text(), Some(text.as_str()));
        let rest = inbox.take(usize::MAX).events;
        let last = parts(rest.last().expect("kept"));
        assert_eq!(last.len(), 1, "no text kept: {last:?}");
        assert_eq!(cut_of(&last[0]), Some(QUOTE_MAX_CHARS));
        assert_eq!(inbox.held_bytes(), 0);

        // Bare updates (no text at all) past the bound: the oldest go.
        let bare = bytes(&slim(status(""), true));
        let n = INBOX_MAX_BYTES / bare + 100;
        for _ in 0..n {
            inbox.push(status(""));
        }
        assert!(inbox.held_bytes() <= INBOX_MAX_BYTES);
        let taken = inbox.take(usize::MAX);
        assert_eq!(taken.dropped as usize + taken.events.len(), n);
        assert!(taken.dropped >= 100, "{}", taken.dropped);
    }
}
