//! The C views of the client's values: `#[repr(C)]` structs whose hot
//! fields (ids, state, text) are typed and whose other fields (data and
//! file parts, metadata, cards) are borrowed UTF-8 JSON, never a document
//! the host must parse to follow a task.
//!
//! A view borrows from an owner that keeps the Rust value and the arrays
//! the view points into: [`Views`] holds those arrays (sized before they
//! are filled, so their buffers never move while pointers into them
//! exist), and the owners ([`TaskBox`], `ReplyBox`, `EventBox`) keep the
//! view as their first field, so the pointer handed to C is also the
//! owner's and `_free` can give it back.

// Every type here is a C view, named as C names it (`a2a_task`).
#![allow(non_camel_case_types)]

use crate::args::{bad_enum, c_enum};
use crate::status::FfiError;
use a2a_client::proto::types::{Role, TaskStatus};
use a2a_client::{AgentCard, Artifact, Message, Part, PushConfig, State, Task};
use serde::Serialize;
use std::ffi::c_char;
use std::ptr;

/// A borrowed UTF-8 string: `len` bytes at `ptr`, NOT NUL-terminated.
/// Absent: `ptr == NULL`, `len == 0`. Present but empty: `len == 0` and a
/// `ptr` that must not be dereferenced.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_str {
    pub ptr: *const c_char,
    pub len: usize,
}

impl a2a_str {
    /// The absent string.
    pub const NONE: a2a_str = a2a_str {
        ptr: ptr::null(),
        len: 0,
    };

    /// Borrows `s` (its bytes must outlive every use of the view).
    pub fn of(s: &str) -> a2a_str {
        a2a_str {
            ptr: s.as_ptr().cast(),
            len: s.len(),
        }
    }

    /// Borrows `s` if present.
    pub fn opt(s: Option<&str>) -> a2a_str {
        s.map_or(a2a_str::NONE, a2a_str::of)
    }

    /// The string as Rust sees it (tests and the bench read views back).
    ///
    /// # Safety
    /// The view's owner is alive.
    pub unsafe fn as_str<'a>(&self) -> Option<&'a str> {
        if self.ptr.is_null() {
            return None;
        }
        // SAFETY: a view made by `of` points at `len` bytes of a live `str`
        // (promised by the caller), which are UTF-8.
        Some(unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(self.ptr.cast(), self.len))
        })
    }
}

/// A task's lifecycle state (docs/protocol.md §7 Task states): one of the A2A_STATE_
/// constants. An integer, not an enum, so that any value C passes is
/// defined; as an argument it is checked (A2A_STATUS_INVALID_ARGUMENT).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct a2a_state(pub i32);

impl a2a_state {
    pub const SUBMITTED: a2a_state = a2a_state(0);
    pub const WORKING: a2a_state = a2a_state(1);
    pub const INPUT_REQUIRED: a2a_state = a2a_state(2);
    pub const AUTH_REQUIRED: a2a_state = a2a_state(3);
    pub const COMPLETED: a2a_state = a2a_state(4);
    pub const CANCELED: a2a_state = a2a_state(5);
    pub const FAILED: a2a_state = a2a_state(6);
    pub const REJECTED: a2a_state = a2a_state(7);
    /// As an input: no state given (no filter, no change).
    pub const UNSET: a2a_state = a2a_state(8);
}

c_enum!(a2a_state {
    SUBMITTED => "A2A_STATE_SUBMITTED",
    WORKING => "A2A_STATE_WORKING",
    INPUT_REQUIRED => "A2A_STATE_INPUT_REQUIRED",
    AUTH_REQUIRED => "A2A_STATE_AUTH_REQUIRED",
    COMPLETED => "A2A_STATE_COMPLETED",
    CANCELED => "A2A_STATE_CANCELED",
    FAILED => "A2A_STATE_FAILED",
    REJECTED => "A2A_STATE_REJECTED",
    UNSET => "A2A_STATE_UNSET",
});

impl a2a_state {
    pub fn from_state(s: State) -> a2a_state {
        match s {
            State::Submitted => a2a_state::SUBMITTED,
            State::Working => a2a_state::WORKING,
            State::InputRequired => a2a_state::INPUT_REQUIRED,
            State::AuthRequired => a2a_state::AUTH_REQUIRED,
            State::Completed => a2a_state::COMPLETED,
            State::Canceled => a2a_state::CANCELED,
            State::Failed => a2a_state::FAILED,
            State::Rejected => a2a_state::REJECTED,
        }
    }

