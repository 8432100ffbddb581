//! The [`Driver`] over the Rust client `a2a-client` (binary frames on the
//! local socket): a few connections, each with its writer and reader
//! thread, carry every agent; calls are `_async` submissions completed by
//! `Pending::on_complete`, events reach the sink from each agent's event
//! handler. With `ring` the connections ask for the shared-memory event
//! ring (`ClientOptions::event_ring_bytes`), which the broker may decline.

use crate::driver::{Done, Driver, Ev, EvKind, LeaseAnswer, LeaseAsk, Sink, StatusTo, SENT_KEY};
use a2a_client::proto::types::{Notification, StreamEvent};
use a2a_client::{
    agent_card, message_to, task_message, text_artifact, A2aErrorCode, Agent, Client, ClientError,
    ClientOptions, Delivery, Message, Part, Pending, State, TaskQuery,
};
use parking_lot::RwLock;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The client driver.
pub struct BinaryDriver {
    clients: Vec<Client>,
    agents: Arc<RwLock<Vec<Option<Agent>>>>,
    sink: Sink,
    ring_asked: bool,
}

/// Bytes of event ring asked for per connection with `--transport ring`.
pub const RING_BYTES: usize = 4 << 20;

impl BinaryDriver {
    /// Opens `connections` connections to the broker at `socket`.
    pub fn connect(
        socket: &Path,
        secret: &str,
        connections: usize,
        ring: bool,
        sink: Sink,
    ) -> Result<BinaryDriver, ClientError> {
        let options = ClientOptions {
            client_name: "a2a-fanout".into(),
            connect_retry: Duration::from_secs(5),
            event_ring_bytes: ring.then_some(RING_BYTES),
            ..ClientOptions::default()
        };
        let clients = (0..connections.max(1))
            .map(|_| Client::connect_with(socket, secret, options.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BinaryDriver {
            clients,
            agents: Arc::new(RwLock::new(Vec::new())),
            sink,
            ring_asked: ring,
        })
    }

    fn agent(&self, slot: usize) -> Result<Agent, String> {
        self.agents
            .read()
            .get(slot)
            .cloned()
            .flatten()
            .ok_or_else(|| format!("agent slot {slot} is not registered"))
    }
}

/// Runs `done` when `p` completes, converting the answer.
fn finish<T: Send + 'static, U: 'static>(
    submitted: Result<Pending<T>, ClientError>,
    done: Done<U>,
    map: impl FnOnce(T) -> U + Send + 'static,
) {
    match submitted {
        Ok(p) => p.on_complete(move |r| done(r.map(map).map_err(|e| e.to_string()))),
        Err(e) => done(Err(e.to_string())),
    }
}

/// `metadata: {"t": sent_ns}`.
fn stamp(sent_ns: u64) -> Option<a2a_client::proto::types::Object> {
    let mut m = Map::new();
    m.insert(SENT_KEY.into(), Value::from(sent_ns));
    Some(m.into())
}

fn stamped(mut m: Message, sent_ns: u64) -> Message {
    m.metadata = stamp(sent_ns);
    m
}

fn sent_of(meta: Option<&a2a_client::proto::types::Object>) -> Option<u64> {
    meta.and_then(|m| m.get(SENT_KEY)).and_then(Value::as_u64)
}

fn first_text(m: Option<&Message>) -> String {
    m.and_then(|m| {
        m.parts.iter().find_map(|p| match p {
            Part::Text { text, .. } => Some(text.clone()),
            _ => None,
        })
    })
    .unwrap_or_default()
}

/// The client's typed event, normalised.
pub fn normalise(n: Notification) -> Ev {
    match n {
        Notification::TaskEvent(p) => match p.event {
            StreamEvent::Status(s) => {
                let msg = s.status.message.as_deref();
                Ev {
                    seq: Some(p.seq),
                    task_id: s.task_id,
                    version: p.task_version,
                    kind: EvKind::Status {
                        state: s.status.state.as_str().to_owned(),
                        is_final: s.is_final,
                    },
                    sent_ns: sent_of(msg.and_then(|m| m.metadata.as_ref())),
                    text: first_text(msg),
                }
            }
            StreamEvent::Artifact(a) => Ev {
                seq: Some(p.seq),
                task_id: a.task_id,
                version: p.task_version,
                kind: EvKind::Artifact,
                sent_ns: sent_of(a.artifact.metadata.as_ref()),
                text: String::new(),
            },
        },
        Notification::Push(p) => Ev {
            seq: Some(p.seq),
            task_id: p.task_id,
            version: 0,
            kind: EvKind::Push,
            sent_ns: None,
            text: String::new(),
        },
        Notification::Lagged(p) => Ev {
            seq: None,
            task_id: String::new(),
            version: 0,
            kind: EvKind::Lagged { dropped: p.dropped },
            sent_ns: None,
            text: String::new(),
        },
        Notification::LeaseReleased(p) => Ev {
            seq: Some(p.seq),
            task_id: String::new(),
            version: 0,
            kind: EvKind::LeaseReleased,
            sent_ns: None,
            text: String::new(),
        },
    }
}

impl Driver for BinaryDriver {
    fn register(&self, slot: usize, conn: usize, context: &str, name: &str, done: Done<String>) {
        let client = &self.clients[conn % self.clients.len()];
        let sink = self.sink.clone();
        let agents = self.agents.clone();
        match client.register_async(context, agent_card(name), Delivery::Push) {
            Ok(p) => p.on_complete(move |r| match r {
                Ok(agent) => {
                    let id = agent.id().to_owned();
                    // The table is filled before the handler is installed:
                    // the handler may act for this slot at once.
                    {
                        let mut t = agents.write();
                        if t.len() <= slot {
                            t.resize(slot + 1, None);
                        }
                        t[slot] = Some(agent.clone());
                    }
                    agent.set_event_handler(Some(Box::new(move |_, ev| sink(slot, normalise(ev)))));
                    done(Ok(id));
                }
                Err(e) => done(Err(e.to_string())),
            }),
            Err(e) => done(Err(e.to_string())),
        }
    }

