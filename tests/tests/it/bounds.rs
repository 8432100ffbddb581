//! §9 bounds: text chars, file bytes, data size, history length, open tasks
//! per context and sends per registration. A refused call writes nothing,
//! routes nothing and is not charged.

use a2a_testkit::*;
use base64::Engine;

on_both_transports!(
    text_bound_counts_unicode_scalars_summed_over_text_parts,
    data_part_bound_counts_serialized_size,
    history_bound_refuses_the_257th_message_but_not_status_changes,
    open_task_bound_is_per_context_and_frees_on_terminal,
    send_bound_counts_successful_sends_per_registration,
    a_broadcast_is_charged_one_send_per_task,
    deregister_settles_a_task_whose_history_is_full,
    every_id_over_the_bound_is_refused_with_its_limit,
    the_batch_wait_and_frame_bounds_name_their_limits,
);

const MAX_TEXT: usize = 16000;
const MAX_FILE: usize = 20 * 1024 * 1024;

fn text_parts(lens: &[(usize, char)]) -> Value {
    Value::Array(
        lens.iter()
            .map(|(n, c)| json!({"kind": "text", "text": c.to_string().repeat(*n)}))
            .collect(),
    )
}

fn text_bound_counts_unicode_scalars_summed_over_text_parts(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    // At the limit: accepted, in multi-byte and astral characters too.
    for parts in [
        text_parts(&[(MAX_TEXT, 'a')]),
        text_parts(&[(8000, 'é'), (8000, '😀')]),
        // Data parts and file names do not count as text.
        json!([{"kind": "text", "text": "x".repeat(MAX_TEXT)}, {"kind": "data", "data": {"t": "y".repeat(100)}}]),
    ] {
        let r = b.ok(
            "a2a.message.send",
            json!({"token": req.token, "message": parts_msg(parts, &wrk.id)}),
        );
        assert_eq!(r["task"]["status"]["state"], "submitted");
    }
    for _ in 0..3 {
        b.expect_event(&wrk.id);
    }
    let before = listed_task_ids(&mut b, &req).len();
    for (parts, actual) in [
        (text_parts(&[(MAX_TEXT + 1, 'a')]), MAX_TEXT + 1),
        (text_parts(&[(8000, 'é'), (8001, '😀')]), MAX_TEXT + 1),
        (text_parts(&[(6000, 'a'), (6000, 'b'), (6000, 'c')]), 18000),
    ] {
        let resp = b.call(
            "a2a.message.send",
            json!({"token": req.token, "message": parts_msg(parts, &wrk.id)}),
        );
        assert_bound_error(
            &resp,
            "A2A_PAYLOAD_TOO_LARGE",
            "A2A_MAX_TEXT_CHARS",
            MAX_TEXT as u64,
            Some(actual as u64),
        );
    }
    assert_eq!(
        listed_task_ids(&mut b, &req).len(),
        before,
        "a refused creation made a task"
    );
    // On an existing task, by either party, and in a status message.
    let t = b.create_task(&req, &wrk, "ok");
    let id = tid(&t);
    let big = json!({"role": "user", "messageId": unique("m"), "taskId": id, "parts": text_parts(&[(MAX_TEXT + 1, 'z')])});
    let art = json!({"artifactId": "a", "parts": text_parts(&[(MAX_TEXT + 1, 'q')])});
    let calls = [
        (
            "a2a.message.send",
            json!({"token": req.token, "message": big}),
        ),
        (
            "a2a.message.send",
            json!({"token": wrk.token, "message": big}),
        ),
        (
            "a2a.tasks.status",
            json!({"token": wrk.token, "id": id, "state": "working", "message": big}),
        ),
        (
            "a2a.tasks.cancel",
            json!({"token": req.token, "id": id, "message": big}),
        ),
        // Artifact parts too.
        (
            "a2a.tasks.artifact",
            json!({"token": wrk.token, "id": id, "artifact": art}),
        ),
    ];
    for (method, params) in calls {
        let resp = b.call(method, params);
        assert_bound_error(
            &resp,
            "A2A_PAYLOAD_TOO_LARGE",
            "A2A_MAX_TEXT_CHARS",
            MAX_TEXT as u64,
            Some(MAX_TEXT as u64 + 1),
        );
    }
    let t = b.get_task(&req, &id);
    assert_eq!(
        t["version"], 1,
        "a refused call changed the task: {}",
        t["status"]
    );
    assert_eq!(t["status"]["state"], "submitted");
    assert_eq!(t["artifacts"], json!([]));
    // Nothing was routed: the worker's next event follows the creation's.
    b.barrier(&wrk.id, 3, |_| {});
    b.barrier(&wrk.id, 4, |b| {
        b.ok(
            "a2a.message.send",
            json!({"token": req.token, "message": text_msg_on("small", &id)}),
        );
    });
    assert!(b.notifications_for(&req.id).is_empty());
}

