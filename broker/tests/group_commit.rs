//! Group commit keeps every call linearizable per task: racing terminal
//! transitions on one task never both win, also when they share a batch,
//! and a refused call inside a batch rolls back alone.

use a2a_broker::delivery::{Outbox, Outgoing};
use a2a_broker::server::{self, ServeConfig};
use a2a_broker::store::Durability;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn racing_terminal_transitions_never_both_win() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServeConfig::new(dir.path().join("g.db"));
    cfg.durability = Durability::Normal;
    cfg.batch_max = 256;
    let b = server::start(&cfg).unwrap();
    let outbox = Arc::new(Outbox::new(1 << 16));
    let mut s = b.session(outbox.clone());
    let mut answers: HashMap<u64, Value> = HashMap::new();
    let wait_for = |ids: &[u64], answers: &mut HashMap<u64, Value>| {
        let mut items = Vec::new();
        while !ids.iter().all(|i| answers.contains_key(i)) {
            assert!(outbox.drain_timeout(&mut items, Duration::from_secs(20)));
            for item in items.drain(..) {
                if matches!(item, Outgoing::Event(_)) {
                    continue;
                }
                let mut bytes = Vec::new();
                a2a_broker::transport::ndjson::write_outgoing(&mut bytes, &item).unwrap();
                let v: Value = serde_json::from_slice(&bytes).unwrap();
                for r in v.as_array().cloned().unwrap_or_else(|| vec![v]) {
                    answers.insert(r["id"].as_u64().unwrap(), r);
                }
            }
        }
    };
    let line = |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    b.handle_line(
        &mut s,
        line(1, "app.handshake", json!({"protocolVersion": 10}))
            .to_string()
            .as_bytes(),
    );
    b.handle_line(
        &mut s,
        line(
            2,
            "a2a.agents.register",
            json!({"contextId": "c", "card": {"name": "req"}}),
        )
        .to_string()
        .as_bytes(),
    );
    b.handle_line(
        &mut s,
        line(
            3,
            "a2a.agents.register",
            json!({"contextId": "c", "card": {"name": "wrk"}}),
        )
        .to_string()
        .as_bytes(),
    );
    wait_for(&[1, 2, 3], &mut answers);
    let req = answers[&2]["result"]["token"].as_str().unwrap().to_owned();
    let wrk = answers[&3]["result"]["token"].as_str().unwrap().to_owned();

    let n = 100u64;
    let creates: Vec<Value> = (0..n)
        .map(|i| line(100 + i, "a2a.message.send", json!({"token": req, "message": {"parts": [{"kind": "text", "text": "go"}], "messageId": format!("m{i}"), "to": "wrk"}})))
        .collect();
    b.handle_line(&mut s, Value::Array(creates).to_string().as_bytes());
    let ids: Vec<u64> = (100..100 + n).collect();
    wait_for(&ids, &mut answers);
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
    let before = b.shared.stats.commits.load(Ordering::Relaxed);
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
        b.handle_line(&mut s, Value::Array(chunk.to_vec()).to_string().as_bytes());
    }
    let racing_ids: Vec<u64> = (0..n)
        .flat_map(|k| (0..3).map(move |j| 1000 + 10 * k + j))
        .collect();
    wait_for(&racing_ids, &mut answers);
    let commits = b.shared.stats.commits.load(Ordering::Relaxed) - before;
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
    b.engine.shutdown();
}