    fn list_agents(&self, slot: usize, done: Done<Vec<String>>) {
        match self.agent(slot) {
            Ok(a) => finish(a.list_agents_async(None), done, |cards| {
                cards.into_iter().map(|c| c.name).collect()
            }),
            Err(e) => done(Err(e)),
        }
    }

    fn create(&self, slot: usize, to: &str, text: &str, sent_ns: u64, done: Done<Vec<String>>) {
        let a = match self.agent(slot) {
            Ok(a) => a,
            Err(e) => return done(Err(e)),
        };
        let m = stamped(message_to(to, text), sent_ns);
        if to == "*" {
            finish(a.broadcast_async(m, None), done, |tasks| {
                tasks.into_iter().map(|t| t.id).collect()
            });
        } else {
            finish(a.send_async(m, None), done, |t| vec![t.id]);
        }
    }

    fn reply(&self, slot: usize, task: &str, text: &str, sent_ns: u64, done: Done<()>) {
        match self.agent(slot) {
            Ok(a) => finish(
                a.send_async(stamped(task_message(task, text), sent_ns), None),
                done,
                |_| (),
            ),
            Err(e) => done(Err(e)),
        }
    }

    fn status(&self, slot: usize, task: &str, to: StatusTo<'_>, sent_ns: u64, done: Done<()>) {
        let StatusTo { state, text } = to;
        let Some(state) = State::parse(state) else {
            return done(Err(format!("unknown state {state}")));
        };
        match self.agent(slot) {
            Ok(a) => finish(
                a.set_status_async(
                    task,
                    state,
                    Some(stamped(task_message(task, text), sent_ns)),
                ),
                done,
                |_| (),
            ),
            Err(e) => done(Err(e)),
        }
    }

    fn artifact(&self, slot: usize, task: &str, sent_ns: u64, done: Done<()>) {
        let mut art = text_artifact("patch", "diff --git a/src/lib.rs b/src/lib.rs");
        art.metadata = stamp(sent_ns);
        match self.agent(slot) {
            Ok(a) => finish(a.add_artifact_async(task, art, false, true), done, |_| ()),
            Err(e) => done(Err(e)),
        }
    }

    fn acquire_lease(&self, slot: usize, ask: LeaseAsk<'_>, done: Done<LeaseAnswer>) {
        let paths: Vec<&str> = ask.paths.iter().map(String::as_str).collect();
        let submitted = match self.agent(slot) {
            Ok(a) => a.acquire_lease_async(&paths, ask.ttl_seconds, true, None, ask.wait_seconds),
            Err(e) => return done(Err(e)),
        };
        match submitted {
            Ok(p) => p.on_complete(move |r| {
                done(match r {
                    Ok(l) => Ok(LeaseAnswer::Granted { id: l.id }),
                    Err(e) if e.a2a_code() == Some(A2aErrorCode::LeaseConflict) => {
                        Ok(LeaseAnswer::Conflict {
                            holder: e
                                .rpc()
                                .and_then(|r| r.data.as_ref())
                                .and_then(|d| d.get("holder"))
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                        })
                    }
                    Err(e) => Err(e.to_string()),
                })
            }),
            Err(e) => done(Err(e.to_string())),
        }
    }

    fn release_lease(&self, slot: usize, lease_id: &str, done: Done<()>) {
        match self.agent(slot) {
            Ok(a) => finish(a.release_lease_async(lease_id), done, |()| ()),
            Err(e) => done(Err(e)),
        }
    }

    fn count_tasks(&self, slot: usize, state: &'static str, done: Done<u64>) {
        let Some(state) = State::parse(state) else {
            return done(Err(format!("unknown state {state}")));
        };
        let q = TaskQuery {
            state: Some(state),
            limit: Some(100),
            ..TaskQuery::default()
        };
        match self.agent(slot) {
            Ok(a) => finish(a.list_tasks_async(q), done, |r| r.tasks.len() as u64),
            Err(e) => done(Err(e)),
        }
    }

    fn close(&self) {
        let agents = std::mem::take(&mut *self.agents.write());
        for c in &self.clients {
            c.close();
        }
        drop(agents);
    }

    fn event_ring(&self) -> Option<bool> {
        self.ring_asked
            .then(|| self.clients.iter().all(Client::uses_event_ring))
    }
}
