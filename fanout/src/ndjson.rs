//! A minimal NDJSON JSON-RPC [`Driver`], for the transports the Rust
//! client does not speak: the broker's stdio and the local socket in NDJSON
//! mode. Per connection, a writer thread (requests queue to it, so a reader
//! thread answering an event never blocks on the socket) and a reader
//! thread that completes calls by `id` and hands notifications to the sink,
//! routed by `recipient`. The wire is the client's core's
//! (`a2a_client::wire`): it encodes each request, cuts the lines, reads
//! each line's envelope and keeps the calls waiting by id.

use crate::driver::{Done, Driver, Ev, EvKind, LeaseAnswer, LeaseAsk, Sink, StatusTo, SENT_KEY};
use a2a_client::wire::{Calls, Codec, Line, Ndjson};
use a2a_client::CloseReason;
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::Duration;

/// A completion of one request: the `result`, or the `error` as text.
type Reply = Box<dyn FnOnce(Result<Value, String>) + Send>;

/// One NDJSON connection.
struct NdConn {
    out: Mutex<Sender<Vec<u8>>>,
    calls: Arc<Mutex<Calls<Reply>>>,
}

impl NdConn {
    fn open(
        w: impl Write + Send + 'static,
        r: impl Read + Send + 'static,
        routes: Arc<RwLock<HashMap<String, usize>>>,
        sink: Sink,
    ) -> NdConn {
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        std::thread::Builder::new()
            .name("fanout-ndjson-w".into())
            .spawn(move || {
                let mut w = std::io::BufWriter::with_capacity(1 << 16, w);
                while let Ok(line) = rx.recv() {
                    if w.write_all(&line).is_err() {
                        return;
                    }
                    // Coalesce what queued meanwhile into one write.
                    while let Ok(more) = rx.try_recv() {
                        if w.write_all(&more).is_err() {
                            return;
                        }
                    }
                    if w.flush().is_err() {
                        return;
                    }
                }
            })
            .expect("spawn the NDJSON writer thread");
        let calls: Arc<Mutex<Calls<Reply>>> = Arc::default();
        let pending = calls.clone();
        std::thread::Builder::new()
            .name("fanout-ndjson-r".into())
            .spawn(move || {
                let end = a2a_testkit::lines::for_each_line(r, |line| {
                    // A line the core cannot read is skipped: the
                    // generator counts what it can match.
                    match Ndjson::decode(line) {
                        Ok(Line::Answer {
                            id: Some(id),
                            result,
                            ..
                        }) => {
                            let reply = pending.lock().take(id);
                            if let Some(reply) = reply {
                                reply(match result {
                                    Ok(v) => serde_json::from_slice(v).map_err(|e| e.to_string()),
                                    Err(e) => Err(String::from_utf8_lossy(e).into_owned()),
                                });
                            }
                        }
                        Ok(Line::Event { method, params }) => {
                            let Ok(params) = serde_json::from_slice::<Value>(params) else {
                                return true;
                            };
                            let to = params["recipient"].as_str().unwrap_or_default();
                            let slot = routes.read().get(to).copied();
                            if let Some(slot) = slot {
                                sink(
                                    slot,
                                    normalise(&json!({"method": method, "params": params})),
                                );
                            }
                        }
                        _ => {}
                    }
                    true
                });
                let reason = match end {
                    Ok(()) => CloseReason::ByBroker,
                    Err(e) => CloseReason::BadFrame(e.to_string()),
                };
                // The connection ended: every call still waiting fails.
                let left = pending.lock().close(reason);
                for (_, r) in left {
                    r(Err("connection closed".into()));
                }
            })
            .expect("spawn the NDJSON reader thread");
        NdConn {
            out: Mutex::new(tx),
            calls,
        }
    }

    fn call(&self, method: &str, params: Value, reply: Reply) {
        let params = match serde_json::to_vec(&params) {
            Ok(p) => p,
            Err(e) => return reply(Err(e.to_string())),
        };
        let mut line = Vec::new();
        let id = {
            let mut calls = self.calls.lock();
            let id = calls.next_id();
            if let Err(e) = Ndjson::encode_raw(Some(id), method, Some(&params), &mut line) {
                drop(calls);
                return reply(Err(e.to_string()));
            }
            if let Err((_, reply)) = calls.insert(id, reply) {
                drop(calls);
                return reply(Err("connection closed".into()));
            }
            id
        };
        if self.out.lock().send(line).is_err() {
            if let Some(r) = self.calls.lock().take(id) {
                r(Err("connection closed".into()));
            }
        }
    }

