//! What a call leaves for after its commit: events to route, the response,
//! and blocking sends that wait for their tasks to settle.

use super::{Command, Engine};
use crate::core::task::Party;
use crate::delivery::{Responder, RingPublishes};
use crate::reply::{Reply, TaskView};
use a2a_proto::limits::A2A_DEFAULT_STREAM_WAIT_SECONDS;
use a2a_proto::types::{
    LeaseReleasedParams, Notification, PushParams, StreamEvent, TaskEventParams, TaskStatus,
};
use std::time::{Duration, Instant};

/// A notification to route once the call is committed.
#[derive(Debug)]
pub(crate) enum Routed {
    /// `a2a.task.event` to a party.
    Task {
        to: Party,
        context_id: String,
        version: u64,
        event: StreamEvent,
    },
    /// `a2a.push` to the party that set a push config.
    Push {
        to: Party,
        task_id: String,
        context_id: String,
        token: Option<String>,
        status: TaskStatus,
    },
    /// (ext) `a2a.lease.released` to a party that waited on or was
    /// refused the lease.
    LeaseEnded {
        to: Party,
        lease: a2a_proto::params::Lease,
        reason: a2a_proto::types::LeaseEnd,
    },
}

/// A blocking send's wait: which tasks must settle, and how to answer.
#[derive(Debug)]
pub(crate) struct BlockingSpec {
    pub task_ids: Vec<String>,
    pub history_length: Option<usize>,
    pub broadcast: bool,
}

/// A blocking send that is waiting.
pub(super) struct Blocking {
    spec: BlockingSpec,
    reply: Responder,
    /// Its expiry on the timer, cancelled when its tasks settle first.
    expiry: Option<crate::delivery::timer::TimerKey>,
}

/// A committed call's aftermath.
#[derive(Debug)]
pub(crate) struct Effects {
    pub reply: Reply,
    pub events: Vec<Routed>,
    pub blocking: Option<BlockingSpec>,
    /// A conflicting lease acquisition that waits (`waitSeconds`); boxed,
    /// as every call's effects carry the field and few use it.
    pub lease_wait: Option<Box<super::LeaseWait>>,
}

impl Effects {
    pub fn reply(reply: Reply) -> Self {
        Self {
            reply,
            events: Vec::new(),
            blocking: None,
            lease_wait: None,
        }
    }
}

impl Engine {
    /// Answers a committed call whose events were routed (or parks it).
    pub(super) fn release(&mut self, effects: Effects, reply: Responder) {
        debug_assert!(effects.events.is_empty(), "routed before release");
        if let Some(wait) = effects.lease_wait {
            return self.park_lease_wait(*wait, reply);
        }
        match effects.blocking {
            Some(spec) if !self.all_settled(&spec.task_ids) => {
                self.next_waiter += 1;
                let id = self.next_waiter;
                for t in &spec.task_ids {
                    self.waiters_by_task.entry(t.clone()).or_default().push(id);
                }
                let tx = self.tx.clone();
                let at = Instant::now() + Duration::from_secs(A2A_DEFAULT_STREAM_WAIT_SECONDS);
                let expiry = self.shared.timer.schedule(at, move || {
                    let _ = tx.send(Command::BlockingExpired(id));
                });
                self.waiters.insert(
                    id,
                    Blocking {
                        spec,
                        reply,
                        expiry: Some(expiry),
                    },
                );
            }
            // Settled already, perhaps by a later call of the same batch:
            // the answer is the task as it now is, not as this call left it.
            Some(spec) => reply.send(self.blocking_reply(&spec)),
            None => reply.send(Ok(effects.reply)),
        }
    }

