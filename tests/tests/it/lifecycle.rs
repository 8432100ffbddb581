//! Process lifetime and connection lifetime: exit 0 on stdin EOF, SIGTERM and
//! SIGINT; a closed connection leaves tasks open and the same party finds
//! them after a restart; events for agents that are not live are dropped and
//! recovered by `resubscribe`; deregister settles the agent's tasks; one
//! socket connection closing leaves the others alone.

use a2a_testkit::*;

on_both_transports!(
    stdin_eof_exits_zero,
    closing_the_connection_leaves_tasks_open_for_the_same_party,
    same_name_in_another_context_gets_a_suffix_while_the_first_is_live,
    events_for_an_absent_agent_are_dropped_and_recovered_by_resubscribe,
    deregister_settles_served_and_requested_tasks_and_notifies_counterparts,
);

fn stdin_eof_exits_zero(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    b.create_task(&req, &wrk, "open task");
    // An outstanding long wait does not keep the broker alive (nor, on the
    // socket transport, the open socket connection: only stdin is closed).
    let p = b.agent_with("ctx-p", "p", "subagent", "pull");
    b.request(
        "a2a.events.wait",
        json!({"token": p.token, "timeoutSeconds": 100}),
    );
    let status = b.close_stdin_and_wait(TIMEOUT);
    assert_eq!(
        status.code(),
        Some(0),
        "{status:?}; stderr {:?}",
        b.stderr_now()
    );
}

#[test]
fn calls_sent_before_stdin_eof_are_still_committed() {
    let db = TestDb::new();
    let mut b = Broker::open(&db.path);
    let (req, wrk) = pair(&mut b);
    // Pipeline creations and close stdin at once, without reading a reply.
    for i in 0..50 {
        let line = json!({"jsonrpc": "2.0", "id": 10_000 + i, "method": "a2a.message.send",
            "params": {"token": req.token, "message": {"role": "user",
                "parts": [{"kind": "text", "text": "last words"}], "messageId": format!("eof-{i}"), "to": wrk.id}}});
        b.send_raw(&line.to_string());
    }
    let status = b.close_stdin_and_wait(TIMEOUT);
    assert_eq!(status.code(), Some(0), "{status:?}");
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM a2a_tasks WHERE create_message_id LIKE 'eof-%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        n, 50,
        "every call sent before EOF was executed and committed"
    );
}

#[test]
fn stdin_eof_before_handshake_exits_zero() {
    let db = TestDb::new();
    let mut b = Broker::start(&db.path, &[]);
    let status = b.close_stdin_and_wait(TIMEOUT);
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn sigterm_and_sigint_exit_zero() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let db = TestDb::new();
        let mut b = Broker::open(&db.path);
        let (req, wrk) = pair(&mut b);
        b.create_task(&req, &wrk, "x");
        b.signal(sig);
        let status = b.wait_exit(TIMEOUT);
        assert_eq!(
            status.code(),
            Some(0),
            "signal {sig}: {status:?}; stderr {:?}",
            b.stderr_now()
        );
    }
}

#[test]
fn durability_flag_is_accepted() {
    let db = TestDb::new();
    let id = {
        let mut b = Broker::start(&db.path, &["--durability", "normal"]);
        b.handshake();
        let (req, wrk) = pair(&mut b);
        let id = tid(&b.create_task(&req, &wrk, "x"));
        assert!(b.close_stdin_and_wait(TIMEOUT).success());
        id
    };
    let mut b = Broker::open(&db.path);
    let (req, _) = pair(&mut b);
    assert_eq!(listed_task_ids(&mut b, &req), [id]);
}

