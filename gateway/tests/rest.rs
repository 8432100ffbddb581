//! The gateway's A2A v1.0 HTTP+JSON (REST) binding against a real broker:
//! the card's interface, every route (send, stream, get, list, cancel,
//! subscribe on POST and GET, the push config CRUD, the extended card),
//! bare `StreamResponse` SSE events, the error statuses with their AIP-193
//! bodies (unknown task 404, not cancelable 409, bad JSON 400, wrong verb
//! 405, unknown path 404, content type 415, version 400), and the same
//! security as JSON-RPC (bearer identities, isolation, rate limit, body
//! bound, audit lines).

mod common;

use a2a_gateway::security::{Tokens, WebhookPolicy};
use common::{message, string, Harness, Sse};
use serde_json::{json, Value};

/// A REST request to the exposed agent, as the official clients send it.
fn rest(h: &Harness, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
    h.http
        .request(method, format!("{}{path}", h.url()))
        .header("a2a-version", "1.0")
}

/// A REST POST with a JSON body.
fn post(h: &Harness, path: &str, body: Value) -> reqwest::RequestBuilder {
    rest(h, reqwest::Method::POST, path)
        .header("content-type", "application/json")
        .json(&body)
}

/// The status and the JSON body of an answer.
async fn answer(r: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = r.send().await.expect("send");
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(ct.contains("application/json"), "{status}: {ct}");
    let body = resp.json().await.expect("a JSON body");
    (status, body)
}

