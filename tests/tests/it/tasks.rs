//! `a2a.tasks.*`: get, the §7 state machine through `status`, cancel,
//! artifacts, list, resubscribe with replay, and push configs.

use a2a_testkit::*;

on_both_transports!(
    status_follows_the_state_machine,
    status_refuses_unknown_states_requesters_strangers_and_unknown_tasks,
    version_starts_at_one_and_grows_by_one_per_change,
    get_returns_the_task_to_parties_only_and_trims_history,
    cancel_by_either_party_routes_to_the_other,
    artifacts_are_added_appended_and_routed_to_the_requester,
    artifacts_are_the_workers_and_validated,
    list_filters_by_role_and_state_newest_first_with_cursor_paging,
    resubscribe_emits_the_current_status_to_the_caller,
    resubscribe_after_version_replays_the_log_in_order,
    push_configs_are_per_party_and_push_on_terminal_state,
    push_on_cancel_without_token,
    push_goes_to_the_counterpart_of_the_caller,
);

const STATES: [&str; 8] = [
    "submitted",
    "working",
    "input-required",
    "auth-required",
    "completed",
    "canceled",
    "failed",
    "rejected",
];
const TERMINAL: [&str; 4] = ["completed", "canceled", "failed", "rejected"];

fn allowed(from: &str, to: &str) -> bool {
    match from {
        "submitted" | "working" => to != "submitted",
        "input-required" | "auth-required" => {
            matches!(to, "working" | "canceled" | "failed" | "rejected")
        }
        _ => false,
    }
}

fn status_follows_the_state_machine(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let mut expected_req_events = 0u64;
    for from in ["submitted", "working", "input-required", "auth-required"] {
        for to in STATES {
            let t = b.create_task(&req, &wrk, "x");
            let id = tid(&t);
            let mut version = 1;
            if from != "submitted" {
                b.set_state(&wrk, &id, from);
                version += 1;
                expected_req_events += 1;
            }
            let resp = b.call(
                "a2a.tasks.status",
                json!({"token": wrk.token, "id": id, "state": to}),
            );
            if allowed(from, to) {
                let t = result(&resp)["task"].clone();
                assert_eq!(t["status"]["state"], to, "{from} -> {to}");
                assert_eq!(t["version"], version + 1, "{from} -> {to}");
                assert_timestamp(&t["status"]["timestamp"]);
                expected_req_events += 1;
            } else {
                assert_a2a_error(&resp, "A2A_INVALID_TRANSITION");
                let t = b.get_task(&req, &id);
                assert_eq!(
                    t["status"]["state"], from,
                    "refused {from} -> {to} changed the state"
                );
                assert_eq!(
                    t["version"], version,
                    "refused {from} -> {to} changed the version"
                );
            }
        }
    }
    for end in TERMINAL {
        let t = b.create_task(&req, &wrk, "x");
        let id = tid(&t);
        b.set_state(&wrk, &id, end);
        expected_req_events += 1;
        for to in STATES {
            let resp = b.call(
                "a2a.tasks.status",
                json!({"token": wrk.token, "id": id, "state": to}),
            );
            assert_a2a_error(&resp, "A2A_TASK_TERMINAL");
        }
        let t = b.get_task(&req, &id);
        assert_eq!(t["status"]["state"], end);
        assert_eq!(t["version"], 2);
    }
    // The requester got exactly one event per accepted change, seq 1..=N, with
    // `final` true exactly for terminal states.
    let mut got = Vec::new();
    while (got.len() as u64) < expected_req_events {
        got.push(b.expect_event(&req.id));
    }
    for (i, n) in got.iter().enumerate() {
        assert_eq!(seq(n), i as u64 + 1, "{n}");
        let e = &n["params"]["event"];
        assert_eq!(e["kind"], "status-update");
        let state = e["status"]["state"].as_str().unwrap();
        assert_eq!(e["final"], TERMINAL.contains(&state), "{n}");
    }
    b.barrier(&req.id, expected_req_events, |b| {
        let t = b.create_task(&req, &wrk, "probe");
        b.set_state(&wrk, &tid(&t), "working");
    });
}

