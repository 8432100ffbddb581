//! `a2a.message.send` / `a2a.message.stream`: task creation, stamping,
//! recipient resolution, broadcast, appending, resuming, blocking sends,
//! part validation and v1.0 part normalisation.

use a2a_testkit::*;

on_both_transports!(
    creation_returns_the_task_and_routes_it_to_the_worker,
    stamped_fields_cannot_be_forged_and_metadata_is_kept,
    omitted_to_prefers_the_only_peer_in_the_own_context,
    omitted_to_falls_back_to_the_only_peer_on_the_host,
    omitted_to_with_no_peer_gets_no_peers,
    omitted_to_with_several_peers_is_ambiguous,
    broadcast_creates_one_task_per_addressable_peer,
    broadcast_with_no_peer_gets_no_peers,
    a_send_on_a_task_appends_and_routes_to_the_counterpart_keeping_the_state,
    a_requester_message_resumes_interrupted_tasks_a_worker_message_does_not,
    terminal_unknown_and_foreign_tasks_refuse_messages,
    blocking_send_answers_when_the_task_completes,
    blocking_send_answers_when_input_is_required_and_trims_history,
    history_length_in_configuration_trims_the_returned_task,
    push_config_in_send_configuration_is_stored,
    stream_creates_the_task_and_emits_its_status_to_the_caller,
    malformed_messages_and_parts_are_invalid_params_and_write_nothing,
    a2a_v1_parts_without_kind_are_normalised,
    file_parts_round_trip,
    a_replayed_broadcast_returns_the_same_tasks,
    blocking_send_answers_when_the_worker_leaves,
    pi_desktop_lenient_forms_are_accepted,
    a_blocking_send_answers_with_the_task_as_it_is_once_settled,
);

fn creation_returns_the_task_and_routes_it_to_the_worker(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let msg = text_msg_to("please do it", &wrk.id);
    let r = b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": msg}),
    );
    let t = &r["task"];
    assert_eq!(t["kind"], "task");
    let tid = t["id"].as_str().expect("task id").to_string();
    assert!(!tid.is_empty());
    assert_eq!(t["contextId"], req.ctx);
    assert_eq!(t["status"]["state"], "submitted");
    assert_timestamp(&t["status"]["timestamp"]);
    assert_eq!(t["artifacts"], json!([]));
    assert_eq!(t["agentName"], wrk.id);
    assert_eq!(t["requesterName"], req.id);
    assert_eq!(t["version"], 1);
    let h = t["history"].as_array().expect("history");
    assert_eq!(h.len(), 1);
    let stored = &h[0];
    assert_eq!(stored["messageId"], msg["messageId"]);
    assert_eq!(stored["parts"], msg["parts"]);
    assert_eq!(stored["role"], "user");
    assert_eq!(stored["from"], req.id);
    assert_eq!(stored["contextId"], req.ctx);
    assert_eq!(stored["taskId"], tid);

    let n = b.expect_event(&wrk.id);
    assert_eq!(n["jsonrpc"], "2.0");
    assert_eq!(n["method"], "a2a.task.event");
    let p = &n["params"];
    assert_eq!(p["recipient"], wrk.id);
    assert_eq!(p["recipientContextId"], wrk.ctx);
    assert_eq!(p["contextId"], req.ctx);
    assert_eq!(p["seq"], 1);
    assert_eq!(p["taskVersion"], 1);
    let e = &p["event"];
    assert_eq!(e["kind"], "status-update");
    assert_eq!(e["taskId"], tid);
    assert_eq!(e["contextId"], req.ctx);
    assert_eq!(e["final"], false);
    assert_eq!(e["status"]["state"], "submitted");
    assert_timestamp(&e["status"]["timestamp"]);
    assert_eq!(&e["status"]["message"], stored);
    // The requester got nothing for its own creation.
    assert!(b.notifications_for(&req.id).is_empty());
}

