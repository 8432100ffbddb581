//! `a2a.message.send` (docs/protocol.md §5 Methods): create a task (one
//! worker, or every addressable peer with `to: "*"`), or append to one;
//! idempotent by `messageId`. `a2a.message.stream` is the same call with
//! the task's status sent to the caller too (`message_stream.rs`).

use super::WriteMethod;
use crate::agents::addressing::resolve_workers;
use crate::agents::registry::Agent;
use crate::core::idempotency::{self, Known};
use crate::core::task::{Party, TaskRecord};
use crate::core::CoreError;
use crate::engine::{
    check_log_room, current_status_event, history_room, party_role, stamp, status_event,
    BlockingSpec, Effects, Encoded, Move, Routed, Undo, WriteCtx, Written,
};
use crate::reply::{Reply, TaskView};
use crate::store::write::LogPayload;
use crate::store::{read, write};
use crate::{clock, ids};
use a2a_proto::check::CheckError;
use a2a_proto::limits::{A2A_MAX_SENDS_PER_RUN, A2A_MAX_TASKS_PER_CONTEXT, A2A_MAX_TASK_BYTES};
use a2a_proto::params::{SendConfiguration, SendParams};
use a2a_proto::types::{Message, Role, State, TaskStatus};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = SendParams;

    /// A blocking send holds a parking place until it is answered.
    fn parks(p: &SendParams) -> bool {
        p.configuration.as_ref().and_then(|c| c.blocking) == Some(true)
    }

    fn run(p: SendParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        send(cx, p, false)
    }
}

/// `a2a.message.send` and `a2a.message.stream` (which also sends the
/// caller its task's status).
pub(super) fn send(
    cx: &mut WriteCtx<'_>,
    p: SendParams,
    stream: bool,
) -> Result<Effects, CoreError> {
    let agent = cx.caller(p.token.as_deref())?;
    let cfg = p.configuration.unwrap_or_default();
    match p.message.task_id.clone() {
        Some(id) => append(cx, &agent, p.message, &id, &cfg, stream),
        None => create(cx, &agent, p.message, &cfg, stream),
    }
}

fn check_sends(agent: &Agent, n: usize) -> Result<(), CoreError> {
    let after = agent.sends() as u64 + n as u64;
    if after > A2A_MAX_SENDS_PER_RUN as u64 {
        return Err(CoreError::SendCap {
            limit: "A2A_MAX_SENDS_PER_RUN",
            max: A2A_MAX_SENDS_PER_RUN as u64,
            actual: after,
        });
    }
    Ok(())
}

fn charge(agent: &Arc<Agent>, n: usize, undo: &mut Undo) {
    if !undo.sends.iter().any(|(a, _)| a.same(agent)) {
        undo.sends.push((agent.clone(), agent.sends()));
    }
    agent.sends.fetch_add(n as u32, Ordering::Relaxed);
}

fn blocking_spec(
    cfg: &SendConfiguration,
    recs: &[Arc<TaskRecord>],
    broadcast: bool,
) -> Option<BlockingSpec> {
    cfg.blocking.unwrap_or(false).then(|| BlockingSpec {
        task_ids: recs.iter().map(|r| r.id.clone()).collect(),
        history_length: cfg.history_length.map(|n| n as usize),
        broadcast,
    })
}

fn views(cfg: &SendConfiguration, recs: Vec<Arc<TaskRecord>>, broadcast: bool) -> Reply {
    let hl = cfg.history_length.map(|n| n as usize);
    let mut views: Vec<TaskView> = recs
        .into_iter()
        .map(|rec| TaskView {
            rec,
            history_length: hl,
        })
        .collect();
    if broadcast {
        Reply::Tasks(views)
    } else {
        Reply::Task(views.pop().expect("one task"))
    }
}