// Stdio only: its 28 MB calls take ~25 s in a debug build, and a socket run
// would about double this file's time. Lines that large on the socket are
// covered by the framing tests' 32 MiB line.
#[test]
fn file_bound_counts_decoded_bytes() {
    let db = TestDb::new();
    let mut b = Broker::open(&db.path);
    let (req, wrk) = pair(&mut b);
    let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![0x5au8; n]);
    let over_b64 = b64(MAX_FILE + 1);
    let at_b64 = b64(MAX_FILE);
    let over = json!([{"kind": "file", "file": {"name": "big.bin", "bytes": over_b64}}]);
    let resp = b.call_slow(
        "a2a.message.send",
        json!({"token": req.token, "message": parts_msg(over, &wrk.id)}),
    );
    let too_large = |resp: &Value| {
        let (max, actual) = (MAX_FILE as u64, Some(MAX_FILE as u64 + 1));
        assert_bound_error(
            resp,
            "A2A_PAYLOAD_TOO_LARGE",
            "A2A_MAX_FILE_BYTES",
            max,
            actual,
        )
    };
    too_large(&resp);
    assert!(listed_task_ids(&mut b, &req).is_empty());
    // Exactly at the limit: accepted (28 MB of base64 stays under the frame bound).
    let at = json!([{"kind": "file", "file": {"name": "big.bin", "bytes": at_b64}}]);
    let resp = b.call_slow(
        "a2a.message.send",
        json!({"token": req.token, "message": parts_msg(at, &wrk.id), "configuration": {"historyLength": 0}}),
    );
    let id = tid(&result(&resp)["task"]);
    let n = b
        .wait_notification(&wrk.id, SLOW_TIMEOUT, |_| true)
        .expect("creation event");
    assert_eq!(seq(&n), 1);
    let got = n["params"]["event"]["status"]["message"]["parts"][0]["file"]["bytes"]
        .as_str()
        .unwrap();
    assert!(got == at_b64, "the file bytes changed on the way");
    // An artifact's file part is bounded too.
    let art = json!({"artifactId": "f", "parts": [{"kind": "file", "file": {"bytes": over_b64}}]});
    let resp = b.call_slow(
        "a2a.tasks.artifact",
        json!({"token": wrk.token, "id": id, "artifact": art}),
    );
    too_large(&resp);
    let t = b.ok(
        "a2a.tasks.get",
        json!({"token": req.token, "id": id, "historyLength": 0}),
    )["task"]
        .clone();
    assert_eq!(t["version"], 1);
}

fn data_part_bound_counts_serialized_size(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let big = json!([{"kind": "data", "data": {"s": "d".repeat(MAX_FILE)}}]);
    let resp = b.call_slow(
        "a2a.message.send",
        json!({"token": req.token, "message": parts_msg(big, &wrk.id)}),
    );
    assert_bound_error(
        &resp,
        "A2A_PAYLOAD_TOO_LARGE",
        "A2A_MAX_FILE_BYTES",
        MAX_FILE as u64,
        None,
    );
    assert!(listed_task_ids(&mut b, &req).is_empty());
    b.barrier(&wrk.id, 0, |b| {
        b.create_task(&req, &wrk, "fine");
    });
}

/// The worker appends 255 status messages to task `id` (ids `{prefix}0`
/// and up, the text of message `i` `text(i)`), each accepted: with the
/// creation's message, a full history.
fn fill_with_status_messages(
    b: &mut Broker,
    wrk: &Agent,
    id: &str,
    prefix: &str,
    text: impl Fn(usize) -> String,
) {
    let reqs = (0..255)
        .map(|i| {
            let m = json!({"role": "agent", "messageId": format!("{prefix}{i}"), "parts": [{"kind": "text", "text": text(i)}]});
            ("a2a.tasks.status", json!({"token": wrk.token, "id": id, "state": "working", "message": m}))
        })
        .collect();
    for resp in b.pipeline(reqs) {
        result(&resp);
    }
}

