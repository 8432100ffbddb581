//! Property tests of the state machine and routing, driving the real
//! broker (writer thread, SQLite) in process over the library's memory connection: random sequences of calls
//! from random parties — requesters, workers, strangers, a parent, agents
//! that leave and come back — never produce an illegal transition, a change
//! after a terminal state, an event to a non-party, a stored `from` that is
//! not the sender, a broken `seq` sequence, or an exceeded bound.

mod common;

use a2a_proto::limits::{A2A_MAX_SENDS_PER_RUN, A2A_MAX_TASKS_PER_CONTEXT, A2A_MAX_TASK_HISTORY};
use a2a_proto::types::State;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::HashMap;

/// The agents of every case: (context, name, kind). Index 5 is a parent.
const AGENTS: [(&str, &str, &str); 6] = [
    ("c0", "alpha", "subagent"),
    ("c0", "beta", "subagent"),
    ("c1", "gamma", "subagent"),
    ("c1", "delta", "subagent"),
    ("c2", "eps", "subagent"),
    ("c2", "boss", "parent"),
];

#[derive(Debug, Clone)]
enum Op {
    Send {
        from: usize,
        to: Option<usize>,
        broadcast: bool,
    },
    Append {
        from: usize,
        task: usize,
    },
    Status {
        from: usize,
        task: usize,
        state: State,
        with_msg: bool,
    },
    Cancel {
        from: usize,
        task: usize,
    },
    Artifact {
        from: usize,
        task: usize,
    },
    Resubscribe {
        from: usize,
        task: usize,
    },
    Get {
        from: usize,
        task: usize,
    },
    Deregister {
        who: usize,
    },
    Reregister {
        who: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let a = 0..AGENTS.len();
    let t = 0..64usize;
    prop_oneof![
        4 => (a.clone(), proptest::option::of(0..AGENTS.len()), any::<bool>())
            .prop_map(|(from, to, b)| Op::Send { from, to, broadcast: b && to.is_none() }),
        2 => (a.clone(), t.clone()).prop_map(|(from, task)| Op::Append { from, task }),
        5 => (a.clone(), t.clone(), proptest::sample::select(State::ALL.to_vec()), any::<bool>())
            .prop_map(|(from, task, state, with_msg)| Op::Status { from, task, state, with_msg }),
        1 => (a.clone(), t.clone()).prop_map(|(from, task)| Op::Cancel { from, task }),
        1 => (a.clone(), t.clone()).prop_map(|(from, task)| Op::Artifact { from, task }),
        1 => (a.clone(), t.clone()).prop_map(|(from, task)| Op::Resubscribe { from, task }),
        1 => (a.clone(), t).prop_map(|(from, task)| Op::Get { from, task }),
        1 => a.clone().prop_map(|who| Op::Deregister { who }),
        1 => a.prop_map(|who| Op::Reregister { who }),
    ]
}

/// What the model knows of a task.
#[derive(Debug, Clone)]
struct TaskModel {
    requester: (String, String),
    worker: (String, String),
    state: State,
    version: u64,
}

struct Harness {
    conn: common::Conn,
    _broker: a2a_broker::MemoryBroker,
    /// Live agents: index -> (peer id, token, registration number).
    live: HashMap<usize, (String, String, u64)>,
    registrations: u64,
    tasks: Vec<String>,
    model: HashMap<String, TaskModel>,
    /// Last seq seen per registration.
    seqs: HashMap<u64, u64>,
    /// Successful sends per registration.
    sends: HashMap<u64, u32>,
    _dir: tempfile::TempDir,
}

fn state_of(v: &Value) -> State {
    State::parse(v.as_str().unwrap()).unwrap()
}

impl Harness {
    fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let broker = common::broker(&dir, "p.db", None);
        let mut h = Harness {
            conn: common::Conn::open(&broker),
            _broker: broker,
            live: HashMap::new(),
            registrations: 0,
            tasks: Vec::new(),
            model: HashMap::new(),
            seqs: HashMap::new(),
            sends: HashMap::new(),
            _dir: dir,
        };
        for i in 0..AGENTS.len() {
            h.register(i);
        }
        h
    }