fn closing_the_connection_leaves_tasks_open_for_the_same_party(t: Transport) {
    let db = TestDb::new();
    let (id, old_token) = {
        let mut b = Broker::open_on(t, &db.path);
        let (req, wrk) = pair(&mut b);
        let id = tid(&b.create_task(&req, &wrk, "long job"));
        b.set_state(&wrk, &id, "working");
        assert!(b.close_and_wait(TIMEOUT).success());
        (id, req.token)
    };
    let mut b = Broker::open_on(t, &db.path);
    // Old tokens are gone with the connection.
    let resp = b.call("a2a.tasks.get", json!({"token": old_token, "id": id}));
    assert_a2a_error(&resp, "A2A_UNKNOWN_TOKEN");
    // Same name in another context: not the same party.
    let impostor = b.agent("ctx-other", "req");
    assert_eq!(impostor.id, "req");
    let resp = b.call("a2a.tasks.get", json!({"token": impostor.token, "id": id}));
    assert_a2a_error(&resp, "A2A_CROSS_CONTEXT_DENIED");
    b.ok("a2a.agents.deregister", json!({"token": impostor.token}));
    // Same contextId and peer id: the same party, the task still open.
    let (req, wrk) = pair(&mut b);
    assert_eq!((req.id.as_str(), wrk.id.as_str()), ("req", "wrk"));
    let t = b.get_task(&req, &id);
    assert_eq!(t["status"]["state"], "working");
    assert_eq!(listed_task_ids(&mut b, &req), vec![id.clone()]);
    assert_eq!(listed_task_ids(&mut b, &wrk), vec![id.clone()]);
    b.set_state(&wrk, &id, "completed");
    let n = b.expect_event(&req.id);
    assert_eq!(n["params"]["event"]["taskId"], id);
    assert_eq!(n["params"]["event"]["status"]["state"], "completed");
    assert_eq!(n["params"]["event"]["final"], true);
}

fn same_name_in_another_context_gets_a_suffix_while_the_first_is_live(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("ctx-1", "dup");
    let c = b.agent("ctx-2", "dup");
    assert_eq!((a.id.as_str(), c.id.as_str()), ("dup", "dup-2"));
}

