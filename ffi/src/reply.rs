//! [`a2a_reply`]: the answer of every call that does not answer with a
//! single task (register, deregister, list agents, broadcast, list tasks,
//! push configs, a2a_call_json), as one tagged struct, owned by a box that
//! keeps what it borrows from.

use crate::agent::a2a_agent;
use crate::view::{a2a_card, a2a_str, a2a_task, push_config_view, Counts, Views};
use crate::view::{a2a_push_config, EMPTY_TASK};
use a2a_client::{AgentCard, PushConfig, Task};
use std::ptr;

/// Which fields of an a2a_reply are filled.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum a2a_reply_kind {
    /// No value (deregister).
    None = 0,
    /// `tasks`, `tasks_len`, `next_cursor` (broadcast, list tasks).
    Tasks,
    /// `agents`, `agents_len` (list agents).
    Agents,
    /// `push_config`, NULL when none is set (push config set/get).
    PushConfig,
    /// `agent` (register).
    Agent,
    /// `json` (a2a_client_call_json).
    Json,
}

/// The answer of a call that does not answer with a single task. Owned by
/// whoever received it from an out parameter (free with a2a_reply_free);
/// borrowed, for the duration of the call, when handed to a callback.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_reply {
    pub kind: a2a_reply_kind,
    /// TASKS: the tasks (an array), newest first for a list.
    pub tasks: *const a2a_task,
    pub tasks_len: usize,
    /// TASKS from a list: the cursor of the next page; absent on the last.
    pub next_cursor: a2a_str,
    /// AGENTS: the cards (an array), sorted by name.
    pub agents: *const a2a_card,
    pub agents_len: usize,
    /// PUSH_CONFIG: the config, or NULL when the task has none.
    pub push_config: *const a2a_push_config,
    /// AGENT: the registered agent, borrowed from the reply: keep it with
    /// a2a_agent_clone (a blocking a2a_client_register returns it owned).
    pub agent: *const a2a_agent,
    /// JSON: the result as a JSON document.
    pub json: a2a_str,
}

/// A reply's value, as Rust has it.
pub(crate) enum ReplyData {
    None,
    Tasks(Vec<Task>, Option<String>),
    Agents(Vec<AgentCard>),
    PushConfig(Option<PushConfig>),
    Agent(Box<a2a_agent>),
    Json(String),
}

/// An owned reply: the view first (C's pointer is this box's), then what
/// it borrows from.
#[repr(C)]
pub(crate) struct ReplyBox {
    view: a2a_reply,
    data: ReplyData,
    tasks: Vec<a2a_task>,
    cards: Vec<a2a_card>,
    push: Option<a2a_push_config>,
    views: Views,
}

impl ReplyBox {
    pub(crate) fn new(data: ReplyData) -> Box<ReplyBox> {
        let mut counts = Counts::default();
        if let ReplyData::Tasks(tasks, _) = &data {
            tasks.iter().for_each(|t| counts.task(t));
        }
        let mut b = Box::new(ReplyBox {
            view: a2a_reply {
                kind: a2a_reply_kind::None,
                tasks: ptr::null(),
                tasks_len: 0,
                next_cursor: a2a_str::NONE,
                agents: ptr::null(),
                agents_len: 0,
                push_config: ptr::null(),
                agent: ptr::null(),
                json: a2a_str::NONE,
            },
            data,
            tasks: Vec::new(),
            cards: Vec::new(),
            push: None,
            views: Views::with(counts),
        });
        let r = &mut *b;
        match &r.data {
            ReplyData::None => {}
            ReplyData::Tasks(tasks, cursor) => {
                r.view.kind = a2a_reply_kind::Tasks;
                r.tasks = vec![EMPTY_TASK; tasks.len()];
                for (slot, t) in r.tasks.iter_mut().zip(tasks) {
                    *slot = r.views.task(t);
                }
                r.view.tasks = if tasks.is_empty() {
                    ptr::null()
                } else {
                    r.tasks.as_ptr()
                };
                r.view.tasks_len = tasks.len();
                r.view.next_cursor = a2a_str::opt(cursor.as_deref());
            }
            ReplyData::Agents(cards) => {
                r.view.kind = a2a_reply_kind::Agents;
                r.cards = cards.iter().map(|c| r.views.card(c)).collect();
                r.view.agents = if cards.is_empty() {
                    ptr::null()
                } else {
                    r.cards.as_ptr()
                };
                r.view.agents_len = cards.len();
            }
            ReplyData::PushConfig(c) => {
                r.view.kind = a2a_reply_kind::PushConfig;
                r.push = c.as_ref().map(push_config_view);
                r.view.push_config = r.push.as_ref().map_or(ptr::null(), |p| p as *const _);
            }
            ReplyData::Agent(a) => {
                r.view.kind = a2a_reply_kind::Agent;
                r.view.agent = &**a as *const a2a_agent;
            }
            ReplyData::Json(s) => {
                r.view.kind = a2a_reply_kind::Json;
                r.view.json = a2a_str::of(s);
            }
        }
        b
    }

    pub(crate) fn into_raw(b: Box<ReplyBox>) -> *mut a2a_reply {
        Box::into_raw(b).cast()
    }

    pub(crate) fn view(&self) -> &a2a_reply {
        &self.view
    }
}

/// Frees a reply received through an out parameter. NULL is ignored.
/// Never pass a reply borrowed from a callback.
///
/// Threads: any; the reply must not be in use by another thread.
#[no_mangle]
pub extern "C" fn a2a_reply_free(reply: *mut a2a_reply) {
    crate::status::guard_value((), || {
        if !reply.is_null() {
            // SAFETY: a reply given to free came from `ReplyBox::into_raw`
            // (the header's rule); its view is the first field of the
            // `repr(C)` box, so the pointer is the box's.
            drop(unsafe { Box::from_raw(reply.cast::<ReplyBox>()) });
        }
    })
}