    /// The client's state; `None` for `UNSET` and for a value that is not
    /// a state.
    pub fn to_state(self) -> Option<State> {
        Some(match self {
            a2a_state::SUBMITTED => State::Submitted,
            a2a_state::WORKING => State::Working,
            a2a_state::INPUT_REQUIRED => State::InputRequired,
            a2a_state::AUTH_REQUIRED => State::AuthRequired,
            a2a_state::COMPLETED => State::Completed,
            a2a_state::CANCELED => State::Canceled,
            a2a_state::FAILED => State::Failed,
            a2a_state::REJECTED => State::Rejected,
            _ => return None,
        })
    }

    /// The argument `name` as a filter: a state, or `None` for UNSET;
    /// anything else is refused.
    pub(crate) fn filter_arg(self, name: &str) -> Result<Option<State>, FfiError> {
        match self.to_state() {
            Some(s) => Ok(Some(s)),
            None if self == a2a_state::UNSET => Ok(None),
            None => Err(bad_enum(self, name, |_| true)),
        }
    }

    /// The argument `name` as a state to move to: UNSET is refused too.
    pub(crate) fn state_arg(self, name: &str) -> Result<State, FfiError> {
        self.to_state()
            .ok_or_else(|| bad_enum(self, name, |k| k != a2a_state::UNSET))
    }
}

/// What kind of part an a2a_part is.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum a2a_part_kind {
    Text = 0,
    File,
    Data,
}

/// Who spoke a message: the requester (USER) or the worker (AGENT).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum a2a_role {
    User = 0,
    Agent,
}

/// One part of a message or artifact.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_part {
    pub kind: a2a_part_kind,
    /// TEXT: the text. Absent for the other kinds.
    pub text: a2a_str,
    /// DATA: the data object, as JSON. FILE: the file object
    /// (`{"name","mimeType","uri"|"bytes" (base64)}`), as JSON. Absent for TEXT.
    pub json: a2a_str,
    /// The part's metadata object as JSON; absent if none.
    pub metadata: a2a_str,
}

/// A message (docs/protocol.md §3 Shapes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_message {
    pub message_id: a2a_str,
    pub role: a2a_role,
    /// The sender's agent id (stamped by the broker).
    pub from: a2a_str,
    pub to: a2a_str,
    pub task_id: a2a_str,
    pub context_id: a2a_str,
    pub parts: *const a2a_part,
    pub parts_len: usize,
    /// The message's metadata object as JSON; absent if none.
    pub metadata: a2a_str,
}

/// A named, multi-part output of a task.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_artifact {
    pub artifact_id: a2a_str,
    pub name: a2a_str,
    pub description: a2a_str,
    pub parts: *const a2a_part,
    pub parts_len: usize,
    pub metadata: a2a_str,
}

/// A task. Owned by whoever received it from an out parameter (free it
/// with a2a_task_free); borrowed when handed to a callback or held in a
/// reply or event (then it lives as long as they do).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_task {
    pub id: a2a_str,
    pub context_id: a2a_str,
    pub state: a2a_state,
    /// Starts at 1, +1 per change.
    pub version: u64,
    /// When the state last changed (RFC 3339).
    pub timestamp: a2a_str,
    /// The worker's agent id.
    pub agent_name: a2a_str,
    /// The requester's agent id.
    pub requester_name: a2a_str,
    /// The message of the last transition; NULL if none.
    pub status_message: *const a2a_message,
    /// The history, oldest first (trimmed by `history_length` arguments).
    pub history: *const a2a_message,
    pub history_len: usize,
    pub artifacts: *const a2a_artifact,
    pub artifacts_len: usize,
}

/// An agent card: the hot fields, and the whole card as JSON.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_card {
    /// The agent id (the broker stamps the card's name with it).
    pub name: a2a_str,
    pub description: a2a_str,
    pub context_id: a2a_str,
    /// The whole card (skills, capabilities, modes, kind), as JSON.
    pub json: a2a_str,
}

