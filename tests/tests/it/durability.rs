//! Durability: a broker killed mid-load loses no acknowledged write and
//! leaves a sound database; SIGTERM finishes in-flight commits; state
//! survives restarts.

use std::collections::HashMap;

use a2a_testkit::*;

on_both_transports!(
    sigkill_mid_load_loses_no_acknowledged_creation,
    task_state_survives_a_restart,
);

/// Registers a worker and `n` requesters (each in its own context) and writes
/// `per` creations for each requester in one go. Returns the request ids.
fn pipeline_creations(b: &mut Broker, n: usize, per: usize) -> (Vec<u64>, Vec<Agent>) {
    let w = b.agent("ctx-w", "w");
    let reqs: Vec<Agent> = (0..n)
        .map(|i| b.agent(&format!("ctx-{i}"), &format!("r{i}")))
        .collect();
    let mut buf = String::new();
    let mut ids = Vec::new();
    let mut next = 1u64;
    for k in 0..per {
        for r in &reqs {
            let id = next;
            next += 1;
            let line = json!({"jsonrpc": "2.0", "id": id, "method": "a2a.message.send",
                              "params": {"token": r.token, "message": text_msg_to(&format!("load {k}"), &w.id)}});
            buf.push_str(&line.to_string());
            buf.push('\n');
            ids.push(id);
        }
    }
    b.write_bytes(buf.into_bytes());
    (ids, reqs)
}

/// The task ids of every successful creation response received.
fn acknowledged(responses: &HashMap<String, Value>) -> Vec<String> {
    responses
        .values()
        .filter_map(|r| r.get("result").map(|res| tid(&res["task"])))
        .collect()
}

fn check_db(path: &std::path::Path, acked: &[String]) {
    let c = open_db(path);
    let ic: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(ic, "ok");
    for id in acked {
        let n: i64 = c
            .query_row("SELECT count(*) FROM a2a_tasks WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .expect("query a2a_tasks");
        assert_eq!(n, 1, "acknowledged task {id} is missing after the crash");
        let m: i64 = c
            .query_row(
                "SELECT count(*) FROM a2a_messages WHERE task_id = ?1",
                [id],
                |r| r.get(0),
            )
            .expect("query a2a_messages");
        assert_eq!(m, 1, "acknowledged task {id} lost its first message");
    }
}

fn sigkill_mid_load_loses_no_acknowledged_creation(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (ids, reqs) = pipeline_creations(&mut b, 10, 120);
    // Wait for a first part of the acknowledgements, then kill without warning.
    for id in &ids[..50] {
        let r = b
            .try_response(&json!(id), TIMEOUT)
            .unwrap_or_else(|| panic!("no response to {id}"));
        b.responses_insert_back(r);
    }
    b.kill();
    // Whatever the broker had written before dying was acknowledged too.
    b.drain(TIMEOUT);
    let responses = b.take_responses();
    let acked = acknowledged(&responses);
    assert!(acked.len() >= 50, "only {} acknowledged", acked.len());
    // Diagnostic: how far the load got before the kill (shown on failure).
    eprintln!(
        "{} of {} creations acknowledged before SIGKILL",
        acked.len(),
        ids.len()
    );
    for r in responses.values() {
        assert!(r.get("result").is_some(), "a creation failed: {r}");
    }
    drop(b);
    check_db(&db.path, &acked);

    // The broker starts again on that database and the tasks are there.
    let mut b = Broker::open_on(t, &db.path);
    let r0 = b.agent(&reqs[0].ctx, &reqs[0].id);
    let listed = listed_task_ids(&mut b, &r0);
    let mine: Vec<_> = acked
        .iter()
        .filter(|id| {
            responses.values().any(|r| {
                r["result"]["task"]["id"] == id.as_str()
                    && r["result"]["task"]["requesterName"] == "r0"
            })
        })
        .collect();
    for id in mine {
        assert!(listed.contains(id), "task {id} not listed after restart");
    }
}

#[test]
fn sigterm_finishes_in_flight_commits_and_exits_zero() {
    let db = TestDb::new();
    let mut b = Broker::open(&db.path);
    let (ids, _) = pipeline_creations(&mut b, 3, 100);
    let first = b
        .try_response(&json!(ids[0]), TIMEOUT)
        .expect("first response");
    b.responses_insert_back(first);
    b.signal(libc::SIGTERM);
    let status = b.wait_exit(TIMEOUT);
    assert_eq!(
        status.code(),
        Some(0),
        "SIGTERM exit: {status:?}; stderr {:?}",
        b.stderr_now()
    );
    b.drain(TIMEOUT);
    let responses = b.take_responses();
    let acked = acknowledged(&responses);
    assert!(!acked.is_empty());
    drop(b);
    check_db(&db.path, &acked);
}

fn task_state_survives_a_restart(t: Transport) {
    let db = TestDb::new();
    let before = {
        let mut b = Broker::open_on(t, &db.path);
        let (req, wrk) = pair(&mut b);
        let id = tid(&b.create_task(&req, &wrk, "persist me"));
        b.ok(
            "a2a.message.send",
            json!({"token": wrk.token, "message": text_msg_on("reply", &id)}),
        );
        let art = json!({"artifactId": "a", "name": "n", "metadata": {"k": "v"}, "parts": [{"kind": "data", "data": {"x": [1, 2]}}]});
        b.ok(
            "a2a.tasks.artifact",
            json!({"token": wrk.token, "id": id, "artifact": art}),
        );
        b.ok(
            "a2a.tasks.pushNotificationConfig.set",
            json!({"token": req.token, "taskId": id, "config": {"id": "c", "token": "t"}}),
        );
        b.set_state(&wrk, &id, "input-required");
        let t = b.get_task(&req, &id);
        assert!(b.close_and_wait(TIMEOUT).success());
        t
    };
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = tid(&before);
    assert_eq!(b.get_task(&req, &id), before);
    assert_eq!(b.get_task(&wrk, &id), before);
    let cfg = b.ok(
        "a2a.tasks.pushNotificationConfig.get",
        json!({"token": req.token, "taskId": id}),
    );
    assert_eq!(cfg["config"], json!({"id": "c", "token": "t"}));
    // Versions continue; ids are never reused.
    let t = b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": text_msg_on("resume", &id)}),
    )["task"]
        .clone();
    assert_eq!(t["version"], before["version"].as_u64().unwrap() + 1);
    assert_eq!(t["status"]["state"], "working");
    let t2 = b.create_task(&req, &wrk, "another");
    assert_ne!(t2["id"], before["id"]);
    // The push fires after the restart too.
    b.set_state(&wrk, &id, "completed");
    let push = b
        .wait_notification(&req.id, TIMEOUT, |n| n["method"] == "a2a.push")
        .expect("push after restart");
    assert_eq!(push["params"]["token"], "t");
}
