//! Transcripts of the tool, as a model sees it: `tool/transcripts/*.ndjson`,
//! run with the project's transcript machinery (`a2a_testkit::transcript`:
//! placeholders for task ids, `UPDATE_EXPECT=1` rewrites) against the real
//! `a2a-broker` binary on a socket.
//!
//! A `>` line is either a registration,
//! `{"register": NAME, "context": C, "description"?: D, "kind"?: K, "turnCap"?: N}`,
//! answered `{"registered": PEER_ID}`, or a tool call by a registered agent,
//! `{"as": NAME, "args": {...}}`, answered with its result:
//! `{"isError", "structured", "text": [the text's lines]}`. All agents share
//! one client connection, so the events a call causes are queued for their
//! recipient before the call returns, and a `wait` after it sees them all.

mod support;

use a2a_client::proto::types::AgentKind;
use a2a_client::Client;
use a2a_testkit::transcript::{self, Lines, Recv};
use a2a_testkit::{BrokerProcess, TestDb};
use a2a_tool::{Registration, Session, SessionOptions};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::time::Duration;

struct ToolLines {
    client: Client,
    sessions: HashMap<String, Session>,
    replies: VecDeque<String>,
    closed: bool,
    _broker: BrokerProcess,
    _db: TestDb,
}

impl ToolLines {
    fn start() -> ToolLines {
        let support::Running {
            client,
            broker,
            _db: db,
        } = support::broker();
        ToolLines {
            client,
            sessions: HashMap::new(),
            replies: VecDeque::new(),
            closed: false,
            _broker: broker,
            _db: db,
        }
    }

    fn handle(&mut self, line: &str) -> Value {
        let v: Value = serde_json::from_str(line).expect("a transcript line is JSON");
        if let Some(name) = v["register"].as_str() {
            let reg = Registration {
                context_id: v["context"].as_str().expect("context").to_owned(),
                name: name.to_owned(),
                description: v["description"].as_str().unwrap_or("").to_owned(),
                kind: match v["kind"].as_str() {
                    Some("parent") => Some(AgentKind::Parent),
                    _ => None,
                },
            };
            let mut options = SessionOptions::default();
            if let Some(cap) = v["turnCap"].as_u64() {
                options.turn_cap = cap as u32;
            }
            let s = Session::register(&self.client, &reg, options).expect("register");
            let id = s.agent().id().to_owned();
            self.sessions.insert(name.to_owned(), s);
            return json!({ "registered": id });
        }
        let who = v["as"].as_str().expect("`as` or `register`");
        let session = self.sessions.get(who).expect("a registered agent");
        let r = session.call(&v["args"]);
        json!({
            "isError": r.is_error,
            "structured": r.structured,
            "text": r.text.lines().collect::<Vec<_>>(),
        })
    }
}

impl Lines for ToolLines {
    fn send_line(&mut self, line: &str) -> std::io::Result<()> {
        let reply = self.handle(line);
        self.replies.push_back(reply.to_string());
        Ok(())
    }

    fn recv_line(&mut self, _timeout: Duration) -> Recv {
        match self.replies.pop_front() {
            Some(l) => Recv::Line(l),
            None if self.closed => Recv::Closed,
            None => Recv::Timeout,
        }
    }

    fn close(&mut self) {
        self.closed = true;
    }
}

fn check(name: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("transcripts")
        .join(format!("{name}.ndjson"));
    let mut lines = ToolLines::start();
    if let Err(e) = transcript::check(&path, &mut lines) {
        panic!("{e}");
    }
}

/// One whole delegation: discover, send, wait, input-required, answer,
/// artifact, complete, and the requester reading the result.
#[test]
fn delegation() {
    check("delegation");
}

/// What a model gets wrong, each answered as a tool error with the fix.
#[test]
fn misuses() {
    check("misuses");
}

/// Two agents that keep asking each other questions are stopped by the
/// per-task turn cap, and can still settle the task.
#[test]
fn turn_cap() {
    check("turn_cap");
}

/// Leases: granted, refused with the holder named (also after a wait),
/// released, then granted to the other agent; the mistakes told.
#[test]
fn leases() {
    check("leases");
}
