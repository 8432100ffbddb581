//! What a write method works against: [`WriteCtx`], the writer's state
//! lent to one call (its SQLite connection inside the batch's transaction,
//! the writer's caches, the call's undo record, the connection it came
//! from), and the steps the methods share (a state move, a change's row
//! and log entry, the bounds they check).
//!
//! A method validates against the writer's current view (which includes
//! earlier calls of the same batch), writes its rows, and only then
//! changes the writer's memory through the context, which notes each
//! change in the undo record: so a refused call leaves nothing behind.

use super::cache::TaskCache;
use super::effects::{Effects, Routed};
use super::{Shared, Undo};
use crate::agents::registry::Agent;
use crate::clock;
use crate::core::idempotency::Creations;
use crate::core::task::{Party, TaskRecord};
use crate::core::ConnId;
use crate::core::CoreError;
use crate::delivery::Outbox;
use crate::store::read;
use crate::store::write::{self, LogPayload};
use a2a_proto::check::CheckError;
use a2a_proto::limits::{A2A_MAX_TASK_BYTES, A2A_MAX_TASK_HISTORY, A2A_MAX_TASK_LOG};
use a2a_proto::types::{Message, PushConfig, Role, State, StreamEvent, TaskStatus};
use rusqlite::Connection;
use std::collections::HashMap;
use std::sync::Arc;

/// How the writer runs a queued call: implemented for `Call` by the
/// method table's dispatch (`crate::methods`), so that the writer runs
/// every method without naming one (the methods build on the writer, not
/// the writer on them).
pub(crate) trait RunOnWriter {
    /// Does the call write rows (`WriteMethod::WRITES`)?
    fn writes(&self) -> bool;

    /// Runs the call's method against the writer's state.
    fn run_on_writer(self, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError>;
}

/// The connection a call came from: where a registered agent lives and
/// where its events go.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub conn: ConnId,
    pub outbox: Arc<Outbox>,
}

/// The writer's memory that calls change, besides the registry.
pub(crate) struct Caches {
    /// The writer's view of the tasks it holds in memory, including the
    /// open batch's changes; bounded (`cache`), the rest is in SQLite.
    pub(super) tasks: TaskCache,
    /// Non-terminal tasks per requester context (`A2A_MAX_TASKS_PER_CONTEXT`);
    /// a context without any has no entry.
    pub(super) open_counts: HashMap<String, usize>,
    /// The next task creation sequence number.
    pub next_seq: i64,
    /// Which tasks requesters created with which `messageId`, where memory
    /// knows exactly (`core::idempotency::Creations`).
    pub creations: Creations,
    /// Live leases (`core::lease`).
    pub leases: crate::core::lease::Leases,
}

/// One call's view of the writer.
pub(crate) struct WriteCtx<'a> {
    /// The writer's connection, inside the batch's transaction.
    pub conn: &'a Connection,
    pub shared: &'a Shared,
    pub caches: &'a mut Caches,
    /// What the call changed in memory, to restore if it or its batch fails.
    pub undo: &'a mut Undo,
    pub from: &'a Origin,
    /// Tasks blocking sends wait on: eviction keeps them.
    pub(super) pinned: &'a HashMap<String, Vec<u64>>,
    /// A parked lease acquisition queued again: the end of its wait.
    pub resume: Option<std::time::Instant>,
}

/// The writer's current record of a task, loading it if needed (from its
/// own connection, which sees the open batch's writes).
pub(super) fn task(
    conn: &Connection,
    shared: &Shared,
    caches: &mut Caches,
    pinned: &HashMap<String, Vec<u64>>,
    id: &str,
) -> Result<Arc<TaskRecord>, CoreError> {
    if let Some(rec) = caches.tasks.get(id) {
        return Ok(rec);
    }
    let rec = read::load_task(conn, id)?.ok_or_else(|| CoreError::UnknownTask(id.to_owned()))?;
    let rec = Arc::new(rec);
    caches.tasks.insert(rec.clone());
    if caches.tasks.far_over() {
        evict(caches, shared, pinned);
    }
    Ok(rec)
}

/// Drops the least recently used task records, open or terminal, from
/// both caches while the writer's is over its bounds (count and bytes,
/// `cache`). A task a blocking send waits on stays. Costs one step per
/// record dropped.
pub(super) fn evict(caches: &mut Caches, shared: &Shared, pinned: &HashMap<String, Vec<u64>>) {
    let victims = caches.tasks.evict(|id| pinned.contains_key(id));
    if victims.is_empty() {
        return;
    }
    let mut shared = shared.tasks.write();
    for id in &victims {
        shared.remove(id);
    }
}

