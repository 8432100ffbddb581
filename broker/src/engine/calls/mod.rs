//! The mutating methods, one family per file. Each validates against the
//! writer's current view (which includes earlier calls of the same batch),
//! writes its rows, and only then changes the writer's memory, so a refused
//! call leaves nothing behind.
//!
//! - [`agents`]: register, deregister.
//! - [`send`]: message.send / message.stream (create, append, broadcast, idempotency).
//! - [`tasks`]: status, cancel, artifact, resubscribe, push config.

mod agents;
mod send;
mod tasks;

use super::effects::Routed;
use super::{Engine, Undo};
use crate::clock;
use crate::core::registry::Agent;
use crate::core::task::{Party, TaskRecord};
use crate::core::CoreError;
use crate::store::write::{self, LogPayload};
use a2a_proto::limits::{A2A_MAX_TASK_BYTES, A2A_MAX_TASK_HISTORY, A2A_MAX_TASK_LOG};
use a2a_proto::types::{Message, Role, State, StatusUpdate, StreamEvent, TaskStatus};
use std::sync::Arc;

/// Stamps a message for a task: the broker, not the client, says who sent it.
pub(super) fn stamp(
    mut msg: Message,
    rec_id: &str,
    ctx: &str,
    role: Role,
    from: &str,
    to: &str,
) -> Message {
    msg.role = role;
    msg.from = Some(from.to_owned());
    msg.to = Some(to.to_owned());
    msg.task_id = Some(rec_id.to_owned());
    msg.context_id = Some(ctx.to_owned());
    msg
}

/// Refuses a message that would be the 257th of a task.
pub(super) fn check_history_room(rec: &TaskRecord) -> Result<(), CoreError> {
    if rec.history.len() >= A2A_MAX_TASK_HISTORY {
        return Err(CoreError::SendCap {
            limit: "A2A_MAX_TASK_HISTORY",
            max: A2A_MAX_TASK_HISTORY as u64,
            actual: rec.history.len() as u64 + 1,
        });
    }
    Ok(())
}

/// Refuses a change that would write the task log's 10,001st entry
/// (terminal moves are never refused: callers skip this for them).
pub(super) fn check_log_room(rec: &TaskRecord) -> Result<(), CoreError> {
    if rec.version >= A2A_MAX_TASK_LOG {
        return Err(CoreError::SendCap {
            limit: "A2A_MAX_TASK_LOG",
            max: A2A_MAX_TASK_LOG,
            actual: rec.version + 1,
        });
    }
    Ok(())
}

/// Refuses `more` stored bytes past `A2A_MAX_TASK_BYTES`.
pub(super) fn check_bytes_room(rec: &TaskRecord, more: usize) -> Result<(), CoreError> {
    let after = rec.stored_bytes + more as u64;
    if after > A2A_MAX_TASK_BYTES as u64 {
        return Err(CoreError::PayloadTooLarge {
            limit: "A2A_MAX_TASK_BYTES",
            max: A2A_MAX_TASK_BYTES as u64,
            actual: after,
        });
    }
    Ok(())
}

/// A message to store in a task's history, encoded once (its row, and the
/// size the task bound counts).
pub(super) struct Encoded {
    pub msg: Arc<Message>,
    pub body: String,
}

impl Encoded {
    pub fn new(msg: Message) -> Result<Self, CoreError> {
        let body = write::json(&msg)?;
        Ok(Self {
            msg: Arc::new(msg),
            body,
        })
    }
}

/// Does a message fit the task's history (count and bytes)? `Err` says
/// which bound it would break.
pub(super) fn history_room(rec: &TaskRecord, m: &Encoded) -> Result<(), CoreError> {
    check_history_room(rec)?;
    check_bytes_room(rec, m.body.len())
}

/// How a change is written besides its log entry's event.
pub(super) struct Written {
    /// The task's new status column (`write::status_row`), or `None` when
    /// the change left the task's status as it was.
    pub row_status: Option<String>,
    /// Did the task's state change (not only its status message or time)?
    pub state_changed: bool,
    /// Where the event's status message is in the task's history (its own
    /// row), if it is: then the log refers to it instead of copying it.
    pub msg_pos: Option<usize>,
}

/// A status change to apply: the task, its new state, the stamped message
/// that goes with it (if any), and the party whose act it is (its
/// counterpart gets the event).
pub(super) struct Move<'a> {
    pub rec: &'a TaskRecord,
    pub state: State,
    pub message: Option<Message>,
    pub actor: &'a Party,
}

/// Refuses anyone but the task's worker.
pub(super) fn worker_only(
    rec: &TaskRecord,
    agent: &Agent,
    what: &'static str,
) -> Result<(), CoreError> {
    if party_role(rec, agent)? != Role::Agent {
        return Err(CoreError::CrossContextDenied(what));
    }
    Ok(())
}

