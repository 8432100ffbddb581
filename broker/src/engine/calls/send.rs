//! `a2a.message.send` and `a2a.message.stream`: create a task (one worker,
//! or every addressable peer with `to: "*"`), or append to one; both
//! idempotent by `messageId`.

use super::super::effects::{BlockingSpec, Effects, Routed};
use super::super::{Engine, Undo};
use super::{
    check_log_room, history_room, party_role, stamp, status_event, Encoded, Move, Written,
};
use crate::core::addressing::resolve_workers;
use crate::core::idempotency::{self, Known};
use crate::core::registry::Agent;
use crate::core::task::TaskRecord;
use crate::core::CoreError;
use crate::reply::{Reply, TaskView};
use crate::store::write::LogPayload;
use crate::store::{read, write};
use crate::{clock, ids};
use a2a_proto::limits::{A2A_MAX_SENDS_PER_RUN, A2A_MAX_TASKS_PER_CONTEXT, A2A_MAX_TASK_BYTES};
use a2a_proto::params::{SendConfiguration, SendParams};
use a2a_proto::types::{Message, Role, State, TaskStatus};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Engine {
    pub(in crate::engine) fn send(
        &mut self,
        p: SendParams,
        stream: bool,
        undo: &mut Undo,
    ) -> Result<Effects, CoreError> {
        let agent = self.caller(p.token.as_deref())?;
        let cfg = p.configuration.unwrap_or_default();
        match p.message.task_id.clone() {
            Some(id) => self.append(&agent, p.message, &id, &cfg, stream, undo),
            None => self.create(&agent, p.message, &cfg, stream, undo),
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
        &mut self,
        agent: &Arc<Agent>,
        msg: Message,
        cfg: &SendConfiguration,
        stream: bool,
        undo: &mut Undo,
    ) -> Result<Effects, CoreError> {
        let me = agent.party();
        let to = msg.to.clone();
        let broadcast = to.as_deref() == Some("*");

        // A retry of a creation returns what the first one made.
        let prior_ids = match self.creations.lookup(&me, &msg.message_id) {
            Known::Tracked(ids) => ids,
            Known::Untracked => read::creations(&self.conn, &me, &msg.message_id)?,
            Known::Unchecked => {
                let ids = read::creations(&self.conn, &me, &msg.message_id)?;
                let any = !ids.is_empty() || read::has_created(&self.conn, &me)?;
                self.creations.checked(me.clone(), any);
                ids
            }
        };
        let prior = prior_ids
            .iter()
            .map(|id| self.task(id))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(same) = idempotency::creation_retry(prior, &msg)? {
            return Ok(Effects {
                blocking: Self::blocking_spec(cfg, &same, broadcast),
                reply: Self::views(cfg, same, broadcast),
                events: Vec::new(),
            });
        }

        let workers = resolve_workers(&self.shared.registry.read(), agent, to.as_deref())?;
        let n = workers.len();
        Self::check_sends(agent, n)?;
        let open_after = self.open_count(&me.context_id) + n;
        if open_after > A2A_MAX_TASKS_PER_CONTEXT {
            return Err(CoreError::SendCap {
                limit: "A2A_MAX_TASKS_PER_CONTEXT",
                max: A2A_MAX_TASKS_PER_CONTEXT as u64,
                actual: open_after as u64,
            });
        }

        let now = clock::now();
        let base_seq = self.next_seq;
        let mut created = Vec::with_capacity(n);
        let mut events = Vec::with_capacity(n * 2);
        // Every task's first message is encoded and checked before the
        // first row is written: a call must not fail halfway (the writer
        // keeps no savepoint per call).
        let mut firsts = Vec::with_capacity(n);
        for worker in &workers {
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
                return Err(CoreError::PayloadTooLarge {
                    limit: "A2A_MAX_TASK_BYTES",
                    max: A2A_MAX_TASK_BYTES as u64,
                    actual: first.body.len() as u64,
                });
            }
            firsts.push((id, first));
        }
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
            write::insert_task(&self.conn, &rec, base_seq + i as i64, &status)?;
            write::insert_message(&self.conn, &id, 0, &stamped, &first.body)?;
            if let Some(pc) = &cfg.push_notification_config {
                write::put_push_config(&self.conn, &id, &me, pc)?;
                rec.push_configs.push((me.clone(), pc.clone()));
            }
            let logged = LogPayload::Status {
                status: &rec.status,
                msg_pos: Some(0),
            };
            write::append_log(&self.conn, &id, 1, logged, &me.peer_id, &now)?;
            let event = status_event(&rec, rec.status.clone());
            events.push(Routed::Task {
                to: rec.worker.clone(),
                context_id: me.context_id.clone(),
                version: 1,
                event,
            });
            if stream {
                events.push(Self::current_status_event(&rec, me.clone()));
            }
            created.push(rec);
        }

        // Every write succeeded: now the writer's memory.
        let ids: Vec<String> = created.iter().map(|r| r.id.clone()).collect();
        if let Some(before) = self.creations.record(&me, &msg.message_id, &ids) {
            undo.creations
                .push((me.clone(), msg.message_id.clone(), before));
        }
        undo.next_seq.get_or_insert(self.next_seq);
        self.next_seq = base_seq + n as i64;
        self.add_open(&me.context_id, n as isize, undo);
        Self::charge(agent, n, undo);
        let recs: Vec<Arc<TaskRecord>> = created
            .into_iter()
            .map(|r| self.put_task(r, undo))
            .collect();
        Ok(Effects {
            blocking: Self::blocking_spec(cfg, &recs, broadcast),
            reply: Self::views(cfg, recs, broadcast),
            events,
        })
    }

    fn append(
        &mut self,
        agent: &Arc<Agent>,
        msg: Message,
        task_id: &str,
        cfg: &SendConfiguration,
        stream: bool,
        undo: &mut Undo,
    ) -> Result<Effects, CoreError> {
        let rec = self.task(task_id)?;
        let role = party_role(&rec, agent)?;
        let me = agent.party();

        // A retry of an append returns the task and writes nothing.
        let retry = idempotency::append_retry(
            &rec.history,
            &msg.message_id,
            &msg.parts,
            &me.peer_id,
            role,
        )?;
        if retry {
            return Ok(Effects {
                blocking: Self::blocking_spec(cfg, std::slice::from_ref(&rec), false),
                reply: Self::views(cfg, vec![rec], false),
                events: Vec::new(),
            });
        }
        if rec.state().is_terminal() {
            return Err(CoreError::TaskTerminal(rec.state()));
        }
        Self::check_sends(agent, 1)?;
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
            self.transition(mv, &mut events, undo)?
        } else {
            let m = Encoded::new(stamped)?;
            history_room(&rec, &m)?;
            let now = clock::now();
            let mut next = (*rec).clone();
            let pos = next.history.len();
            write::insert_message(&self.conn, &rec.id, pos, &m.msg, &m.body)?;
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
            self.record_change(&next, event, written, &me, counterpart, &now, &mut events)?;
            self.put_task(next, undo)
        };
        if let Some(pc) = &cfg.push_notification_config {
            next = self.set_push_config(&next, &me, pc.clone(), undo)?;
        }
        if stream {
            events.push(Self::current_status_event(&next, me));
        }
        Self::charge(agent, 1, undo);
        Ok(Effects {
            blocking: Self::blocking_spec(cfg, std::slice::from_ref(&next), false),
            reply: Self::views(cfg, vec![next], false),
            events,
        })
    }
}