fn events_for_an_absent_agent_are_dropped_and_recovered_by_resubscribe(t: Transport) {
    let db = TestDb::new();
    let id = {
        let mut b = Broker::open_on(t, &db.path);
        let (req, wrk) = pair(&mut b);
        let id = tid(&b.create_task(&req, &wrk, "job"));
        assert!(b.close_and_wait(TIMEOUT).success());
        id
    };
    let mut b = Broker::open_on(t, &db.path);
    let wrk = b.agent("ctx-wrk", "wrk");
    // The requester is not live: these events reach nobody.
    b.set_state(&wrk, &id, "working");
    b.ok(
        "a2a.message.send",
        json!({"token": wrk.token, "message": text_msg_on("progress", &id)}),
    );
    b.ok("a2a.tasks.artifact", json!({"token": wrk.token, "id": id, "artifact": {"artifactId": "r", "parts": [{"kind": "text", "text": "out"}]}}));
    let req = b.agent("ctx-req", "req");
    assert_eq!(req.id, "req");
    let t = b.get_task(&req, &id);
    assert_eq!(t["version"], 4);
    b.ok(
        "a2a.tasks.resubscribe",
        json!({"token": req.token, "id": id, "afterVersion": 1}),
    );
    let got: Vec<_> = (0..4).map(|_| b.expect_event(&req.id)).collect();
    let versions: Vec<_> = got[..3]
        .iter()
        .map(|n| n["params"]["taskVersion"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, [2, 3, 4], "{got:?}");
    assert_eq!(got[0]["params"]["event"]["status"]["state"], "working");
    assert_eq!(
        got[1]["params"]["event"]["status"]["message"]["parts"][0]["text"],
        "progress"
    );
    assert_eq!(got[2]["params"]["event"]["kind"], "artifact-update");
    assert_eq!(got[3]["params"]["event"]["kind"], "status-update");
    assert_eq!(got[3]["params"]["event"]["status"]["state"], "working");
    // Seqs are consecutive: nothing else (no stale backlog) reached the requester.
    let seqs: Vec<_> = got.iter().map(seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert!(b.notifications_for(&req.id).is_empty());
}

fn deregister_settles_served_and_requested_tasks_and_notifies_counterparts(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("ctx-a", "a");
    let w = b.agent("ctx-w", "w");
    let requested = tid(&b.create_task(&a, &w, "for w"));
    let served = tid(&b.create_task(&w, &a, "for a"));
    let interrupted = tid(&b.create_task(&w, &a, "for a too"));
    let done = tid(&b.create_task(&a, &w, "finished"));
    b.set_state(&a, &interrupted, "input-required");
    b.set_state(&w, &done, "completed");
    b.ok(
        "a2a.tasks.pushNotificationConfig.set",
        json!({"token": w.token, "taskId": requested, "config": {"id": "c", "token": "wt"}}),
    );
    // w had creation events for `requested` and `done`, and the interrupt.
    let w_seqs: Vec<_> = (0..3).map(|_| seq(&b.expect_event(&w.id))).collect();
    assert_eq!(w_seqs, [1, 2, 3]);

    b.ok("a2a.agents.deregister", json!({"token": a.token}));
    let t = b.get_task(&w, &requested);
    assert_eq!(t["status"]["state"], "canceled");
    assert!(
        t["status"]["message"].is_object(),
        "no broker-stamped status message: {t}"
    );
    assert_eq!(
        t["history"].as_array().unwrap().last().unwrap(),
        &t["status"]["message"]
    );
    let t = b.get_task(&w, &served);
    assert_eq!(t["status"]["state"], "failed");
    assert!(
        t["status"]["message"]["parts"]
            .as_array()
            .is_some_and(|p| !p.is_empty()),
        "{t}"
    );
    assert_eq!(
        t["history"].as_array().unwrap().last().unwrap(),
        &t["status"]["message"]
    );
    assert_eq!(b.get_task(&w, &interrupted)["status"]["state"], "failed");
    let t = b.get_task(&w, &done);
    assert_eq!(t["status"]["state"], "completed");
    assert_eq!(t["version"], 2);

    // w hears of each settled task (final), and gets its push.
    let mut settled = std::collections::HashMap::new();
    let mut pushes = 0;
    for _ in 0..4 {
        let n = b.expect_event(&w.id);
        if n["method"] == "a2a.push" {
            assert_eq!(n["params"]["token"], "wt");
            assert_eq!(n["params"]["taskId"], requested);
            pushes += 1;
            continue;
        }
        let e = &n["params"]["event"];
        assert_eq!(e["final"], true);
        assert!(e["status"]["message"].is_object(), "{n}");
        settled.insert(
            e["taskId"].as_str().unwrap().to_string(),
            e["status"]["state"].as_str().unwrap().to_string(),
        );
    }
    assert_eq!(pushes, 1);
    assert_eq!(
        settled.get(&requested).map(String::as_str),
        Some("canceled")
    );
    assert_eq!(settled.get(&served).map(String::as_str), Some("failed"));
    assert_eq!(
        settled.get(&interrupted).map(String::as_str),
        Some("failed")
    );
    // The departed agent is no longer addressable.
    let resp = b.call(
        "a2a.message.send",
        json!({"token": w.token, "message": text_msg_to("hello?", "a")}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_AGENT");
}

#[test]
fn closing_one_socket_connection_kills_only_its_tokens_and_leaves_tasks_open() {
    let db = TestDb::new();
    let mut b = Broker::open_on(Transport::Socket, &db.path);
    let req = b.agent("ctx-req", "req");
    let mut c2 = b.connect();
    c2.handshake();
    let wrk = c2.agent("ctx-wrk", "wrk");
    // Events go to the connection that registered the recipient.
    let id = tid(&b.create_task(&req, &wrk, "long job"));
    let n = c2.expect_event(&wrk.id);
    assert_eq!(n["params"]["event"]["taskId"], id);
    c2.set_state(&wrk, &id, "working");
    let n = b.expect_event(&req.id);
    assert_eq!(n["params"]["event"]["status"]["state"], "working");
    assert!(b.notifications_for(&wrk.id).is_empty());
    assert!(c2.notifications_for(&req.id).is_empty());
    // Closing c2 invalidates wrk's token (whoever presents it) ...
    c2.close();
    assert!(c2.wait_closed(TIMEOUT), "the broker kept c2 open");
    let resp = b.call(
        "a2a.tasks.status",
        json!({"token": wrk.token, "id": id, "state": "input-required"}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_TOKEN");
    // Reads too: the token is dead before the broker hangs up.
    for (method, params) in [
        ("a2a.tasks.get", json!({"token": wrk.token, "id": id})),
        ("a2a.agents.list", json!({"token": wrk.token})),
        ("a2a.tasks.list", json!({"token": wrk.token})),
    ] {
        assert_a2a_error(&b.call(method, params), "A2A_UNKNOWN_TOKEN");
    }
    // ... but not req's, and the task stays open.
    let t = b.get_task(&req, &id);
    assert_eq!(t["status"]["state"], "working");
    // The same party comes back on a new connection and finishes it.
    let mut c3 = b.connect();
    c3.handshake();
    let wrk2 = c3.agent("ctx-wrk", "wrk");
    assert_eq!(wrk2.id, "wrk");
    assert_eq!(c3.get_task(&wrk2, &id)["status"]["state"], "working");
    c3.set_state(&wrk2, &id, "completed");
    let n = b.expect_event(&req.id);
    assert_eq!(n["params"]["event"]["status"]["state"], "completed");
    assert_eq!(n["params"]["event"]["final"], true);
}
