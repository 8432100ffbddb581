//! The gateway's A2A v1.0 HTTP+JSON (REST) binding against a real broker:
//! the card's interface, every route (send, stream, get, list, cancel,
//! subscribe on POST and GET, the push config CRUD, the extended card),
//! bare `StreamResponse` SSE events, the error statuses with their AIP-193
//! bodies (unknown task 404, not cancelable 409, bad JSON 400, wrong verb
//! 405, unknown path 404, content type 415, version 400), and the same
//! security as JSON-RPC (bearer identities, isolation, rate limit, body
//! bound, audit lines). And outbound: `remote add` of an agent whose card
//! offers only HTTP+JSON, driven through a whole delegation.

mod common;

use a2a_gateway::{Tokens, WebhookPolicy};
use common::{message, string, Harness, Sse};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::Arc;

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
    let ct = common::content_type(&resp);
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
    // JSON-RPC, HTTP+JSON and gRPC in v1.0, then JSON-RPC in v0.3
    // (compat::v03).
    assert_eq!(ifaces.len(), 4, "{card}");
    assert_eq!(ifaces[2]["protocolBinding"], "GRPC", "{card}");
    assert_eq!(ifaces[3]["protocolVersion"], "0.3", "{card}");
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

// ------------------------------------------------------------ outbound

/// A reverse proxy in front of a gateway that serves the card of its
/// `sink` agent with only the HTTP+JSON interface (pointing back through
/// the proxy), forwards everything else as it comes, and records each
/// request's verb and path: what a remote that speaks only REST gets.
struct RestOnly {
    target: String,
    card: Mutex<Value>,
    http: reqwest::Client,
    seen: Mutex<Vec<String>>,
}

async fn rest_only(
    axum::extract::State(p): axum::extract::State<Arc<RestOnly>>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if uri.path() == "/.well-known/agent-card.json" {
        return axum::Json(p.card.lock().clone()).into_response();
    }
    p.seen.lock().push(format!("{method} {}", uri.path()));
    let path = uri.path_and_query().map_or("/", |x| x.as_str());
    let mut req = p
        .http
        .request(method, format!("{}{path}", p.target))
        .body(body);
    for (k, v) in &headers {
        if k != axum::http::header::HOST && k != axum::http::header::CONTENT_LENGTH {
            req = req.header(k, v);
        }
    }
    let resp = req.send().await.expect("the gateway behind answers");
    let status = resp.status();
    let ct = resp.headers().get("content-type").cloned();
    let mut out = axum::response::Response::new(axum::body::Body::from_stream(resp.bytes_stream()));
    *out.status_mut() = status;
    if let Some(ct) = ct {
        out.headers_mut().insert("content-type", ct);
    }
    out
}

/// `a2a-gateway remote add` (the real binary) of `url` on a broker, killed
/// on drop: the peer name it registered.
struct RemoteAdd(std::process::Child);

impl Drop for RemoteAdd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn remote_add(socket: &std::path::Path, secret: &str, url: &str) -> (RemoteAdd, String) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-gateway"))
        .args(["remote", "add", "--socket"])
        .arg(socket)
        .arg(url)
        .env(a2a_client::SECRET_ENV, secret)
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("remote add starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(peer) = line.split(" -> peer ").nth(1) {
                let _ = tx.send(peer.trim().to_owned());
            }
        }
    });
    let peer = rx
        .recv_timeout(common::TIMEOUT)
        .expect("remote add's `remote URL -> peer NAME` line");
    (RemoteAdd(child), peer)
}

/// The next status of the sink's task with a message of the requester
/// (its first task, or a follow-up on `task`): the task id and the text.
async fn sink_gets(
    events: &mut (impl futures_util::Stream<Item = a2a_client::Event> + Unpin),
    task: Option<&str>,
) -> (String, String) {
    use a2a_client::proto::types::{Role, StreamEvent};
    use futures_util::StreamExt;
    loop {
        let ev = tokio::time::timeout(common::TIMEOUT, events.next())
            .await
            .expect("the sink hears of the task in time")
            .expect("events open");
        let a2a_client::Event::TaskEvent(p) = ev else {
            continue;
        };
        let StreamEvent::Status(su) = p.event else {
            continue;
        };
        let Some(m) = su.status.message.as_deref() else {
            continue;
        };
        if m.role != Role::User || task.is_some_and(|t| t != su.task_id) {
            continue;
        }
        let text = match m.parts.first() {
            Some(a2a_client::Part::Text { text, .. }) => text.clone(),
            other => panic!("not a text: {other:?}"),
        };
        return (su.task_id, text);
    }
}