    /// One call; returns its response and checks every notification it caused.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let (response, events) = self.conn.call(method, params);
        if let Some(r) = response.get("result") {
            for t in r
                .get("tasks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .chain(r.get("task"))
            {
                self.observe_task(t);
            }
        }
        for e in events {
            self.check_event(&e);
        }
        response
    }

    fn register(&mut self, i: usize) {
        let (ctx, name, kind) = AGENTS[i];
        let r = self.call(
            "a2a.agents.register",
            json!({"contextId": ctx, "card": {"name": name, "kind": kind}}),
        );
        let r = &r["result"];
        self.registrations += 1;
        self.live.insert(
            i,
            (
                r["agentId"].as_str().unwrap().into(),
                r["token"].as_str().unwrap().into(),
                self.registrations,
            ),
        );
    }

    fn party(&self, i: usize) -> Option<(String, String)> {
        self.live
            .get(&i)
            .map(|(peer, _, _)| (AGENTS[i].0.to_owned(), peer.clone()))
    }

    fn token(&self, i: usize) -> String {
        self.live
            .get(&i)
            .map(|l| l.1.clone())
            .unwrap_or_else(|| "0".repeat(48))
    }

    fn task(&self, n: usize) -> Option<String> {
        (!self.tasks.is_empty()).then(|| self.tasks[n % self.tasks.len()].clone())
    }

    /// A task as returned: checks stamping, bounds and the state machine
    /// against the model, then updates the model.
    fn observe_task(&mut self, t: &Value) {
        let id = t["id"].as_str().unwrap().to_owned();
        let state = state_of(&t["status"]["state"]);
        let version = t["version"].as_u64().unwrap();
        let history = t["history"].as_array().unwrap();
        assert!(history.len() <= A2A_MAX_TASK_HISTORY);
        for m in history {
            let expect = if m["role"] == "user" {
                &t["requesterName"]
            } else {
                &t["agentName"]
            };
            assert_eq!(&m["from"], expect, "stored from is the sender: {m}");
            assert_eq!(m["taskId"], t["id"]);
            assert_eq!(m["contextId"], t["contextId"]);
        }
        match self.model.get_mut(&id) {
            Some(m) => {
                assert!(version >= m.version, "version went back");
                if m.state.is_terminal() {
                    assert_eq!(
                        (state, version),
                        (m.state, m.version),
                        "a terminal task changed"
                    );
                } else if state != m.state {
                    assert!(
                        m.state.can_move(state),
                        "illegal {:?} -> {:?}",
                        m.state,
                        state
                    );
                }
                m.state = state;
                m.version = version;
            }
            None => {
                assert_eq!(version, 1, "a new task starts at version 1");
                assert_eq!(state, State::Submitted);
                let worker_peer = t["agentName"].as_str().unwrap().to_owned();
                let worker_ctx = AGENTS
                    .iter()
                    .enumerate()
                    .find(|(i, _)| self.live.get(i).is_some_and(|l| l.0 == worker_peer))
                    .map(|(_, a)| a.0.to_owned())
                    .unwrap();
                self.model.insert(
                    id.clone(),
                    TaskModel {
                        requester: (
                            t["contextId"].as_str().unwrap().into(),
                            t["requesterName"].as_str().unwrap().into(),
                        ),
                        worker: (worker_ctx, worker_peer),
                        state,
                        version,
                    },
                );
                self.tasks.push(id);
            }
        }
    }

