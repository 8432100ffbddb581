//! The writer: no savepoint per call, and a task log that
//! refers to stored messages instead of copying them.
//!
//! - A call that fails after writing some of its rows (here: SQLite refuses
//!   its log entry) rolls its whole batch back: nothing of it is stored, no
//!   call of the batch is acknowledged, and the writer goes on.
//! - Resubscribe replay, the task it answers with, and the audit view
//!   (`a2a-broker tasks show`) read the compact log and status forms and
//!   the full forms of earlier brokers alike, byte for byte the same.

mod common;

use common::{request as line, Conn};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn db_conn(db: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(db).unwrap()
}

fn send(mid: &str, token: &str) -> Value {
    json!({"token": token, "message": {"parts": [{"kind": "text", "text": "go"}], "messageId": mid, "to": "wrk"}})
}

#[test]
fn a_call_failing_after_its_first_write_rolls_its_batch_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    // Create the schema, then a trap: the log entry of any change made by
    // `doomed` is refused, after that call's task and message rows were written.
    drop(common::broker(&dir, "w.db", None));
    db_conn(&db)
        .execute_batch(
            "CREATE TRIGGER halfway BEFORE INSERT ON a2a_task_log WHEN NEW.actor = 'doomed'
             BEGIN SELECT RAISE(ABORT, 'refused halfway'); END;",
        )
        .unwrap();
    let b = common::broker(&dir, "w.db", Some(256));
    let mut c = Conn::open(&b);
    let req = c.register("c", "req");
    let doomed = c.register("c", "doomed");
    c.register("c", "wrk");

    let mut together = false;
    let mut answers: HashMap<u64, Value> = HashMap::new();
    let mut fine = Vec::new();
    let mut lost = Vec::new();
    for round in 0..20u64 {
        let base = 1000 + round * 10;
        let calls = vec![
            line(base, "a2a.message.send", send(&format!("a{round}"), &req)),
            line(
                base + 1,
                "a2a.message.send",
                send(&format!("x{round}"), &doomed),
            ),
            line(
                base + 2,
                "a2a.message.send",
                send(&format!("b{round}"), &req),
            ),
        ];
        c.send(&Value::Array(calls));
        while !(base..base + 3).all(|i| answers.contains_key(&i)) {
            let v = c.next();
            for r in v.as_array().cloned().unwrap_or_else(|| vec![v]) {
                if let Some(id) = r["id"].as_u64() {
                    answers.insert(id, r);
                }
            }
        }
        let doomed_answer = &answers[&(base + 1)];
        assert_eq!(doomed_answer["error"]["code"], -32603, "{doomed_answer}");
        for (i, mid) in [(base, format!("a{round}")), (base + 2, format!("b{round}"))] {
            let a = &answers[&i];
            if a.get("result").is_some() {
                fine.push((mid, a["result"]["task"]["id"].as_str().unwrap().to_owned()));
            } else {
                assert_eq!(a["error"]["code"], -32603, "{a}");
                together = true;
                lost.push(mid);
            }
        }
    }
    assert!(
        together,
        "the doomed call never shared a batch with another in 20 rounds"
    );
    // The writer goes on: a later call commits.
    let (after, _) = c.call("a2a.message.send", send("after", &req));
    assert!(after.get("result").is_some(), "{after}");
    drop(b);

    let conn = db_conn(&db);
    let count = |sql: &str, p: &str| -> i64 { conn.query_row(sql, [p], |r| r.get(0)).unwrap() };
    assert_eq!(
        count(
            "SELECT count(*) FROM a2a_tasks WHERE requester_peer = ?1",
            "doomed"
        ),
        0,
        "a half-written call left its task row"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM a2a_messages WHERE from_peer = ?1",
            "doomed"
        ),
        0,
        "a half-written call left its message row"
    );
    for mid in &lost {
        assert_eq!(
            count(
                "SELECT count(*) FROM a2a_tasks WHERE create_message_id = ?1",
                mid
            ),
            0,
            "{mid} was answered with an error but stored"
        );
    }
    for (mid, id) in &fine {
        assert_eq!(
            count("SELECT count(*) FROM a2a_tasks WHERE id = ?1", id),
            1,
            "{mid} was acknowledged but not stored"
        );
        assert_eq!(
            count("SELECT count(*) FROM a2a_task_log WHERE task_id = ?1", id),
            1
        );
    }
}

/// Every line a connection receives until `id`'s response, raw.
fn lines_until(c: &a2a_broker::MemoryConnection, id: u64) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let l = c.recv_line(Duration::from_secs(20)).expect("a line");
        let v: Value = serde_json::from_str(&l).unwrap();
        let done = v["id"] == id;
        out.push(l);
        if done {
            return out;
        }
    }
}