fn create(
    cx: &mut WriteCtx<'_>,
    agent: &Arc<Agent>,
    msg: Message,
    cfg: &SendConfiguration,
    stream: bool,
) -> Result<Effects, CoreError> {
    let me = agent.party();
    let to = msg.to.clone();
    let broadcast = to.as_deref() == Some("*");

    // A retry of a creation returns what the first one made.
    let prior = prior_creations(cx, &me, &msg.message_id)?;
    if let Some(same) = idempotency::creation_retry(prior, &msg)? {
        return Ok(Effects {
            blocking: blocking_spec(cfg, &same, broadcast),
            lease_wait: None,
            reply: views(cfg, same, broadcast),
            events: Vec::new(),
        });
    }

    let workers = resolve_workers(&cx.shared.registry.read(), agent, to.as_deref())?;
    let n = workers.len();
    check_sends(agent, n)?;
    let open_after = cx.open_count(&me.context_id) + n;
    if open_after > A2A_MAX_TASKS_PER_CONTEXT {
        return Err(CoreError::SendCap {
            limit: "A2A_MAX_TASKS_PER_CONTEXT",
            max: A2A_MAX_TASKS_PER_CONTEXT as u64,
            actual: open_after as u64,
        });
    }

    let now = clock::now();
    let base_seq = cx.caches.next_seq;
    let mut created = Vec::with_capacity(n);
    let mut events = Vec::with_capacity(n * 2);
    // Every task's first message is encoded and checked before the
    // first row is written: a call must not fail halfway (the writer
    // keeps no savepoint per call).
    let firsts = first_messages(&msg, &me, &workers)?;
    for (i, (worker, (id, first))) in workers.iter().zip(firsts).enumerate() {
        let stamped = first.msg.clone();
        let mut rec = TaskRecord {
            id: id.clone(),
            context_id: me.context_id.clone(),
            requester: me.clone(),
            worker: worker.party(),
            status: TaskStatus {
                state: State::Submitted,
                message: Some(stamped.clone()),
                timestamp: now.clone(),
            },
            history: vec![stamped.clone()],
            artifacts: Vec::new(),
            stored_bytes: first.body.len() as u64,
            version: 1,
            create_message_id: msg.message_id.clone(),
            broadcast,
            push_configs: Vec::new(),
            created_at: now.clone(),
            updated_at: now.clone(),
            render: Default::default(),
        };
        let status = write::status_row(&rec.status, Some(0), Some(&first.body))?;
        write::insert_task(cx.conn, &rec, base_seq + i as i64, &status)?;
        write::insert_message(cx.conn, &id, 0, &stamped, &first.body)?;
        if let Some(pc) = &cfg.push_notification_config {
            write::put_push_config(cx.conn, &id, &me, pc)?;
            rec.push_configs.push((me.clone(), pc.clone()));
        }
        let logged = LogPayload::Status {
            status: &rec.status,
            msg_pos: Some(0),
        };
        write::append_log(cx.conn, &id, 1, logged, &me.peer_id, &now)?;
        let event = status_event(&rec, rec.status.clone());
        events.push(Routed::Task {
            to: rec.worker.clone(),
            context_id: me.context_id.clone(),
            version: 1,
            event,
        });
        if stream {
            events.push(current_status_event(&rec, me.clone()));
        }
        created.push(rec);
    }

    // Every write succeeded: now the writer's memory.
    let ids: Vec<String> = created.iter().map(|r| r.id.clone()).collect();
    if let Some(before) = cx.caches.creations.record(&me, &msg.message_id, &ids) {
        cx.undo
            .creations
            .push((me.clone(), msg.message_id.clone(), before));
    }
    cx.undo.next_seq.get_or_insert(cx.caches.next_seq);
    cx.caches.next_seq = base_seq + n as i64;
    cx.add_open(&me.context_id, n as isize);
    charge(agent, n, cx.undo);
    let recs: Vec<Arc<TaskRecord>> = created.into_iter().map(|r| cx.put_task(r)).collect();
    Ok(Effects {
        blocking: blocking_spec(cfg, &recs, broadcast),
        lease_wait: None,
        reply: views(cfg, recs, broadcast),
        events,
    })
}

/// The tasks an earlier call of the caller created with this `messageId`
/// (memory knows, else the database says).
fn prior_creations(
    cx: &mut WriteCtx<'_>,
    me: &Party,
    message_id: &str,
) -> Result<Vec<Arc<TaskRecord>>, CoreError> {
    let prior_ids = match cx.caches.creations.lookup(me, message_id) {
        Known::Tracked(ids) => ids,
        Known::Untracked => read::creations(cx.conn, me, message_id)?,
        Known::Unchecked => {
            let ids = read::creations(cx.conn, me, message_id)?;
            let any = !ids.is_empty() || read::has_created(cx.conn, me)?;
            cx.caches.creations.checked(me.clone(), any);
            ids
        }
    };
    prior_ids.iter().map(|id| cx.task(id)).collect()
}