    fn call_blocking(&self, method: &str, params: Value) -> Result<Value, String> {
        let (tx, rx) = mpsc::channel();
        self.call(
            method,
            params,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv_timeout(Duration::from_secs(20))
            .map_err(|_| format!("no answer to {method} within 20 s"))?
    }
}

/// Per agent slot: its connection's index and its token.
type Tokens = Arc<RwLock<Vec<Option<(usize, String)>>>>;

/// The NDJSON driver: connections, and each agent's token and connection.
pub struct NdjsonDriver {
    conns: Vec<Arc<NdConn>>,
    /// Per slot: (connection index, token).
    agents: Tokens,
    /// Peer id → slot, for routing notifications.
    routes: Arc<RwLock<HashMap<String, usize>>>,
    /// Socket connections, to shut down on close (stdio ends with the
    /// broker).
    sockets: Vec<std::os::unix::net::UnixStream>,
}

impl NdjsonDriver {
    /// A driver over byte streams already open (stdio: one pair), each
    /// shaken hands with `secret` (none on stdio).
    pub fn over<W, R>(
        streams: Vec<(W, R)>,
        secret: Option<&str>,
        sink: Sink,
    ) -> Result<NdjsonDriver, String>
    where
        W: Write + Send + 'static,
        R: Read + Send + 'static,
    {
        let routes: Arc<RwLock<HashMap<String, usize>>> = Arc::default();
        let mut conns = Vec::new();
        for (w, r) in streams {
            let c = NdConn::open(w, r, routes.clone(), sink.clone());
            let mut hello = json!({"protocolVersion": 10, "client": "a2a-fanout"});
            if let Some(s) = secret {
                hello["secret"] = json!(s);
            }
            c.call_blocking("app.handshake", hello)?;
            conns.push(Arc::new(c));
        }
        Ok(NdjsonDriver {
            conns,
            agents: Arc::default(),
            routes,
            sockets: Vec::new(),
        })
    }

    /// `connections` NDJSON connections to the socket at `path`.
    pub fn socket(
        path: &std::path::Path,
        secret: &str,
        connections: usize,
        sink: Sink,
    ) -> Result<NdjsonDriver, String> {
        let mut streams = Vec::new();
        let mut sockets = Vec::new();
        for _ in 0..connections.max(1) {
            let s = std::os::unix::net::UnixStream::connect(path)
                .map_err(|e| format!("connect {}: {e}", path.display()))?;
            let r = s.try_clone().map_err(|e| e.to_string())?;
            sockets.push(s.try_clone().map_err(|e| e.to_string())?);
            streams.push((s, r));
        }
        let mut d = NdjsonDriver::over(streams, Some(secret), sink)?;
        d.sockets = sockets;
        Ok(d)
    }

    /// Submits `method` for agent `slot`, its token added to `params`.
    fn call(&self, slot: usize, method: &str, mut params: Value, reply: Reply) {
        let Some((conn, token)) = self.agents.read().get(slot).cloned().flatten() else {
            return reply(Err(format!("agent slot {slot} is not registered")));
        };
        params["token"] = json!(token);
        self.conns[conn].call(method, params, reply);
    }
}

fn message(to: Option<&str>, task: Option<&str>, text: &str, sent_ns: u64) -> Value {
    let mut m = json!({
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        "messageId": a2a_client::new_id(),
        "metadata": {SENT_KEY: sent_ns},
    });
    if let Some(to) = to {
        m["to"] = json!(to);
    }
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    m
}

fn ok<T: 'static>(done: Done<T>, f: impl FnOnce(Value) -> T + Send + 'static) -> Reply {
    Box::new(move |r| done(r.map(f)))
}

/// An NDJSON notification, normalised.
pub fn normalise(v: &Value) -> Ev {
    let p = &v["params"];
    let seq = p["seq"].as_u64();
    let version = p["taskVersion"].as_u64().unwrap_or(0);
    match v["method"].as_str() {
        Some("a2a.task.event") => {
            let e = &p["event"];
            let task_id = e["taskId"].as_str().unwrap_or_default().to_owned();
            if e["kind"] == "artifact-update" {
                Ev {
                    seq,
                    task_id,
                    version,
                    kind: EvKind::Artifact,
                    sent_ns: e["artifact"]["metadata"][SENT_KEY].as_u64(),
                    text: String::new(),
                }
            } else {
                let msg = &e["status"]["message"];
                Ev {
                    seq,
                    task_id,
                    version,
                    kind: EvKind::Status {
                        state: e["status"]["state"].as_str().unwrap_or_default().to_owned(),
                        is_final: e["final"].as_bool().unwrap_or(false),
                    },
                    sent_ns: msg["metadata"][SENT_KEY].as_u64(),
                    text: msg["parts"][0]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                }
            }
        }
        Some("a2a.lease.released") => Ev {
            seq,
            task_id: String::new(),
            version: 0,
            kind: EvKind::LeaseReleased,
            sent_ns: None,
            text: String::new(),
        },
        Some("a2a.lagged") => Ev {
            seq: None,
            task_id: String::new(),
            version: 0,
            kind: EvKind::Lagged {
                dropped: p["dropped"].as_u64().unwrap_or(0),
            },
            sent_ns: None,
            text: String::new(),
        },
        _ => Ev {
            seq,
            task_id: p["taskId"].as_str().unwrap_or_default().to_owned(),
            version: 0,
            kind: EvKind::Push,
            sent_ns: None,
            text: String::new(),
        },
    }
}

