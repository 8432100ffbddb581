//! Idempotent sends by `messageId` (ext): a replay returns the task as it is
//! now, writes and routes nothing, is not charged; a conflicting replay is
//! invalid params; replays survive a broker restart.

use a2a_testkit::*;

on_both_transports!(
    replayed_creation_returns_the_same_task_and_routes_nothing,
    replayed_append_does_not_append_again,
    same_message_id_with_different_parts_is_invalid_params,
    the_same_message_id_elsewhere_is_not_a_replay,
    replays_are_recognised_after_a_restart,
    replays_succeed_at_every_cap,
);

/// `req` sends `m` with `a2a.message.send`: the task it answers.
fn send_task(b: &mut Broker, req: &Agent, m: &Value) -> Value {
    b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": m}),
    )["task"]
        .clone()
}

fn replayed_creation_returns_the_same_task_and_routes_nothing(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let m = text_msg_to("do it once", &wrk.id);
    let first = send_task(&mut b, &req, &m);
    let again = send_task(&mut b, &req, &m);
    assert_eq!(again, first);
    // Through stream as well.
    let again = b.ok(
        "a2a.message.stream",
        json!({"token": req.token, "message": m}),
    )["task"]
        .clone();
    assert_eq!(again["id"], first["id"]);
    assert_eq!(listed_task_ids(&mut b, &req), [tid(&first)]);
    assert_eq!(b.expect_event(&wrk.id)["params"]["seq"], 1);
    // The worker gets no second creation event.
    b.barrier(&wrk.id, 1, |b| {
        b.ok(
            "a2a.message.send",
            json!({"token": req.token, "message": text_msg_on("next", &tid(&first))}),
        );
    });
    // A replay answers with the task as it is now.
    b.set_state(&wrk, &tid(&first), "working");
    let now = send_task(&mut b, &req, &m);
    assert_eq!(now["id"], first["id"]);
    assert_eq!(now["status"]["state"], "working");
    assert_eq!(now["version"], 3);
    assert_eq!(now["history"].as_array().unwrap().len(), 2);
}

fn replayed_append_does_not_append_again(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = tid(&b.create_task(&req, &wrk, "one"));
    b.expect_event(&wrk.id);
    let m = text_msg_on("two", &id);
    let first = send_task(&mut b, &req, &m);
    assert_eq!(first["version"], 2);
    b.expect_event(&wrk.id);
    let again = send_task(&mut b, &req, &m);
    assert_eq!(again, first);
    let t = b.get_task(&req, &id);
    assert_eq!(t["version"], 2);
    assert_eq!(t["history"].as_array().unwrap().len(), 2);
    b.barrier(&wrk.id, 2, |b| {
        b.ok(
            "a2a.message.send",
            json!({"token": req.token, "message": text_msg_on("three", &id)}),
        );
    });
    // Replaying on a terminal task still answers with the task (nothing new
    // would be written).
    b.set_state(&wrk, &id, "completed");
    let r = b.call(
        "a2a.message.send",
        json!({"token": req.token, "message": m}),
    );
    if let Some(t) = r.get("result") {
        assert_eq!(t["task"]["id"], id);
    } else {
        assert_a2a_error(&r, "A2A_TASK_TERMINAL");
    }
}

fn same_message_id_with_different_parts_is_invalid_params(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let m = text_msg_to("original", &wrk.id);
    let t = send_task(&mut b, &req, &m);
    let mut changed = m.clone();
    changed["parts"] = json!([{"kind": "text", "text": "changed"}]);
    let resp = b.call(
        "a2a.message.send",
        json!({"token": req.token, "message": changed}),
    );
    assert_rpc_error(&resp, -32602);
    // Same for an append.
    let id = tid(&t);
    let m2 = text_msg_on("second", &id);
    b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": m2}),
    );
    let mut changed = m2.clone();
    changed["parts"] = json!([{"kind": "data", "data": {"x": 1}}]);
    let resp = b.call(
        "a2a.message.send",
        json!({"token": req.token, "message": changed}),
    );
    assert_rpc_error(&resp, -32602);
    let t = b.get_task(&req, &id);
    assert_eq!(t["version"], 2);
    assert_eq!(listed_task_ids(&mut b, &req).len(), 1);
}

fn the_same_message_id_elsewhere_is_not_a_replay(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let wrk2 = b.agent("ctx-w2", "wrk2");
    let other = b.agent("ctx-o", "other");
    let mut m = text_msg_to("same id", &wrk.id);
    m["messageId"] = json!("shared-id");
    let t1 = send_task(&mut b, &req, &m);
    // To another worker: a new task.
    m["to"] = json!(wrk2.id);
    let t2 = send_task(&mut b, &req, &m);
    assert_ne!(t1["id"], t2["id"]);
    // From another sender in another context: a new task.
    m["to"] = json!(wrk.id);
    let t3 = b.ok(
        "a2a.message.send",
        json!({"token": other.token, "message": m}),
    )["task"]
        .clone();
    assert_ne!(t3["id"], t1["id"]);
    assert_eq!(listed_task_ids(&mut b, &wrk).len(), 2);
}

