//! [`a2a_event`]: one event delivered to an agent (`a2a.task.event` status
//! or artifact update, `a2a.push`, `a2a.lagged`), flattened into one typed
//! struct, and the box that owns it.

use crate::view::{a2a_artifact, a2a_message, a2a_state, a2a_str, Counts, Views};
use a2a_client::proto::types::StreamEvent;
use a2a_client::{Event, Notification};
use std::ptr;

/// What an a2a_event reports.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum a2a_event_kind {
    /// A task's status changed (`a2a.task.event`, status-update): `task_id`,
    /// `state`, `is_final`, `message`.
    Status = 0,
    /// A task produced or extended an artifact (`a2a.task.event`,
    /// artifact-update): `task_id`, `artifact`, `append`, `last_chunk`.
    Artifact,
    /// A task with a push config ended (`a2a.push`): `task_id`, `state`,
    /// `message`, `push_token`.
    Push,
    /// The broker dropped `dropped` events for this agent (`a2a.lagged`).
    Lagged,
    /// (ext) A lease this agent waited on or was refused ended
    /// (`a2a.lease.released`): `recipient`, `recipient_context_id`, `seq`.
    LeaseReleased,
}

/// One event. Borrowed, for the duration of the call, when handed to an
/// a2a_event_cb; owned (free with a2a_event_free) when taken with
/// a2a_agent_next_event / a2a_agent_wait_event.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_event {
    pub kind: a2a_event_kind,
    /// The agent it is for (its agent id) and that agent's context.
    pub recipient: a2a_str,
    pub recipient_context_id: a2a_str,
    /// The task's context; absent for LAGGED.
    pub context_id: a2a_str,
    /// Per-recipient sequence number (0 for LAGGED).
    pub seq: u64,
    /// The task; absent for LAGGED.
    pub task_id: a2a_str,
    /// STATUS and ARTIFACT: the task's version after the change (0 otherwise).
    pub task_version: u64,
    /// STATUS and PUSH: the task's state; A2A_STATE_UNSET otherwise.
    pub state: a2a_state,
    /// STATUS: the state is terminal.
    pub is_final: bool,
    /// STATUS and PUSH: the message of the transition; NULL if none.
    pub message: *const a2a_message,
    /// ARTIFACT: the artifact (all of it, or the chunk appended).
    pub artifact: *const a2a_artifact,
    pub append: bool,
    pub last_chunk: bool,
    /// PUSH: the config's token; absent if none.
    pub push_token: a2a_str,
    /// LAGGED: how many events were dropped.
    pub dropped: u64,
    /// The time of the status change (STATUS, PUSH); absent otherwise.
    pub timestamp: a2a_str,
}

/// An owned event: the view first (C's pointer is this box's).
#[repr(C)]
pub(crate) struct EventBox {
    view: a2a_event,
    ev: Event,
    views: Views,
}

impl EventBox {
    pub(crate) fn new(ev: Event) -> Box<EventBox> {
        let mut counts = Counts::default();
        match &ev {
            Notification::TaskEvent(p) => match &p.event {
                StreamEvent::Status(s) => counts.status(&s.status),
                StreamEvent::Artifact(a) => counts.artifact(&a.artifact),
            },
            Notification::Push(p) => counts.status(&p.status),
            Notification::Lagged(_) | Notification::LeaseReleased(_) => {}
        }
        let mut b = Box::new(EventBox {
            view: a2a_event {
                kind: a2a_event_kind::Lagged,
                recipient: a2a_str::NONE,
                recipient_context_id: a2a_str::NONE,
                context_id: a2a_str::NONE,
                seq: 0,
                task_id: a2a_str::NONE,
                task_version: 0,
                state: a2a_state::UNSET,
                is_final: false,
                message: ptr::null(),
                artifact: ptr::null(),
                append: false,
                last_chunk: false,
                push_token: a2a_str::NONE,
                dropped: 0,
                timestamp: a2a_str::NONE,
            },
            ev,
            views: Views::with(counts),
        });
        let r = &mut *b;
        let v = &mut r.view;
        match &r.ev {
            Notification::TaskEvent(p) => {
                v.recipient = a2a_str::of(&p.recipient);
                v.recipient_context_id = a2a_str::of(&p.recipient_context_id);
                v.context_id = a2a_str::of(&p.context_id);
                v.seq = p.seq;
                v.task_version = p.task_version;
                match &p.event {
                    StreamEvent::Status(s) => {
                        v.kind = a2a_event_kind::Status;
                        v.task_id = a2a_str::of(&s.task_id);
                        v.state = a2a_state::from_state(s.status.state);
                        v.is_final = s.is_final;
                        v.message = r.views.status_message(&s.status);
                        v.timestamp = a2a_str::of(&s.status.timestamp);
                    }
                    StreamEvent::Artifact(a) => {
                        v.kind = a2a_event_kind::Artifact;
                        v.task_id = a2a_str::of(&a.task_id);
                        v.artifact = r.views.artifact(&a.artifact);
                        v.append = a.append;
                        v.last_chunk = a.last_chunk;
                    }
                }
            }
            Notification::Push(p) => {
                v.kind = a2a_event_kind::Push;
                v.recipient = a2a_str::of(&p.recipient);
                v.recipient_context_id = a2a_str::of(&p.recipient_context_id);
                v.context_id = a2a_str::of(&p.context_id);
                v.seq = p.seq;
                v.task_id = a2a_str::of(&p.task_id);
                v.state = a2a_state::from_state(p.status.state);
                v.message = r.views.status_message(&p.status);
                v.push_token = a2a_str::opt(p.token.as_deref());
                v.timestamp = a2a_str::of(&p.status.timestamp);
            }
            Notification::Lagged(p) => {
                v.kind = a2a_event_kind::Lagged;
                v.recipient = a2a_str::of(&p.recipient);
                v.recipient_context_id = a2a_str::of(&p.recipient_context_id);
                v.dropped = p.dropped;
            }
            Notification::LeaseReleased(p) => {
                v.kind = a2a_event_kind::LeaseReleased;
                v.recipient = a2a_str::of(&p.recipient);
                v.recipient_context_id = a2a_str::of(&p.recipient_context_id);
                v.seq = p.seq;
            }
        }
        b
    }

    pub(crate) fn into_raw(b: Box<EventBox>) -> *mut a2a_event {
        Box::into_raw(b).cast()
    }

    pub(crate) fn view(&self) -> &a2a_event {
        &self.view
    }
}

/// Frees an event taken with a2a_agent_next_event or a2a_agent_wait_event.
/// NULL is ignored. Never pass an event borrowed from a callback.
///
/// Threads: any; the event must not be in use by another thread.
#[no_mangle]
pub extern "C" fn a2a_event_free(event: *mut a2a_event) {
    crate::status::guard_value((), || {
        if !event.is_null() {
            // SAFETY: an event given to free came from `EventBox::into_raw`
            // (the header's rule); the view is the first field of the
            // `repr(C)` box, so the pointer is the box's.
            drop(unsafe { Box::from_raw(event.cast::<EventBox>()) });
        }
    })
}
