//! Typed results of every method. The core builds these; the transports
//! render them in the connection's writer thread (off the core's path), one
//! module per codec:
//!
//! - [`json`]: NDJSON (serde), reusing each task version's kept rendering.
//! - [`binary`]: binary frames (bincode), borrowed from the shared records
//!   with the bytes the owned `a2a_proto` values would have.

pub(crate) mod binary;
mod json;

use crate::core::task::TaskRecord;
use a2a_proto::call::OutcomeKind;
use a2a_proto::params::{HandshakeResult, Lease, RegisterResult};
use a2a_proto::types::{AgentCard, Message, Notification, PushConfig};
use std::sync::Arc;

/// A task as a caller sees it, with its history trimmed to the last
/// `history_length` entries when asked.
#[derive(Debug, Clone)]
pub struct TaskView {
    pub rec: Arc<TaskRecord>,
    pub history_length: Option<usize>,
}

impl TaskView {
    /// The whole task.
    pub fn full(rec: Arc<TaskRecord>) -> Self {
        Self {
            rec,
            history_length: None,
        }
    }

    /// The history this view shows: the last `history_length` messages, or
    /// all of them. Both codecs render this, never the record's own.
    pub fn history(&self) -> &[Arc<Message>] {
        let h = &self.rec.history;
        match self.history_length {
            Some(n) => &h[h.len().saturating_sub(n)..],
            None => h,
        }
    }
}

/// The result of a method.
#[derive(Debug)]
pub enum Reply {
    Handshake(HandshakeResult),
    Registered(RegisterResult),
    /// `{ok: true}`.
    Ok,
    Agents(Vec<AgentCard>),
    Task(TaskView),
    /// A broadcast's tasks.
    Tasks(Vec<TaskView>),
    TaskList {
        tasks: Vec<TaskView>,
        next_cursor: Option<String>,
    },
    Config(Option<PushConfig>),
    Events {
        events: Vec<Arc<Notification>>,
        timed_out: bool,
    },
    /// (ext) `{lease}`.
    Lease(Lease),
    /// (ext) `{leases}`.
    Leases(Vec<Lease>),
}

impl Reply {
    /// `{task}` for one task.
    pub fn task(rec: Arc<TaskRecord>, history_length: Option<usize>) -> Reply {
        Reply::Task(TaskView {
            rec,
            history_length,
        })
    }

    /// The `a2a_proto::call::Outcome` variant this reply is on the wire.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Reply::Handshake(_) => OutcomeKind::Handshake,
            Reply::Registered(_) => OutcomeKind::Registered,
            Reply::Ok => OutcomeKind::Ok,
            Reply::Agents(_) => OutcomeKind::Agents,
            Reply::Task(_) => OutcomeKind::Task,
            Reply::Tasks(_) => OutcomeKind::Tasks,
            Reply::TaskList { .. } => OutcomeKind::TaskList,
            Reply::Config(_) => OutcomeKind::Config,
            Reply::Events { .. } => OutcomeKind::Events,
            Reply::Lease(_) => OutcomeKind::Lease,
            Reply::Leases(_) => OutcomeKind::Leases,
        }
    }
}