fn history_bound_refuses_the_257th_message_but_not_status_changes(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = tid(&b.create_task(&req, &wrk, "m1"));
    // 255 more messages, as worker status messages (not charged as sends).
    fill_with_status_messages(&mut b, &wrk, &id, "h", |i| format!("m{}", i + 2));
    let t = b.get_task(&req, &id);
    assert_eq!(t["history"].as_array().unwrap().len(), 256);
    assert_eq!(t["version"], 256);
    let hist = t["history"].as_array().unwrap();
    assert_eq!(hist[255]["parts"][0]["text"], "m256");
    for who in [&req, &wrk] {
        let resp = b.call(
            "a2a.message.send",
            json!({"token": who.token, "message": text_msg_on("one too many", &id)}),
        );
        assert_bound_error(&resp, "A2A_SEND_CAP", "A2A_MAX_TASK_HISTORY", 256, None);
    }
    let m = json!({"role": "agent", "messageId": unique("m"), "parts": [{"kind": "text", "text": "x"}]});
    let resp = b.call(
        "a2a.tasks.status",
        json!({"token": wrk.token, "id": id, "state": "input-required", "message": m}),
    );
    assert_bound_error(&resp, "A2A_SEND_CAP", "A2A_MAX_TASK_HISTORY", 256, None);
    assert_eq!(b.get_task(&req, &id)["version"], 256);
    assert_eq!(b.get_task(&req, &id)["status"]["state"], "working");
    // A status change without a message is always possible.
    let t = b.set_state(&wrk, &id, "input-required");
    assert_eq!(t["version"], 257);
    assert_eq!(t["history"].as_array().unwrap().len(), 256);
    // The requester's resuming reply is refused and so does not resume.
    let resp = b.call(
        "a2a.message.send",
        json!({"token": req.token, "message": text_msg_on("answer", &id)}),
    );
    assert_bound_error(&resp, "A2A_SEND_CAP", "A2A_MAX_TASK_HISTORY", 256, None);
    assert_eq!(b.get_task(&req, &id)["status"]["state"], "input-required");
    b.set_state(&wrk, &id, "working");
    // A terminal move is never refused by the history bound (§9): its
    // message rides on the status only, so no task can be pinned open.
    let done = json!({"role": "agent", "messageId": unique("m"), "parts": [{"kind": "text", "text": "done"}]});
    let t = result(&b.call(
        "a2a.tasks.status",
        json!({"token": wrk.token, "id": id, "state": "completed", "message": done}),
    ))["task"]
        .clone();
    assert_eq!(t["version"], 259);
    assert_eq!(t["history"].as_array().unwrap().len(), 256);
    assert_eq!(t["status"]["message"]["parts"][0]["text"], "done");
    // A cancel with a message, likewise.
    let id2 = tid(&b.create_task(&req, &wrk, "m1"));
    let reqs = (0..255)
        .map(|i| {
            let m = json!({"role": "agent", "messageId": format!("h{i}"), "parts": [{"kind": "text", "text": "x"}]});
            ("a2a.tasks.status", json!({"token": wrk.token, "id": id2, "state": "working", "message": m}))
        })
        .collect();
    for resp in b.pipeline(reqs) {
        result(&resp);
    }
    let t = result(&b.call(
        "a2a.tasks.cancel",
        json!({"token": req.token, "id": id2, "message": m}),
    ))["task"]
        .clone();
    assert_eq!(t["status"]["state"], "canceled");
    assert_eq!(t["history"].as_array().unwrap().len(), 256);
}