/// The requester's task until it is in one of `until` (within TIMEOUT).
async fn until_state(
    a: &a2a_client::Agent,
    id: &str,
    until: &[a2a_client::State],
) -> a2a_client::Task {
    let deadline = tokio::time::Instant::now() + common::TIMEOUT;
    loop {
        let t = a
            .get_task_async(id, None)
            .expect("submit")
            .await
            .expect("get");
        if until.contains(&t.status.state) {
            return t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {id} stays {:?}, not {until:?}",
            t.status.state
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The first text of a status message.
fn status_text(t: &a2a_client::Task) -> String {
    match t.status.message.as_deref().and_then(|m| m.parts.first()) {
        Some(a2a_client::Part::Text { text, .. }) => text.clone(),
        other => panic!("no status text: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_add_delegates_to_an_agent_that_speaks_only_http_json() {
    delegation_over_rest(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_add_delegates_to_an_agent_that_speaks_only_http_json_without_streaming() {
    delegation_over_rest(false).await;
}

/// A whole delegation (artifact, input-required, follow-up, cancel) to a
/// remote that offers only HTTP+JSON, streaming or not (then the bridge
/// forwards with `SendMessage` and polls `GetTask`).
async fn delegation_over_rest(streaming: bool) {
    use a2a_client::{message_to, task_message, State};
    // The remote side: a gateway whose `sink` agent the test drives by
    // hand, behind a proxy whose card offers HTTP+JSON alone.
    let remote = Harness::start(|_| {}).await;
    let sink = remote.sink.id().to_owned();
    let mut card: Value = remote
        .http
        .get(format!(
            "{}/agents/{sink}/.well-known/agent-card.json",
            remote.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let proxy = Arc::new(RestOnly {
        target: remote.base.clone(),
        card: Mutex::new(Value::Null),
        http: reqwest::Client::builder().no_proxy().build().unwrap(),
        seen: Mutex::default(),
    });
    let port = common::serve_loopback(
        axum::Router::new()
            .fallback(rest_only)
            .with_state(proxy.clone()),
    )
    .await;
    let proxy_url = format!("http://127.0.0.1:{port}");
    card["supportedInterfaces"] = json!([{
        "url": format!("{proxy_url}/agents/{sink}"),
        "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"
    }]);
    card["capabilities"]["streaming"] = json!(streaming);
    *proxy.card.lock() = card;

    // The requester's side: another broker (with its gateway's harness),
    // the remote added to it by the real `remote add`, and a delegate.
    let local = Harness::start(|_| {}).await;
    let (_added, peer) = remote_add(&local.broker.socket, &local.broker.secret, &proxy_url);
    // (`sink-2`: the local broker has a `sink` of its own.)
    assert!(peer.starts_with("sink"), "{peer}");
    let delegate = &local.sink;
    let mut sink_events = remote.sink.events();

    // A delegation through input-required, with an artifact, to the end.
    let task = delegate
        .send_async(message_to(&peer, "paint the fence"), None)
        .expect("submit")
        .await
        .expect("sent");
    let (remote_task, text) = sink_gets(&mut sink_events, None).await;
    assert_eq!(text, "paint the fence");
    let s = &remote.sink;
    s.set_status_async(&remote_task, State::Working, None)
        .expect("submit")
        .await
        .expect("working");
    let mut a = a2a_client::text_artifact("plan", "two coats");
    a.name = Some("plan".into());
    s.add_artifact_async(&remote_task, a, false, true)
        .expect("submit")
        .await
        .expect("artifact");
    s.set_status_async(
        &remote_task,
        State::InputRequired,
        Some(agent_text("which colour?")),
    )
    .expect("submit")
    .await
    .expect("input required");
    let t = until_state(delegate, &task.id, &[State::InputRequired]).await;
    assert_eq!(status_text(&t), "which colour?");
    assert_eq!(t.artifacts.len(), 1, "{t:?}");
    assert!(
        matches!(t.artifacts[0].parts.first(), Some(a2a_client::Part::Text { text, .. }) if text == "two coats"),
        "{t:?}"
    );
    delegate
        .send_async(task_message(&task.id, "green"), None)
        .expect("submit")
        .await
        .expect("follow-up sent");
    let (same, text) = sink_gets(&mut sink_events, Some(&remote_task)).await;
    assert_eq!(
        (same.as_str(), text.as_str()),
        (remote_task.as_str(), "green")
    );
    s.set_status_async(
        &remote_task,
        State::Completed,
        Some(agent_text("done in green")),
    )
    .expect("submit")
    .await
    .expect("completed");
    let t = until_state(delegate, &task.id, &[State::Completed]).await;
    assert_eq!(status_text(&t), "done in green");

    // A cancel from the delegate reaches the remote task.
    let task = delegate
        .send_async(message_to(&peer, "mow the lawn"), None)
        .expect("submit")
        .await
        .expect("sent");
    let (remote_task, _) = sink_gets(&mut sink_events, None).await;
    s.set_status_async(&remote_task, State::Working, None)
        .expect("submit")
        .await
        .expect("working");
    until_state(delegate, &task.id, &[State::Working]).await;
    delegate
        .cancel_async(&task.id, None)
        .expect("submit")
        .await
        .expect("canceled");
    until_state(s, &remote_task, &[State::Canceled]).await;

    // Every call went over the REST paths, none to the JSON-RPC endpoint.
    let seen = proxy.seen.lock().clone();
    let base = format!("/agents/{sink}");
    assert!(
        seen.iter().all(|r| r.contains(&format!("{base}/"))),
        "a call off the REST paths: {seen:?}"
    );
    let verb = if streaming { "stream" } else { "send" };
    let send = format!("POST {base}/message:{verb}");
    for want in [send.as_str(), ":cancel"] {
        assert!(
            seen.iter().any(|r| r.contains(want)),
            "no {want} call: {seen:?}"
        );
    }
    remote.gateway.stop().await;
    local.gateway.stop().await;
}

/// An agent's text message.
fn agent_text(text: &str) -> a2a_client::Message {
    let mut m = a2a_client::text_message(text);
    m.role = a2a_client::proto::types::Role::Agent;
    m
}