/// A task's push notification config.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_push_config {
    pub id: a2a_str,
    pub url: a2a_str,
    pub token: a2a_str,
}

/// How many of each array a set of values needs.
#[derive(Default, Clone, Copy)]
pub(crate) struct Counts {
    parts: usize,
    messages: usize,
    artifacts: usize,
}

impl Counts {
    fn message(&mut self, m: &Message) {
        self.messages += 1;
        self.parts += m.parts.len();
    }

    pub(crate) fn status(&mut self, s: &TaskStatus) {
        if let Some(m) = &s.message {
            self.message(m);
        }
    }

    pub(crate) fn task(&mut self, t: &Task) {
        self.status(&t.status);
        for m in &t.history {
            self.message(m);
        }
        for a in &t.artifacts {
            self.artifact(a);
        }
    }

    pub(crate) fn artifact(&mut self, a: &Artifact) {
        self.artifacts += 1;
        self.parts += a.parts.len();
    }
}

/// The arrays and JSON renderings views point into. Each array is
/// allocated once, at its final size: a push beyond it would move the
/// buffer under pointers already handed out, so it panics instead (a
/// miscount is a bug, caught by the panic boundary).
#[derive(Default)]
pub(crate) struct Views {
    parts: Vec<a2a_part>,
    messages: Vec<a2a_message>,
    artifacts: Vec<a2a_artifact>,
    /// JSON renderings (each `String`'s buffer stays put when the vector
    /// grows).
    json: Vec<String>,
}

fn push_fixed<T>(v: &mut Vec<T>, item: T) -> *const T {
    assert!(v.len() < v.capacity(), "a2a-ffi: view arrays miscounted");
    v.push(item);
    // Non-empty after the push; `wrapping_add` keeps this safe code.
    v.as_ptr().wrapping_add(v.len() - 1)
}

impl Views {
    pub(crate) fn with(c: Counts) -> Views {
        Views {
            parts: Vec::with_capacity(c.parts),
            messages: Vec::with_capacity(c.messages),
            artifacts: Vec::with_capacity(c.artifacts),
            json: Vec::new(),
        }
    }

    /// Renders `v` as JSON kept here.
    pub(crate) fn json(&mut self, v: &impl Serialize) -> a2a_str {
        // Values that came off the wire always serialize; "null" keeps a
        // miss visible rather than fatal.
        let s = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
        let out = a2a_str::of(&s);
        self.json.push(s);
        out
    }

    fn json_opt(&mut self, v: Option<&impl Serialize>) -> a2a_str {
        match v {
            Some(v) => self.json(v),
            None => a2a_str::NONE,
        }
    }

    /// The parts, contiguous; returns (first, count).
    fn parts(&mut self, parts: &[Part]) -> (*const a2a_part, usize) {
        let mut first: *const a2a_part = ptr::null();
        for (i, p) in parts.iter().enumerate() {
            let view = match p {
                Part::Text { text, metadata } => a2a_part {
                    kind: a2a_part_kind::Text,
                    text: a2a_str::of(text),
                    json: a2a_str::NONE,
                    metadata: self.json_opt(metadata.as_ref()),
                },
                Part::Data { data, metadata } => a2a_part {
                    kind: a2a_part_kind::Data,
                    text: a2a_str::NONE,
                    json: self.json(data),
                    metadata: self.json_opt(metadata.as_ref()),
                },
                Part::File { file, metadata } => a2a_part {
                    kind: a2a_part_kind::File,
                    text: a2a_str::NONE,
                    json: self.json(file),
                    metadata: self.json_opt(metadata.as_ref()),
                },
            };
            let at = push_fixed(&mut self.parts, view);
            if i == 0 {
                first = at;
            }
        }
        (first, parts.len())
    }

    pub(crate) fn message(&mut self, m: &Message) -> *const a2a_message {
        let (parts, parts_len) = self.parts(&m.parts);
        let view = a2a_message {
            message_id: a2a_str::of(&m.message_id),
            role: match m.role {
                Role::User => a2a_role::User,
                Role::Agent => a2a_role::Agent,
            },
            from: a2a_str::opt(m.from.as_deref()),
            to: a2a_str::opt(m.to.as_deref()),
            task_id: a2a_str::opt(m.task_id.as_deref()),
            context_id: a2a_str::opt(m.context_id.as_deref()),
            parts,
            parts_len,
            metadata: self.json_opt(m.metadata.as_ref()),
        };
        push_fixed(&mut self.messages, view)
    }