impl Driver for NdjsonDriver {
    fn register(&self, slot: usize, conn: usize, context: &str, name: &str, done: Done<String>) {
        let conn = conn % self.conns.len();
        let agents = self.agents.clone();
        let routes = self.routes.clone();
        self.conns[conn].call(
            "a2a.agents.register",
            json!({"contextId": context, "card": {"name": name}}),
            Box::new(move |r| match r {
                Ok(v) => {
                    let id = v["agentId"].as_str().unwrap_or_default().to_owned();
                    let token = v["token"].as_str().unwrap_or_default().to_owned();
                    {
                        let mut t = agents.write();
                        if t.len() <= slot {
                            t.resize(slot + 1, None);
                        }
                        t[slot] = Some((conn, token));
                    }
                    // Routed before this reader reads the next line, which
                    // is the earliest an event for the agent can come.
                    routes.write().insert(id.clone(), slot);
                    done(Ok(id));
                }
                Err(e) => done(Err(e)),
            }),
        );
    }

    fn list_agents(&self, slot: usize, done: Done<Vec<String>>) {
        self.call(
            slot,
            "a2a.agents.list",
            json!({}),
            ok(done, |v| {
                v["agents"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|c| c["name"].as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default()
            }),
        );
    }

    fn create(&self, slot: usize, to: &str, text: &str, sent_ns: u64, done: Done<Vec<String>>) {
        self.call(
            slot,
            "a2a.message.send",
            json!({"message": message(Some(to), None, text, sent_ns)}),
            ok(done, |v| match v.get("tasks").and_then(Value::as_array) {
                Some(tasks) => tasks
                    .iter()
                    .filter_map(|t| t["id"].as_str().map(str::to_owned))
                    .collect(),
                None => v["task"]["id"]
                    .as_str()
                    .map(str::to_owned)
                    .into_iter()
                    .collect(),
            }),
        );
    }

    fn reply(&self, slot: usize, task: &str, text: &str, sent_ns: u64, done: Done<()>) {
        self.call(
            slot,
            "a2a.message.send",
            json!({"message": message(None, Some(task), text, sent_ns)}),
            ok(done, |_| ()),
        );
    }

    fn status(&self, slot: usize, task: &str, to: StatusTo<'_>, sent_ns: u64, done: Done<()>) {
        let StatusTo { state, text } = to;
        self.call(
            slot,
            "a2a.tasks.status",
            json!({"id": task, "state": state, "message": message(None, Some(task), text, sent_ns)}),
            ok(done, |_| ()),
        );
    }

    fn artifact(&self, slot: usize, task: &str, sent_ns: u64, done: Done<()>) {
        self.call(
            slot,
            "a2a.tasks.artifact",
            json!({"id": task, "artifact": {
                "artifactId": "patch",
                "parts": [{"kind": "text", "text": "diff --git a/src/lib.rs b/src/lib.rs"}],
                "metadata": {SENT_KEY: sent_ns},
            }}),
            ok(done, |_| ()),
        );
    }

    fn count_tasks(&self, slot: usize, state: &'static str, done: Done<u64>) {
        self.call(
            slot,
            "a2a.tasks.list",
            json!({"state": state, "limit": 100}),
            ok(done, |v| {
                v["tasks"].as_array().map_or(0, |a| a.len() as u64)
            }),
        );
    }

    fn acquire_lease(&self, slot: usize, ask: LeaseAsk<'_>, done: Done<LeaseAnswer>) {
        let mut params = json!({"paths": ask.paths, "ttlSeconds": ask.ttl_seconds});
        if let Some(w) = ask.wait_seconds {
            params["waitSeconds"] = json!(w);
        }
        self.call(
            slot,
            "a2a.leases.acquire",
            params,
            Box::new(move |r| {
                done(match r {
                    Ok(v) => Ok(LeaseAnswer::Granted {
                        id: v["lease"]["id"].as_str().unwrap_or_default().to_owned(),
                    }),
                    // The error object, as JSON text (see `call`).
                    Err(e) => match serde_json::from_str::<Value>(&e) {
                        Ok(v) if v["data"]["errorCode"] == "A2A_LEASE_CONFLICT" => {
                            Ok(LeaseAnswer::Conflict {
                                holder: v["data"]["holder"].as_str().unwrap_or_default().to_owned(),
                            })
                        }
                        _ => Err(e),
                    },
                })
            }),
        );
    }

    fn release_lease(&self, slot: usize, lease_id: &str, done: Done<()>) {
        self.call(
            slot,
            "a2a.leases.release",
            json!({"leaseId": lease_id}),
            ok(done, |_| ()),
        );
    }

    fn close(&self) {
        self.agents.write().clear();
        self.routes.write().clear();
        for c in &self.conns {
            // Dropping the sender ends the writer thread, which drops (and
            // so closes) the write half; the broker then closes its side.
            let (dead, _) = mpsc::channel();
            *c.out.lock() = dead;
        }
        for s in &self.sockets {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}