    fn check_event(&mut self, e: &Value) {
        let p = &e["params"];
        let recipient = (
            p["recipientContextId"].as_str().unwrap().to_owned(),
            p["recipient"].as_str().unwrap().to_owned(),
        );
        let task_id = p["event"]["taskId"]
            .as_str()
            .or(p["taskId"].as_str())
            .unwrap_or_default();
        if e["method"] != "a2a.lagged" {
            let m = self
                .model
                .get(task_id)
                .unwrap_or_else(|| panic!("event for an unknown task: {e}"));
            assert!(
                recipient == m.requester || recipient == m.worker,
                "event to a non-party: {e}"
            );
            let reg = self
                .live
                .iter()
                .find(|(i, l)| l.0 == recipient.1 && AGENTS[**i].0 == recipient.0)
                .map(|(_, l)| l.2)
                .expect("events go to live agents only");
            let seq = p["seq"].as_u64().unwrap();
            let last = self.seqs.insert(reg, seq).unwrap_or(0);
            assert_eq!(seq, last + 1, "seq increases by one per recipient: {e}");
            // A status event newer than the model moves it, by the rules.
            if let (Some(v), Some(st)) = (
                p["taskVersion"].as_u64(),
                p["event"]["status"]["state"].as_str(),
            ) {
                let m = self.model.get_mut(task_id).unwrap();
                let st = State::parse(st).unwrap();
                if v > m.version {
                    assert!(!m.state.is_terminal(), "event after a terminal state: {e}");
                    assert!(st == m.state || m.state.can_move(st), "illegal move in {e}");
                    m.state = st;
                    m.version = v;
                }
            }
        }
    }

    fn is_party(&self, who: usize, task: &str) -> bool {
        let m = &self.model[task];
        self.party(who)
            .is_some_and(|p| p == m.requester || p == m.worker)
    }

    fn expect_denied_unless_party(&self, who: usize, task: &str, r: &Value) {
        if !self.is_party(who, task) {
            let code = r["error"]["data"]["errorCode"].as_str();
            let expected = if self.live.contains_key(&who) {
                "A2A_CROSS_CONTEXT_DENIED"
            } else {
                "A2A_UNKNOWN_TOKEN"
            };
            assert_eq!(code, Some(expected), "a non-party was not refused: {r}");
            assert!(
                r.get("result").is_none(),
                "a stranger learned something: {r}"
            );
        }
    }

