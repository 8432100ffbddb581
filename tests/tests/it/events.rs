//! Event delivery: `seq` per recipient, pull delivery through
//! `a2a.events.wait` (pending, blocking, timeout, acks, overflow/lagged).

use a2a_testkit::*;

on_both_transports!(
    seq_grows_by_one_per_recipient_across_tasks_and_kinds,
    pull_agent_gets_pending_events_from_wait_until_acked,
    wait_blocks_until_an_event_arrives_or_times_out,
    events_wait_from_a_push_agent_is_invalid_params,
    pull_agent_pushes_and_resubscribe_go_through_wait,
    pull_queue_overflow_drops_the_oldest_and_reports_lagged_once,
);

fn wait(b: &mut Broker, who: &Agent, params: Value) -> Value {
    let mut p = params;
    p["token"] = json!(who.token);
    b.ok("a2a.events.wait", p)
}

fn seq_grows_by_one_per_recipient_across_tasks_and_kinds(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let r = b.agent("ctx-r", "r");
    let w1 = b.agent("ctx-1", "w1");
    let w2 = b.agent("ctx-2", "w2");
    let t1 = tid(&b.create_task(&r, &w1, "a"));
    let t2 = tid(&b.create_task(&r, &w2, "b"));
    b.ok(
        "a2a.tasks.pushNotificationConfig.set",
        json!({"token": r.token, "taskId": t1, "config": {"id": "c", "token": "k"}}),
    );
    b.set_state(&w1, &t1, "working");
    b.set_state(&w2, &t2, "working");
    b.ok("a2a.tasks.artifact", json!({"token": w2.token, "id": t2, "artifact": {"artifactId": "x", "parts": [{"kind": "text", "text": "y"}]}}));
    b.ok(
        "a2a.message.send",
        json!({"token": w1.token, "message": text_msg_on("hello", &t1)}),
    );
    b.set_state(&w1, &t1, "completed"); // event + push
    b.ok("a2a.tasks.resubscribe", json!({"token": r.token, "id": t2}));
    let mut got: Vec<_> = (0..7).map(|_| b.expect_event(&r.id)).collect();
    got.sort_by_key(seq);
    assert_eq!(
        got.iter().map(seq).collect::<Vec<_>>(),
        (1..=7).collect::<Vec<_>>()
    );
    // Each worker has its own counter.
    assert_eq!(seq(&b.expect_event(&w1.id)), 1);
    assert_eq!(seq(&b.expect_event(&w2.id)), 1);
    b.barrier(&r.id, 7, |b| {
        b.set_state(&w2, &t2, "input-required");
    });
}

fn pull_agent_gets_pending_events_from_wait_until_acked(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let p = b.agent_with("ctx-p", "p", "subagent", "pull");
    let w = b.agent("ctx-w", "w");
    let t = tid(&b.create_task(&w, &p, "one"));
    b.ok(
        "a2a.message.send",
        json!({"token": w.token, "message": text_msg_on("two", &t)}),
    );
    b.ok(
        "a2a.message.send",
        json!({"token": w.token, "message": text_msg_on("three", &t)}),
    );

    let r = wait(&mut b, &p, json!({"timeoutSeconds": 0}));
    assert_eq!(r["timedOut"], false);
    let evs = r["events"].as_array().unwrap().clone();
    assert_eq!(evs.len(), 3, "{r}");
    for (i, e) in evs.iter().enumerate() {
        assert_eq!(e["method"], "a2a.task.event");
        let obj = e.as_object().unwrap();
        assert!(obj.keys().all(|k| k == "method" || k == "params"), "{e}");
        assert_eq!(e["params"]["seq"], i as u64 + 1);
        assert_eq!(e["params"]["recipient"], p.id);
        assert_eq!(e["params"]["recipientContextId"], p.ctx);
        assert_eq!(e["params"]["contextId"], w.ctx);
        assert_eq!(e["params"]["taskVersion"], i as u64 + 1);
        assert_eq!(e["params"]["event"]["taskId"], t);
    }
    assert_eq!(
        evs[2]["params"]["event"]["status"]["message"]["parts"][0]["text"],
        "three"
    );

    // Not acknowledged: they come back.
    let again = wait(&mut b, &p, json!({"timeoutSeconds": 0}));
    assert_eq!(again["events"], json!(evs));
    // Acknowledge the first two.
    let r = wait(&mut b, &p, json!({"timeoutSeconds": 0, "afterSeq": 2}));
    assert_eq!(r["events"], json!([evs[2]]));
    // Acknowledge all: nothing pending, the wait times out.
    let r = wait(&mut b, &p, json!({"timeoutSeconds": 0, "afterSeq": 3}));
    assert_eq!(r["events"], json!([]));
    assert_eq!(r["timedOut"], true);
    // The pull agent got nothing on the connection.
    assert!(b.notifications_for(&p.id).is_empty());
}