fn stamped_fields_cannot_be_forged_and_metadata_is_kept(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let forged = json!({
        "role": "agent", "from": "wrk", "contextId": "ctx-wrk", "to": "wrk",
        "messageId": "forged-1", "metadata": {"k": [1, {"x": null}]},
        "parts": [{"kind": "text", "text": "hi", "metadata": {"p": true}}]
    });
    let t = b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": forged}),
    )["task"]
        .clone();
    let tid = t["id"].as_str().unwrap().to_string();
    let m = &t["history"][0];
    assert_eq!(m["role"], "user");
    assert_eq!(m["from"], "req");
    assert_eq!(m["contextId"], "ctx-req");
    assert_eq!(m["taskId"], tid);
    assert_eq!(m["metadata"], json!({"k": [1, {"x": null}]}));
    assert_eq!(m["parts"][0]["metadata"], json!({"p": true}));
    b.expect_event(&wrk.id);

    // The worker's reply, claiming to be the user in another context.
    let reply = json!({
        "role": "user", "from": "req", "contextId": "elsewhere", "taskId": tid,
        "messageId": "forged-2", "parts": [{"kind": "text", "text": "ok"}]
    });
    let t = b.ok(
        "a2a.message.send",
        json!({"token": wrk.token, "message": reply}),
    )["task"]
        .clone();
    let m = &t["history"][1];
    assert_eq!(m["role"], "agent");
    assert_eq!(m["from"], "wrk");
    assert_eq!(m["contextId"], "ctx-req");
    assert_eq!(m["taskId"], tid);
    let n = b.expect_event(&req.id);
    assert_eq!(&n["params"]["event"]["status"]["message"], m);

    // A status message is stamped too.
    let smsg = json!({"role": "user", "from": "req", "messageId": "forged-3", "parts": [{"kind": "text", "text": "w"}]});
    let t = b.ok(
        "a2a.tasks.status",
        json!({"token": wrk.token, "id": tid, "state": "working", "message": smsg}),
    )["task"]
        .clone();
    let m = &t["history"][2];
    assert_eq!(m["role"], "agent");
    assert_eq!(m["from"], "wrk");
    assert_eq!(m["contextId"], "ctx-req");
    assert_eq!(m["taskId"], tid);
    assert_eq!(t["status"]["message"], *m);
}

fn omitted_to_prefers_the_only_peer_in_the_own_context(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("home", "a");
    let mate = b.agent("home", "mate");
    b.agent("away1", "x");
    b.agent("away2", "y");
    let t = b.ok(
        "a2a.message.send",
        json!({"token": a.token, "message": text_msg("hi")}),
    )["task"]
        .clone();
    assert_eq!(t["agentName"], mate.id);
    b.expect_event(&mate.id);
}

fn omitted_to_falls_back_to_the_only_peer_on_the_host(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("home", "a");
    b.agent_with("home", "boss", "parent", "push");
    let far = b.agent("away", "far");
    let t = b.ok(
        "a2a.message.send",
        json!({"token": a.token, "message": text_msg("hi")}),
    )["task"]
        .clone();
    assert_eq!(t["agentName"], far.id);
}

fn omitted_to_with_no_peer_gets_no_peers(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("home", "a");
    let resp = b.call(
        "a2a.message.send",
        json!({"token": a.token, "message": text_msg("hi")}),
    );
    assert_a2a_error(&resp, "A2A_NO_PEERS");
}

fn omitted_to_with_several_peers_is_ambiguous(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    // Several in the own context.
    let a = b.agent("home", "a");
    b.agent("home", "m1");
    b.agent("home", "m2");
    b.agent("away", "far");
    assert_eq!(ambiguous_candidates(&mut b, &a.token), ["m1", "m2"]);

    // None in the own context, several on the host.
    let lone = b.agent("lonely", "lone");
    assert_eq!(
        ambiguous_candidates(&mut b, &lone.token),
        ["a", "far", "m1", "m2"]
    );
    assert!(listed_task_ids(&mut b, &lone).is_empty());
}

/// Sends with `to` omitted and returns the candidates of the
/// `ambiguous recipient` refusal, sorted.
fn ambiguous_candidates(b: &mut Broker, token: &str) -> Vec<String> {
    let resp = b.call(
        "a2a.message.send",
        json!({"token": token, "message": text_msg("hi")}),
    );
    let err = assert_a2a_error(&resp, "A2A_UNKNOWN_AGENT");
    assert_eq!(err["data"]["reason"], "ambiguous recipient");
    let mut c: Vec<String> =
        serde_json::from_value(err["data"]["candidates"].clone()).expect("candidates list");
    c.sort();
    c
}