    pub(crate) fn artifact(&mut self, a: &Artifact) -> *const a2a_artifact {
        let (parts, parts_len) = self.parts(&a.parts);
        let view = a2a_artifact {
            artifact_id: a2a_str::of(&a.artifact_id),
            name: a2a_str::opt(a.name.as_deref()),
            description: a2a_str::opt(a.description.as_deref()),
            parts,
            parts_len,
            metadata: self.json_opt(a.metadata.as_ref()),
        };
        push_fixed(&mut self.artifacts, view)
    }

    pub(crate) fn status_message(&mut self, s: &TaskStatus) -> *const a2a_message {
        match &s.message {
            Some(m) => self.message(m),
            None => ptr::null(),
        }
    }

    pub(crate) fn task(&mut self, t: &Task) -> a2a_task {
        let status_message = self.status_message(&t.status);
        let mut history: *const a2a_message = ptr::null();
        for (i, m) in t.history.iter().enumerate() {
            let at = self.message(m);
            if i == 0 {
                history = at;
            }
        }
        let mut artifacts: *const a2a_artifact = ptr::null();
        for (i, a) in t.artifacts.iter().enumerate() {
            let at = self.artifact(a);
            if i == 0 {
                artifacts = at;
            }
        }
        a2a_task {
            id: a2a_str::of(&t.id),
            context_id: a2a_str::of(&t.context_id),
            state: a2a_state::from_state(t.status.state),
            version: t.version,
            timestamp: a2a_str::of(&t.status.timestamp),
            agent_name: a2a_str::of(&t.agent_name),
            requester_name: a2a_str::of(&t.requester_name),
            status_message,
            history,
            history_len: t.history.len(),
            artifacts,
            artifacts_len: t.artifacts.len(),
        }
    }

    pub(crate) fn card(&mut self, c: &AgentCard) -> a2a_card {
        a2a_card {
            name: a2a_str::of(&c.name),
            description: a2a_str::of(&c.description),
            context_id: a2a_str::opt(c.context_id.as_deref()),
            json: self.json(c),
        }
    }
}

/// The push config view of `c`.
pub(crate) fn push_config_view(c: &PushConfig) -> a2a_push_config {
    a2a_push_config {
        id: a2a_str::of(&c.id),
        url: a2a_str::opt(c.url.as_deref()),
        token: a2a_str::opt(c.token.as_deref()),
    }
}

/// An owned task: the view first (the pointer C holds is this box's), then
/// what it borrows from.
#[repr(C)]
pub(crate) struct TaskBox {
    view: a2a_task,
    task: Task,
    views: Views,
}

impl TaskBox {
    pub(crate) fn new(task: Task) -> Box<TaskBox> {
        let mut counts = Counts::default();
        counts.task(&task);
        let mut b = Box::new(TaskBox {
            view: EMPTY_TASK,
            task,
            views: Views::with(counts),
        });
        let b2 = &mut *b;
        b2.view = b2.views.task(&b2.task);
        b
    }

    /// The pointer C receives (and gives back to `a2a_task_free`).
    pub(crate) fn into_raw(b: Box<TaskBox>) -> *mut a2a_task {
        Box::into_raw(b).cast()
    }

    pub(crate) fn view(&self) -> &a2a_task {
        &self.view
    }
}

pub(crate) const EMPTY_TASK: a2a_task = a2a_task {
    id: a2a_str::NONE,
    context_id: a2a_str::NONE,
    state: a2a_state::UNSET,
    version: 0,
    timestamp: a2a_str::NONE,
    agent_name: a2a_str::NONE,
    requester_name: a2a_str::NONE,
    status_message: ptr::null(),
    history: ptr::null(),
    history_len: 0,
    artifacts: ptr::null(),
    artifacts_len: 0,
};