    /// A blocking send's answer: its tasks as they are now.
    fn blocking_reply(&mut self, spec: &BlockingSpec) -> Result<Reply, a2a_proto::error::RpcError> {
        let mut views = Vec::new();
        for t in &spec.task_ids {
            let rec = self.task(t).map_err(crate::rpc_errors::to_rpc)?;
            views.push(TaskView {
                rec,
                history_length: spec.history_length,
            });
        }
        Ok(if spec.broadcast {
            Reply::Tasks(views)
        } else {
            Reply::Task(
                views
                    .pop()
                    .expect("a blocking send waits on one task at least"),
            )
        })
    }

    /// Delivers notifications to the live agents that are their recipients;
    /// a recipient that is not live misses them (and can replay them with
    /// `resubscribe` + `afterVersion`). Events staged into event rings are
    /// published by `rings` (once per ring for the whole commit group).
    pub(super) fn route(&self, events: Vec<Routed>, rings: &mut RingPublishes) {
        if events.is_empty() {
            return;
        }
        let reg = self.shared.registry.read();
        for ev in events {
            let to = match &ev {
                Routed::Task { to, .. }
                | Routed::Push { to, .. }
                | Routed::LeaseEnded { to, .. } => to,
            };
            let Some(agent) = reg.live_party(to) else {
                continue;
            };
            let seq = agent.next_seq();
            let n = match ev {
                Routed::Task {
                    context_id,
                    version,
                    event,
                    ..
                } => Notification::TaskEvent(TaskEventParams {
                    recipient: agent.peer_id.clone(),
                    recipient_context_id: agent.context_id.clone(),
                    context_id,
                    seq,
                    task_version: version,
                    event,
                }),
                Routed::Push {
                    task_id,
                    context_id,
                    token,
                    status,
                    ..
                } => Notification::Push(PushParams {
                    recipient: agent.peer_id.clone(),
                    recipient_context_id: agent.context_id.clone(),
                    context_id,
                    seq,
                    task_id,
                    token,
                    status,
                }),
                Routed::LeaseEnded { lease, reason, .. } => {
                    Notification::LeaseReleased(LeaseReleasedParams {
                        recipient: agent.peer_id.clone(),
                        recipient_context_id: agent.context_id.clone(),
                        seq,
                        lease,
                        reason,
                    })
                }
            };
            agent.endpoint.deliver(n, rings);
        }
    }

    /// Have all of a blocking send's tasks settled? (A task the writer's
    /// cache dropped is read back; one that cannot be read counts as
    /// settled, and the answer then reports its error.)
    fn all_settled(&mut self, task_ids: &[String]) -> bool {
        task_ids.iter().all(|id| {
            self.task(id).map_or(true, |r| {
                r.state().is_terminal() || r.state().is_interrupted()
            })
        })
    }

    /// Answers the blocking sends whose tasks have all settled.
    pub(super) fn wake_waiters<'a>(&mut self, touched: impl Iterator<Item = &'a String>) {
        let mut ready = Vec::new();
        for id in touched {
            let Some(ws) = self.waiters_by_task.get(id).cloned() else {
                continue;
            };
            for w in ws {
                let Some(spec) = self.waiters.get(&w).map(|b| b.spec.task_ids.clone()) else {
                    continue;
                };
                if self.all_settled(&spec) {
                    ready.push(w);
                }
            }
        }
        ready.sort_unstable();
        ready.dedup();
        for w in ready {
            self.finish_waiter(w);
        }
    }

    /// Answers a blocking send with its tasks as they are (they settled, or
    /// its time ran out), if it is still waiting.
    pub(super) fn finish_waiter(&mut self, id: u64) {
        let Some(b) = self.waiters.remove(&id) else {
            return;
        };
        if let Some(key) = b.expiry {
            self.shared.timer.cancel(key);
        }
        for t in &b.spec.task_ids {
            if let Some(ws) = self.waiters_by_task.get_mut(t) {
                ws.retain(|w| *w != id);
                if ws.is_empty() {
                    self.waiters_by_task.remove(t);
                }
            }
        }
        let reply = self.blocking_reply(&b.spec);
        b.reply.send(reply);
    }
}
