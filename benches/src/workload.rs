//! The requests the benchmarks send, and the rotation of requesters that
//! keeps a long run of task creations inside the A2A bounds.
//!
//! An agent may make at most `A2A_MAX_SENDS_PER_RUN` (200) sends per
//! registration and a context may hold at most `A2A_MAX_TASKS_PER_CONTEXT`
//! (128) open tasks, so a run of creations uses a fresh requester, in a
//! fresh context, every [`CREATIONS_PER_REQUESTER`] creations. Those
//! registrations are made before the clock starts.

use serde_json::{json, Value};
use std::time::Duration;

/// How a response line starts (a notification starts with `"method"`).
pub const RESPONSE_PREFIX: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":";

/// Creations made by one requester before the next one takes over.
pub const CREATIONS_PER_REQUESTER: u64 = 100;

/// The text of the benchmark's task-creating messages: with the fields the
/// broker stamps, the stored message is about 250 bytes, its status about
/// 300 and its log entry about 400.
pub const TASK_TEXT: &str =
    "Please review the change to src/store/write.rs and report any problem you find.";

/// Is this response line a success (`"result"` right after its numeric id)?
pub fn is_ok_response(line: &[u8]) -> bool {
    let Some(rest) = line.strip_prefix(RESPONSE_PREFIX) else {
        return false;
    };
    match rest.iter().position(|&b| b == b',') {
        Some(i) => rest[i + 1..].starts_with(b"\"result\""),
        None => false,
    }
}

/// One request line with its `\n`.
pub fn request_line(id: u64, method: &str, params: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    )
    .expect("encode request");
    line.push(b'\n');
    line
}

/// Something that answers NDJSON requests: the broker over stdio, or in
/// this process.
pub trait Client {
    /// A fresh request id.
    fn next_id(&mut self) -> u64;
    /// One request, answered before returning: its `result` (panics on an error).
    fn call(&mut self, method: &str, params: Value) -> Value;
    /// Pipelines `lines` and returns every response (in arrival order).
    fn collect(&mut self, lines: &[Vec<u8>], depth: usize) -> Vec<Value>;
    /// Pipelines `lines`, checks every response is a success, and returns
    /// the time from the first write to the last response.
    fn timed(&mut self, lines: &[Vec<u8>], depth: usize) -> Duration;
}

/// `app.handshake`.
pub fn handshake(c: &mut impl Client) {
    c.call("app.handshake", json!({"protocolVersion": 10}));
}

/// Registers `name` in `context`: its token.
pub fn register(c: &mut impl Client, context: &str, name: &str) -> String {
    let r = c.call(
        "a2a.agents.register",
        json!({"contextId": context, "card": {"name": name}}),
    );
    r["token"].as_str().expect("token").to_owned()
}

/// Makes the lines of task creations, a fresh requester every
/// [`CREATIONS_PER_REQUESTER`] creations.
pub struct Creator {
    /// The worker every task goes to (its peer id).
    pub worker: String,
    /// The worker's token (to read the tasks as their worker).
    pub worker_token: String,
    /// Distinguishes contexts and names between runs on one broker.
    next_requester: u64,
    next_message: u64,
}

impl Creator {
    /// Registers the worker (`wrk`, in its own context) and returns the creator.
    pub fn new(c: &mut impl Client) -> Creator {
        let worker_token = register(c, "bench-workers", "wrk");
        Creator {
            worker: "wrk".into(),
            worker_token,
            next_requester: 0,
            next_message: 0,
        }
    }

    /// Registers the requesters `n` creations need (pipelined, untimed)
    /// and returns the `n` creation lines.
    pub fn prepare(&mut self, c: &mut impl Client, n: u64) -> Vec<Vec<u8>> {
        let requesters = n.div_ceil(CREATIONS_PER_REQUESTER);
        let mut reg_lines = Vec::with_capacity(requesters as usize);
        for _ in 0..requesters {
            self.next_requester += 1;
            let k = self.next_requester;
            let params =
                json!({"contextId": format!("bench-ctx-{k}"), "card": {"name": format!("req{k}")}});
            reg_lines.push(request_line(c.next_id(), "a2a.agents.register", &params));
        }
        let mut tokens = Vec::with_capacity(requesters as usize);
        let mut answers = c.collect(&reg_lines, 64);
        answers.sort_by_key(|v| v["id"].as_u64());
        for a in answers {
            match a["result"]["token"].as_str() {
                Some(t) => tokens.push(t.to_owned()),
                None => panic!("registration failed: {a}"),
            }
        }
        (0..n)
            .map(|i| {
                self.next_message += 1;
                let token = &tokens[(i / CREATIONS_PER_REQUESTER) as usize];
                let params = json!({"token": token, "message": {
                    "role": "user",
                    "parts": [{"kind": "text", "text": TASK_TEXT}],
                    "messageId": format!("m{}", self.next_message),
                    "to": self.worker,
                }});
                request_line(c.next_id(), "a2a.message.send", &params)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_is_read_from_the_envelope() {
        assert!(is_ok_response(
            b"{\"jsonrpc\":\"2.0\",\"id\":12,\"result\":{}}\n"
        ));
        assert!(!is_ok_response(
            b"{\"jsonrpc\":\"2.0\",\"id\":12,\"error\":{}}\n"
        ));
        assert!(!is_ok_response(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"a2a.task.event\"}\n"
        ));
    }
}