fn open_task_bound_is_per_context_and_frees_on_terminal(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a1 = b.agent("ctx-a", "a1");
    let a2 = b.agent("ctx-a", "a2");
    let other = b.agent("ctx-b", "other");
    let w = b.agent("ctx-w", "w");
    // 128 open tasks in ctx-a, from two agents of that context.
    let reqs = (0..128)
        .map(|i| {
            let who = if i % 2 == 0 { &a1 } else { &a2 };
            (
                "a2a.message.send",
                json!({"token": who.token, "message": text_msg_to("t", &w.id)}),
            )
        })
        .collect();
    let ids: Vec<String> = b
        .pipeline(reqs)
        .iter()
        .map(|r| tid(&result(r)["task"]))
        .collect();
    for who in [&a1, &a2] {
        let resp = b.call(
            "a2a.message.send",
            json!({"token": who.token, "message": text_msg_to("t", &w.id)}),
        );
        assert_bound_error(
            &resp,
            "A2A_SEND_CAP",
            "A2A_MAX_TASKS_PER_CONTEXT",
            128,
            None,
        );
        let mut m = text_msg("all");
        m["to"] = json!("*");
        let resp = b.call(
            "a2a.message.send",
            json!({"token": who.token, "message": m}),
        );
        assert_a2a_error(&resp, "A2A_SEND_CAP");
    }
    // Another context is not affected.
    b.create_task(&other, &w, "fine");
    // Interrupted tasks still count; a terminal one frees a slot.
    b.set_state(&w, &ids[0], "input-required");
    let resp = b.call(
        "a2a.message.send",
        json!({"token": a1.token, "message": text_msg_to("t", &w.id)}),
    );
    assert_a2a_error(&resp, "A2A_SEND_CAP");
    b.set_state(&w, &ids[1], "completed");
    b.create_task(&a2, &w, "now it fits");
    let resp = b.call(
        "a2a.message.send",
        json!({"token": a1.token, "message": text_msg_to("t", &w.id)}),
    );
    assert_a2a_error(&resp, "A2A_SEND_CAP");
    b.ok("a2a.tasks.cancel", json!({"token": a1.token, "id": ids[2]}));
    b.create_task(&a1, &w, "fits again");
    // The worker got exactly 128 + 1 + 1 + 1 creations and the cancel.
    let got = (0..132).map(|_| b.expect_event(&w.id)).collect::<Vec<_>>();
    assert_eq!(
        got.iter().map(seq).collect::<Vec<_>>(),
        (1..=132).collect::<Vec<_>>()
    );
    b.barrier(&w.id, 132, |b| {
        b.create_task(&other, &w, "probe");
    });
}

fn send_bound_counts_successful_sends_per_registration(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (a, w) = pair(&mut b);
    let first = text_msg_to("start", &w.id);
    let id = tid(&b.ok(
        "a2a.message.send",
        json!({"token": a.token, "message": first}),
    )["task"]); // 1
    let mut reqs: Vec<(&str, Value)> = Vec::new();
    for i in 0..198 {
        // Sends and streams both count: 198 more -> 199.
        let method = if i % 3 == 0 {
            "a2a.message.stream"
        } else {
            "a2a.message.send"
        };
        reqs.push((
            method,
            json!({"token": a.token, "message": text_msg_on("more", &id)}),
        ));
        if i % 40 == 0 {
            // Refused calls, replays, status changes and pushes are not charged.
            let big = json!({"role": "user", "messageId": unique("m"), "taskId": id, "parts": text_parts(&[(MAX_TEXT + 1, 'x')])});
            reqs.push((
                "a2a.message.send",
                json!({"token": a.token, "message": big}),
            ));
            reqs.push((
                "a2a.message.send",
                json!({"token": a.token, "message": first}),
            ));
            reqs.push((
                "a2a.tasks.pushNotificationConfig.set",
                json!({"token": a.token, "taskId": id, "config": {"id": "c"}}),
            ));
            reqs.push((
                "a2a.tasks.status",
                json!({"token": w.token, "id": id, "state": "working"}),
            ));
            reqs.push((
                "a2a.message.send",
                json!({"token": a.token, "message": text_msg_to("nobody", "nobody")}),
            ));
        }
    }
    let resps = b.pipeline(reqs);
    let errors: Vec<_> = resps.iter().filter(|r| r.get("error").is_some()).collect();
    assert_eq!(
        errors.len(),
        10,
        "only the deliberately bad calls fail: {:?}",
        errors.first()
    );
    // The 200th succeeds, the 201st is refused.
    the_200th_send_passes_the_201st_is_refused(&mut b, &a, &id);
    let resp = b.call(
        "a2a.message.stream",
        json!({"token": a.token, "message": text_msg_to("new", &w.id)}),
    );
    assert_bound_error(&resp, "A2A_SEND_CAP", "A2A_MAX_SENDS_PER_RUN", 200, None);
    // Still allowed: cancel, reads, and the worker's own sends.
    b.ok(
        "a2a.message.send",
        json!({"token": w.token, "message": text_msg_on("from worker", &id)}),
    );
    let t = b.get_task(&a, &id);
    assert_eq!(t["history"].as_array().unwrap().len(), 201);
    b.ok("a2a.tasks.cancel", json!({"token": a.token, "id": id}));
    // A new registration has its own count.
    b.ok("a2a.agents.deregister", json!({"token": a.token}));
    let a = b.agent("ctx-req", "req");
    b.create_task(&a, &w, "fresh start");
}

