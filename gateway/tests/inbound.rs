//! The gateway's A2A v1.0 JSON-RPC binding against a real broker: cards,
//! SendMessage (blocking, returnImmediately, message responses, reused
//! message ids, follow-ups), GetTask with historyLength, ListTasks
//! paging, CancelTask, SSE streams (SendStreamingMessage, SubscribeToTask)
//! that close after a terminal state, and v1.0 errors.

mod common;

use common::{json_body, keys, message, string, Harness};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_is_v1_with_caching_headers_and_a_reachable_interface() {
    let h = Harness::start(|_| {}).await;
    let resp = h
        .http
        .get(format!("{}/.well-known/agent-card.json", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let etag = resp.headers()["etag"].to_str().unwrap().to_owned();
    assert!(resp.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("max-age"));
    assert!(resp.headers().contains_key("last-modified"));
    let card: Value = resp.json().await.unwrap();
    let mut top: Vec<&str> = card
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    top.sort_unstable();
    // The v1.0 members, and the v0.3 ones a v0.3 client reads (additional
    // interfaces, preferred transport, protocol version, url).
    assert_eq!(
        top,
        [
            "additionalInterfaces",
            "capabilities",
            "defaultInputModes",
            "defaultOutputModes",
            "description",
            "name",
            "preferredTransport",
            "protocolVersion",
            "skills",
            "supportedInterfaces",
            "url",
            "version"
        ]
    );
    assert_eq!(card["supportedInterfaces"][0]["url"], h.url());
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    assert_eq!(card["capabilities"]["streaming"], true);
    // Push is off unless webhooks are allowed somewhere.
    assert_eq!(card["capabilities"]["pushNotifications"], false);
    // The per-agent URL serves the same card; a matching ETag gets 304.
    let again = h
        .http
        .get(format!("{}/.well-known/agent-card.json", h.url()))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    let missing = h
        .http
        .get(format!(
            "{}/agents/nobody/.well-known/agent-card.json",
            h.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.expect("even a 404 is JSON");
    assert!(body.get("error").is_some());
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_blocks_until_the_task_settles_and_keeps_the_client_message_id() {
    let h = Harness::start(|_| {}).await;
    let r = h.send("tck-complete-task-a", "hi").await;
    let task = &r["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(task["status"]["timestamp"].as_str().unwrap().ends_with('Z'));
    assert_eq!(task["history"][0]["messageId"], "tck-complete-task-a");
    assert_eq!(task["history"][0]["role"], "ROLE_USER");
    assert_eq!(task["history"][1]["role"], "ROLE_AGENT");
    let ctx = string(&task["contextId"]);
    assert!(!ctx.is_empty());
    // No snake_case key and no `kind` anywhere.
    let mut all = Vec::new();
    keys(&r, &mut all);
    assert!(
        all.iter().all(|k| !k.contains('_') && k != "kind"),
        "{all:?}"
    );
    // The same messageId again is a new request, never merged by the
    // broker's idempotency: a second task.
    let again = h.send("tck-complete-task-a", "hi").await;
    assert_ne!(again["task"]["id"], task["id"]);
    assert_eq!(again["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    // Same id, same client context: still two tasks, one context.
    let mut m = message("tck-complete-task-a", "hi");
    m["contextId"] = json!(ctx);
    let third = h.ok("SendMessage", json!({"message": m})).await;
    assert_eq!(third["task"]["contextId"], ctx);
    assert_ne!(third["task"]["id"], task["id"]);
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_required_then_a_follow_up_completes_and_history_length_trims() {
    let h = Harness::start(|_| {}).await;
    let r = h
        .send("tck-input-required-1", "TCK history message 1")
        .await;
    let t = &r["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let id = string(&t["id"]);
    let ctx = t["contextId"].clone();
    // A follow-up by task id alone infers the context.
    let mut m = message("tck-complete-task-2", "TCK history message 2");
    m["taskId"] = json!(id);
    let done = h.ok("SendMessage", json!({"message": m})).await;
    assert_eq!(done["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(done["task"]["contextId"], ctx);
    let full = h
        .ok("GetTask", json!({"id": id, "historyLength": 10}))
        .await;
    let texts: Vec<&str> = full["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "ROLE_USER")
        .map(|m| m["parts"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["TCK history message 1", "TCK history message 2"]);
    let one = h
        .ok("GetTask", json!({"id": id, "history_length": 1}))
        .await;
    assert_eq!(one["history"].as_array().unwrap().len(), 1);
    let none = h.ok("GetTask", json!({"id": id, "historyLength": 0})).await;
    assert!(none.get("history").is_none());
    // A follow-up to a terminal task, and one naming another context, fail.
    let mut late = message("tck-complete-task-3", "late");
    late["taskId"] = json!(id);
    let e = h.rpc("SendMessage", json!({"message": late})).await;
    assert_eq!(e["error"]["code"], -32004);
    let mut wrong = message("tck-complete-task-4", "x");
    wrong["taskId"] = json!(id);
    wrong["contextId"] = json!("another-context");
    assert!(h
        .rpc("SendMessage", json!({"message": wrong}))
        .await
        .get("error")
        .is_some());
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_responses_artifacts_and_return_immediately() {
    let h = Harness::start(|_| {}).await;
    let r = h.send("tck-message-response-1", "hi").await;
    assert_eq!(r["message"]["parts"][0]["text"], "Direct message response");
    assert_eq!(r["message"]["role"], "ROLE_AGENT");
    assert!(r.get("task").is_none());
    for (prefix, want) in [
        (
            "tck-artifact-text",
            json!({"text": "Generated text content"}),
        ),
        (
            "tck-artifact-data",
            json!({"data": {"key": "value", "count": 42}}),
        ),
        (
            "tck-artifact-file-url",
            json!({"url": "https://example.com/output.txt", "filename": "output.txt", "mediaType": "text/plain"}),
        ),
    ] {
        let r = h.send(&format!("{prefix}-1"), "x").await;
        assert_eq!(r["task"]["artifacts"][0]["parts"][0], want, "{prefix}");
        assert!(!r["task"]["artifacts"][0]["artifactId"]
            .as_str()
            .unwrap()
            .is_empty());
    }
    let raw = h.send("tck-artifact-file-1", "x").await;
    assert!(raw["task"]["artifacts"][0]["parts"][0]["raw"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));
    // returnImmediately answers before the worker acts; the task gets
    // there anyway.
    let quick = h
        .ok(
            "SendMessage",
            json!({"message": message("tck-complete-task-q", "x"), "configuration": {"returnImmediately": true}}),
        )
        .await;
    let id = string(&quick["task"]["id"]);
    let mut state = Value::Null;
    for _ in 0..400 {
        state = h.ok("GetTask", json!({"id": id})).await["status"]["state"].clone();
        if state == "TASK_STATE_COMPLETED" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(state, "TASK_STATE_COMPLETED");
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_carry_task_then_updates_and_close_after_the_terminal_state() {
    let h = Harness::start(|_| {}).await;
    let events = h
        .stream(
            "SendStreamingMessage",
            json!({"message": message("tck-stream-001-1", "hi")}),
        )
        .await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| {
            assert_eq!(e["jsonrpc"], "2.0");
            assert_eq!(e["id"], 1);
            let r = e["result"].as_object().expect("a result");
            assert_eq!(r.len(), 1, "exactly one member: {e}");
            r.keys().next().unwrap().as_str()
        })
        .collect();
    assert_eq!(
        kinds,
        ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    );
    assert_eq!(
        events[1]["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert_eq!(
        events[2]["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"],
        "Stream hello from TCK"
    );
    assert_eq!(
        events[3]["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    // Subscribe to an input-required task from two clients; a follow-up
    // completes it and both streams see the same events, then close.
    let r = h.send("tck-input-required-s", "wait").await;
    let id = string(&r["task"]["id"]);
    // Both streams have delivered their first event (so both are
    // subscribed) before the follow-up is sent.
    let mut sa = common::Sse::open(&h, "SubscribeToTask", json!({"id": id})).await;
    let mut sb = common::Sse::open(&h, "SubscribeToTask", json!({"id": id})).await;
    let first_a = sa.next().await.expect("a first event");
    let first_b = sb.next().await.expect("a first event");
    let mut m = message("tck-complete-task-s", "go on");
    m["taskId"] = json!(id);
    h.ok("SendMessage", json!({"message": m})).await;
    let mut a = vec![first_a];
    a.extend(sa.rest().await);
    let mut b = vec![first_b];
    b.extend(sb.rest().await);
    assert_eq!(a, b, "identical streams for both subscribers");
    assert_eq!(
        a[0]["result"]["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    let last = a.last().unwrap();
    assert_eq!(
        last["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // Subscribing to the terminal task is a plain JSON error.
    let e = h.stream("SubscribeToTask", json!({"id": id})).await;
    assert_eq!(e.len(), 1);
    assert_eq!(e[0]["error"]["code"], -32004);
    let e = h
        .stream("SubscribeToTask", json!({"id": "no-such-task"}))
        .await;
    assert_eq!(e[0]["error"]["code"], -32001);
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_list_and_errors_with_error_info() {
    let h = Harness::start(|_| {}).await;
    let r = h.send("tck-input-required-c", "x").await;
    let id = string(&r["task"]["id"]);
    let ctx = string(&r["task"]["contextId"]);
    let c = h.ok("CancelTask", json!({"id": id})).await;
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELED");
    let again = h.rpc("CancelTask", json!({"id": id})).await;
    assert_eq!(again["error"]["code"], -32002);
    assert_eq!(again["error"]["data"][0]["reason"], "TASK_NOT_CANCELABLE");
    let nf = h.rpc("GetTask", json!({"id": "nope"})).await;
    assert_eq!(nf["error"]["code"], -32001);
    assert_eq!(
        nf["error"]["data"][0],
        json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org"})
    );
    let mut keys: Vec<&String> = nf["error"].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["code", "data", "message"]);

    // Five more tasks in the same context; list them three at a time.
    for i in 0..5 {
        let mut m = message(&format!("tck-complete-task-l{i}"), "x");
        m["contextId"] = json!(ctx);
        h.ok("SendMessage", json!({"message": m})).await;
    }
    let p1 = h
        .ok("ListTasks", json!({"context_id": ctx, "page_size": 3}))
        .await;
    assert_eq!(p1["totalSize"], 6);
    assert_eq!(p1["pageSize"], 3);
    assert_eq!(p1["tasks"].as_array().unwrap().len(), 3);
    assert!(p1["tasks"][0].get("artifacts").is_none());
    let token = string(&p1["nextPageToken"]);
    assert!(!token.is_empty());
    let p2 = h
        .ok(
            "ListTasks",
            json!({"contextId": ctx, "pageSize": 3, "pageToken": token}),
        )
        .await;
    assert_eq!(p2["tasks"].as_array().unwrap().len(), 3);
    assert_eq!(p2["nextPageToken"], "");
    let ts = |p: &Value| -> Vec<String> {
        p["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| string(&t["status"]["timestamp"]))
            .collect()
    };
    let all: Vec<String> = ts(&p1).into_iter().chain(ts(&p2)).collect();
    let mut sorted = all.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(all, sorted, "newest first");
    let empty = h.ok("ListTasks", json!({"contextId": "never-used"})).await;
    assert_eq!(empty["tasks"], json!([]));
    assert_eq!(empty["nextPageToken"], "");

    assert_eq!(
        h.rpc("NonExistentMethod", json!({})).await["error"]["code"],
        -32601
    );
    assert_eq!(
        h.rpc("SendMessage", json!({})).await["error"]["code"],
        -32602
    );
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_and_envelopes_are_checked_before_dispatch() {
    let h = Harness::start(|_| {}).await;
    let send = |ct: &'static str, version: Option<&'static str>, body: &'static str| {
        let mut r = h
            .http
            .post(format!("{}/", h.url()))
            .header("content-type", ct)
            .body(body);
        if let Some(v) = version {
            r = r.header("a2a-version", v);
        }
        r
    };
    let e = json_body(send("text/plain", Some("1.0"), "not json")).await;
    assert_eq!(e["error"]["code"], -32005);
    let e = json_body(send(
        "application/json",
        Some("99.0"),
        r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#,
    ))
    .await;
    assert_eq!(e["error"]["code"], -32009);
    assert_eq!(e["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
    let e = json_body(send("application/json", Some("1.0"), "{oops")).await;
    assert_eq!(e["error"]["code"], -32700);
    let e = json_body(send("application/json", Some("1.0"), "[1,2]")).await;
    assert_eq!(e["error"]["code"], -32600);
    let e = json_body(send(
        "application/json",
        Some("1.0"),
        r#"{"jsonrpc":"1.0","id":7,"method":"GetTask"}"#,
    ))
    .await;
    assert_eq!(e["error"]["code"], -32600);
    assert_eq!(e["id"], 7);
    // The trailing-slash URL is the same endpoint; patch versions are 1.0.
    let ok = json_body(send(
        "application/json",
        Some("1.0.2"),
        r#"{"jsonrpc":"2.0","id":"s","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"tckUnknownField":1},"tckExtraParam":true}}"#,
    )).await;
    assert_eq!(ok["id"], "s");
    assert_eq!(
        ok["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_not_declared_are_not_offered() {
    let h = Harness::start(|_| {}).await;
    let card = h.ok("GetExtendedAgentCard", json!({})).await;
    assert_eq!(card["supportedInterfaces"][0]["url"], h.url());
    h.gateway.stop().await;

    let h = Harness::start(|o| {
        o.streaming = false;
        o.extended_card = false;
    })
    .await;
    let card = h.card().await;
    assert_eq!(
        card["capabilities"],
        json!({"streaming": false, "pushNotifications": false, "extendedAgentCard": false})
    );
    // Refused as plain JSON, not as a stream.
    let e = h
        .stream(
            "SendStreamingMessage",
            json!({"message": message("tck-stream-001-x", "x")}),
        )
        .await;
    assert_eq!(e.len(), 1);
    assert_eq!(e[0]["error"]["code"], -32004);
    let e = h.rpc("GetExtendedAgentCard", json!({})).await;
    assert_eq!(e["error"]["code"], -32004);
    let e = h
        .rpc(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t", "url": "https://example.com/w"}),
        )
        .await;
    assert_eq!(e["error"]["code"], -32003);
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_extension_must_be_listed_by_message_requests() {
    const EXT: &str = "urn:example:required";
    let h = Harness::start(|o| o.required_extensions = vec![EXT.into()]).await;
    let card = h.card().await;
    assert_eq!(
        card["capabilities"]["extensions"],
        json!([{"uri": EXT, "required": true}])
    );
    let params = json!({"message": message("tck-complete-task-e", "x")});
    let e = h.rpc("SendMessage", params.clone()).await;
    assert_eq!(e["error"]["code"], -32008);
    assert_eq!(
        e["error"]["data"][0]["reason"],
        "EXTENSION_SUPPORT_REQUIRED"
    );
    let ok = json_body(
        h.post("SendMessage", params)
            .header("a2a-extensions", format!("urn:example:other, {EXT}")),
    )
    .await;
    assert_eq!(
        ok["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // Reads need no extension.
    let id = ok["result"]["task"]["id"].clone();
    h.ok("GetTask", json!({"id": id})).await;
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v03_names_under_the_v1_header_get_the_v1_names_and_blocking_false_returns_at_once() {
    let h = Harness::start(|_| {}).await;
    let r = h
        .rpc(
            "message/send",
            json!({"message": message("tck-complete-task-v03", "hi")}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let text = string(&r["error"]["message"]);
    assert!(
        text.contains("message/send") && text.contains("v0.3") && text.contains("SendMessage"),
        "{text}"
    );
    let r = h.rpc("tasks/resubscribe", json!({"id": "x"})).await;
    assert!(
        string(&r["error"]["message"]).contains("SubscribeToTask"),
        "{r}"
    );
    // An unknown name that is no v0.3 one gets no hint.
    let r = h.rpc("NoSuchMethod", json!({})).await;
    assert_eq!(r["error"]["code"], -32601);
    assert!(!string(&r["error"]["message"]).contains("v0.3"), "{r}");
    // v0.3's `blocking: false` is read as v1.0's `returnImmediately`: an
    // agent that never answers (the sink) does not hold the call.
    let sink = h.sink.id().to_owned();
    let r = json_body(h.post_to(
        &sink,
        "SendMessage",
        json!({"message": message("open-v03b", "hi"), "configuration": {"blocking": false}}),
    ))
    .await;
    assert_eq!(
        r["result"]["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{r}"
    );
    // `blocking: true` is v1.0's default: let through.
    let ok = h
        .ok(
            "SendMessage",
            json!({"message": message("tck-complete-task-v03c", "hi"),
                   "configuration": {"blocking": true}}),
        )
        .await;
    assert_eq!(
        ok["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{ok}"
    );
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_requesters_are_hidden_from_local_agents() {
    let h = Harness::start(|_| {}).await;
    for c in ["hidden-1", "hidden-2"] {
        let mut m = message(&format!("tck-complete-task-{c}"), "hi");
        m["contextId"] = json!(c);
        h.ok("SendMessage", json!({"message": m})).await;
    }
    assert!(h.gateway.contexts().registered() >= 2);
    let sink = h.sink.clone();
    let listed = tokio::task::spawn_blocking(move || sink.list_agents(None))
        .await
        .unwrap()
        .expect("a2a.agents.list");
    let names: Vec<&str> = listed.iter().map(|c| c.name.as_str()).collect();
    assert!(names.contains(&common::tck::SUT_NAME), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("a2a-gateway-")),
        "the gateway's requesters are listed: {names:?}"
    );
    h.gateway.stop().await;
}

#[test]
fn serve_names_a_missing_broker_not_its_secret() {
    let dir = tempfile::tempdir().unwrap();
    for socket in [
        "no-such-broker",
        &dir.path().join("gone.sock").display().to_string(),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-gateway"))
            .args(["serve", "--expose", "x", "--socket", socket])
            .env("XDG_RUNTIME_DIR", dir.path())
            .env_remove(a2a_client::SECRET_ENV)
            .output()
            .expect("the gateway binary runs");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no broker is listening at"), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }
}