/// Stamps a message for a task: the broker, not the client, says who sent it.
pub(crate) fn stamp(
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
pub(crate) fn check_history_room(rec: &TaskRecord) -> Result<(), CoreError> {
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
pub(crate) fn check_log_room(rec: &TaskRecord) -> Result<(), CoreError> {
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
pub(crate) fn check_bytes_room(rec: &TaskRecord, more: usize) -> Result<(), CoreError> {
    let after = rec.stored_bytes + more as u64;
    if after > A2A_MAX_TASK_BYTES as u64 {
        return Err(CoreError::Check(CheckError::PayloadTooLarge {
            limit: "A2A_MAX_TASK_BYTES",
            max: A2A_MAX_TASK_BYTES as u64,
            actual: after,
        }));
    }
    Ok(())
}

/// A message to store in a task's history, encoded once (its row, and the
/// size the task bound counts).
pub(crate) struct Encoded {
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
pub(crate) fn history_room(rec: &TaskRecord, m: &Encoded) -> Result<(), CoreError> {
    check_history_room(rec)?;
    check_bytes_room(rec, m.body.len())
}

/// How a change is written besides its log entry's event.
pub(crate) struct Written {
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
pub(crate) struct Move<'a> {
    pub rec: &'a TaskRecord,
    pub state: State,
    pub message: Option<Message>,
    pub actor: &'a Party,
}

/// Refuses anyone but the task's worker.
pub(crate) fn worker_only(
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
pub(crate) fn party_role(rec: &TaskRecord, agent: &Agent) -> Result<Role, CoreError> {
    rec.role_of(&agent.party())
        .ok_or(CoreError::CrossContextDenied(
            "only a party to the task may act on it",
        ))
}

/// Refuses a status message whose id the task's history already holds
/// (the bounds are `WriteCtx::transition`'s).
pub(crate) fn check_status_message(
    rec: &TaskRecord,
    msg: Option<&Message>,
) -> Result<(), CoreError> {
    if let Some(m) = msg {
        if rec.history.iter().any(|h| h.message_id == m.message_id) {
            return Err(CoreError::InvalidParams(format!(
                "messageId `{}` is already used on this task",
                m.message_id
            )));
        }
    }
    Ok(())
}

/// A `status-update` event of a task carrying `status` (final when its state is terminal).
pub(crate) fn status_event(rec: &TaskRecord, status: TaskStatus) -> StreamEvent {
    StreamEvent::status(rec.id.clone(), rec.context_id.clone(), status)
}

impl WriteCtx<'_> {
    /// The live agent a token belongs to.
    pub(crate) fn caller(&self, token: Option<&str>) -> Result<Arc<Agent>, CoreError> {
        self.shared.registry.read().resolve_for_write(token)
    }

    /// The writer's current record of a task, loading it if needed (from
    /// its own connection, which sees the open batch's writes).
    pub(crate) fn task(&mut self, id: &str) -> Result<Arc<TaskRecord>, CoreError> {
        task(self.conn, self.shared, self.caches, self.pinned, id)
    }

    /// Replaces a task record, noting it as changed by the call (to publish
    /// after the commit, or to drop if the call or batch fails).
    pub(crate) fn put_task(&mut self, rec: TaskRecord) -> Arc<TaskRecord> {
        self.undo.tasks.insert(rec.id.clone());
        let rec = Arc::new(rec);
        self.caches.tasks.insert(rec.clone());
        self.evict_if_far_over();
        rec
    }

    /// Within a batch, lets the cache grow to twice its bounds before
    /// evicting (a deregistration may settle thousands of tasks in one
    /// call); the batch's end brings it back within them.
    fn evict_if_far_over(&mut self) {
        if self.caches.tasks.far_over() {
            evict(self.caches, self.shared, self.pinned);
        }
    }

    /// Adds `delta` to a context's count of open tasks.
    pub(crate) fn add_open(&mut self, ctx: &str, delta: isize) {
        let cur = self.open_count(ctx);
        self.undo.open_counts.entry(ctx.to_owned()).or_insert(cur);
        let next = cur.saturating_add_signed(delta);
        // A context without open tasks leaves no entry behind: contexts
        // come and go without bound.
        if next == 0 {
            self.caches.open_counts.remove(ctx);
        } else {
            self.caches.open_counts.insert(ctx.to_owned(), next);
        }
    }

    /// A context's count of open tasks.
    pub(crate) fn open_count(&self, ctx: &str) -> usize {
        self.caches.open_counts.get(ctx).copied().unwrap_or(0)
    }

    /// Stores the task's push config (one per task, the last set wins,
    /// whichever party sets it; `owner` is kept for the audit view).
    pub(crate) fn set_push_config(
        &mut self,
        rec: &TaskRecord,
        owner: &Party,
        cfg: PushConfig,
    ) -> Result<Arc<TaskRecord>, CoreError> {
        write::put_push_config(self.conn, &rec.id, owner, &cfg)?;
        let mut next = rec.clone();
        next.push_configs = vec![(owner.clone(), cfg)];
        Ok(self.put_task(next))
    }

    /// Applies a move (its transition already checked against §7 Task states): the
    /// message joins the history, the status changes, the row and the log
    /// are written, and the counterpart's event (with the push
    /// notification, if the state is terminal) is queued.
    ///
    /// Bounds (§9): a move that is not terminal is refused past the task
    /// log, history or size bound; a terminal move never is: past one of
    /// them its message rides on the status only, so no task can be pinned open.
    pub(crate) fn transition(
        &mut self,
        mv: Move<'_>,
        events: &mut Vec<Routed>,
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
            write::insert_message(self.conn, &rec.id, next.history.len(), &m.msg, &m.body)?;
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
            self.add_open(&next.context_id, -1);
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
        Ok(self.put_task(next))
    }

    /// Writes a change already applied to `next` (its row and its log
    /// entry) and queues its event to `to`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_change(
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
            self.conn,
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
            self.conn,
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
}

/// The task's current status as an event to `to` (stream, resubscribe).
pub(crate) fn current_status_event(rec: &TaskRecord, to: Party) -> Routed {
    Routed::Task {
        to,
        context_id: rec.context_id.clone(),
        version: rec.version,
        event: status_event(rec, rec.status.clone()),
    }
}