/// `a` has made 199 sends: the 200th, on task `id`, succeeds; the 201st
/// is refused with the send cap.
fn the_200th_send_passes_the_201st_is_refused(b: &mut Broker, a: &Agent, id: &str) {
    b.ok(
        "a2a.message.send",
        json!({"token": a.token, "message": text_msg_on("200th", id)}),
    );
    let resp = b.call(
        "a2a.message.send",
        json!({"token": a.token, "message": text_msg_on("201st", id)}),
    );
    assert_bound_error(&resp, "A2A_SEND_CAP", "A2A_MAX_SENDS_PER_RUN", 200, None);
}

fn a_broadcast_is_charged_one_send_per_task(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("ctx-a", "a");
    let peers: Vec<_> = (0..4)
        .map(|i| b.agent(&format!("ctx-{i}"), &format!("p{i}")))
        .collect();
    let mut m = text_msg("mine");
    m["to"] = json!("*");
    let r = b.ok("a2a.message.send", json!({"token": a.token, "message": m})); // 4
    let id = tid(&r["tasks"][0]);
    let reqs = (0..195)
        .map(|_| {
            (
                "a2a.message.send",
                json!({"token": a.token, "message": text_msg_on("x", &id)}),
            )
        })
        .collect();
    for resp in b.pipeline(reqs) {
        result(&resp); // 199
    }
    the_200th_send_passes_the_201st_is_refused(&mut b, &a, &id);
    assert_eq!(peers.len(), 4);
}

fn deregister_settles_a_task_whose_history_is_full(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = tid(&b.create_task(&req, &wrk, "m1"));
    fill_with_status_messages(&mut b, &wrk, &id, "h", |_| "x".into());
    b.expect_event(&wrk.id);
    // The requester leaves: the task is canceled although no message fits.
    b.ok("a2a.agents.deregister", json!({"token": req.token}));
    let n = b.expect_event(&wrk.id);
    assert_eq!(n["params"]["event"]["status"]["state"], "canceled");
    assert_eq!(n["params"]["event"]["final"], true);
    let t = b.get_task(&wrk, &id);
    assert_eq!(t["status"]["state"], "canceled");
    assert_eq!(t["history"].as_array().unwrap().len(), 256);
    assert_eq!(t["version"], 257);
    // And a cancel without a message on a full task works too.
    let req = b.agent("ctx-req", "req");
    let id = tid(&b.create_task(&req, &wrk, "m1"));
    fill_with_status_messages(&mut b, &wrk, &id, "k", |_| "x".into());
    let t = b.ok("a2a.tasks.cancel", json!({"token": req.token, "id": id}))["task"].clone();
    assert_eq!(t["status"]["state"], "canceled");
}

const MAX_ID: usize = 256;