/// The caller's party role on a task, or `A2A_CROSS_CONTEXT_DENIED`.
pub(super) fn party_role(rec: &TaskRecord, agent: &Agent) -> Result<Role, CoreError> {
    rec.role_of(&agent.party())
        .ok_or(CoreError::CrossContextDenied(
            "only a party to the task may act on it",
        ))
}

/// A `status-update` event of a task carrying `status` (final when its state is terminal).
pub(super) fn status_event(rec: &TaskRecord, status: TaskStatus) -> StreamEvent {
    StreamEvent::Status(StatusUpdate {
        task_id: rec.id.clone(),
        context_id: rec.context_id.clone(),
        is_final: status.state.is_terminal(),
        status,
    })
}

impl Engine {
    /// The live agent a token belongs to.
    pub(super) fn caller(&self, token: Option<&str>) -> Result<Arc<Agent>, CoreError> {
        self.shared.registry.read().resolve_for_write(token)
    }

    /// Applies a move (its transition already checked against §6): the
    /// message joins the history, the status changes, the row and the log
    /// are written, and the counterpart's event (with the push
    /// notification, if the state is terminal) is queued.
    ///
    /// Bounds (§7): a move that is not terminal is refused past the task
    /// log, history or size bound; a terminal move never is: past one of
    /// them its message rides on the status only, so no task can be pinned open.
    pub(super) fn transition(
        &mut self,
        mv: Move<'_>,
        events: &mut Vec<Routed>,
        undo: &mut Undo,
    ) -> Result<Arc<TaskRecord>, CoreError> {
        let Move {
            rec,
            state,
            message,
            actor,
        } = mv;
        let terminal = state.is_terminal();
        if !terminal {
            check_log_room(rec)?;
        }
        let message = message.map(Encoded::new).transpose()?;
        let in_history = match &message {
            Some(m) => match history_room(rec, m) {
                Ok(()) => true,
                Err(_) if terminal => false,
                Err(e) => return Err(e),
            },
            None => false,
        };
        let now = clock::now();
        let mut next = rec.clone();
        let msg_pos = in_history.then_some(next.history.len());
        if let Some(m) = message.as_ref().filter(|_| in_history) {
            write::insert_message(&self.conn, &rec.id, next.history.len(), &m.msg, &m.body)?;
            next.history.push(m.msg.clone());
            next.stored_bytes += m.body.len() as u64;
        }
        next.status = TaskStatus {
            state,
            message: message.as_ref().map(|m| m.msg.clone()),
            timestamp: now.clone(),
        };
        next.version += 1;
        next.updated_at = now.clone();
        let body = message.as_ref().map(|m| m.body.as_str());
        let written = Written {
            row_status: Some(write::status_row(&next.status, msg_pos, body)?),
            state_changed: rec.state() != state,
            msg_pos,
        };
        let event = status_event(&next, next.status.clone());
        let counterpart = next.counterpart(actor).clone();
        self.record_change(
            &next,
            event,
            written,
            actor,
            counterpart.clone(),
            &now,
            events,
        )?;
        if terminal && !rec.state().is_terminal() {
            self.add_open(&next.context_id, -1, undo);
            // One push config per task; its notification goes where the
            // task event goes: to the counterpart of the caller (§5).
            if let Some((_, cfg)) = next.push_configs.first() {
                events.push(Routed::Push {
                    to: counterpart,
                    task_id: next.id.clone(),
                    context_id: next.context_id.clone(),
                    token: cfg.token.clone(),
                    status: next.status.clone(),
                });
            }
        }
        Ok(self.put_task(next, undo))
    }

    /// Writes a change already applied to `next` (its row and its log
    /// entry) and queues its event to `to`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_change(
        &self,
        next: &TaskRecord,
        event: StreamEvent,
        written: Written,
        actor: &Party,
        to: Party,
        now: &str,
        events: &mut Vec<Routed>,
    ) -> Result<(), CoreError> {
        write::update_task(
            &self.conn,
            next,
            written.row_status.as_deref(),
            written.state_changed,
        )?;
        let logged = match &event {
            StreamEvent::Status(su) => LogPayload::Status {
                status: &su.status,
                msg_pos: written.msg_pos,
            },
            other => LogPayload::Event(other),
        };
        write::append_log(
            &self.conn,
            &next.id,
            next.version,
            logged,
            &actor.peer_id,
            now,
        )?;
        events.push(Routed::Task {
            to,
            context_id: next.context_id.clone(),
            version: next.version,
            event,
        });
        Ok(())
    }

    /// The task's current status as an event to `to` (stream, resubscribe).
    pub(super) fn current_status_event(rec: &TaskRecord, to: Party) -> Routed {
        Routed::Task {
            to,
            context_id: rec.context_id.clone(),
            version: rec.version,
            event: status_event(rec, rec.status.clone()),
        }
    }
}