fn broadcast_creates_one_task_per_addressable_peer(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("home", "a");
    let peers = [
        b.agent("home", "p1"),
        b.agent("away", "p2"),
        b.agent("far", "p3"),
    ];
    let boss = b.agent_with("home", "boss", "parent", "push");
    let mut m = text_msg("I own src/lib.rs");
    m["to"] = json!("*");
    let r = b.ok("a2a.message.send", json!({"token": a.token, "message": m}));
    assert!(r.get("task").is_none() || r["task"].is_null(), "{r}");
    let tasks = r["tasks"].as_array().expect("tasks");
    let mut workers: Vec<_> = tasks
        .iter()
        .map(|t| t["agentName"].as_str().unwrap().to_string())
        .collect();
    workers.sort();
    assert_eq!(workers, ["p1", "p2", "p3"]);
    let mut ids: Vec<_> = tasks
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "broadcast tasks share an id");
    for t in tasks {
        assert_eq!(t["requesterName"], "a");
        assert_eq!(t["contextId"], "home");
        assert_eq!(t["status"]["state"], "submitted");
        assert_eq!(t["history"][0]["parts"][0]["text"], "I own src/lib.rs");
        assert_eq!(
            t["history"][0]["taskId"], t["id"],
            "broadcast message stamped with another task's id"
        );
        assert_eq!(t["history"][0]["from"], "a");
        assert_eq!(t["version"], 1);
    }
    for p in &peers {
        let n = b.expect_event(&p.id);
        assert_eq!(n["params"]["event"]["status"]["state"], "submitted");
        let tid = &n["params"]["event"]["taskId"];
        assert!(tasks.iter().any(|t| &t["id"] == tid));
    }
    assert!(b.notifications_for(&boss.id).is_empty());
    assert_eq!(listed_task_ids(&mut b, &a).len(), 3);
}

fn broadcast_with_no_peer_gets_no_peers(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("home", "a");
    let mut m = text_msg("anyone?");
    m["to"] = json!("*");
    let resp = b.call("a2a.message.send", json!({"token": a.token, "message": m}));
    assert_a2a_error(&resp, "A2A_NO_PEERS");
}

fn a_send_on_a_task_appends_and_routes_to_the_counterpart_keeping_the_state(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let t = b.create_task(&req, &wrk, "one");
    let tid = t["id"].as_str().unwrap().to_string();
    b.expect_event(&wrk.id);
    let t0 = t["status"].clone();

    // Requester -> worker; state stays submitted, stored status unchanged.
    let r = b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": text_msg_on("two", &tid)}),
    )["task"]
        .clone();
    assert_eq!(r["version"], 2);
    assert_eq!(r["status"]["state"], "submitted");
    assert_eq!(r["status"], t0, "a plain message changed the stored status");
    assert_eq!(r["history"].as_array().unwrap().len(), 2);
    let n = b.expect_event(&wrk.id);
    assert_eq!(n["params"]["seq"], 2);
    assert_eq!(n["params"]["taskVersion"], 2);
    let e = &n["params"]["event"];
    assert_eq!(e["kind"], "status-update");
    assert_eq!(e["final"], false);
    assert_eq!(e["status"]["state"], "submitted");
    assert_eq!(e["status"]["message"], r["history"][1]);
    assert_timestamp(&e["status"]["timestamp"]);

    // Worker moves to working, then messages the requester; state stays working.
    b.set_state(&wrk, &tid, "working");
    let n = b.expect_event(&req.id);
    assert_eq!(n["params"]["event"]["status"]["state"], "working");
    let r = b.ok(
        "a2a.message.send",
        json!({"token": wrk.token, "message": text_msg_on("three", &tid)}),
    )["task"]
        .clone();
    assert_eq!(r["version"], 4);
    assert_eq!(r["status"]["state"], "working");
    assert_eq!(r["history"][2]["role"], "agent");
    let n = b.expect_event(&req.id);
    assert_eq!(n["params"]["seq"], 2);
    assert_eq!(n["params"]["taskVersion"], 4);
    assert_eq!(n["params"]["event"]["status"]["state"], "working");
    assert_eq!(
        n["params"]["event"]["status"]["message"]["parts"][0]["text"],
        "three"
    );
    assert_eq!(n["params"]["event"]["final"], false);
    // Neither party heard its own message back.
    assert!(b.notifications_for(&wrk.id).is_empty());
}

