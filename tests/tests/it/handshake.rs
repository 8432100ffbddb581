//! `app.handshake`: required first, version checked, repeatable, result shape,
//! the stderr ready line, and the secret (socket only).

use a2a_testkit::*;

on_both_transports!(
    ready_line_names_the_child_pid,
    handshake_result_shape,
    every_method_before_handshake_is_refused,
    version_mismatch_is_refused_and_does_not_complete_the_handshake,
    repeated_handshake_is_answered_alike_and_changes_nothing,
);

fn ready_line_names_the_child_pid(t: Transport) {
    let db = TestDb::new();
    let b = Broker::start_on(t, &db.path, &[]);
    assert_eq!(b.ready["ready"], true);
    assert_eq!(
        b.ready["pid"].as_u64(),
        Some(u64::from(b.pid)),
        "ready line: {}",
        b.ready
    );
    match t {
        Transport::Stdio => assert!(b.ready.get("socket").is_none(), "{}", b.ready),
        Transport::Socket => {
            // `start_on` checked the path and read the secret from the file.
            assert!(b.ready["socket"].is_string(), "{}", b.ready);
            assert!(b.ready["secretFile"].is_string(), "{}", b.ready);
        }
    }
}

fn handshake_result_shape(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::start_on(t, &db.path, &[]);
    let params = b.with_secret(
        json!({"protocolVersion": 10, "client": "t", "clientVersion": "1", "locale": "en"}),
    );
    let r = b.ok("app.handshake", params);
    assert_eq!(r["protocolVersion"], 10);
    assert_eq!(r["host"], "a2a-broker");
    assert!(r["hostVersion"].is_string(), "{r}");
    assert!(r["features"].is_array(), "{r}");
    let caps = r["capabilities"].as_array().expect("capabilities array");
    assert!(
        caps.iter().any(|c| c == "a2a"),
        "capabilities lack a2a: {r}"
    );
    assert!(
        r.get("eventRing").is_none() || r["eventRing"].is_null(),
        "no ring was asked for: {r}"
    );
}

fn every_method_before_handshake_is_refused(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::start_on(t, &db.path, &[]);
    let methods = [
        (
            "a2a.agents.register",
            json!({"contextId": "c", "card": {"name": "a"}}),
        ),
        ("a2a.agents.deregister", json!({"token": "t"})),
        ("a2a.agents.list", json!({"token": "t"})),
        (
            "a2a.message.send",
            json!({"token": "t", "message": text_msg("x")}),
        ),
        (
            "a2a.message.stream",
            json!({"token": "t", "message": text_msg("x")}),
        ),
        ("a2a.tasks.get", json!({"token": "t", "id": "x"})),
        (
            "a2a.tasks.status",
            json!({"token": "t", "id": "x", "state": "working"}),
        ),
        ("a2a.tasks.cancel", json!({"token": "t", "id": "x"})),
        ("a2a.tasks.resubscribe", json!({"token": "t", "id": "x"})),
        (
            "a2a.tasks.pushNotificationConfig.set",
            json!({"token": "t", "taskId": "x", "config": {"id": "p"}}),
        ),
        (
            "a2a.tasks.pushNotificationConfig.get",
            json!({"token": "t", "taskId": "x"}),
        ),
        ("a2a.tasks.list", json!({"token": "t"})),
        (
            "a2a.tasks.artifact",
            json!({"token": "t", "id": "x", "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}}),
        ),
        (
            "a2a.events.wait",
            json!({"token": "t", "timeoutSeconds": 0}),
        ),
    ];
    for (method, params) in methods {
        let resp = b.call(method, params);
        let err = assert_rpc_error(&resp, -32600);
        assert_eq!(
            err["data"]["reason"], "handshake required",
            "{method}: {resp}"
        );
    }
    // The connection is still usable and the handshake then works.
    b.handshake();
    let (id, _) = b.register("c", "a", "subagent", "push");
    assert_eq!(id, "a");
}

fn version_mismatch_is_refused_and_does_not_complete_the_handshake(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::start_on(t, &db.path, &[]);
    for v in [9, 11, 0] {
        let params = b.with_secret(json!({"protocolVersion": v}));
        let resp = b.call("app.handshake", params);
        let err = assert_rpc_error(&resp, -32600);
        assert_eq!(
            err["data"],
            json!({"reason": "protocol version mismatch", "protocolVersion": 10}),
            "{resp}"
        );
    }
    let resp = b.call(
        "a2a.agents.register",
        json!({"contextId": "c", "card": {"name": "a"}}),
    );
    let err = assert_rpc_error(&resp, -32600);
    assert_eq!(err["data"]["reason"], "handshake required");
    b.handshake();
    b.register("c", "a", "subagent", "push");
}

fn repeated_handshake_is_answered_alike_and_changes_nothing(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::start_on(t, &db.path, &[]);
    let first = b.handshake();
    let a = b.agent("c1", "a");
    let w = b.agent("c2", "w");
    let second = b.handshake();
    assert_eq!(first, second);
    // A repeated handshake with the wrong version is refused like a first one...
    let params = b.with_secret(json!({"protocolVersion": 9}));
    let resp = b.call("app.handshake", params);
    let err = assert_rpc_error(&resp, -32600);
    assert_eq!(err["data"]["reason"], "protocol version mismatch");
    // ...and changes nothing: the connection, its agents and tokens still work.
    let list = b.ok("a2a.agents.list", json!({"token": a.token}));
    assert_eq!(list["agents"].as_array().map(Vec::len), Some(1), "{list}");
    let task = b.create_task(&a, &w, "hi");
    let n = b.expect_event(&w.id);
    assert_eq!(n["params"]["event"]["taskId"], task["id"]);
}

#[test]
fn secret_is_not_used_on_stdio() {
    let db = TestDb::new();
    let mut b = Broker::start(&db.path, &[]);
    let r = b.ok(
        "app.handshake",
        json!({"protocolVersion": 10, "secret": "anything at all"}),
    );
    assert_eq!(r["protocolVersion"], 10);
    b.register("c", "a", "subagent", "push");
}

#[test]
fn socket_handshake_without_the_right_secret_is_refused_and_closes() {
    let db = TestDb::new();
    let b = Broker::start_on(Transport::Socket, &db.path, &[]);
    for secret in [None, Some("wrong".to_string()), Some(String::new())] {
        let mut c = b.connect_with_secret(secret.clone());
        let resp = c.call(
            "app.handshake",
            c.with_secret(json!({"protocolVersion": 10})),
        );
        let err = assert_rpc_error(&resp, -32600);
        assert_eq!(err["data"]["reason"], "bad secret", "{secret:?}: {resp}");
        assert!(
            c.wait_closed(TIMEOUT),
            "the connection stayed open after a bad secret ({secret:?})"
        );
    }
    // The broker still takes good connections; a method before the
    // handshake is refused there without closing the connection.
    let mut c = b.connect();
    let resp = c.call("a2a.agents.list", json!({"token": "t"}));
    let err = assert_rpc_error(&resp, -32600);
    assert_eq!(err["data"]["reason"], "handshake required");
    c.handshake();
    c.register("c", "a", "subagent", "push");
}