/// Every id field of §9's `A2A_MAX_ID_BYTES` (messageId, taskId,
/// artifactId, contextId, card.name, a push config's id, and the ids that
/// name a task), 300 bytes long: `-32602` with `data.limit`, `max`,
/// `actual`, and nothing written.
fn every_id_over_the_bound_is_refused_with_its_limit(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let task = b.create_task(&req, &wrk, "ok");
    let id = tid(&task);
    b.expect_event(&wrk.id);
    let long = "x".repeat(300);
    let msg = |field: &str| {
        let mut m = text_msg_to("hi", &wrk.id);
        m[field] = json!(long);
        m
    };
    let mut on_task = text_msg_on("more", &id);
    on_task["messageId"] = json!(long);
    let calls = [
        (
            "a2a.message.send",
            json!({"token": req.token, "message": msg("messageId")}),
        ),
        (
            "a2a.message.send",
            json!({"token": req.token, "message": msg("taskId")}),
        ),
        (
            "a2a.message.send",
            json!({"token": req.token, "message": msg("contextId")}),
        ),
        (
            "a2a.message.send",
            json!({"token": req.token, "message": msg("to")}),
        ),
        (
            "a2a.message.stream",
            json!({"token": req.token, "message": msg("messageId")}),
        ),
        (
            "a2a.message.send",
            json!({"token": req.token, "message": on_task}),
        ),
        (
            "a2a.message.send",
            json!({"token": req.token, "message": text_msg_to("hi", &wrk.id),
                   "configuration": {"pushNotificationConfig": {"id": long, "url": "http://x"}}}),
        ),
        (
            "a2a.agents.register",
            json!({"contextId": long, "card": {"name": "n"}}),
        ),
        (
            "a2a.agents.register",
            json!({"contextId": "c", "card": {"name": long}}),
        ),
        ("a2a.tasks.get", json!({"token": req.token, "id": long})),
        (
            "a2a.tasks.status",
            json!({"token": wrk.token, "id": long, "state": "working"}),
        ),
        ("a2a.tasks.cancel", json!({"token": req.token, "id": long})),
        (
            "a2a.tasks.resubscribe",
            json!({"token": req.token, "id": long}),
        ),
        (
            "a2a.tasks.artifact",
            json!({"token": wrk.token, "id": id, "artifact": {"artifactId": long, "parts": []}}),
        ),
        (
            "a2a.tasks.artifact",
            json!({"token": wrk.token, "id": long, "artifact": {"artifactId": "a", "parts": []}}),
        ),
        (
            "a2a.tasks.pushNotificationConfig.set",
            json!({"token": req.token, "taskId": id, "config": {"id": long, "url": "http://x"}}),
        ),
        (
            "a2a.tasks.pushNotificationConfig.set",
            json!({"token": req.token, "taskId": long, "config": {"id": "p", "url": "http://x"}}),
        ),
        (
            "a2a.tasks.pushNotificationConfig.get",
            json!({"token": req.token, "taskId": long}),
        ),
    ];
    for (method, params) in calls {
        let resp = b.call(method, params);
        assert_rpc_bound(&resp, -32602, "A2A_MAX_ID_BYTES", MAX_ID as u64, Some(300));
        let reason = resp["error"]["data"]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("A2A_MAX_ID_BYTES"), "{method}: {resp}");
    }
    // Exactly at the bound is an id like any other.
    let mut m = text_msg_to("hi", &wrk.id);
    m["messageId"] = json!("y".repeat(MAX_ID));
    b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": m}),
    );
    b.expect_event(&wrk.id);
    // Nothing refused was written or routed: the task is as it was, and
    // the two tasks are the only ones.
    let now = b.ok("a2a.tasks.get", json!({"token": req.token, "id": id}))["task"].clone();
    assert_eq!(now["history"].as_array().map(Vec::len), Some(1), "{now}");
    assert!(
        now["artifacts"].as_array().is_none_or(Vec::is_empty),
        "{now}"
    );
    assert_eq!(listed_task_ids(&mut b, &req).len(), 2);
    assert!(b.notifications_for(&wrk.id).is_empty());
}

/// The other bounds answered with JSON-RPC codes rather than A2A ones name
/// their constant too: a batch of 257 entries (`A2A_MAX_BATCH`, -32600),
/// the 65th parked wait of a connection (`A2A_MAX_PARKED_WAITS`, -32602),
/// a line over 32 MiB (`MAX_FRAME_BYTES`, -32600).
fn the_batch_wait_and_frame_bounds_name_their_limits(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent_with("c", "puller", "subagent", "pull");
    let entry = json!({"jsonrpc": "2.0", "id": 1, "method": "a2a.agents.list", "params": {"token": a.token}});
    b.send_raw(&serde_json::to_string(&vec![entry; 257]).unwrap());
    let v = b.next_other(TIMEOUT).expect("an answer to the batch");
    assert_rpc_bound(&v, -32600, "A2A_MAX_BATCH", 256, None);

    let waits: Vec<u64> = (0..64)
        .map(|_| {
            b.request(
                "a2a.events.wait",
                json!({"token": a.token, "timeoutSeconds": 1}),
            )
        })
        .collect();
    let resp = b.call(
        "a2a.events.wait",
        json!({"token": a.token, "timeoutSeconds": 1}),
    );
    assert_rpc_bound(&resp, -32602, "A2A_MAX_PARKED_WAITS", 64, Some(65));
    assert_eq!(resp["error"]["data"]["reason"], "too many waits");
    for w in waits {
        assert_eq!(b.response(w)["result"]["timedOut"], true);
    }

    const MAX_FRAME: usize = 32 * 1024 * 1024;
    let head = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"a2a.agents.list","params":{{"token":"{}","pad":""#,
        a.token
    );
    let mut line = head.into_bytes();
    line.resize(MAX_FRAME + 1, b'a');
    line.extend_from_slice(b"\"}}\n");
    b.write_bytes(line);
    let v = b
        .next_other(SLOW_TIMEOUT)
        .expect("an answer to the long line");
    assert_rpc_bound(&v, -32600, "MAX_FRAME_BYTES", MAX_FRAME as u64, None);
    assert_eq!(v["error"]["data"]["reason"], "frame too large");
}