fn replays_are_recognised_after_a_restart(t: Transport) {
    let db = TestDb::new();
    let create = text_msg_to("survives", "wrk");
    let (task_id, append) = {
        let mut b = Broker::open_on(t, &db.path);
        let (req, wrk) = pair(&mut b);
        let t = b.ok(
            "a2a.message.send",
            json!({"token": req.token, "message": create}),
        )["task"]
            .clone();
        let id = tid(&t);
        let append = text_msg_on("appended", &id);
        b.ok(
            "a2a.message.send",
            json!({"token": req.token, "message": append}),
        );
        b.set_state(&wrk, &id, "working");
        let status = b.close_and_wait(TIMEOUT);
        assert!(status.success(), "{status:?}");
        (id, append)
    };
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    assert_eq!(req.id, "req");
    assert_eq!(wrk.id, "wrk");
    let r = b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": create}),
    )["task"]
        .clone();
    assert_eq!(r["id"], task_id);
    assert_eq!(r["version"], 3);
    let r = b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": append}),
    )["task"]
        .clone();
    assert_eq!(r["version"], 3);
    let mut changed = append.clone();
    changed["parts"] = json!([{"kind": "text", "text": "different"}]);
    let resp = b.call(
        "a2a.message.send",
        json!({"token": req.token, "message": changed}),
    );
    assert_rpc_error(&resp, -32602);
    assert_eq!(listed_task_ids(&mut b, &req), vec![task_id.clone()]);
    // And nothing was routed to the worker: its next event is the new message.
    b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": text_msg_on("new", &task_id)}),
    );
    let n = b.expect_event(&wrk.id);
    assert_eq!(n["params"]["taskVersion"], 4, "{n}");
    assert_eq!(
        n["params"]["event"]["status"]["message"]["parts"][0]["text"],
        "new"
    );
}

fn replays_succeed_at_every_cap(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    // Sends cap: 1 creation + 199 appends, then replays of both kinds.
    let first = text_msg_to("first", &wrk.id);
    let id = tid(&b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": first}),
    )["task"]);
    let appends: Vec<Value> = (0..199).map(|_| text_msg_on("more", &id)).collect();
    let reqs = appends
        .iter()
        .map(|m| {
            (
                "a2a.message.send",
                json!({"token": req.token, "message": m}),
            )
        })
        .collect();
    for resp in b.pipeline(reqs) {
        result(&resp);
    }
    let resp = b.call(
        "a2a.message.send",
        json!({"token": req.token, "message": text_msg_on("over", &id)}),
    );
    assert_a2a_error(&resp, "A2A_SEND_CAP");
    let r = b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": first}),
    );
    assert_eq!(r["task"]["id"], id);
    let r = b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": appends[198]}),
    );
    assert_eq!(r["task"]["version"], 200);

    // History cap: the task holding 256 messages answers a replay.
    let req2 = b.agent("ctx-2", "req2");
    let id2 = tid(&b.create_task(&req2, &wrk, "m1"));
    let mine = text_msg_on("m2", &id2);
    b.ok(
        "a2a.message.send",
        json!({"token": req2.token, "message": mine}),
    );
    let reqs = (0..254)
        .map(|_| {
            let m = json!({"role": "agent", "messageId": unique("s"), "parts": [{"kind": "text", "text": "s"}]});
            ("a2a.tasks.status", json!({"token": wrk.token, "id": id2, "state": "working", "message": m}))
        })
        .collect();
    for resp in b.pipeline(reqs) {
        result(&resp);
    }
    let resp = b.call(
        "a2a.message.send",
        json!({"token": req2.token, "message": text_msg_on("257", &id2)}),
    );
    assert_a2a_error(&resp, "A2A_SEND_CAP");
    let r = b.ok(
        "a2a.message.send",
        json!({"token": req2.token, "message": mine}),
    );
    assert_eq!(r["task"]["history"].as_array().unwrap().len(), 256);

    // Open-task cap: a replayed creation creates nothing, so it fits.
    let req3 = b.agent("ctx-3", "req3");
    let c1 = text_msg_to("c1", &wrk.id);
    let id3 = tid(&b.ok(
        "a2a.message.send",
        json!({"token": req3.token, "message": c1}),
    )["task"]);
    let reqs = (0..127)
        .map(|_| {
            (
                "a2a.message.send",
                json!({"token": req3.token, "message": text_msg_to("c", &wrk.id)}),
            )
        })
        .collect();
    for resp in b.pipeline(reqs) {
        result(&resp);
    }
    let resp = b.call(
        "a2a.message.send",
        json!({"token": req3.token, "message": text_msg_to("129", &wrk.id)}),
    );
    assert_a2a_error(&resp, "A2A_SEND_CAP");
    let r = b.ok(
        "a2a.message.send",
        json!({"token": req3.token, "message": c1}),
    );
    assert_eq!(r["task"]["id"], id3);
}