/// Frees a task received through an out parameter (a2a_agent_send,
/// a2a_agent_get_task, ...). NULL is ignored. Never pass a task borrowed
/// from a callback, a reply or an event.
///
/// Threads: any; the task must not be in use by another thread.
#[no_mangle]
pub extern "C" fn a2a_task_free(task: *mut a2a_task) {
    crate::status::guard_value((), || {
        if !task.is_null() {
            // SAFETY: a non-NULL task given to free came from
            // `TaskBox::into_raw` (the header's rule), whose view is the
            // first field of a `repr(C)` box: the pointer is the box's.
            drop(unsafe { Box::from_raw(task.cast::<TaskBox>()) });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_client::proto::types::{FileContent, Object};
    use std::sync::Arc;

    fn msg(text: &str, n_parts: usize) -> Message {
        let mut m = a2a_client::task_message("t1", text);
        for i in 1..n_parts {
            let mut data = Object::default();
            data.insert("i".into(), i.into());
            m.parts.push(if i % 2 == 0 {
                Part::Data {
                    data,
                    metadata: None,
                }
            } else {
                Part::File {
                    file: FileContent {
                        uri: Some("file:///x".into()),
                        ..Default::default()
                    },
                    metadata: Some(data),
                }
            });
        }
        m
    }

    #[test]
    fn a_task_view_reads_back_what_the_task_holds() {
        let task = Task {
            kind: "task".into(),
            id: "t1".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: State::InputRequired,
                message: Some(Arc::new(msg("why?", 1))),
                timestamp: "2026-11-30T00:00:00Z".into(),
            },
            history: vec![Arc::new(msg("a", 3)), Arc::new(msg("b", 2))],
            artifacts: vec![a2a_client::text_artifact("art", "out")],
            agent_name: "w".into(),
            requester_name: "r".into(),
            version: 4,
        };
        let b = TaskBox::new(task);
        let v = b.view();
        // SAFETY: the box (the owner of every view) is alive throughout.
        unsafe {
            assert_eq!(v.id.as_str(), Some("t1"));
            assert_eq!(v.state, a2a_state::INPUT_REQUIRED);
            assert_eq!(v.version, 4);
            let sm = &*v.status_message;
            assert_eq!((*sm.parts).text.as_str(), Some("why?"));
            assert_eq!(v.history_len, 2);
            let h = std::slice::from_raw_parts(v.history, v.history_len);
            assert_eq!(h[0].parts_len, 3);
            let parts = std::slice::from_raw_parts(h[0].parts, 3);
            assert_eq!(parts[1].kind, a2a_part_kind::File);
            assert_eq!(parts[1].json.as_str(), Some(r#"{"uri":"file:///x"}"#));
            assert_eq!(parts[1].metadata.as_str(), Some(r#"{"i":1}"#));
            assert_eq!(parts[2].json.as_str(), Some(r#"{"i":2}"#));
            assert!(parts[0].metadata.ptr.is_null());
            assert_eq!((*h[1].parts).text.as_str(), Some("b"));
            assert_eq!(h[1].task_id.as_str(), Some("t1"));
            assert!(h[1].from.ptr.is_null());
            let a = &*v.artifacts;
            assert_eq!(a.artifact_id.as_str(), Some("art"));
            assert_eq!((*a.parts).text.as_str(), Some("out"));
        }
        a2a_task_free(TaskBox::into_raw(b));
        a2a_task_free(ptr::null_mut());
    }

    #[test]
    fn states_map_both_ways() {
        for s in State::ALL {
            assert_eq!(a2a_state::from_state(s).to_state(), Some(s));
        }
        assert_eq!(a2a_state::UNSET.to_state(), None);
        assert_eq!(a2a_state::UNSET.filter_arg("state").unwrap(), None);
        assert!(a2a_state::UNSET.state_arg("state").is_err());
        for bad in [-1, 9, 99, 1000, i32::MIN, i32::MAX] {
            assert_eq!(a2a_state(bad).to_state(), None);
            let e = a2a_state(bad).filter_arg("state").unwrap_err().to_string();
            assert!(e.contains(&format!("`state` is {bad};")), "{e}");
            assert!(e.contains("A2A_STATE_UNSET (8)"), "{e}");
            let e = a2a_state(bad).state_arg("state").unwrap_err().to_string();
            assert!(e.contains("A2A_STATE_REJECTED (7)"), "{e}");
            assert!(!e.contains("UNSET"), "{e}");
        }
    }
}