/// Each new task's id and first message (stamped for its worker), encoded
/// and checked against the task size bound before anything is written.
fn first_messages(
    msg: &Message,
    me: &Party,
    workers: &[Arc<Agent>],
) -> Result<Vec<(String, Encoded)>, CoreError> {
    let mut firsts = Vec::with_capacity(workers.len());
    for worker in workers {
        let id = ids::uuid();
        let first = Encoded::new(stamp(
            msg.clone(),
            &id,
            &me.context_id,
            Role::User,
            &me.peer_id,
            &worker.peer_id,
        ))?;
        if first.body.len() > A2A_MAX_TASK_BYTES {
            return Err(CoreError::Check(CheckError::PayloadTooLarge {
                limit: "A2A_MAX_TASK_BYTES",
                max: A2A_MAX_TASK_BYTES as u64,
                actual: first.body.len() as u64,
            }));
        }
        firsts.push((id, first));
    }
    Ok(firsts)
}

fn append(
    cx: &mut WriteCtx<'_>,
    agent: &Arc<Agent>,
    msg: Message,
    task_id: &str,
    cfg: &SendConfiguration,
    stream: bool,
) -> Result<Effects, CoreError> {
    let rec = cx.task(task_id)?;
    let role = party_role(&rec, agent)?;
    let me = agent.party();

    // A retry of an append returns the task and writes nothing.
    let retry =
        idempotency::append_retry(&rec.history, &msg.message_id, &msg.parts, &me.peer_id, role)?;
    if retry {
        return Ok(Effects {
            blocking: blocking_spec(cfg, std::slice::from_ref(&rec), false),
            lease_wait: None,
            reply: views(cfg, vec![rec], false),
            events: Vec::new(),
        });
    }
    if rec.state().is_terminal() {
        return Err(CoreError::TaskTerminal(rec.state()));
    }
    check_sends(agent, 1)?;
    check_log_room(&rec)?;

    let counterpart = rec.counterpart(&me).clone();
    let stamped = stamp(
        msg,
        &rec.id,
        &rec.context_id,
        role,
        &me.peer_id,
        &counterpart.peer_id,
    );
    let mut events = Vec::new();
    let mut next = if role == Role::User && rec.state().is_interrupted() {
        // The requester's answer resumes the task.
        let mv = Move {
            rec: &rec,
            state: State::Working,
            message: Some(stamped),
            actor: &me,
        };
        cx.transition(mv, &mut events)?
    } else {
        let m = Encoded::new(stamped)?;
        history_room(&rec, &m)?;
        let now = clock::now();
        let mut next = (*rec).clone();
        let pos = next.history.len();
        write::insert_message(cx.conn, &rec.id, pos, &m.msg, &m.body)?;
        next.history.push(m.msg.clone());
        next.stored_bytes += m.body.len() as u64;
        next.version += 1;
        next.updated_at = now.clone();
        let status = TaskStatus {
            state: next.state(),
            message: Some(m.msg),
            timestamp: now.clone(),
        };
        // The task's own status stays as it was (only the event
        // carries the new message); its row keeps its status column.
        let event = status_event(&next, status);
        let written = Written {
            row_status: None,
            state_changed: false,
            msg_pos: Some(pos),
        };
        cx.record_change(&next, event, written, &me, counterpart, &now, &mut events)?;
        cx.put_task(next)
    };
    if let Some(pc) = &cfg.push_notification_config {
        next = cx.set_push_config(&next, &me, pc.clone())?;
    }
    if stream {
        events.push(current_status_event(&next, me));
    }
    charge(agent, 1, cx.undo);
    Ok(Effects {
        blocking: blocking_spec(cfg, std::slice::from_ref(&next), false),
        lease_wait: None,
        reply: views(cfg, vec![next], false),
        events,
    })
}
