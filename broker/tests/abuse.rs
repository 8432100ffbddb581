//! Abuse: what a hostile or broken client must not be able to do to the
//! broker (docs/protocol.md §4 Identity and addressing, issue "hostile input and trust boundaries").
//! In process (the library's memory connection) against the real writer and SQLite; the socket-level abuse
//! tests (flooding, never reading, killed clients) live with the client crate.

mod common;

use common::Conn;
use serde_json::{json, Value};
use std::collections::HashSet;

impl Conn {
    /// One call's response (notifications are dropped).
    fn ask(&mut self, method: &str, params: Value) -> Value {
        self.call(method, params).0
    }
}

fn broker(dir: &tempfile::TempDir) -> a2a_broker::MemoryBroker {
    common::broker(dir, "abuse.db", None)
}

/// Resident set size of this process, in bytes (Linux).
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn tokens_are_long_random_and_exact() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(&dir);
    let mut c = Conn::open(&b);
    let mut seen = HashSet::new();
    let mut bits_set = 0u32;
    let n = 500;
    for i in 0..n {
        let r = c.ask(
            "a2a.agents.register",
            json!({"contextId": "c", "card": {"name": format!("a{i}")}}),
        );
        let token = r["result"]["token"].as_str().unwrap().to_owned();
        assert_eq!(token.len(), 48, "64-bit key + 128-bit secret, hex");
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        // The secret half differs in about half its bits from one token to the next.
        bits_set += u128::from_str_radix(&token[16..], 16).unwrap().count_ones();
        assert!(seen.insert(token), "tokens never repeat");
    }
    let mean = bits_set as f64 / n as f64;
    assert!(
        (48.0..80.0).contains(&mean),
        "secret bits look random: mean {mean} of 128 set"
    );

    // A token off by one digit, truncated, or of another agent's key is refused.
    let token = seen.iter().next().unwrap().clone();
    let mut flipped = token.clone().into_bytes();
    flipped[40] = if flipped[40] == b'0' { b'1' } else { b'0' };
    for bad in [
        String::from_utf8(flipped).unwrap(),
        token[..47].to_owned(),
        format!("{token}0"),
        String::new(),
    ] {
        let r = c.ask("a2a.agents.list", json!({"token": bad}));
        assert_eq!(r["error"]["data"]["errorCode"], "A2A_UNKNOWN_TOKEN", "{r}");
    }
    let r = c.ask("a2a.agents.list", json!({"token": token}));
    assert!(r.get("result").is_some());
}

#[test]
fn ten_thousand_registrations_leave_no_memory_growth() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(&dir);
    let mut c = Conn::open(&b);
    let cycle = |c: &mut Conn, i: usize| {
        let r = c.ask(
            "a2a.agents.register",
            json!({"contextId": format!("ctx-{}", i % 10), "card": {"name": "churn", "skills": [{"id": "s", "name": "s", "description": "d", "tags": ["t"]}]},
                   "delivery": if i % 2 == 0 { "push" } else { "pull" }}),
        );
        let token = r["result"]["token"].as_str().unwrap().to_owned();
        let r = c.ask("a2a.agents.deregister", json!({"token": token}));
        assert_eq!(r["result"]["ok"], true);
    };
    // Ten contexts, so the audit rows in a2a_agents are updated rather than
    // added (the durable audit trail grows by design, memory must not).
    // Warm up allocator pools and SQLite's page cache first.
    for i in 0..2_000 {
        cycle(&mut c, i);
    }
    let before = rss();
    for i in 2_000..12_000 {
        cycle(&mut c, i);
    }
    let after = rss();
    assert_eq!(b.stats().agents, 0, "no agent is left behind");
    let growth = after.saturating_sub(before);
    eprintln!("10,000 register/deregister cycles: RSS {before} -> {after} bytes (+{growth})");
    // A leak of even 200 bytes per cycle would show as 2 MB.
    assert!(
        growth < 2 << 20,
        "memory grew by {growth} bytes over 10,000 cycles"
    );
}

#[test]
fn a_stranger_learns_nothing_of_a_task() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(&dir);
    let mut c = Conn::open(&b);
    let reg = |c: &mut Conn, ctx: &str, name: &str, kind: &str| {
        let r = c.ask(
            "a2a.agents.register",
            json!({"contextId": ctx, "card": {"name": name, "kind": kind}}),
        );
        r["result"]["token"].as_str().unwrap().to_owned()
    };
    let req = reg(&mut c, "c1", "req", "subagent");
    let _wrk = reg(&mut c, "c1", "wrk", "subagent");
    let stranger = reg(&mut c, "c2", "stranger", "subagent");
    let parent = reg(&mut c, "c3", "boss", "parent");
    let r = c.ask(
        "a2a.message.send",
        json!({"token": req, "message": {"parts": [{"kind": "text", "text": "secret plan"}], "messageId": "m", "to": "wrk"},
               "configuration": {"pushNotificationConfig": {"id": "p", "token": "push-secret"}}}),
    );
    let task = r["result"]["task"]["id"].as_str().unwrap().to_owned();
    for who in [&stranger, &parent] {
        for (method, params) in [
            ("a2a.tasks.get", json!({"token": who, "id": task})),
            (
                "a2a.tasks.resubscribe",
                json!({"token": who, "id": task, "afterVersion": 0}),
            ),
            ("a2a.tasks.cancel", json!({"token": who, "id": task})),
            (
                "a2a.tasks.status",
                json!({"token": who, "id": task, "state": "completed"}),
            ),
            (
                "a2a.tasks.pushNotificationConfig.get",
                json!({"token": who, "taskId": task}),
            ),
            (
                "a2a.tasks.pushNotificationConfig.set",
                json!({"token": who, "taskId": task, "config": {"id": "x"}}),
            ),
            (
                "a2a.tasks.artifact",
                json!({"token": who, "id": task, "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}}),
            ),
            (
                "a2a.message.send",
                json!({"token": who, "message": {"parts": [{"kind": "text", "text": "x"}], "messageId": "s", "taskId": task}}),
            ),
        ] {
            let r = c.ask(method, params);
            let text = r.to_string();
            assert_eq!(
                r["error"]["data"]["errorCode"], "A2A_CROSS_CONTEXT_DENIED",
                "{method}: {r}"
            );
            for leak in ["secret plan", "push-secret", "wrk", "\"req\""] {
                assert!(!text.contains(leak), "{method} leaked {leak}: {r}");
            }
        }
        let r = c.ask("a2a.tasks.list", json!({"token": who}));
        assert_eq!(r["result"]["tasks"], json!([]), "{r}");
    }
    // The parent does not even see the subagents.
    let r = c.ask("a2a.agents.list", json!({"token": parent}));
    assert_eq!(r["result"]["agents"], json!([]));
}