fn status_refuses_unknown_states_requesters_strangers_and_unknown_tasks(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let stranger = b.agent("ctx-s", "stranger");
    let id = tid(&b.create_task(&req, &wrk, "x"));
    for state in [json!("bogus"), json!("Working"), json!(""), json!(3)] {
        let resp = b.call(
            "a2a.tasks.status",
            json!({"token": wrk.token, "id": id, "state": state}),
        );
        assert_rpc_error(&resp, -32602);
    }
    let resp = b.call("a2a.tasks.status", json!({"token": wrk.token, "id": id}));
    assert_rpc_error(&resp, -32602);
    let resp = b.call(
        "a2a.tasks.status",
        json!({"token": req.token, "id": id, "state": "completed"}),
    );
    assert_a2a_error(&resp, "A2A_CROSS_CONTEXT_DENIED");
    let resp = b.call(
        "a2a.tasks.status",
        json!({"token": stranger.token, "id": id, "state": "completed"}),
    );
    assert_a2a_error(&resp, "A2A_CROSS_CONTEXT_DENIED");
    let resp = b.call(
        "a2a.tasks.status",
        json!({"token": wrk.token, "id": "no-such-task", "state": "working"}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_TASK");
    let t = b.get_task(&wrk, &id);
    assert_eq!(t["version"], 1);
    assert_eq!(t["status"]["state"], "submitted");
}

fn version_starts_at_one_and_grows_by_one_per_change(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = tid(&b.create_task(&req, &wrk, "x"));
    let mut v = 1;
    let mut check = |b: &mut Broker, t: Value| {
        v += 1;
        assert_eq!(t["version"], v, "{t}");
        assert_eq!(b.get_task(&req, &id)["version"], v);
    };
    let t = b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": text_msg_on("m", &id)}),
    )["task"]
        .clone();
    check(&mut b, t);
    let t = b.set_state(&wrk, &id, "working");
    check(&mut b, t);
    let t = b.set_state(&wrk, &id, "working");
    check(&mut b, t);
    // A status change with a message is one change.
    let m = json!({"role": "agent", "messageId": unique("m"), "parts": [{"kind": "text", "text": "progress"}]});
    let t = b.ok(
        "a2a.tasks.status",
        json!({"token": wrk.token, "id": id, "state": "working", "message": m}),
    )["task"]
        .clone();
    let hist = t["history"].as_array().unwrap().len();
    assert_eq!(hist, 3);
    check(&mut b, t);
    let art = json!({"artifactId": "a", "parts": [{"kind": "text", "text": "r"}]});
    let t = b.ok(
        "a2a.tasks.artifact",
        json!({"token": wrk.token, "id": id, "artifact": art}),
    )["task"]
        .clone();
    check(&mut b, t);
    let art = json!({"artifactId": "a", "parts": [{"kind": "text", "text": "s"}]});
    let t = b.ok(
        "a2a.tasks.artifact",
        json!({"token": wrk.token, "id": id, "artifact": art, "append": true}),
    )["task"]
        .clone();
    check(&mut b, t);
    let t = b.ok("a2a.tasks.cancel", json!({"token": req.token, "id": id}))["task"].clone();
    check(&mut b, t);
    // Reads change nothing.
    b.ok(
        "a2a.tasks.resubscribe",
        json!({"token": req.token, "id": id}),
    );
    b.ok(
        "a2a.tasks.pushNotificationConfig.get",
        json!({"token": req.token, "taskId": id}),
    );
    assert_eq!(b.get_task(&req, &id)["version"], 8);
    // The requester got one event per change addressed to it, in version order.
    let versions: Vec<_> = (0..5)
        .map(|_| {
            b.expect_event(&req.id)["params"]["taskVersion"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(versions, [3, 4, 5, 6, 7]);
    let versions: Vec<_> = (0..3)
        .map(|_| {
            b.expect_event(&wrk.id)["params"]["taskVersion"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(versions, [1, 2, 8]);
    b.barrier(&wrk.id, 3, |b| {
        b.create_task(&req, &wrk, "probe");
    });
}

fn get_returns_the_task_to_parties_only_and_trims_history(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let stranger = b.agent("ctx-s", "stranger");
    let samectx = b.agent("ctx-req", "sibling");
    let id = tid(&b.create_task(&req, &wrk, "m1"));
    b.ok(
        "a2a.message.send",
        json!({"token": wrk.token, "message": text_msg_on("m2", &id)}),
    );
    b.ok(
        "a2a.message.send",
        json!({"token": req.token, "message": text_msg_on("m3", &id)}),
    );
    let t = b.get_task(&req, &id);
    assert_eq!(t, b.get_task(&wrk, &id));
    let texts = |t: &Value| -> Vec<String> {
        t["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["parts"][0]["text"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(texts(&t), ["m1", "m2", "m3"]);
    for (n, want) in [
        (0, vec![]),
        (1, vec!["m3"]),
        (2, vec!["m2", "m3"]),
        (3, vec!["m1", "m2", "m3"]),
        (50, vec!["m1", "m2", "m3"]),
    ] {
        let t = b.ok(
            "a2a.tasks.get",
            json!({"token": req.token, "id": id, "historyLength": n}),
        )["task"]
            .clone();
        assert_eq!(texts(&t), want, "historyLength {n}");
    }
    // Being in the requester's context is not being a party.
    for who in [&stranger, &samectx] {
        let resp = b.call("a2a.tasks.get", json!({"token": who.token, "id": id}));
        assert_a2a_error(&resp, "A2A_CROSS_CONTEXT_DENIED");
    }
    let resp = b.call(
        "a2a.tasks.get",
        json!({"token": req.token, "id": "no-such-task"}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_TASK");
    let resp = b.call("a2a.tasks.get", json!({"token": req.token}));
    assert_rpc_error(&resp, -32602);
}

/// A requester, a worker, a third agent (`ctx-s`) and a task from the
/// requester to the worker, whose creation event the worker has had.
fn task_and_stranger(b: &mut Broker) -> (Agent, Agent, Agent, String) {
    let (req, wrk) = pair(b);
    let stranger = b.agent("ctx-s", "stranger");
    let id = tid(&b.create_task(&req, &wrk, "x"));
    b.expect_event(&wrk.id);
    (req, wrk, stranger, id)
}

fn cancel_by_either_party_routes_to_the_other(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk, stranger, id) = task_and_stranger(&mut b);
    let resp = b.call(
        "a2a.tasks.cancel",
        json!({"token": stranger.token, "id": id}),
    );
    assert_a2a_error(&resp, "A2A_CROSS_CONTEXT_DENIED");
    let t = b.ok("a2a.tasks.cancel", json!({"token": req.token, "id": id}))["task"].clone();
    assert_eq!(t["status"]["state"], "canceled");
    assert_eq!(t["version"], 2);
    let n = b.expect_event(&wrk.id);
    assert_eq!(n["params"]["event"]["kind"], "status-update");
    assert_eq!(n["params"]["event"]["status"]["state"], "canceled");
    assert_eq!(n["params"]["event"]["final"], true);
    assert_eq!(n["params"]["taskVersion"], 2);
    for who in [&req, &wrk] {
        let resp = b.call("a2a.tasks.cancel", json!({"token": who.token, "id": id}));
        assert_a2a_error(&resp, "A2A_TASK_TERMINAL");
    }

    // The worker cancels, with a message (ext), from an interrupted state.
    let id = tid(&b.create_task(&req, &wrk, "x"));
    b.set_state(&wrk, &id, "input-required");
    b.expect_event(&req.id);
    let m = json!({"role": "user", "from": "req", "messageId": unique("m"), "parts": [{"kind": "text", "text": "giving up"}]});
    let t = b.ok(
        "a2a.tasks.cancel",
        json!({"token": wrk.token, "id": id, "message": m}),
    )["task"]
        .clone();
    assert_eq!(t["status"]["state"], "canceled");
    assert_eq!(t["version"], 3);
    let last = t["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["parts"][0]["text"], "giving up");
    assert_eq!(last["role"], "agent");
    assert_eq!(last["from"], wrk.id);
    let n = b.expect_event(&req.id);
    assert_eq!(n["params"]["event"]["status"]["state"], "canceled");
    assert_eq!(n["params"]["event"]["status"]["message"], last);
    assert_eq!(n["params"]["event"]["final"], true);

    let resp = b.call(
        "a2a.tasks.cancel",
        json!({"token": req.token, "id": "no-such-task"}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_TASK");
}

fn artifacts_are_added_appended_and_routed_to_the_requester(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = tid(&b.create_task(&req, &wrk, "x"));
    let a1 = json!({"artifactId": "a1", "name": "report", "description": "the report",
                    "metadata": {"m": 1}, "parts": [{"kind": "text", "text": "part one"}]});
    let t = b.ok(
        "a2a.tasks.artifact",
        json!({"token": wrk.token, "id": id, "artifact": a1}),
    )["task"]
        .clone();
    assert_eq!(t["artifacts"], json!([a1]));
    assert_eq!(t["version"], 2);
    let n = b.expect_event(&req.id);
    assert_eq!(n["method"], "a2a.task.event");
    assert_eq!(n["params"]["taskVersion"], 2);
    let e = &n["params"]["event"];
    assert_eq!(e["kind"], "artifact-update");
    assert_eq!(e["taskId"], id);
    assert_eq!(e["contextId"], req.ctx);
    assert_eq!(e["artifact"], a1);
    assert_eq!(e["append"], false);
    assert_eq!(e["lastChunk"], true);

    let chunk = json!({"artifactId": "a1", "parts": [{"kind": "data", "data": {"n": 2}}]});
    let t = b.ok("a2a.tasks.artifact", json!({"token": wrk.token, "id": id, "artifact": chunk, "append": true, "lastChunk": false}))["task"].clone();
    let arts = t["artifacts"].as_array().unwrap();
    assert_eq!(arts.len(), 1, "append created a second artifact: {t}");
    assert_eq!(
        arts[0]["parts"],
        json!([{"kind": "text", "text": "part one"}, {"kind": "data", "data": {"n": 2}}])
    );
    assert_eq!(arts[0]["name"], "report");
    let e = b.expect_event(&req.id)["params"]["event"].clone();
    assert_eq!(e["kind"], "artifact-update");
    assert_eq!(e["append"], true);
    assert_eq!(e["lastChunk"], false);
    assert_eq!(e["artifact"]["artifactId"], "a1");

    let a2 = json!({"artifactId": "a2", "parts": [{"kind": "text", "text": "other"}]});
    let t = b.ok(
        "a2a.tasks.artifact",
        json!({"token": wrk.token, "id": id, "artifact": a2}),
    )["task"]
        .clone();
    let ids: Vec<_> = t["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["artifactId"].clone())
        .collect();
    assert_eq!(ids, [json!("a1"), json!("a2")]);
    assert_eq!(t["version"], 4);
    assert_eq!(
        t["status"]["state"], "submitted",
        "an artifact changed the state"
    );
    // The worker heard nothing of its own artifacts.
    let wrk_events = b.notifications_for(&wrk.id);
    assert!(
        wrk_events
            .iter()
            .all(|n| n["params"]["event"]["kind"] == "status-update"
                && n["params"]["taskVersion"] == 1),
        "{wrk_events:?}"
    );
}

fn artifacts_are_the_workers_and_validated(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let stranger = b.agent("ctx-s", "stranger");
    let id = tid(&b.create_task(&req, &wrk, "x"));
    let art = json!({"artifactId": "a", "parts": [{"kind": "text", "text": "r"}]});
    for who in [&req, &stranger] {
        let resp = b.call(
            "a2a.tasks.artifact",
            json!({"token": who.token, "id": id, "artifact": art}),
        );
        assert_a2a_error(&resp, "A2A_CROSS_CONTEXT_DENIED");
    }
    let resp = b.call(
        "a2a.tasks.artifact",
        json!({"token": wrk.token, "id": "no-such-task", "artifact": art}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_TASK");
    for bad in [
        json!({"parts": [{"kind": "text", "text": "r"}]}),
        json!({"artifactId": "a\u{0}b", "parts": [{"kind": "text", "text": "r"}]}),
        json!({"artifactId": "a".repeat(257), "parts": [{"kind": "text", "text": "r"}]}),
        json!({"artifactId": "a", "parts": [{"kind": "nope"}]}),
        json!({"artifactId": "a", "parts": [{"kind": "file", "file": {"bytes": "@@@"}}]}),
    ] {
        let resp = b.call(
            "a2a.tasks.artifact",
            json!({"token": wrk.token, "id": id, "artifact": bad}),
        );
        assert_rpc_error(&resp, -32602);
    }
    let resp = b.call("a2a.tasks.artifact", json!({"token": wrk.token, "id": id}));
    assert_rpc_error(&resp, -32602);
    let t = b.get_task(&req, &id);
    assert_eq!(t["version"], 1);
    assert_eq!(t["artifacts"], json!([]));
}

fn list_filters_by_role_and_state_newest_first_with_cursor_paging(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (a, w) = pair(&mut b);
    let stranger = b.agent("ctx-s", "stranger");
    let mut requested = Vec::new();
    for i in 0..5 {
        requested.push(tid(&b.create_task(&a, &w, &format!("r{i}"))));
    }
    let mut served = Vec::new();
    for i in 0..2 {
        served.push(tid(&b.create_task(&w, &a, &format!("s{i}"))));
    }
    b.create_task(&stranger, &w, "not a's");

    let ids = |b: &mut Broker, params: Value| -> (Vec<String>, Value) {
        let r = b.ok("a2a.tasks.list", params);
        let ids = r["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect();
        (ids, r)
    };
    let mut all_newest_first: Vec<String> =
        requested.iter().chain(served.iter()).cloned().collect();
    all_newest_first.reverse();
    let (any, r) = ids(&mut b, json!({"token": a.token}));
    assert_eq!(any, all_newest_first);
    assert!(r.get("nextCursor").is_none_or(Value::is_null), "{r}");
    let (any2, _) = ids(&mut b, json!({"token": a.token, "role": "any"}));
    assert_eq!(any2, all_newest_first);
    let (req_only, _) = ids(&mut b, json!({"token": a.token, "role": "requester"}));
    assert_eq!(
        req_only,
        requested.iter().rev().cloned().collect::<Vec<_>>()
    );
    let (wrk_only, _) = ids(&mut b, json!({"token": a.token, "role": "worker"}));
    assert_eq!(wrk_only, served.iter().rev().cloned().collect::<Vec<_>>());

    // Paging by 3: 3 + 3 + 1, nextCursor only while more remain.
    let mut paged = Vec::new();
    let mut cursor: Option<Value> = None;
    for page in 0..3 {
        let mut p = json!({"token": a.token, "limit": 3});
        if let Some(c) = &cursor {
            p["cursor"] = c.clone();
        }
        let (chunk, r) = ids(&mut b, p);
        paged.extend(chunk.clone());
        if page < 2 {
            assert_eq!(chunk.len(), 3, "{r}");
            assert!(
                r["nextCursor"].is_string(),
                "page {page} lacks nextCursor: {r}"
            );
            cursor = Some(r["nextCursor"].clone());
        } else {
            assert_eq!(chunk.len(), 1, "{r}");
            assert!(
                r.get("nextCursor").is_none_or(Value::is_null),
                "last page has nextCursor: {r}"
            );
        }
    }
    assert_eq!(paged, all_newest_first);
    // An exact last page has no cursor either.
    let (_, r) = ids(&mut b, json!({"token": a.token, "limit": 7}));
    assert!(r.get("nextCursor").is_none_or(Value::is_null), "{r}");

    // State filter.
    let (none, _) = ids(&mut b, json!({"token": a.token, "state": "completed"}));
    assert!(none.is_empty());
    b.set_state(&w, &requested[1], "completed");
    let (done, r) = ids(&mut b, json!({"token": a.token, "state": "completed"}));
    assert_eq!(done, [requested[1].clone()], "{r}");
    assert_eq!(r["tasks"][0]["status"]["state"], "completed");
    let (sub, _) = ids(
        &mut b,
        json!({"token": a.token, "state": "submitted", "role": "requester"}),
    );
    assert_eq!(sub.len(), 4);

    for bad in [
        json!({"token": a.token, "role": "boss"}),
        json!({"token": a.token, "state": "bogus"}),
    ] {
        let resp = b.call("a2a.tasks.list", bad);
        assert_rpc_error(&resp, -32602);
    }
    let (s, _) = ids(&mut b, json!({"token": stranger.token}));
    assert_eq!(s.len(), 1);
}

fn resubscribe_emits_the_current_status_to_the_caller(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk, stranger, id) = task_and_stranger(&mut b);
    b.set_state(&wrk, &id, "working");
    b.expect_event(&req.id);
    let r = b.ok(
        "a2a.tasks.resubscribe",
        json!({"token": req.token, "id": id}),
    );
    assert_eq!(r["task"]["id"], id);
    assert_eq!(r["task"]["status"]["state"], "working");
    let n = b.expect_event(&req.id);
    assert_eq!(n["params"]["recipient"], req.id);
    assert_eq!(n["params"]["seq"], 2);
    assert_eq!(n["params"]["event"]["kind"], "status-update");
    assert_eq!(n["params"]["event"]["status"]["state"], "working");
    assert_eq!(n["params"]["event"]["final"], false);
    // The worker can resubscribe too; its own events only.
    b.ok(
        "a2a.tasks.resubscribe",
        json!({"token": wrk.token, "id": id}),
    );
    let n = b.expect_event(&wrk.id);
    assert_eq!(n["params"]["seq"], 2);
    assert_eq!(n["params"]["event"]["status"]["state"], "working");
    // A terminal task's status is final.
    b.set_state(&wrk, &id, "completed");
    b.expect_event(&req.id);
    b.ok(
        "a2a.tasks.resubscribe",
        json!({"token": wrk.token, "id": id}),
    );
    let n = b.expect_event(&wrk.id);
    assert_eq!(n["params"]["event"]["final"], true);
    let resp = b.call(
        "a2a.tasks.resubscribe",
        json!({"token": stranger.token, "id": id}),
    );
    assert_a2a_error(&resp, "A2A_CROSS_CONTEXT_DENIED");
    let resp = b.call(
        "a2a.tasks.resubscribe",
        json!({"token": req.token, "id": "no-such-task"}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_TASK");
}

/// Builds a task with versions 1..=5: created, working, worker message,
/// artifact, input-required with a message.
pub fn five_version_task(b: &mut Broker, req: &Agent, wrk: &Agent) -> String {
    let id = tid(&b.create_task(req, wrk, "v1"));
    b.set_state(wrk, &id, "working");
    b.ok(
        "a2a.message.send",
        json!({"token": wrk.token, "message": text_msg_on("v3", &id)}),
    );
    let art = json!({"artifactId": "a", "parts": [{"kind": "text", "text": "v4"}]});
    b.ok(
        "a2a.tasks.artifact",
        json!({"token": wrk.token, "id": id, "artifact": art}),
    );
    let m = json!({"role": "agent", "messageId": unique("m"), "parts": [{"kind": "text", "text": "v5"}]});
    let t = b.ok(
        "a2a.tasks.status",
        json!({"token": wrk.token, "id": id, "state": "input-required", "message": m}),
    )["task"]
        .clone();
    assert_eq!(t["version"], 5);
    id
}

fn resubscribe_after_version_replays_the_log_in_order(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = five_version_task(&mut b, &req, &wrk);
    // Drain what the requester got live: versions 2..=5.
    let live: Vec<_> = (0..4).map(|_| b.expect_event(&req.id)).collect();
    let live_versions: Vec<_> = live
        .iter()
        .map(|n| n["params"]["taskVersion"].as_u64().unwrap())
        .collect();
    assert_eq!(live_versions, [2, 3, 4, 5]);

    let mut last_seq = seq(live.last().unwrap());
    for after in [0u64, 3, 5] {
        b.ok(
            "a2a.tasks.resubscribe",
            json!({"token": req.token, "id": id, "afterVersion": after}),
        );
        let replayed: Vec<_> = (after + 1..=5).map(|_| b.expect_event(&req.id)).collect();
        for (i, n) in replayed.iter().enumerate() {
            let v = after + 1 + i as u64;
            assert_eq!(n["params"]["taskVersion"], v, "replay after {after}: {n}");
            assert_eq!(seq(n), last_seq + 1 + i as u64, "seq gap in replay: {n}");
            let e = &n["params"]["event"];
            assert_eq!(e["taskId"], id);
            match v {
                1 => {
                    assert_eq!(e["kind"], "status-update");
                    assert_eq!(e["status"]["state"], "submitted");
                    assert_eq!(e["status"]["message"]["parts"][0]["text"], "v1");
                }
                2 => {
                    assert_eq!(e["kind"], "status-update");
                    assert_eq!(e["status"]["state"], "working");
                }
                3 => {
                    assert_eq!(e["kind"], "status-update");
                    assert_eq!(e["status"]["message"]["parts"][0]["text"], "v3");
                }
                4 => {
                    assert_eq!(e["kind"], "artifact-update");
                    assert_eq!(e["artifact"]["parts"][0]["text"], "v4");
                }
                _ => {
                    assert_eq!(e["kind"], "status-update");
                    assert_eq!(e["status"]["state"], "input-required");
                    assert_eq!(e["status"]["message"]["parts"][0]["text"], "v5");
                }
            }
        }
        // Then the current status.
        let cur = b.expect_event(&req.id);
        assert_eq!(cur["params"]["event"]["kind"], "status-update", "{cur}");
        assert_eq!(cur["params"]["event"]["status"]["state"], "input-required");
        assert_eq!(seq(&cur), last_seq + 1 + replayed.len() as u64);
        last_seq = seq(&cur);
    }
    // Nothing else was emitted: the next event is the next seq.
    b.barrier(&req.id, last_seq, |b| {
        b.set_state(&wrk, &id, "working");
    });
}

fn push_configs_are_per_party_and_push_on_terminal_state(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let stranger = b.agent("ctx-s", "stranger");
    let id = tid(&b.create_task(&req, &wrk, "x"));
    let get = |b: &mut Broker, who: &Agent| {
        b.ok(
            "a2a.tasks.pushNotificationConfig.get",
            json!({"token": who.token, "taskId": id}),
        )["config"]
            .clone()
    };
    assert!(get(&mut b, &req).is_null());
    let c1 = json!({"id": "c1", "url": "https://example.invalid/1", "token": "req-old"});
    let r = b.ok(
        "a2a.tasks.pushNotificationConfig.set",
        json!({"token": req.token, "taskId": id, "config": c1}),
    );
    assert_eq!(r["config"], c1);
    let c2 = json!({"id": "c2", "url": "https://example.invalid/2", "token": "req-tok"});
    b.ok(
        "a2a.tasks.pushNotificationConfig.set",
        json!({"token": req.token, "taskId": id, "config": c2}),
    );
    // One config per task (§5): the last set wins, and either party reads it.
    assert_eq!(get(&mut b, &req), c2, "set did not replace the config");
    assert_eq!(get(&mut b, &wrk), c2, "the worker reads the task's config");
    let cw = json!({"id": "cw", "token": "wrk-tok"});
    b.ok(
        "a2a.tasks.pushNotificationConfig.set",
        json!({"token": wrk.token, "taskId": id, "config": cw}),
    );
    assert_eq!(get(&mut b, &wrk), cw);
    assert_eq!(get(&mut b, &req), cw);

    let resp = b.call(
        "a2a.tasks.pushNotificationConfig.set",
        json!({"token": stranger.token, "taskId": id, "config": {"id": "s"}}),
    );
    assert_a2a_error(&resp, "A2A_CROSS_CONTEXT_DENIED");
    let resp = b.call(
        "a2a.tasks.pushNotificationConfig.get",
        json!({"token": stranger.token, "taskId": id}),
    );
    assert_a2a_error(&resp, "A2A_CROSS_CONTEXT_DENIED");
    let resp = b.call(
        "a2a.tasks.pushNotificationConfig.get",
        json!({"token": req.token, "taskId": "no-such-task"}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_TASK");
    let resp = b.call(
        "a2a.tasks.pushNotificationConfig.set",
        json!({"token": req.token, "taskId": "no-such-task", "config": {"id": "x"}}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_TASK");
    let resp = b.call(
        "a2a.tasks.pushNotificationConfig.set",
        json!({"token": req.token, "taskId": id}),
    );
    assert_rpc_error(&resp, -32602);

    // Non-terminal moves push nothing.
    b.set_state(&wrk, &id, "working");
    b.set_state(&wrk, &id, "completed");
    // The requester, counterpart of the worker that completed the task:
    // working event, completed event and one push with the task's config.
    let mut req_notes: Vec<_> = (0..3).map(|_| b.expect_event(&req.id)).collect();
    req_notes.sort_by_key(seq);
    assert_eq!(req_notes.iter().map(seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(req_notes[0]["method"], "a2a.task.event");
    assert_eq!(
        req_notes[0]["params"]["event"]["status"]["state"],
        "working"
    );
    let pushes: Vec<_> = req_notes
        .iter()
        .filter(|n| n["method"] == "a2a.push")
        .collect();
    assert_eq!(pushes.len(), 1, "{req_notes:?}");
    let p = &pushes[0]["params"];
    assert_eq!(p["recipient"], req.id);
    assert_eq!(p["recipientContextId"], req.ctx);
    assert_eq!(p["contextId"], req.ctx);
    assert_eq!(p["taskId"], id);
    assert_eq!(p["token"], "wrk-tok");
    assert_eq!(p["status"]["state"], "completed");
    assert_timestamp(&p["status"]["timestamp"]);
    // The caller never gets a push for its own move: after the creation
    // event, the worker's next notification is the one the barrier sends.
    assert_eq!(seq(&b.expect_event(&wrk.id)), 1);
    b.barrier(&wrk.id, 1, |b| {
        b.create_task(&req, &wrk, "probe");
    });
}

/// A requester that cancels: the push goes to the worker, its counterpart,
/// never to the requester itself (ADR 0147).
fn push_goes_to_the_counterpart_of_the_caller(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = tid(&b.create_task(&req, &wrk, "x"));
    assert_eq!(seq(&b.expect_event(&wrk.id)), 1);
    b.ok(
        "a2a.tasks.pushNotificationConfig.set",
        json!({"token": req.token, "taskId": id, "config": {"id": "c", "token": "t"}}),
    );
    b.ok("a2a.tasks.cancel", json!({"token": req.token, "id": id}));
    let push = b
        .wait_notification(&wrk.id, TIMEOUT, |n| n["method"] == "a2a.push")
        .expect("push to the worker");
    assert_eq!(push["params"]["token"], "t");
    assert_eq!(push["params"]["status"]["state"], "canceled");
    b.barrier(&req.id, 0, |b| {
        b.create_task(&wrk, &req, "probe");
    });
}

fn push_on_cancel_without_token(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let (req, wrk) = pair(&mut b);
    let id = tid(&b.create_task(&req, &wrk, "x"));
    b.ok(
        "a2a.tasks.pushNotificationConfig.set",
        json!({"token": req.token, "taskId": id, "config": {"id": "c"}}),
    );
    b.ok("a2a.tasks.cancel", json!({"token": wrk.token, "id": id}));
    let push = b
        .wait_notification(&req.id, TIMEOUT, |n| n["method"] == "a2a.push")
        .expect("push");
    assert!(
        push["params"].get("token").is_none_or(Value::is_null),
        "{push}"
    );
    assert_eq!(push["params"]["status"]["state"], "canceled");
}