fn a_requester_message_resumes_interrupted_tasks_a_worker_message_does_not(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    for interrupted in ["input-required", "auth-required"] {
        let t = b.create_task(&req, &wrk, "q");
        let tid = t["id"].as_str().unwrap().to_string();
        b.set_state(&wrk, &tid, interrupted);
        // The worker's own message does not resume it.
        let r = b.ok(
            "a2a.message.send",
            json!({"token": wrk.token, "message": text_msg_on("need more", &tid)}),
        )["task"]
            .clone();
        assert_eq!(r["status"]["state"], interrupted);
        let r = b.ok(
            "a2a.message.send",
            json!({"token": req.token, "message": text_msg_on("here", &tid)}),
        )["task"]
            .clone();
        assert_eq!(
            r["status"]["state"], "working",
            "requester reply did not resume {interrupted}"
        );
        assert_eq!(r["version"], 4);
        let created = b.expect_event(&wrk.id);
        assert_eq!(created["params"]["taskVersion"], 1);
        let last = b.expect_event(&wrk.id);
        assert_eq!(last["params"]["event"]["taskId"], tid.as_str());
        assert_eq!(last["params"]["taskVersion"], 4);
        assert_eq!(last["params"]["event"]["status"]["state"], "working");
        assert_eq!(
            last["params"]["event"]["status"]["message"]["parts"][0]["text"],
            "here"
        );
        b.ok("a2a.tasks.cancel", json!({"token": req.token, "id": tid}));
        let canceled = b.expect_event(&wrk.id);
        assert_eq!(canceled["params"]["event"]["status"]["state"], "canceled");
        assert_eq!(canceled["params"]["event"]["final"], true);
    }
}