/// Replays task `id` from version 0 on a fresh connection as `name` of
/// `ctx`: every line written, raw.
fn replay(db_dir: &tempfile::TempDir, ctx: &str, name: &str, id: &str) -> Vec<String> {
    let b = common::broker(db_dir, "r.db", None);
    let c = b.connect().unwrap();
    let send = |id: u64, method: &str, params: Value| {
        c.send_line(&line(id, method, params).to_string()).unwrap();
    };
    send(1, "app.handshake", json!({"protocolVersion": 10}));
    lines_until(&c, 1);
    send(
        2,
        "a2a.agents.register",
        json!({"contextId": ctx, "card": {"name": name}}),
    );
    let reg: Value = serde_json::from_str(&lines_until(&c, 2)[0]).unwrap();
    let token = reg["result"]["token"].as_str().unwrap().to_owned();
    send(
        3,
        "a2a.tasks.resubscribe",
        json!({"token": token, "id": id, "afterVersion": 0}),
    );
    // Events may follow the response: a later call's response comes
    // after every one of them.
    let mut out = lines_until(&c, 3);
    send(4, "a2a.agents.list", json!({"token": token}));
    out.extend(lines_until(&c, 4));
    out.pop();
    drop(c);
    drop(b);
    out
}

fn show(db: &Path, id: &str) -> String {
    let out = Command::new(a2a_testkit::broker_bin())
        .args(["tasks", "show", id, "--db"])
        .arg(db)
        .output()
        .expect("run tasks show");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn replay_and_audit_read_both_log_forms_alike() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let task = {
        let b = common::broker(&dir, "r.db", None);
        let mut c = Conn::open(&b);
        let req = c.register("c1", "req");
        let wrk = c.register("c1", "wrk");
        let (r, _) = c.call("a2a.message.send", send("m0", &req));
        let id = r["result"]["task"]["id"].as_str().unwrap().to_owned();
        let msg = |mid: &str, text: &str| json!({"messageId": mid, "parts": [{"kind": "text", "text": text}]});
        for (state, m) in [
            ("working", Some(msg("w1", "on it"))),
            ("working", None),
            ("input-required", Some(msg("w2", "which file?"))),
        ] {
            let mut p = json!({"token": wrk, "id": id, "state": state});
            if let Some(m) = m {
                p["message"] = m;
            }
            let (r, _) = c.call("a2a.tasks.status", p);
            assert!(r.get("result").is_some(), "{r}");
        }
        // The requester's answer resumes the task; then one more message.
        for (mid, text) in [("r1", "src/x.rs"), ("r2", "and quickly")] {
            let mut m = msg(mid, text);
            m["taskId"] = json!(id);
            let (r, _) = c.call("a2a.message.send", json!({"token": req, "message": m}));
            assert!(r.get("result").is_some(), "{r}");
        }
        let (r, _) = c.call(
            "a2a.tasks.artifact",
            json!({"token": wrk, "id": id, "artifact": {"artifactId": "a1", "parts": [{"kind": "text", "text": "diff"}]}}),
        );
        assert!(r.get("result").is_some(), "{r}");
        let (r, _) = c.call(
            "a2a.tasks.status",
            json!({"token": wrk, "id": id, "state": "completed", "message": msg("w3", "done")}),
        );
        assert!(r.get("result").is_some(), "{r}");
        drop(b);
        id
    };
    let conn = db_conn(&db);
    let compact: i64 = conn
        .query_row(
            "SELECT count(*) FROM a2a_task_log WHERE payload LIKE '{\"state\"%' AND payload LIKE '%\"ref\"%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(compact >= 5, "status changes with messages refer to them");
    let replay_compact = replay(&dir, "c1", "req", &task);
    let show_compact = show(&db, &task);

    // The same log in the full form earlier brokers stored: each entry's
    // payload is the event JSON (taken from the replay itself).
    let events: Vec<Value> = replay_compact
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["method"] == "a2a.task.event")
        .collect();
    let versions: i64 = conn
        .query_row(
            "SELECT count(*) FROM a2a_task_log WHERE task_id = ?1",
            [&task],
            |r| r.get(0),
        )
        .unwrap();
    // The logged versions, then the current status.
    assert_eq!(events.len() as i64, versions + 1);
    for e in &events[..versions as usize] {
        let p = &e["params"];
        // As the broker encoded events (struct field order, `kind` first).
        let event: a2a_proto::types::StreamEvent =
            serde_json::from_value(p["event"].clone()).unwrap();
        let n = conn
            .execute(
                "UPDATE a2a_task_log SET payload = ?3 WHERE task_id = ?1 AND version = ?2",
                rusqlite::params![
                    task,
                    p["taskVersion"].as_i64().unwrap(),
                    serde_json::to_string(&event).unwrap()
                ],
            )
            .unwrap();
        assert_eq!(n, 1, "{p}");
    }
    // And the task row's status column as earlier brokers stored it: the
    // full status (the current status event's).
    let current: a2a_proto::types::StreamEvent =
        serde_json::from_value(events[versions as usize]["params"]["event"].clone()).unwrap();
    let a2a_proto::types::StreamEvent::Status(current) = current else {
        panic!("the last event is the current status");
    };
    let row: String = conn
        .query_row("SELECT status FROM a2a_tasks WHERE id = ?1", [&task], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(
        row.contains("\"ref\":"),
        "the row refers to its message: {row}"
    );
    conn.execute(
        "UPDATE a2a_tasks SET status = ?2 WHERE id = ?1",
        rusqlite::params![task, serde_json::to_string(&current.status).unwrap()],
    )
    .unwrap();
    let full: i64 = conn
        .query_row(
            "SELECT count(*) FROM a2a_task_log WHERE payload LIKE '{\"kind\"%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(full, versions);
    drop(conn);
    assert_eq!(replay(&dir, "c1", "req", &task), replay_compact);
    assert_eq!(show(&db, &task), show_compact);
}