/// A success's body (panics on any other status).
async fn ok(r: reqwest::RequestBuilder) -> Value {
    let (status, body) = answer(r).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Checks an AIP-193 error body: `error.code` is the HTTP status, and the
/// A2A `reason`, when given, is in a `google.rpc.ErrorInfo` of `details`.
fn assert_error(status: u16, body: &Value, want: u16, reason: Option<&str>) {
    assert_eq!(status, want, "{body}");
    let e = &body["error"];
    assert_eq!(e["code"], want, "{body}");
    assert!(
        e["status"].as_str().is_some_and(|s| !s.is_empty()),
        "{body}"
    );
    assert!(
        e["message"].as_str().is_some_and(|s| !s.is_empty()),
        "{body}"
    );
    let info = e["details"]
        .as_array()
        .expect("details")
        .iter()
        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo");
    match reason {
        Some(r) => {
            let info = info.unwrap_or_else(|| panic!("no ErrorInfo: {body}"));
            assert_eq!(info["reason"], r, "{body}");
            assert_eq!(info["domain"], "a2a-protocol.org", "{body}");
        }
        None => assert!(info.is_none(), "{body}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_offers_http_json_on_the_agent_url() {
    let h = Harness::start(|_| {}).await;
    let card = h.card().await;
    let ifaces = card["supportedInterfaces"].as_array().unwrap();
    assert_eq!(ifaces.len(), 2, "{card}");
    assert_eq!(ifaces[0]["protocolBinding"], "JSONRPC");
    assert_eq!(ifaces[1]["protocolBinding"], "HTTP+JSON");
    assert_eq!(ifaces[1]["protocolVersion"], "1.0");
    assert_eq!(ifaces[1]["url"], h.url());
    // The extended card is the same card, over GET.
    let ext = ok(rest(&h, reqwest::Method::GET, "/extendedAgentCard")).await;
    assert_eq!(ext, card);
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_get_list_and_cancel_answer_the_bare_results() {
    let h = Harness::start(|_| {}).await;
    let m = message("tck-complete-task-r1", "hi");
    let r = ok(post(&h, "/message:send", json!({"message": m}))).await;
    assert!(
        r.get("jsonrpc").is_none() && r.get("result").is_none(),
        "{r}"
    );
    let task = &r["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["history"][0]["messageId"], "tck-complete-task-r1");
    let id = string(&task["id"]);
    let ctx = string(&task["contextId"]);
    // A message response is the `message` member.
    let r = ok(post(
        &h,
        "/message:send",
        json!({"message": message("tck-message-response-r", "x")}),
    ))
    .await;
    assert_eq!(r["message"]["parts"][0]["text"], "Direct message response");

    // GetTask, its historyLength from the query.
    let got = ok(rest(&h, reqwest::Method::GET, &format!("/tasks/{id}"))).await;
    assert_eq!(got["id"], json!(id));
    assert_eq!(got["history"].as_array().unwrap().len(), 2, "{got}");
    let one = ok(rest(
        &h,
        reqwest::Method::GET,
        &format!("/tasks/{id}?historyLength=1"),
    ))
    .await;
    assert_eq!(one["history"].as_array().unwrap().len(), 1, "{one}");

    // ListTasks: a context's three tasks, in pages of two.
    let mut ids = vec![id.clone()];
    for n in 0..2 {
        let mut m = message(&format!("tck-complete-task-l{n}"), "x");
        m["contextId"] = json!(ctx);
        let r = ok(post(&h, "/message:send", json!({"message": m}))).await;
        ids.push(string(&r["task"]["id"]));
    }
    let (mut seen, mut token, mut pages) = (Vec::new(), String::new(), 0);
    loop {
        let mut q = format!("/tasks?contextId={ctx}&pageSize=2&includeArtifacts=false");
        if !token.is_empty() {
            q.push_str(&format!("&pageToken={token}"));
        }
        let page = ok(rest(&h, reqwest::Method::GET, &q)).await;
        pages += 1;
        let tasks = page["tasks"].as_array().unwrap();
        assert!(tasks.len() <= 2, "{page}");
        seen.extend(tasks.iter().map(|t| string(&t["id"])));
        token = page["nextPageToken"].as_str().unwrap().to_owned();
        if token.is_empty() || pages > 3 {
            break;
        }
    }
    seen.sort();
    ids.sort();
    assert_eq!((seen, pages), (ids, 2));

    // CancelTask with an empty body (as the TCK posts it), then again.
    let r = ok(post(
        &h,
        "/message:send",
        json!({"message": message("tck-input-required-c", "x")}),
    ))
    .await;
    let open = string(&r["task"]["id"]);
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let canceled = ok(
        rest(&h, reqwest::Method::POST, &format!("/tasks/{open}:cancel"))
            .header("content-type", "application/json"),
    )
    .await;
    assert_eq!(canceled["id"], json!(open));
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
    let (status, body) = answer(rest(
        &h,
        reqwest::Method::POST,
        &format!("/tasks/{open}:cancel"),
    ))
    .await;
    assert_error(status, &body, 409, Some("TASK_NOT_CANCELABLE"));
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_and_subscriptions_are_sse_of_bare_stream_responses() {
    let h = Harness::start(|_| {}).await;
    let resp = post(
        &h,
        "/message:stream",
        json!({"message": message("tck-stream-001-r", "x")}),
    )
    .header("accept", "text/event-stream")
    .send()
    .await
    .unwrap();
    let events = Sse::from_response(resp).rest().await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.as_object().unwrap().keys().next().unwrap().as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"task"), "{events:?}");
    assert!(kinds.contains(&"artifactUpdate"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"statusUpdate"), "{kinds:?}");
    assert!(events.iter().all(|e| e.as_object().unwrap().len() == 1));
    let last = events.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    // Subscribing, on POST and on GET, to an interrupted task: the task
    // first, then its updates until the follow-up completes it.
    for verb in [reqwest::Method::POST, reqwest::Method::GET] {
        let r = ok(post(
            &h,
            "/message:send",
            json!({"message": message("tck-input-required-s", "x")}),
        ))
        .await;
        let id = string(&r["task"]["id"]);
        let resp = rest(&h, verb.clone(), &format!("/tasks/{id}:subscribe"))
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        let mut sse = Sse::from_response(resp);
        let first = sse.next().await.expect("the task first");
        assert_eq!(first["task"]["id"], json!(id), "{verb}: {first}");
        let mut m = message("tck-complete-task-s", "done");
        m["taskId"] = json!(id);
        let done = ok(post(&h, "/message:send", json!({"message": m}))).await;
        assert_eq!(done["task"]["status"]["state"], "TASK_STATE_COMPLETED");
        let rest_events = sse.rest().await;
        let end = rest_events.last().expect("updates after the task");
        assert_eq!(
            end["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{verb}: {rest_events:?}"
        );
    }
    // An unknown task is not a stream but a 404.
    let (status, body) = answer(rest(
        &h,
        reqwest::Method::POST,
        "/tasks/no-such-task:subscribe",
    ))
    .await;
    assert_error(status, &body, 404, Some("TASK_NOT_FOUND"));
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_configs_are_created_read_listed_and_deleted() {
    let h = Harness::start(|o| {
        o.webhooks = WebhookPolicy {
            allow_hosts: vec![],
            allow_loopback: true,
        };
    })
    .await;
    let r = ok(post(
        &h,
        "/message:send",
        json!({"message": message("tck-complete-task-p", "x")}),
    ))
    .await;
    let id = string(&r["task"]["id"]);
    let configs = format!("/tasks/{id}/pushNotificationConfigs");
    let created = ok(post(
        &h,
        &configs,
        json!({"id": "cfg-1", "url": "http://127.0.0.1:9/webhook", "token": "t"}),
    ))
    .await;
    assert_eq!(
        (&created["taskId"], &created["id"], &created["url"]),
        (
            &json!(id),
            &json!("cfg-1"),
            &json!("http://127.0.0.1:9/webhook")
        )
    );
    let one = ok(rest(&h, reqwest::Method::GET, &format!("{configs}/cfg-1"))).await;
    assert_eq!(one, created);
    let list = ok(rest(&h, reqwest::Method::GET, &configs)).await;
    assert_eq!(list["configs"], json!([created]));
    let deleted = ok(rest(
        &h,
        reqwest::Method::DELETE,
        &format!("{configs}/cfg-1"),
    ))
    .await;
    assert_eq!(deleted, json!({}));
    let list = ok(rest(&h, reqwest::Method::GET, &configs)).await;
    assert_eq!(list["configs"], json!([]));
    // A body naming another task than the path's is refused.
    let (status, body) = answer(post(
        &h,
        &configs,
        json!({"taskId": "other", "url": "http://127.0.0.1:9/webhook"}),
    ))
    .await;
    assert_error(status, &body, 400, None);
    // On a task that is not there: 404.
    let (status, body) = answer(post(
        &h,
        "/tasks/no-such-task/pushNotificationConfigs",
        json!({"url": "http://127.0.0.1:9/webhook"}),
    ))
    .await;
    assert_error(status, &body, 404, Some("TASK_NOT_FOUND"));
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_have_the_spec_status_and_an_aip193_body() {
    let h = Harness::start(|_| {}).await;
    let get = reqwest::Method::GET;
    let (s, b) = answer(rest(&h, get.clone(), "/tasks/no-such-task")).await;
    assert_error(s, &b, 404, Some("TASK_NOT_FOUND"));
    assert_eq!(b["error"]["status"], "NOT_FOUND");

    // A body that is not JSON: 400, saying so.
    let (s, b) = answer(
        rest(&h, reqwest::Method::POST, "/message:send")
            .header("content-type", "application/json")
            .body("{\"message\": "),
    )
    .await;
    assert_error(s, &b, 400, None);
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("parse error"),
        "{b}"
    );
    // JSON that is not a request object, and a request without a message.
    let (s, b) = answer(post(&h, "/message:send", json!([1, 2]))).await;
    assert_error(s, &b, 400, None);
    let (s, b) = answer(post(&h, "/message:send", json!({}))).await;
    assert_error(s, &b, 400, None);
    // A query value of the wrong type.
    let (s, b) = answer(rest(&h, get.clone(), "/tasks?pageSize=many")).await;
    assert_error(s, &b, 400, None);
    assert!(b["error"]["message"].as_str().unwrap().contains("pageSize"));

    // A known path with another verb: 405 with Allow.
    let resp = rest(&h, get.clone(), "/message:send").send().await.unwrap();
    assert_eq!(resp.headers()["allow"], "POST");
    let (s, b) = (resp.status().as_u16(), resp.json::<Value>().await.unwrap());
    assert_error(s, &b, 405, None);
    let resp = rest(&h, reqwest::Method::PUT, "/tasks/t1")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers()["allow"], "GET");
    // No such path: 404 (JSON too).
    let (s, b) = answer(rest(&h, get.clone(), "/no/such/path")).await;
    assert_error(s, &b, 404, None);

    // Content type and version, checked before the body is read.
    let (s, b) = answer(
        rest(&h, reqwest::Method::POST, "/message:send")
            .header("content-type", "text/plain")
            .body(json!({"message": message("tck-complete-task-ct", "x")}).to_string()),
    )
    .await;
    assert_error(s, &b, 415, Some("CONTENT_TYPE_NOT_SUPPORTED"));
    let (s, b) = answer(
        h.http
            .post(format!("{}/message:send", h.url()))
            .header("a2a-version", "99.0")
            .json(&json!({"message": message("tck-complete-task-v", "x")})),
    )
    .await;
    assert_error(s, &b, 400, Some("VERSION_NOT_SUPPORTED"));
    // A follow-up to a terminal task: UnsupportedOperation, 400.
    let done = ok(post(
        &h,
        "/message:send",
        json!({"message": message("tck-complete-task-t", "x")}),
    ))
    .await;
    let mut late = message("tck-complete-task-late", "x");
    late["taskId"] = done["task"]["id"].clone();
    let (s, b) = answer(post(&h, "/message:send", json!({"message": late}))).await;
    assert_error(s, &b, 400, Some("UNSUPPORTED_OPERATION"));
    // An agent that is not exposed.
    let (s, b) = answer(
        h.http
            .get(format!("{}/agents/nobody/tasks/x", h.base))
            .header("a2a-version", "1.0"),
    )
    .await;
    assert_error(s, &b, 404, None);
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_security_of_json_rpc_holds_over_rest() {
    const ALICE: &str = "alice-secret-0123456789";
    const BOB: &str = "bob-secret-0123456789ab";
    let dir = tempfile::tempdir().unwrap();
    let audit_path = dir.path().join("audit.jsonl");
    let file = audit_path.clone();
    let h = Harness::start(move |o| {
        o.tokens = Tokens::parse([
            format!("alice={ALICE}").as_str(),
            format!("bob={BOB}").as_str(),
        ])
        .unwrap();
        o.audit = Some(file);
        o.max_body_bytes = 4096;
        o.rate = 0.001;
        o.burst = 3;
    })
    .await;
    // No token: 401 with WWW-Authenticate and an AIP-193 body.
    let resp = rest(&h, reqwest::Method::GET, "/tasks")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    let (s, b) = (resp.status().as_u16(), resp.json::<Value>().await.unwrap());
    assert_error(s, &b, 401, None);
    assert_eq!(b["error"]["status"], "UNAUTHENTICATED");
    // Alice's task is not Bob's to read.
    let r = ok(post(
        &h,
        "/message:send",
        json!({"message": message("tck-complete-task-a", "x")}),
    )
    .bearer_auth(ALICE))
    .await;
    let id = string(&r["task"]["id"]);
    let (s, b) =
        answer(rest(&h, reqwest::Method::GET, &format!("/tasks/{id}")).bearer_auth(BOB)).await;
    assert_error(s, &b, 404, Some("TASK_NOT_FOUND"));
    // A body over the bound: 413, before it is parsed.
    let big = "x".repeat(8192);
    let (s, b) = answer(
        post(
            &h,
            "/message:send",
            json!({"message": message("tck-complete-task-b", &big)}),
        )
        .bearer_auth(BOB),
    )
    .await;
    assert_error(s, &b, 413, None);
    // Bob's fourth call within the burst is refused: 429 with Retry-After.
    let _ = ok(rest(&h, reqwest::Method::GET, "/tasks").bearer_auth(BOB)).await;
    let resp = rest(&h, reqwest::Method::GET, "/tasks")
        .bearer_auth(BOB)
        .send()
        .await
        .unwrap();
    assert!(resp.headers().contains_key("retry-after"));
    let (s, b) = (resp.status().as_u16(), resp.json::<Value>().await.unwrap());
    assert_error(s, &b, 429, None);
    assert_eq!(b["error"]["status"], "RESOURCE_EXHAUSTED");
    h.gateway.stop().await;
    // Each call has its audit line, as over JSON-RPC: the operation's
    // v1.0 name, the identity, the task.
    let text = std::fs::read_to_string(&audit_path).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let calls: Vec<(&Value, &Value, &Value)> = rows
        .iter()
        .filter(|r| r["kind"] == "call")
        .map(|r| (&r["identity"], &r["method"], &r["task"]))
        .collect();
    assert_eq!(
        calls,
        [
            (&json!("alice"), &json!("SendMessage"), &json!(id)),
            (&json!("bob"), &json!("GetTask"), &Value::Null),
            (&json!("bob"), &json!("ListTasks"), &Value::Null),
        ],
        "{text}"
    );
    let refused: Vec<&Value> = rows
        .iter()
        .filter(|r| r["kind"] == "refused")
        .map(|r| &r["status"])
        .collect();
    assert_eq!(refused, [&json!(401), &json!(413), &json!(429)], "{text}");
}
