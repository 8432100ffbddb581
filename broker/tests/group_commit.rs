//! Group commit keeps every call linearizable per task: racing terminal
//! transitions on one task never both win, also when they share a batch,
//! and a refused call inside a batch rolls back alone.

mod common;

use common::{request as line, Conn};
use serde_json::{json, Value};
use std::collections::HashMap;

/// Reads lines until every id in `ids` is answered (notifications skipped,
/// batch replies split into their responses).
fn wait_for(c: &Conn, ids: &[u64], answers: &mut HashMap<u64, Value>) {
    while !ids.iter().all(|i| answers.contains_key(i)) {
        let v = c.next();
        if v.get("method").is_some() {
            continue;
        }
        for r in v.as_array().cloned().unwrap_or_else(|| vec![v]) {
            answers.insert(r["id"].as_u64().unwrap(), r);
        }
    }
}

#[test]
fn racing_terminal_transitions_never_both_win() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::broker(&dir, "g.db", Some(256));
    let mut c = Conn::open(&b);
    let mut answers: HashMap<u64, Value> = HashMap::new();
    let register = |c: &mut Conn, name: &str| {
        let r = c
            .call(
                "a2a.agents.register",
                json!({"contextId": "c", "card": {"name": name}}),
            )
            .0;
        r["result"]["token"].as_str().unwrap().to_owned()
    };
    let req = register(&mut c, "req");
    let wrk = register(&mut c, "wrk");

    let n = 100u64;
    let creates: Vec<Value> = (0..n)
        .map(|i| line(100 + i, "a2a.message.send", json!({"token": req, "message": {"parts": [{"kind": "text", "text": "go"}], "messageId": format!("m{i}"), "to": "wrk"}})))
        .collect();
    c.send(&Value::Array(creates));
    let ids: Vec<u64> = (100..100 + n).collect();
    wait_for(&c, &ids, &mut answers);
    let tasks: Vec<String> = ids
        .iter()
        .map(|i| {
            answers[i]["result"]["task"]["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();

    // Per task, in one batch line (of two): the worker completes it, the requester
    // cancels it, and the worker fails it. Exactly one may win.
    let before = b.stats().commits;
    let mut racing = Vec::new();
    for (k, t) in tasks.iter().enumerate() {
        let base = 1000 + 10 * k as u64;
        racing.push(line(
            base,
            "a2a.tasks.status",
            json!({"token": wrk, "id": t, "state": "completed"}),
        ));
        racing.push(line(
            base + 1,
            "a2a.tasks.cancel",
            json!({"token": req, "id": t}),
        ));
        racing.push(line(
            base + 2,
            "a2a.tasks.status",
            json!({"token": wrk, "id": t, "state": "failed"}),
        ));
    }
    // Batch lines hold at most A2A_MAX_BATCH (256) entries: two lines of
    // 50 tasks' triples each, sent back to back.
    for chunk in racing.chunks(150) {
        c.send(&Value::Array(chunk.to_vec()));
    }
    let racing_ids: Vec<u64> = (0..n)
        .flat_map(|k| (0..3).map(move |j| 1000 + 10 * k + j))
        .collect();
    wait_for(&c, &racing_ids, &mut answers);
    let commits = b.stats().commits - before;
    for k in 0..n {
        let rs: Vec<&Value> = (0..3).map(|j| &answers[&(1000 + 10 * k + j)]).collect();
        let winners = rs.iter().filter(|r| r.get("result").is_some()).count();
        assert_eq!(winners, 1, "exactly one terminal transition wins: {rs:?}");
        for r in rs.iter().filter(|r| r.get("error").is_some()) {
            assert_eq!(r["error"]["data"]["errorCode"], "A2A_TASK_TERMINAL", "{r}");
        }
    }
    eprintln!("{} racing calls committed in {commits} transactions", 3 * n);
    assert!(commits >= 1);
}
