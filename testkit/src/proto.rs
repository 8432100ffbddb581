//! Protocol helpers: the handshake (with the socket's secret), agents,
//! tasks and messages as the tests use them, built on [`Conn`]'s calls.
//! They fail the test on an unexpected error; to look at an error, use
//! [`Conn::call`] / [`Conn::err`] directly.

use crate::Conn;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// The protocol version the kit speaks.
pub const PROTOCOL_VERSION: u64 = 10;

/// The `code` of every A2A error.
pub const A2A_ERROR: i64 = 1400;

static UNIQUE: AtomicU64 = AtomicU64::new(1);

/// A fresh string, unique within this process (message ids, names).
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        UNIQUE.fetch_add(1, Ordering::Relaxed)
    )
}

/// One agent registered by a test.
#[derive(Clone, Debug)]
pub struct Agent {
    /// The peer id (`agentId`).
    pub id: String,
    /// The capability token.
    pub token: String,
    /// The context it registered under.
    pub ctx: String,
}

/// A user message with one text part and a fresh messageId.
pub fn text_msg(text: &str) -> Value {
    json!({"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": unique("m")})
}

/// [`text_msg`] addressed to `to`.
pub fn text_msg_to(text: &str, to: &str) -> Value {
    let mut m = text_msg(text);
    m["to"] = json!(to);
    m
}

/// [`text_msg`] on an existing task.
pub fn text_msg_on(text: &str, task_id: &str) -> Value {
    let mut m = text_msg(text);
    m["taskId"] = json!(task_id);
    m
}

/// A message with the given parts and a fresh messageId.
pub fn parts_msg(parts: Value, to: &str) -> Value {
    json!({"role": "user", "parts": parts, "messageId": unique("m"), "to": to})
}

/// The `id` of a task object (as `a2a.message.send` or `a2a.tasks.get`
/// returns it under `task`).
pub fn tid(task: &Value) -> String {
    task["id"].as_str().expect("task id").to_string()
}

/// `params.seq` of a notification.
pub fn seq(n: &Value) -> u64 {
    n["params"]["seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("notification without seq: {n}"))
}

/// Registers a requester (`req` in `ctx-req`) and a worker (`wrk` in
/// `ctx-wrk`), both push subagents.
pub fn pair(c: &mut Conn) -> (Agent, Agent) {
    let req = c.agent("ctx-req", "req");
    let wrk = c.agent("ctx-wrk", "wrk");
    (req, wrk)
}

/// The ids of the tasks `who` sees through `a2a.tasks.list` (first page).
pub fn listed_task_ids(c: &mut Conn, who: &Agent) -> Vec<String> {
    let r = c.ok("a2a.tasks.list", json!({"token": who.token, "limit": 1000}));
    r["tasks"]
        .as_array()
        .expect("tasks array")
        .iter()
        .map(|t| t["id"].as_str().expect("id").to_string())
        .collect()
}

impl Conn {
    /// `app.handshake` params with this connection's secret added (socket
    /// connections only; stdio takes none).
    pub fn with_secret(&self, mut params: Value) -> Value {
        if let Some(s) = self.secret() {
            params["secret"] = json!(s);
        }
        params
    }

    /// `app.handshake` with protocol 10 (and the secret on the socket);
    /// returns the result.
    pub fn handshake(&mut self) -> Value {
        let params =
            self.with_secret(json!({"protocolVersion": PROTOCOL_VERSION, "client": "a2a-testkit"}));
        self.ok("app.handshake", params)
    }

    /// Registers an agent; returns `(agentId, token)`.
    pub fn register(
        &mut self,
        ctx: &str,
        name: &str,
        kind: &str,
        delivery: &str,
    ) -> (String, String) {
        let r = self.ok(
            "a2a.agents.register",
            json!({"contextId": ctx, "card": {"name": name, "kind": kind}, "delivery": delivery}),
        );
        let id = r["agentId"].as_str().expect("agentId").to_string();
        let token = r["token"].as_str().expect("token").to_string();
        (id, token)
    }

    /// Registers a push `subagent`; returns it as an [`Agent`].
    pub fn agent(&mut self, ctx: &str, name: &str) -> Agent {
        self.agent_with(ctx, name, "subagent", "push")
    }

    /// Registers an agent of a kind and delivery.
    pub fn agent_with(&mut self, ctx: &str, name: &str, kind: &str, delivery: &str) -> Agent {
        let (id, token) = self.register(ctx, name, kind, delivery);
        Agent {
            id,
            token,
            ctx: ctx.to_string(),
        }
    }

    /// Creates a task from `from` to `to` with one text part; returns the task.
    pub fn create_task(&mut self, from: &Agent, to: &Agent, text: &str) -> Value {
        let r = self.ok(
            "a2a.message.send",
            json!({"token": from.token, "message": text_msg_to(text, &to.id)}),
        );
        r["task"].clone()
    }

    /// Worker moves a task to `state`; returns the task.
    pub fn set_state(&mut self, worker: &Agent, task_id: &str, state: &str) -> Value {
        self.ok(
            "a2a.tasks.status",
            json!({"token": worker.token, "id": task_id, "state": state}),
        )["task"]
            .clone()
    }

    /// `a2a.tasks.get` by a party; returns the task.
    pub fn get_task(&mut self, who: &Agent, task_id: &str) -> Value {
        self.ok("a2a.tasks.get", json!({"token": who.token, "id": task_id}))["task"].clone()
    }

    /// Makes sure no notification for `recipient` is pending beyond the probe:
    /// runs `probe` (which must route exactly one event to `recipient`) and
    /// checks that the next notification `recipient` gets has `seq` exactly
    /// `last_seq + 1` and is the probe's. Returns it.
    pub fn barrier(
        &mut self,
        recipient: &str,
        last_seq: u64,
        probe: impl FnOnce(&mut Conn),
    ) -> Value {
        probe(self);
        let n = self.expect_event(recipient);
        assert_eq!(
            n["params"]["seq"].as_u64(),
            Some(last_seq + 1),
            "an unexpected notification reached {recipient} (expected seq {}): {n}",
            last_seq + 1
        );
        n
    }
}
