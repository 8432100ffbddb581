//! One NDJSON connection to a broker in this process (the library's
//! [`MemoryBroker`]: the real dispatch, writer thread and SQLite, no child
//! process), shared by the broker tests (`abuse`, `group_commit`, `properties`).

#![allow(dead_code)] // each test binary uses its own part of it

use a2a_broker::server::ServeConfig;
use a2a_broker::{Durability, MemoryBroker, MemoryConnection};
use serde_json::{json, Value};
use std::time::Duration;

/// Longest wait for one line: a lost answer fails the test, never hangs it.
const LINE_TIMEOUT: Duration = Duration::from_secs(20);

/// A broker on `<dir>/<file>`, `synchronous=NORMAL` (tests need no power-loss
/// durability), at most `batch_max` calls per commit.
pub fn broker(dir: &tempfile::TempDir, file: &str, batch_max: Option<usize>) -> MemoryBroker {
    let mut cfg = ServeConfig::new(dir.path().join(file));
    cfg.durability = Durability::Normal;
    if let Some(n) = batch_max {
        cfg.batch_max = n;
    }
    MemoryBroker::start(&cfg).expect("start an in-memory broker")
}

/// A request line's JSON.
pub fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// One connection, handshaken.
pub struct Conn {
    conn: MemoryConnection,
    id: u64,
}

impl Conn {
    pub fn open(broker: &MemoryBroker) -> Conn {
        let mut c = Conn {
            conn: broker.connect().expect("connect"),
            id: 0,
        };
        let r = c.call("app.handshake", json!({"protocolVersion": 10})).0;
        assert!(r.get("result").is_some(), "handshake refused: {r}");
        c
    }

    /// The id the next [`Conn::call`] will use.
    pub fn next_id(&self) -> u64 {
        self.id + 1
    }

    /// Sends one line of JSON (a request or a batch).
    pub fn send(&self, line: &Value) {
        self.conn.send_line(&line.to_string()).expect("send a line");
    }

    /// The next line the broker wrote.
    pub fn next(&self) -> Value {
        let line = self
            .conn
            .recv_line(LINE_TIMEOUT)
            .expect("a line from the broker");
        serde_json::from_str(&line).expect("a JSON line")
    }

    /// One call: its response and the notifications written before it.
    /// Any other response in between fails the test.
    pub fn call(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.id += 1;
        let id = self.id;
        self.send(&request(id, method, params));
        let mut events = Vec::new();
        loop {
            let v = self.next();
            if v.get("method").is_some() {
                events.push(v);
            } else if v["id"] == id {
                return (v, events);
            } else {
                panic!("unexpected line while waiting for {method}: {v}");
            }
        }
    }
    /// Registers `name` in context `ctx`: its bearer token.
    pub fn register(&mut self, ctx: &str, name: &str) -> String {
        let r = self
            .call(
                "a2a.agents.register",
                json!({"contextId": ctx, "card": {"name": name}}),
            )
            .0;
        r["result"]["token"].as_str().unwrap().to_owned()
    }
}