    fn msg(&self, text: &str) -> Value {
        json!({"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": format!("m{}", self.conn.next_id())})
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Send {
                from,
                to,
                broadcast,
            } => {
                let mut msg = self.msg("hello");
                if broadcast {
                    msg["to"] = json!("*");
                } else if let Some(t) = to {
                    msg["to"] = json!(self
                        .live
                        .get(&t)
                        .map(|l| l.0.clone())
                        .unwrap_or_else(|| "ghost".into()));
                }
                let r = self.call(
                    "a2a.message.send",
                    json!({"token": self.token(from), "message": msg}),
                );
                if let Some(res) = r.get("result") {
                    let n = res
                        .get("tasks")
                        .and_then(Value::as_array)
                        .map_or(1, Vec::len);
                    let reg = self.live[&from].2;
                    *self.sends.entry(reg).or_default() += n as u32;
                    assert!(self.sends[&reg] <= A2A_MAX_SENDS_PER_RUN);
                    for t in res
                        .get("tasks")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .chain(res.get("task"))
                    {
                        let w = t["agentName"].as_str().unwrap();
                        let caller = &self.live[&from];
                        assert_ne!(w, caller.0, "nobody addresses itself");
                        let wi = self
                            .live
                            .iter()
                            .find(|(_, l)| l.0 == w)
                            .map(|(i, _)| *i)
                            .unwrap();
                        assert_eq!(AGENTS[wi].2, AGENTS[from].2, "kinds never mix");
                    }
                }
            }
            Op::Append { from, task } => {
                let Some(id) = self.task(task) else { return };
                let mut msg = self.msg("more");
                msg["taskId"] = json!(id);
                let r = self.call(
                    "a2a.message.send",
                    json!({"token": self.token(from), "message": msg}),
                );
                self.expect_denied_unless_party(from, &id, &r);
                if r.get("result").is_some() {
                    *self.sends.entry(self.live[&from].2).or_default() += 1;
                }
            }
            Op::Status {
                from,
                task,
                state,
                with_msg,
            } => {
                let Some(id) = self.task(task) else { return };
                let before = self.model[&id].clone();
                let mut p = json!({"token": self.token(from), "id": id, "state": state.as_str()});
                if with_msg {
                    p["message"] = self.msg("status");
                }
                let r = self.call("a2a.tasks.status", p);
                self.expect_denied_unless_party(from, &id, &r);
                if r.get("result").is_some() {
                    assert_eq!(
                        self.party(from).as_ref(),
                        Some(&before.worker),
                        "only the worker sets status"
                    );
                    assert!(before.state.can_move(state));
                } else if self.party(from).as_ref() == Some(&before.worker) {
                    let code = r["error"]["data"]["errorCode"].as_str().unwrap_or("");
                    if before.state.is_terminal() {
                        assert_eq!(code, "A2A_TASK_TERMINAL", "{r}");
                    } else if !before.state.can_move(state) {
                        assert_eq!(code, "A2A_INVALID_TRANSITION", "{r}");
                    }
                }
            }
            Op::Cancel { from, task } => {
                let Some(id) = self.task(task) else { return };
                let r = self.call(
                    "a2a.tasks.cancel",
                    json!({"token": self.token(from), "id": id}),
                );
                self.expect_denied_unless_party(from, &id, &r);
            }
            Op::Artifact { from, task } => {
                let Some(id) = self.task(task) else { return };
                let r = self.call(
                    "a2a.tasks.artifact",
                    json!({"token": self.token(from), "id": id,
                           "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}, "append": true}),
                );
                self.expect_denied_unless_party(from, &id, &r);
            }
            Op::Resubscribe { from, task } => {
                let Some(id) = self.task(task) else { return };
                let r = self.call(
                    "a2a.tasks.resubscribe",
                    json!({"token": self.token(from), "id": id}),
                );
                self.expect_denied_unless_party(from, &id, &r);
            }
            Op::Get { from, task } => {
                let Some(id) = self.task(task) else { return };
                let r = self.call(
                    "a2a.tasks.get",
                    json!({"token": self.token(from), "id": id, "historyLength": 3}),
                );
                self.expect_denied_unless_party(from, &id, &r);
            }
            Op::Deregister { who } => {
                if self.live.contains_key(&who) {
                    let r = self.call("a2a.agents.deregister", json!({"token": self.token(who)}));
                    assert_eq!(r["result"]["ok"], true);
                    let me = self.party(who).unwrap();
                    self.live.remove(&who);
                    // The contract: what it served fails, what it asked for is canceled.
                    for m in self.model.values_mut() {
                        if m.state.is_terminal() {
                            continue;
                        }
                        if m.worker == me {
                            m.state = State::Failed;
                            m.version += 1;
                        } else if m.requester == me {
                            m.state = State::Canceled;
                            m.version += 1;
                        }
                    }
                }
            }
            Op::Reregister { who } => {
                if !self.live.contains_key(&who) {
                    self.register(who);
                }
            }
        }
        self.check_bounds();
    }

    fn check_bounds(&self) {
        let mut open: HashMap<&str, usize> = HashMap::new();
        for m in self.model.values() {
            if !m.state.is_terminal() {
                *open.entry(m.requester.0.as_str()).or_default() += 1;
            }
        }
        for n in open.values() {
            assert!(*n <= A2A_MAX_TASKS_PER_CONTEXT);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_calls_keep_every_rule(ops in proptest::collection::vec(op(), 1..80)) {
        let mut h = Harness::new();
        for op in &ops {
            h.apply(op);
        }
        if std::env::var_os("A2A_PROP_VERBOSE").is_some() {
            let terminal = h.model.values().filter(|m| m.state.is_terminal()).count();
            eprintln!("{} ops: {} tasks, {} terminal, {} events checked", ops.len(), h.model.len(), terminal, h.seqs.values().sum::<u64>());
        }
    }
}