fn wait_blocks_until_an_event_arrives_or_times_out(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let p = b.agent_with("ctx-p", "p", "subagent", "pull");
    let w = b.agent("ctx-w", "w");
    let r = wait(&mut b, &p, json!({"timeoutSeconds": 1}));
    assert_eq!(r["timedOut"], true);
    assert_eq!(r["events"], json!([]));
    // A timeout above the maximum is clamped, not refused; an arrival ends it.
    let id = b.request(
        "a2a.events.wait",
        json!({"token": p.token, "timeoutSeconds": 100000}),
    );
    b.ok("a2a.agents.list", json!({"token": w.token}));
    assert!(!b.has_response(id));
    let t = tid(&b.create_task(&w, &p, "wake"));
    let r = result(&b.response(id));
    assert_eq!(r["timedOut"], false);
    assert_eq!(r["events"][0]["params"]["event"]["taskId"], t);
    assert_eq!(r["events"][0]["params"]["seq"], 1);
    // Default timeout, with an event pending: returns at once.
    let r = wait(&mut b, &p, json!({}));
    assert_eq!(r["events"].as_array().unwrap().len(), 1);
}

fn events_wait_from_a_push_agent_is_invalid_params(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("ctx", "a");
    let resp = b.call(
        "a2a.events.wait",
        json!({"token": a.token, "timeoutSeconds": 0}),
    );
    assert_rpc_error(&resp, -32602);
    let a = b.agent_with("ctx", "explicit", "subagent", "push");
    let resp = b.call(
        "a2a.events.wait",
        json!({"token": a.token, "timeoutSeconds": 0}),
    );
    assert_rpc_error(&resp, -32602);
}

fn pull_agent_pushes_and_resubscribe_go_through_wait(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let p = b.agent_with("ctx-p", "p", "subagent", "pull");
    let w = b.agent("ctx-w", "w");
    let t = tid(&b.create_task(&p, &w, "job"));
    b.ok(
        "a2a.tasks.pushNotificationConfig.set",
        json!({"token": p.token, "taskId": t, "config": {"id": "c", "token": "tok"}}),
    );
    b.ok("a2a.tasks.resubscribe", json!({"token": p.token, "id": t}));
    b.set_state(&w, &t, "completed");
    let mut events = Vec::new();
    let mut after = 0;
    while events.len() < 3 {
        let r = wait(&mut b, &p, json!({"timeoutSeconds": 20, "afterSeq": after}));
        assert_eq!(r["timedOut"], false, "expected 3 events, have {events:?}");
        for e in r["events"].as_array().unwrap() {
            after = e["params"]["seq"].as_u64().unwrap();
            events.push(e.clone());
        }
    }
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(
        events
            .iter()
            .map(|e| e["params"]["seq"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(events[0]["method"], "a2a.task.event");
    assert_eq!(events[0]["params"]["event"]["status"]["state"], "submitted");
    let methods: Vec<_> = events[1..]
        .iter()
        .map(|e| e["method"].as_str().unwrap().to_string())
        .collect();
    assert!(
        methods.contains(&"a2a.push".to_string())
            && methods.contains(&"a2a.task.event".to_string()),
        "{methods:?}"
    );
    let push = events.iter().find(|e| e["method"] == "a2a.push").unwrap();
    assert_eq!(push["params"]["token"], "tok");
    assert!(b.notifications_for(&p.id).is_empty());
}

fn pull_queue_overflow_drops_the_oldest_and_reports_lagged_once(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let p = b.agent_with("ctx-p", "p", "subagent", "pull");
    let w = b.agent("ctx-w", "w");
    let t = tid(&b.create_task(&p, &w, "job"));
    const TOTAL: u64 = 1030;
    let reqs = (0..TOTAL)
        .map(|_| {
            (
                "a2a.tasks.status",
                json!({"token": w.token, "id": t, "state": "working"}),
            )
        })
        .collect();
    for resp in b.pipeline(reqs) {
        result(&resp);
    }
    let r = wait(&mut b, &p, json!({"timeoutSeconds": 0}));
    let evs = r["events"].as_array().unwrap().clone();
    assert!(!evs.is_empty());
    assert_eq!(
        evs[0]["method"], "a2a.lagged",
        "first event is not a2a.lagged: {}",
        evs[0]
    );
    assert_eq!(evs[0]["params"]["recipient"], p.id);
    assert_eq!(evs[0]["params"]["recipientContextId"], p.ctx);
    assert_eq!(evs[0]["params"]["dropped"], TOTAL - 1024);
    assert!(evs[1..].iter().all(|e| e["method"] == "a2a.task.event"));
    let mut seqs: Vec<u64> = evs[1..]
        .iter()
        .map(|e| e["params"]["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs.first().copied(),
        Some(TOTAL - 1024 + 1),
        "the oldest were not the ones dropped"
    );
    // Collect the rest (if a wait returns a chunk), acknowledging as we go.
    while seqs.last().copied() != Some(TOTAL) {
        let r = wait(
            &mut b,
            &p,
            json!({"timeoutSeconds": 20, "afterSeq": seqs.last().copied().unwrap()}),
        );
        let evs = r["events"].as_array().unwrap();
        assert!(
            !evs.is_empty(),
            "events missing after seq {:?}",
            seqs.last()
        );
        assert!(
            evs.iter().all(|e| e["method"] == "a2a.task.event"),
            "a2a.lagged came twice"
        );
        seqs.extend(evs.iter().map(|e| e["params"]["seq"].as_u64().unwrap()));
    }
    assert_eq!(seqs, (TOTAL - 1023..=TOTAL).collect::<Vec<_>>());
    let r = wait(&mut b, &p, json!({"timeoutSeconds": 0, "afterSeq": TOTAL}));
    assert_eq!(
        r["events"],
        json!([]),
        "lagged or events came back after all were acknowledged"
    );
}