fn terminal_unknown_and_foreign_tasks_refuse_messages(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let stranger = b.agent("ctx-x", "stranger");
    let t = b.create_task(&req, &wrk, "q");
    let tid = t["id"].as_str().unwrap().to_string();
    let resp = b.call(
        "a2a.message.send",
        json!({"token": stranger.token, "message": text_msg_on("psst", &tid)}),
    );
    assert_a2a_error(&resp, "A2A_CROSS_CONTEXT_DENIED");
    let resp = b.call(
        "a2a.message.send",
        json!({"token": req.token, "message": text_msg_on("x", "no-such-task")}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_TASK");
    for end in ["completed", "canceled", "failed", "rejected"] {
        let t = b.create_task(&req, &wrk, "q");
        let tid = t["id"].as_str().unwrap().to_string();
        b.set_state(&wrk, &tid, end);
        for who in [&req, &wrk] {
            let resp = b.call(
                "a2a.message.send",
                json!({"token": who.token, "message": text_msg_on("late", &tid)}),
            );
            assert_a2a_error(&resp, "A2A_TASK_TERMINAL");
        }
        assert_eq!(b.get_task(&req, &tid)["version"], 2);
    }
    assert_eq!(b.get_task(&req, &tid)["version"], 1);
}

/// `req` sends "work" to `wrk` with `blocking: true`: the request's id,
/// whose answer waits for the task to settle.
fn blocking_send(b: &mut Broker, req: &Agent, wrk: &Agent) -> u64 {
    b.request(
        "a2a.message.send",
        json!({"token": req.token, "message": text_msg_to("work", &wrk.id), "configuration": {"blocking": true}}),
    )
}

fn blocking_send_answers_when_the_task_completes(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = blocking_send(&mut b, &req, &wrk);
    // While it is outstanding, the worker acts on the same connection.
    let n = b.expect_event(&wrk.id);
    let tid = n["params"]["event"]["taskId"].as_str().unwrap().to_string();
    b.set_state(&wrk, &tid, "working");
    b.ok("a2a.tasks.artifact", json!({"token": wrk.token, "id": tid, "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "r"}]}}));
    b.ok("a2a.agents.list", json!({"token": req.token}));
    assert!(
        !b.has_response(id),
        "blocking send answered before the task was terminal or interrupted"
    );
    b.set_state(&wrk, &tid, "completed");
    let r = result(&b.response(id));
    assert_eq!(r["task"]["id"], tid);
    assert_eq!(r["task"]["status"]["state"], "completed");
    assert_eq!(r["task"]["artifacts"][0]["artifactId"], "a");
}

fn blocking_send_answers_when_input_is_required_and_trims_history(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = b.request(
        "a2a.message.send",
        json!({"token": req.token, "message": text_msg_to("work", &wrk.id),
               "configuration": {"blocking": true, "historyLength": 1}}),
    );
    let n = b.expect_event(&wrk.id);
    let tid = n["params"]["event"]["taskId"].as_str().unwrap().to_string();
    b.ok(
        "a2a.message.send",
        json!({"token": wrk.token, "message": text_msg_on("thinking", &tid)}),
    );
    assert!(!b.has_response(id));
    let q = json!({"role": "agent", "messageId": unique("m"), "parts": [{"kind": "text", "text": "which file?"}]});
    b.ok(
        "a2a.tasks.status",
        json!({"token": wrk.token, "id": tid, "state": "input-required", "message": q}),
    );
    let r = result(&b.response(id));
    assert_eq!(r["task"]["status"]["state"], "input-required");
    let h = r["task"]["history"].as_array().unwrap();
    assert_eq!(h.len(), 1, "historyLength 1 not applied: {r}");
    assert_eq!(h[0]["parts"][0]["text"], "which file?");
}

fn history_length_in_configuration_trims_the_returned_task(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let r = b.ok("a2a.message.send", json!({"token": req.token, "message": text_msg_to("x", &wrk.id), "configuration": {"historyLength": 0}}));
    assert_eq!(r["task"]["history"], json!([]));
    let tid = r["task"]["id"].as_str().unwrap().to_string();
    // Stored history is complete.
    assert_eq!(
        b.get_task(&req, &tid)["history"].as_array().unwrap().len(),
        1
    );
}

fn push_config_in_send_configuration_is_stored(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let cfg = json!({"id": "pc1", "url": "https://example.invalid/hook", "token": "secret-1"});
    let r = b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": text_msg_to("x", &wrk.id), "configuration": {"pushNotificationConfig": cfg}}),
    );
    let tid = r["task"]["id"].as_str().unwrap().to_string();
    let got = b.ok(
        "a2a.tasks.pushNotificationConfig.get",
        json!({"token": req.token, "taskId": tid}),
    );
    assert_eq!(got["config"], cfg);
    b.set_state(&wrk, &tid, "completed");
    let push = b
        .wait_notification(&req.id, TIMEOUT, |n| n["method"] == "a2a.push")
        .expect("a2a.push");
    assert_eq!(push["params"]["token"], "secret-1");
    assert_eq!(push["params"]["taskId"], tid);
}

fn stream_creates_the_task_and_emits_its_status_to_the_caller(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let r = b.ok(
        "a2a.message.stream",
        json!({"token": req.token, "message": text_msg_to("go", &wrk.id)}),
    );
    let tid = r["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(r["task"]["status"]["state"], "submitted");
    let mine = b.expect_event(&req.id);
    assert_eq!(mine["method"], "a2a.task.event");
    assert_eq!(mine["params"]["recipient"], req.id);
    assert_eq!(mine["params"]["recipientContextId"], req.ctx);
    assert_eq!(mine["params"]["event"]["taskId"], tid);
    assert_eq!(mine["params"]["event"]["kind"], "status-update");
    assert_eq!(mine["params"]["event"]["status"]["state"], "submitted");
    assert_eq!(mine["params"]["event"]["final"], false);
    let theirs = b.expect_event(&wrk.id);
    assert_eq!(theirs["params"]["event"]["taskId"], tid);
    // Streaming on an existing task emits too.
    b.set_state(&wrk, &tid, "input-required");
    b.expect_event(&req.id);
    let r = b.ok(
        "a2a.message.stream",
        json!({"token": req.token, "message": text_msg_on("answer", &tid)}),
    );
    assert_eq!(r["task"]["status"]["state"], "working");
    let mine = b.expect_event(&req.id);
    assert_eq!(mine["params"]["event"]["status"]["state"], "working");
    let theirs = b.expect_event(&wrk.id);
    assert_eq!(
        theirs["params"]["event"]["status"]["message"]["parts"][0]["text"],
        "answer"
    );
}

fn malformed_messages_and_parts_are_invalid_params_and_write_nothing(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let bad_parts = [
        json!([{"kind": "file", "file": {"uri": "https://x/y", "bytes": "not base64!"}}]),
        json!([{"kind": "file", "file": {"bytes": "not base64 at all!"}}]),
        json!([{"kind": "text", "text": "ok"}, {"kind": "video", "video": {}}]),
        json!([{"kind": "text"}]),
        json!([{"kind": "text", "text": 5}]),
        json!([{"kind": "data", "data": "not an object"}]),
        json!([{}]),
        json!([{"raw": "%%%"}]),
        json!("text"),
    ];
    for parts in bad_parts {
        let m = parts_msg(parts.clone(), &wrk.id);
        let resp = b.call(
            "a2a.message.send",
            json!({"token": req.token, "message": m}),
        );
        assert_rpc_error(&resp, -32602);
    }
    // Missing parts, message, messageId.
    let no_parts = json!({"role": "user", "messageId": "x1", "to": "wrk"});
    let no_id = json!({"role": "user", "parts": [{"kind": "text", "text": "x"}], "to": "wrk"});
    for params in [
        json!({"token": req.token, "message": no_parts}),
        json!({"token": req.token}),
        json!({"token": req.token, "message": no_id}),
    ] {
        let resp = b.call("a2a.message.send", params);
        assert_rpc_error(&resp, -32602);
    }
    // Nothing was created or routed: the next event the worker gets is seq 1.
    assert!(listed_task_ids(&mut b, &req).is_empty());
    b.barrier(&wrk.id, 0, |b| {
        b.create_task(&req, &wrk, "fine");
    });
}

fn a2a_v1_parts_without_kind_are_normalised(t: Transport) {
    use base64::Engine;
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let raw = base64::engine::general_purpose::STANDARD.encode(b"hello file");
    let parts = json!([
        {"text": "plain"},
        {"raw": raw, "mediaType": "text/plain", "filename": "h.txt"},
        {"url": "https://example.invalid/f.png", "mediaType": "image/png", "filename": "f.png"},
        {"data": {"k": [1, 2], "s": "v"}}
    ]);
    let t = b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": parts_msg(parts, &wrk.id)}),
    )["task"]
        .clone();
    let p = &t["history"][0]["parts"];
    assert_eq!(p[0]["kind"], "text");
    assert_eq!(p[0]["text"], "plain");
    assert_eq!(p[1]["kind"], "file");
    assert_eq!(p[1]["file"]["bytes"], raw);
    assert_eq!(p[1]["file"]["mimeType"], "text/plain");
    assert_eq!(p[1]["file"]["name"], "h.txt");
    assert!(p[1]["file"].get("uri").is_none_or(Value::is_null));
    assert_eq!(p[2]["kind"], "file");
    assert_eq!(p[2]["file"]["uri"], "https://example.invalid/f.png");
    assert_eq!(p[2]["file"]["mimeType"], "image/png");
    assert_eq!(p[2]["file"]["name"], "f.png");
    assert!(p[2]["file"].get("bytes").is_none_or(Value::is_null));
    assert_eq!(
        p[3],
        json!({"kind": "data", "data": {"k": [1, 2], "s": "v"}})
    );
    // The worker sees the normalised form too.
    let n = b.expect_event(&wrk.id);
    assert_eq!(&n["params"]["event"]["status"]["message"]["parts"], p);
}

/// `req` sends a message of `parts` to `wrk`: the task it creates.
fn send_parts(b: &mut Broker, req: &Agent, wrk: &Agent, parts: &Value) -> Value {
    b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": parts_msg(parts.clone(), &wrk.id)}),
    )["task"]
        .clone()
}

fn file_parts_round_trip(t: Transport) {
    use base64::Engine;
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let bytes = base64::engine::general_purpose::STANDARD.encode([0u8, 1, 2, 255, 254]);
    let parts = json!([
        {"kind": "file", "file": {"name": "b.bin", "mimeType": "application/octet-stream", "bytes": bytes}},
        {"kind": "file", "file": {"uri": "file:///tmp/x"}},
        {"kind": "data", "data": {"nested": {"a": [true, null, 1.5]}}}
    ]);
    let t = send_parts(&mut b, &req, &wrk, &parts);
    assert_eq!(t["history"][0]["parts"], parts);
    let tid = t["id"].as_str().unwrap();
    assert_eq!(b.get_task(&wrk, tid)["history"][0]["parts"], parts);
}

fn a_replayed_broadcast_returns_the_same_tasks(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("home", "a");
    let p1 = b.agent("away", "p1");
    let p2 = b.agent("far", "p2");
    let mut m = text_msg("mine");
    m["to"] = json!("*");
    let ids = |r: &Value| -> Vec<String> {
        let mut v: Vec<String> = r["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    let first = b.ok("a2a.message.send", json!({"token": a.token, "message": m}));
    let again = b.ok("a2a.message.send", json!({"token": a.token, "message": m}));
    assert_eq!(ids(&again), ids(&first));
    assert_eq!(listed_task_ids(&mut b, &a).len(), 2);
    for p in [&p1, &p2] {
        assert_eq!(seq(&b.expect_event(&p.id)), 1);
        b.barrier(&p.id, 1, |b| {
            b.create_task(&a, p, "probe");
        });
    }
}

fn blocking_send_answers_when_the_worker_leaves(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = blocking_send(&mut b, &req, &wrk);
    b.expect_event(&wrk.id);
    assert!(!b.has_response(id));
    b.ok("a2a.agents.deregister", json!({"token": wrk.token}));
    let r = result(&b.response(id));
    assert_eq!(r["task"]["status"]["state"], "failed");
}

/// What PI-Desktop's broker accepts, and a client written against it sends
/// (§3): no parts, a file part that is only a name (a reference), a file
/// part with both `uri` and `bytes`, and blank `to`/`taskId` meaning omitted.
fn pi_desktop_lenient_forms_are_accepted(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    for parts in [
        json!([]),
        json!([{"kind": "file", "file": {"name": "n.txt", "mimeType": "text/plain"}}]),
        json!([{"kind": "file", "file": {"uri": "https://x/y", "bytes": "aGk="}}]),
    ] {
        let t = send_parts(&mut b, &req, &wrk, &parts);
        assert_eq!(t["history"][0]["parts"], parts);
    }
    // Blank `to` is omitted: the only peer; blank `taskId` creates a task.
    let mut m = text_msg("blank to");
    m["to"] = json!("");
    m["taskId"] = json!("");
    let t = b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": m}),
    )["task"]
        .clone();
    assert_eq!(t["agentName"], wrk.id);
    assert_eq!(t["history"].as_array().unwrap().len(), 1);
}

/// A blocking send answers with the task as it is once it settled (§5),
/// also when the call that settles it commits in the same group as the
/// send: never with the task as the send alone left it.
fn a_blocking_send_answers_with_the_task_as_it_is_once_settled(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = tid(&b.create_task(&req, &wrk, "x"));
    b.set_state(&wrk, &id, "working");
    let busy = tid(&b.create_task(&req, &wrk, "busy"));
    for round in 0..20 {
        // Keep the writer busy so that the two calls below queue up and
        // commit in one group.
        let burst: String = (0..100)
            .map(|i| {
                json!({"jsonrpc": "2.0", "id": 100_000 + 100 * round + i, "method": "a2a.tasks.status",
                    "params": {"token": wrk.token, "id": busy, "state": "working"}})
                .to_string()
                    + "\n"
            })
            .collect();
        let send = json!({"jsonrpc": "2.0", "id": 9000 + 2 * round, "method": "a2a.message.send",
            "params": {"token": req.token, "message": text_msg_on("more", &id),
                       "configuration": {"blocking": true}}});
        let ask = json!({"jsonrpc": "2.0", "id": 9001 + 2 * round, "method": "a2a.tasks.status",
            "params": {"token": wrk.token, "id": id, "state": "input-required"}});
        // One write: the two calls usually reach the writer in one batch.
        b.send_raw(&format!("{burst}{send}\n{ask}"));
        let sent = result(&b.response(9000 + 2 * round));
        result(&b.response(9001 + 2 * round));
        assert_eq!(
            sent["task"]["status"]["state"], "input-required",
            "round {round}: {sent}"
        );
        // The requester's answer resumes it for the next round.
        b.ok(
            "a2a.message.send",
            json!({"token": req.token, "message": text_msg_on("answer", &id)}),
        );
    }
}
