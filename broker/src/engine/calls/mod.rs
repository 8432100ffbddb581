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
use crate::store::write;
use a2a_proto::limits::A2A_MAX_TASK_HISTORY;
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

impl Engine {
    /// The live agent a token belongs to.
    pub(super) fn caller(&self, token: Option<&str>) -> Result<Arc<Agent>, CoreError> {
        self.shared.registry.read().resolve(token)
    }

    /// Moves a task to `state` (already checked), optionally with a stamped
    /// message (appended to the history when `in_history`), writes it, and
    /// queues the counterpart's event (and the push notifications if the
    /// state is terminal). `actor` is the party whose act this is; its
    /// counterpart gets the event.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn transition(
        &mut self,
        rec: &TaskRecord,
        state: State,
        message: Option<Message>,
        in_history: bool,
        actor: &Party,
        events: &mut Vec<Routed>,
        undo: &mut Undo,
    ) -> Result<Arc<TaskRecord>, CoreError> {
        let now = clock::now();
        let mut next = rec.clone();
        let message = message.map(Arc::new);
        if let Some(m) = message.as_ref().filter(|_| in_history) {
            write::insert_message(&self.conn, &rec.id, next.history.len(), m)?;
            next.history.push(m.clone());
        }
        next.status = TaskStatus {
            state,
            message,
            timestamp: now.clone(),
        };
        next.version += 1;
        next.updated_at = now.clone();
        let event = StreamEvent::Status(StatusUpdate {
            task_id: next.id.clone(),
            context_id: next.context_id.clone(),
            status: next.status.clone(),
            is_final: state.is_terminal(),
        });
        self.record_change(
            &next,
            event,
            actor,
            next.counterpart(actor).clone(),
            &now,
            events,
        )?;
        if state.is_terminal() && !rec.state().is_terminal() {
            self.settled.push_back(next.id.clone());
            self.add_open(&next.context_id, -1, undo);
            for (owner, cfg) in &next.push_configs {
                events.push(Routed::Push {
                    to: owner.clone(),
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
    pub(super) fn record_change(
        &self,
        next: &TaskRecord,
        event: StreamEvent,
        actor: &Party,
        to: Party,
        now: &str,
        events: &mut Vec<Routed>,
    ) -> Result<(), CoreError> {
        write::update_task(&self.conn, next)?;
        write::append_log(
            &self.conn,
            &next.id,
            next.version,
            &event,
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
            event: StreamEvent::Status(StatusUpdate {
                task_id: rec.id.clone(),
                context_id: rec.context_id.clone(),
                status: rec.status.clone(),
                is_final: rec.state().is_terminal(),
            }),
        }
    }
}
