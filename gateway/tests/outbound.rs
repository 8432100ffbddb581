//! The outbound path end to end, without any SDK: a real `a2a-broker`
//! (spawned on a socket), the gateway's outbound bridge in this process,
//! and a scripted A2A v1.0 remote agent served here over HTTP (JSON-RPC +
//! SSE). A local delegate calls the remote by its card's name with plain
//! `a2a.message.send` and must see the remote's work as broker events.
//! (gateway/sdk-tests/ runs the same path against the official Python
//! SDK's server.)
//!
//! The remote behaves by the first word of the text: `complete`, `input`
//! (a follow-up completes it), `slow` (works until canceled), `hang` (takes
//! the task and says nothing until canceled), `break` (takes the task and
//! breaks the connection before its first event), `message` (a direct
//! Message answer), `error` (a JSON-RPC error). While `down`, its JSON-RPC
//! endpoint answers 503 (its card is still served). As a v0.3 remote
//! ([`serve_fake_v03`]) it serves a v0.3 card and answers v0.3's method
//! names only, in v0.3's shapes.

mod common;

use a2a_client::proto::types::StreamEvent;
use a2a_client::{
    agent_card, message_to, task_message, Agent, Client, Delivery, Event, Part, State, Task,
};
use a2a_gateway::{add_remote, BrokerAddr, BrokerConn, OutboundOptions, Remote, RemoteSpec};
use a2a_testkit::{BrokerProcess, Spawn};
use axum::body::Body;
use axum::extract::State as AxState;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

/// Bounds every wait; only stops a hang, never measures speed.
const TIMEOUT: Duration = Duration::from_secs(30);

// ------------------------------------------------------------ the remote

#[derive(Default)]
struct Fake {
    /// Every JSON-RPC request: (method, params, A2A-Version header).
    calls: Mutex<Vec<(String, Value, Option<String>)>>,
    card_fetches: AtomicUsize,
    /// Declare streaming in the card.
    streaming: AtomicBool,
    /// The card points at `/rpc-b` instead of `/rpc-a`, and `/rpc-a`
    /// answers 404 (the remote moved).
    moved: AtomicBool,
    port: AtomicUsize,
    /// The card names this URL as its interface instead (another origin).
    elsewhere: Mutex<Option<String>>,
    /// JSON-RPC calls answer 503 (not recorded in `calls`; counted in
    /// `refused`).
    down: AtomicBool,
    refused: AtomicUsize,
    /// Tasks by id, and their ids in creation order.
    tasks: Mutex<HashMap<String, Value>>,
    order: Mutex<Vec<String>>,
    /// Wakes the stream of a `slow` task when it is canceled.
    cancels: Mutex<HashMap<String, Arc<Notify>>>,
    next: AtomicUsize,
    /// Speak A2A v0.3: its card, its method names, its shapes.
    v03: AtomicBool,
}

impl Fake {
    fn id(&self, p: &str) -> String {
        format!("{p}-{}", self.next.fetch_add(1, Ordering::Relaxed))
    }
    fn calls_of(&self, method: &str) -> Vec<Value> {
        self.calls
            .lock()
            .iter()
            .filter(|(m, _, _)| m == method)
            .map(|(_, p, _)| p.clone())
            .collect()
    }
    /// The remote's task `id` completes with an agent message `text`, as
    /// `GetTask` then shows it.
    fn complete(&self, id: &str, text: &str) {
        let mut tasks = self.tasks.lock();
        let t = tasks.get_mut(id).expect("a remote task");
        let ctx = t["contextId"].as_str().unwrap_or("").to_owned();
        t["status"] = status(id, &ctx, "TASK_STATE_COMPLETED", Some(text))["status"].clone();
    }

    /// The id of the one task the remote holds.
    fn only_task(&self) -> String {
        self.tasks
            .lock()
            .keys()
            .next()
            .cloned()
            .expect("one remote task")
    }
}

async fn card(AxState(f): AxState<Arc<Fake>>) -> Response {
    f.card_fetches.fetch_add(1, Ordering::Relaxed);
    let port = f.port.load(Ordering::Relaxed);
    let path = if f.moved.load(Ordering::Relaxed) {
        "rpc-b"
    } else {
        "rpc-a"
    };
    let url = f
        .elsewhere
        .lock()
        .clone()
        .unwrap_or_else(|| format!("http://127.0.0.1:{port}/{path}"));
    if f.v03.load(Ordering::Relaxed) {
        // As a2a-sdk 0.3 writes it: no supportedInterfaces.
        let card = json!({
            "name": "fake-v03", "description": "scripted", "version": "1",
            "protocolVersion": "0.3.0", "url": url, "preferredTransport": "JSONRPC",
            "capabilities": {"streaming": f.streaming.load(Ordering::Relaxed)},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": []
        });
        return Json(card).into_response();
    }
    let card = json!({
        "name": "fake-remote", "description": "scripted", "version": "1",
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": f.streaming.load(Ordering::Relaxed)},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "echo", "tags": ["echo"]}]
    });
    ([("cache-control", "max-age=3600")], Json(card)).into_response()
}

fn status(task: &str, ctx: &str, state: &str, text: Option<&str>) -> Value {
    let mut st = json!({"state": state, "timestamp": "2026-01-01T00:00:00Z"});
    if let Some(t) = text {
        st["message"] = json!({"messageId": format!("{task}-{state}"), "role": "ROLE_AGENT", "parts": [{"text": t}]});
    }
    json!({"taskId": task, "contextId": ctx, "status": st})
}

/// The scripted behaviour: the events of one send, as StreamResponses.
/// `hold` is set for a `slow` task (the stream waits for its cancel).
fn script(f: &Fake, params: &Value) -> Result<(Vec<Value>, Option<Arc<Notify>>), Value> {
    let msg = &params["message"];
    let text = msg["parts"][0]["text"].as_str().unwrap_or("").to_owned();
    let verb = text.split(' ').next().unwrap_or("");
    if verb == "error" {
        return Err(json!({"code": -32603, "message": "scripted failure"}));
    }
    if verb == "message" {
        let m = json!({"messageId": f.id("m"), "role": "ROLE_AGENT", "parts": [{"text": format!("reply: {text}")}]});
        return Ok((vec![json!({ "message": m })], None));
    }
    if let Some(task_id) = msg["taskId"].as_str() {
        let mut tasks = f.tasks.lock();
        let Some(task) = tasks.get_mut(task_id) else {
            return Err(json!({"code": -32001, "message": "Task not found"}));
        };
        let ctx = task["contextId"].as_str().unwrap_or("").to_owned();
        let done = status(
            task_id,
            &ctx,
            "TASK_STATE_COMPLETED",
            Some(&format!("got: {text}")),
        );
        // What GetTask shows from now on: the follow-up, and the end.
        if let Some(h) = task["history"].as_array_mut() {
            h.push(msg.clone());
        }
        task["status"] = done["status"].clone();
        return Ok((vec![json!({ "statusUpdate": done })], None));
    }
    let (id, ctx) = (
        f.id("t"),
        msg["contextId"]
            .as_str()
            .map_or_else(|| f.id("c"), str::to_owned),
    );
    let task = json!({"id": id, "contextId": ctx, "status": {"state": "TASK_STATE_SUBMITTED"}, "history": [msg]});
    f.tasks.lock().insert(id.clone(), task.clone());
    f.order.lock().push(id.clone());
    let mut evs = vec![json!({ "task": task })];
    let mut hold = None;
    match verb {
        "break" => evs.clear(),
        "hang" => {
            evs.clear();
            let n = Arc::new(Notify::new());
            f.cancels.lock().insert(id.clone(), n.clone());
            hold = Some(n);
        }
        "input" => evs.push(json!({"statusUpdate": status(&id, &ctx, "TASK_STATE_INPUT_REQUIRED", Some("which one?"))})),
        "slow" => {
            evs.push(json!({"statusUpdate": status(&id, &ctx, "TASK_STATE_WORKING", Some("working"))}));
            let n = Arc::new(Notify::new());
            f.cancels.lock().insert(id.clone(), n.clone());
            hold = Some(n);
        }
        _ => {
            evs.push(json!({"statusUpdate": status(&id, &ctx, "TASK_STATE_WORKING", None)}));
            evs.push(json!({"artifactUpdate": {"taskId": id, "contextId": ctx,
                "artifact": {"artifactId": "a1", "name": "echo", "parts": [{"text": format!("echo: {text}")}]}}}));
            evs.push(json!({"statusUpdate": status(&id, &ctx, "TASK_STATE_COMPLETED", Some(&format!("done: {text}")))}));
        }
    }
    Ok((evs, hold))
}

/// The v0.3 shape of one of the fake's v1.0 answers (written here
/// independently of the gateway's translation, so that the test checks
/// it against another reading of the v0.3 schema): `kind` on every object,
/// lowercase kebab-case states, roles `user`/`agent`, text parts
/// `{kind: text}`, and `final` on status updates.
fn v03_of(v: &Value) -> Value {
    let parts = |ps: &Value| -> Value {
        ps.as_array()
            .into_iter()
            .flatten()
            .map(|p| json!({"kind": "text", "text": p["text"]}))
            .collect()
    };
    let msg = |m: &Value| -> Value {
        let mut out = json!({"kind": "message", "messageId": m["messageId"],
            "role": if m["role"] == "ROLE_USER" { "user" } else { "agent" },
            "parts": parts(&m["parts"])});
        for k in ["taskId", "contextId"] {
            if let Some(x) = m.get(k) {
                out[k] = x.clone();
            }
        }
        out
    };
    let status = |s: &Value| -> Value {
        let state = s["state"].as_str().unwrap_or("");
        let mut out = json!({"state": state.trim_start_matches("TASK_STATE_").to_lowercase().replace('_', "-")});
        if let Some(m) = s.get("message") {
            out["message"] = msg(m);
        }
        out
    };
    let artifact = |a: &Value| json!({"artifactId": a["artifactId"], "name": a["name"], "parts": parts(&a["parts"])});
    if let Some(t) = v.get("task") {
        return v03_of(t);
    }
    if let Some(m) = v.get("message") {
        return msg(m);
    }
    if let Some(u) = v.get("statusUpdate") {
        let st = status(&u["status"]);
        let last = !matches!(st["state"].as_str(), Some("submitted" | "working"));
        return json!({"kind": "status-update", "taskId": u["taskId"], "contextId": u["contextId"],
            "status": st, "final": last});
    }
    if let Some(u) = v.get("artifactUpdate") {
        return json!({"kind": "artifact-update", "taskId": u["taskId"], "contextId": u["contextId"],
            "artifact": artifact(&u["artifact"])});
    }
    // A task itself.
    let mut out = json!({"kind": "task", "id": v["id"], "contextId": v["contextId"], "status": status(&v["status"])});
    if let Some(a) = v["artifacts"].as_array() {
        out["artifacts"] = a.iter().map(artifact).collect();
    }
    if let Some(h) = v["history"].as_array() {
        out["history"] = h.iter().map(msg).collect();
    }
    out
}

/// A task snapshot after the events of a unary send (SendMessage returns
/// the task as it ends).
fn fold(evs: &[Value]) -> Value {
    let mut task = Value::Null;
    for e in evs {
        if let Some(t) = e.get("task") {
            task = t.clone();
        } else if let Some(s) = e.get("statusUpdate") {
            task["status"] = s["status"].clone();
        } else if let Some(a) = e.get("artifactUpdate") {
            let arts = task["artifacts"].as_array().cloned().unwrap_or_default();
            task["artifacts"] = Value::Array([arts, vec![a["artifact"].clone()]].concat());
        } else if e.get("message").is_some() {
            return e.clone();
        }
    }
    json!({ "task": task })
}

async fn rpc(
    AxState(f): AxState<Arc<Fake>>,
    path: &'static str,
    headers: HeaderMap,
    body: Json<Value>,
) -> Response {
    if path == "rpc-a" && f.moved.load(Ordering::Relaxed) {
        return StatusCode::NOT_FOUND.into_response();
    }
    if f.down.load(Ordering::Relaxed) {
        f.refused.fetch_add(1, Ordering::Relaxed);
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let Json(req) = body;
    let id = req["id"].clone();
    let mut method = req["method"].as_str().unwrap_or("").to_owned();
    let params = req["params"].clone();
    let version = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    f.calls
        .lock()
        .push((method.clone(), params.clone(), version));
    let v03 = f.v03.load(Ordering::Relaxed);
    if v03 {
        // v0.3's names only (a v1.0 name is not found there).
        method = match method.as_str() {
            "message/send" => "SendMessage",
            "message/stream" => "SendStreamingMessage",
            "tasks/get" => "GetTask",
            "tasks/cancel" => "CancelTask",
            _ => "",
        }
        .to_owned();
    }
    let reply = |r: Result<Value, Value>| match r {
        Ok(result) if v03 => {
            Json(json!({"jsonrpc": "2.0", "id": id, "result": v03_of(&result)})).into_response()
        }
        Ok(result) => Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response(),
        Err(error) => Json(json!({"jsonrpc": "2.0", "id": id, "error": error})).into_response(),
    };
    match method.as_str() {
        "SendMessage" => match script(&f, &params) {
            Err(e) => reply(Err(e)),
            Ok((evs, hold)) => {
                // Without returnImmediately a blocking server answers when
                // the task settles: a `slow` one, once canceled.
                let immediate = params["configuration"]["returnImmediately"] == true
                    || (v03 && params["configuration"]["blocking"] == false);
                if let (Some(n), false) = (hold, immediate) {
                    n.notified().await;
                }
                let mut answer = fold(&evs);
                // A follow-up's fold has no task id; v0.3 answers the whole
                // task (its schema requires the id).
                if let (true, Some(tid)) = (
                    v03 && answer["task"]["id"].is_null(),
                    params["message"]["taskId"].as_str(),
                ) {
                    if let Some(t) = f.tasks.lock().get(tid) {
                        answer = json!({ "task": t });
                    }
                }
                reply(Ok(answer))
            }
        },
        "SendStreamingMessage" => match script(&f, &params) {
            Err(e) => reply(Err(e)),
            Ok(_)
                if params["message"]["parts"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("break")) =>
            {
                // The body fails before any event: the connection breaks.
                let broken = futures_util::stream::iter([Err::<String, _>(std::io::Error::other(
                    "the remote's gateway died",
                ))]);
                (
                    [("content-type", "text/event-stream")],
                    Body::from_stream(broken),
                )
                    .into_response()
            }
            Ok((evs, hold)) => {
                let (tx, rx) = mpsc::unbounded_channel::<String>();
                let frame = move |r: Value| {
                    let r = if v03 { v03_of(&r) } else { r };
                    format!(
                        "data: {}\n\n",
                        json!({"jsonrpc": "2.0", "id": id, "result": r})
                    )
                };
                for e in evs {
                    let _ = tx.send(frame(e));
                }
                if let Some(n) = hold {
                    tokio::spawn(async move {
                        // Hold the stream open until the task is canceled.
                        n.notified().await;
                        drop(tx);
                    });
                }
                let body = futures_util::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|s| (Ok::<_, Infallible>(s), rx))
                });
                (
                    [("content-type", "text/event-stream")],
                    Body::from_stream(body),
                )
                    .into_response()
            }
        },
        "CancelTask" => {
            let tid = params["id"].as_str().unwrap_or("").to_owned();
            if let Some(n) = f.cancels.lock().remove(&tid) {
                n.notify_one();
            }
            let task = f.tasks.lock().get(&tid).cloned();
            reply(
                task.map(|mut t| {
                    t["status"] = json!({"state": "TASK_STATE_CANCELED"});
                    t
                })
                .ok_or(json!({"code": -32001, "message": "Task not found"})),
            )
        }
        "GetTask" => {
            let tid = params["id"].as_str().unwrap_or("");
            let task = f.tasks.lock().get(tid).cloned();
            reply(task.ok_or(json!({"code": -32001, "message": "Task not found"})))
        }
        "ListTasks" => {
            // Newest first, in the context asked for (one page).
            let tasks = f.tasks.lock();
            let page: Vec<Value> = f
                .order
                .lock()
                .iter()
                .rev()
                .filter_map(|id| tasks.get(id))
                .filter(|t| params["contextId"].is_null() || t["contextId"] == params["contextId"])
                .cloned()
                .collect();
            let n = page.len();
            reply(Ok(
                json!({"tasks": page, "nextPageToken": "", "pageSize": n, "totalSize": n}),
            ))
        }
        _ => reply(Err(json!({"code": -32601, "message": "Method not found"}))),
    }
}

async fn serve_fake(streaming: bool) -> (Arc<Fake>, String) {
    let f = Arc::new(Fake::default());
    f.streaming.store(streaming, Ordering::Relaxed);
    let app = Router::new()
        .route("/.well-known/agent-card.json", get(card))
        .route("/rpc-a", post(|s, h, b| rpc(s, "rpc-a", h, b)))
        .route("/rpc-b", post(|s, h, b| rpc(s, "rpc-b", h, b)))
        .with_state(f.clone());
    let port = common::serve_loopback(app).await;
    f.port.store(port as usize, Ordering::Relaxed);
    (f, format!("http://127.0.0.1:{port}"))
}

/// The fake as an A2A v0.3 agent (see [`v03_of`]).
async fn serve_fake_v03(streaming: bool) -> (Arc<Fake>, String) {
    let (f, url) = serve_fake(streaming).await;
    f.v03.store(true, Ordering::Relaxed);
    (f, url)
}

// ------------------------------------------------------------ the broker side

struct Setup {
    _dir: tempfile::TempDir,
    _broker: BrokerProcess,
    _remote: Remote,
    delegate: Agent,
    peer: String,
}

impl Setup {
    /// The gateway dies (its bridge, actors and broker connection go, as in
    /// a crash), and the broker has seen its peer leave: what is left.
    async fn gateway_dies(self) -> Dead {
        drop(self._remote);
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while listed(&self.delegate, &self.peer).await {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the dead gateway's peer stays listed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Dead {
            _dir: self._dir,
            broker: self._broker,
            delegate: self.delegate,
            peer: self.peer,
        }
    }
}

/// What a dead gateway leaves: the broker's folder and process, the
/// delegate and the remote's peer name.
struct Dead {
    _dir: tempfile::TempDir,
    broker: BrokerProcess,
    delegate: Agent,
    peer: String,
}

impl Dead {
    /// The gateway comes back (the remote at `url` added again with
    /// `opts`) under the same name and context: the same party.
    async fn add_again(&self, url: &str, opts: &OutboundOptions) -> Remote {
        let socket = self._dir.path().join("run").join("sock");
        let secret = self.broker.secret().expect("secret");
        let gateway = gateway_conn(&socket, &secret).await;
        let again = add_remote(&gateway, RemoteSpec::new(url), opts)
            .await
            .expect("re-added");
        assert_eq!(again.peer_id, self.peer, "the same party");
        again
    }
}

/// Bridge options with a state file in `dir` (`remotes.db`).
fn stateful_options(dir: &tempfile::TempDir) -> OutboundOptions {
    let store = a2a_gateway::StateFile::open(&dir.path().join("remotes.db")).expect("state file");
    OutboundOptions {
        store: Some(store),
        ..OutboundOptions::default()
    }
}

async fn setup(url: &str) -> Setup {
    setup_with(url, OutboundOptions::default()).await
}

/// A broker on a socket in `dir`: the process, its socket and secret.
fn broker_in(dir: &std::path::Path) -> (BrokerProcess, std::path::PathBuf, String) {
    let socket = dir.join("run").join("sock");
    let broker = Spawn::new(dir.join("db"))
        .socket(&socket)
        .no_stdio()
        .start(TIMEOUT)
        .expect("broker starts");
    let secret = broker.secret().expect("secret file");
    (broker, socket, secret)
}

async fn setup_with(url: &str, opts: OutboundOptions) -> Setup {
    setup_spec(RemoteSpec::new(url), opts).await
}

/// A broker, the remote of `spec` added to it with `opts`, and a delegate.
async fn setup_spec(spec: RemoteSpec, opts: OutboundOptions) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let (broker, socket, secret) = broker_in(dir.path());
    let gateway = gateway_conn(&socket, &secret).await;
    let remote = add_remote(&gateway, spec, &opts)
        .await
        .expect("remote added");
    let client = Client::connect(&socket, &secret).expect("delegate connects");
    let delegate = client
        .register_async("session-1", agent_card("delegate"), Delivery::Push)
        .expect("submit")
        .await
        .expect("delegate registers");
    Setup {
        peer: remote.peer_id.clone(),
        _dir: dir,
        _broker: broker,
        _remote: remote,
        delegate,
    }
}

/// A streaming remote, bridged, with a slow task the delegate sent it,
/// once the task is working.
async fn a_working_remote_task() -> (Arc<Fake>, String, Setup, Task) {
    a_working_remote_task_with(true, OutboundOptions::default()).await
}

/// The same with a streaming remote or not, and the bridge's options.
async fn a_working_remote_task_with(
    streaming: bool,
    opts: OutboundOptions,
) -> (Arc<Fake>, String, Setup, Task) {
    let (fake, url) = serve_fake(streaming).await;
    let s = setup_with(&url, opts).await;
    let task = send(&s.delegate, message_to(&s.peer, "slow work")).await;
    statuses_until(&s.delegate, &task.id, &[State::Working]).await;
    (fake, url, s, task)
}

/// Whether the broker lists an agent named `name` to `a`.
async fn listed(a: &Agent, name: &str) -> bool {
    let cards = tokio::time::timeout(TIMEOUT, a.list_agents_async(None).expect("submit"))
        .await
        .expect("in time")
        .expect("list ok");
    cards.iter().any(|c| c.name == name)
}

/// Waits (within TIMEOUT) until the remote has been asked to cancel its
/// one task.
async fn until_the_remote_task_is_canceled(fake: &Fake) {
    until_called(fake, "CancelTask").await;
    assert_eq!(
        fake.calls_of("CancelTask")[0]["id"],
        json!(fake.only_task())
    );
}

/// Waits (within TIMEOUT) until the remote has received a `method` call.
async fn until_called(fake: &Fake, method: &str) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while fake.calls_of(method).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the remote never got {method}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn send(a: &Agent, m: a2a_client::Message) -> Task {
    tokio::time::timeout(TIMEOUT, a.send_async(m, None).expect("submit"))
        .await
        .expect("send answered in time")
        .expect("send ok")
}

/// The delegate's status events for `task` until one in a state of
/// `until` (each with its message's first text).
async fn statuses_until(a: &Agent, task: &str, until: &[State]) -> Vec<(State, Option<String>)> {
    let mut events = a.events();
    let mut seen = Vec::new();
    loop {
        let ev = tokio::time::timeout(TIMEOUT, events.next())
            .await
            .unwrap_or_else(|_| panic!("no status in {until:?} for {task}; saw {seen:?}"))
            .expect("event stream open");
        let Event::TaskEvent(p) = ev else { continue };
        let StreamEvent::Status(su) = p.event else {
            continue;
        };
        if su.task_id != task {
            continue;
        }
        let text = su
            .status
            .message
            .as_ref()
            .and_then(|m| match m.parts.first() {
                Some(Part::Text { text, .. }) => Some(text.clone()),
                _ => None,
            });
        let st = su.status.state;
        seen.push((st, text));
        if until.contains(&st) {
            return seen;
        }
    }
}

async fn cancel(a: &Agent, id: &str) {
    tokio::time::timeout(TIMEOUT, a.cancel_async(id, None).expect("submit"))
        .await
        .expect("in time")
        .expect("cancel ok");
}

async fn get_task(a: &Agent, id: &str) -> Task {
    tokio::time::timeout(TIMEOUT, a.get_task_async(id, None).expect("submit"))
        .await
        .expect("in time")
        .expect("get ok")
}

fn first_text(parts: &[Part]) -> &str {
    match parts.first() {
        Some(Part::Text { text, .. }) => text,
        other => panic!("not a text part: {other:?}"),
    }
}

// ------------------------------------------------------------ tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_remote_completes_a_delegated_task_with_its_artifact() {
    let (fake, url) = serve_fake(true).await;
    let s = setup(&url).await;
    assert_eq!(s.peer, "fake-remote");
    let task = send(&s.delegate, message_to(&s.peer, "complete hello")).await;
    let seen = statuses_until(&s.delegate, &task.id, &[State::Completed, State::Failed]).await;
    assert_eq!(
        seen.last(),
        Some(&(State::Completed, Some("done: complete hello".into()))),
        "{seen:?}"
    );
    assert!(seen.iter().any(|(s, _)| *s == State::Working), "{seen:?}");
    let t = get_task(&s.delegate, &task.id).await;
    assert_eq!(t.artifacts.len(), 1);
    assert_eq!(t.artifacts[0].artifact_id, "a1");
    assert_eq!(first_text(&t.artifacts[0].parts), "echo: complete hello");
    let sent = fake.calls_of("SendStreamingMessage");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["message"]["role"], "ROLE_USER");
    assert_eq!(
        sent[0]["message"]["parts"],
        json!([{"text": "complete hello"}])
    );
    assert!(fake
        .calls
        .lock()
        .iter()
        .all(|(_, _, v)| v.as_deref() == Some("1.0")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_required_then_a_follow_up_continues_the_same_remote_task() {
    let (fake, url) = serve_fake(true).await;
    let s = setup(&url).await;
    let task = send(&s.delegate, message_to(&s.peer, "input please")).await;
    let seen = statuses_until(
        &s.delegate,
        &task.id,
        &[State::InputRequired, State::Failed],
    )
    .await;
    assert_eq!(
        seen.last(),
        Some(&(State::InputRequired, Some("which one?".into()))),
        "{seen:?}"
    );
    send(&s.delegate, task_message(&task.id, "the blue one")).await;
    let seen = statuses_until(&s.delegate, &task.id, &[State::Completed, State::Failed]).await;
    assert_eq!(
        seen.last(),
        Some(&(State::Completed, Some("got: the blue one".into()))),
        "{seen:?}"
    );
    let sent = fake.calls_of("SendStreamingMessage");
    assert_eq!(sent.len(), 2);
    let remote_task = fake.only_task();
    assert_eq!(sent[1]["message"]["taskId"], json!(remote_task));
    assert_eq!(
        sent[1]["message"]["contextId"],
        fake.tasks.lock()[&remote_task]["contextId"]
    );
    assert_ne!(
        sent[0]["message"]["messageId"],
        sent[1]["message"]["messageId"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegate_cancel_cancels_the_remote_task() {
    let (fake, url) = serve_fake(true).await;
    let s = setup(&url).await;
    let task = send(&s.delegate, message_to(&s.peer, "slow work")).await;
    let seen = statuses_until(&s.delegate, &task.id, &[State::Working]).await;
    assert_eq!(seen.last(), Some(&(State::Working, Some("working".into()))));
    cancel(&s.delegate, &task.id).await;
    until_the_remote_task_is_canceled(&fake).await;
    assert_eq!(
        get_task(&s.delegate, &task.id).await.status.state,
        State::Canceled
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_a_unary_remote_while_its_task_runs() {
    // The remote answers SendMessage only when a `slow` task settles,
    // unless asked to return at once: the gateway asks, so it knows the
    // remote task while it runs and a cancel reaches it.
    let (fake, url) = serve_fake(false).await;
    let s = setup(&url).await;
    let task = send(&s.delegate, message_to(&s.peer, "slow work")).await;
    statuses_until(&s.delegate, &task.id, &[State::Working]).await;
    assert_eq!(
        fake.calls_of("SendMessage")[0]["configuration"]["returnImmediately"],
        true
    );
    cancel(&s.delegate, &task.id).await;
    until_the_remote_task_is_canceled(&fake).await;
}

/// A remote task forwarded by a gateway that then dies three times (its
/// bridge dropped, as in a crash, and added again on the same state
/// file): the remote is sent the message once, the task resumes each
/// time, and the delegate's cancel reaches the remote.
async fn forwarded_once_across_restarts(streaming: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = stateful_options(&dir);
    let (fake, url, s, task) = a_working_remote_task_with(streaming, opts.clone()).await;
    let mut s = s;
    for round in 0..3 {
        let dead = s.gateway_dies().await;
        let again = dead.add_again(&url, &opts).await;
        // Resumed, not failed, and not sent again.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let t = get_task(&dead.delegate, &task.id).await;
        assert_eq!(t.status.state, State::Working, "round {round}");
        s = Setup {
            _dir: dead._dir,
            _broker: dead.broker,
            _remote: again,
            delegate: dead.delegate,
            peer: dead.peer,
        };
    }
    let sends = fake.calls_of("SendMessage").len() + fake.calls_of("SendStreamingMessage").len();
    assert_eq!(sends, 1, "the remote task ran once");
    cancel(&s.delegate, &task.id).await;
    until_the_remote_task_is_canceled(&fake).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_remote_task_is_forwarded_once_across_three_restarts() {
    forwarded_once_across_restarts(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unary_remote_task_is_forwarded_once_across_three_restarts() {
    forwarded_once_across_restarts(false).await;
}

/// The connection breaks after the first message went out and before the
/// remote's first event, the remote having taken the task (its gateway
/// died mid-answer): the bridge finds the task there and follows it,
/// instead of failing a task the remote is working on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_broken_before_its_first_event_finds_the_task_the_remote_took() {
    let (fake, url) = serve_fake(true).await;
    let s = setup(&url).await;
    let task = send(&s.delegate, message_to(&s.peer, "break now")).await;
    found_and_completed_once(&fake, &s.delegate, &task.id, "done despite it").await;
}

/// The bridge dies between sending a task's first message and the
/// remote's first answer (the remote took the task, the bridge never
/// learned its id): started again while the remote is down (503), it waits
/// for it, then finds the task on the remote by the message's recorded id
/// instead of sending the message a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_message_the_remote_took_before_a_crash_is_found_not_sent_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = stateful_options(&dir);
    let (fake, url) = serve_fake(true).await;
    let s = setup_with(&url, opts.clone()).await;
    let task = send(&s.delegate, message_to(&s.peer, "hang on")).await;
    until_called(&fake, "SendStreamingMessage").await;
    let dead = s.gateway_dies().await;
    fake.down.store(true, Ordering::Relaxed);
    let _again = dead.add_again(&url, &opts).await;
    until_refused(&fake).await;
    fake.down.store(false, Ordering::Relaxed);
    found_and_completed_once(&fake, &dead.delegate, &task.id, "done after all").await;
}

/// The bridge looked the task up on the remote (`ListTasks`); the remote
/// then completes it with `text`, which reaches the delegate, and the
/// remote was sent the first message once.
async fn found_and_completed_once(fake: &Fake, delegate: &Agent, task: &str, text: &str) {
    until_called(fake, "ListTasks").await;
    fake.complete(&fake.only_task(), text);
    let seen = statuses_until(delegate, task, &[State::Completed, State::Failed]).await;
    assert_eq!(
        seen.last(),
        Some(&(State::Completed, Some(text.to_owned()))),
        "{seen:?}"
    );
    assert_eq!(fake.calls_of("SendStreamingMessage").len(), 1, "sent once");
}

/// Waits until the remote, down, has refused a call.
async fn until_refused(fake: &Fake) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while fake.refused.load(Ordering::Relaxed) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no call tried");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A streaming remote, bridged with a state file in `dir`, with a task
/// the delegate sent it, once the remote asked for input.
async fn an_input_required_remote_task(
    dir: &tempfile::TempDir,
) -> (Arc<Fake>, String, OutboundOptions, Setup, Task) {
    let opts = stateful_options(dir);
    let (fake, url) = serve_fake(true).await;
    let s = setup_with(&url, opts.clone()).await;
    let task = send(&s.delegate, message_to(&s.peer, "input please")).await;
    statuses_until(&s.delegate, &task.id, &[State::InputRequired]).await;
    (fake, url, opts, s, task)
}

/// The delegate's `answer` to `task` reached the remote once, which
/// completed the task with it.
async fn answered_once(fake: &Fake, delegate: &Agent, task: &str, answer: &str) {
    let seen = statuses_until(delegate, task, &[State::Completed, State::Failed]).await;
    assert_eq!(
        seen.last(),
        Some(&(State::Completed, Some(format!("got: {answer}")))),
        "{seen:?}"
    );
    let follow_ups: Vec<Value> = fake
        .calls_of("SendStreamingMessage")
        .into_iter()
        .filter(|p| p["message"]["taskId"].is_string())
        .collect();
    assert_eq!(follow_ups.len(), 1, "delivered once: {follow_ups:?}");
}

/// The bridge records a follow-up, cannot reach the remote (503), and dies:
/// started again, it sees the remote task's history lacks the message and
/// sends it (before, the task was only polled, and the requester's
/// message was never delivered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_recorded_but_never_delivered_is_sent_after_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (fake, url, opts, s, task) = an_input_required_remote_task(&dir).await;
    fake.down.store(true, Ordering::Relaxed);
    send(&s.delegate, task_message(&task.id, "the red one")).await;
    until_refused(&fake).await;
    let dead = s.gateway_dies().await;
    fake.down.store(false, Ordering::Relaxed);
    let _again = dead.add_again(&url, &opts).await;
    answered_once(&fake, &dead.delegate, &task.id, "the red one").await;
}

/// A follow-up sent while the bridge is down (its event never reached a
/// bridge, so no forward was recorded): the bridge that comes back
/// forwards it when it resumes the task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_sent_while_the_bridge_was_down_is_forwarded_when_it_returns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (fake, url, opts, s, task) = an_input_required_remote_task(&dir).await;
    let dead = s.gateway_dies().await;
    send(&dead.delegate, task_message(&task.id, "the green one")).await;
    let _again = dead.add_again(&url, &opts).await;
    answered_once(&fake, &dead.delegate, &task.id, "the green one").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_made_while_the_gateway_was_down_reaches_the_remote() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = stateful_options(&dir);
    let (fake, url, s, task) = a_working_remote_task_with(false, opts.clone()).await;
    let dead = s.gateway_dies().await;
    cancel(&dead.delegate, &task.id).await;
    assert!(fake.calls_of("CancelTask").is_empty());
    let _again = dead.add_again(&url, &opts).await;
    until_the_remote_task_is_canceled(&fake).await;
}

/// A whole delegation through a v0.3 remote: an artifact and a
/// completion, input-required and its follow-up, a cancel; every call in
/// v0.3's names and shapes.
async fn a_v03_remote_runs_a_whole_delegation(streaming: bool) {
    let (fake, url) = serve_fake_v03(streaming).await;
    let s = setup(&url).await;
    assert_eq!(s.peer, "fake-v03");
    let task = send(&s.delegate, message_to(&s.peer, "complete hello")).await;
    let seen = statuses_until(&s.delegate, &task.id, &[State::Completed, State::Failed]).await;
    assert_eq!(
        seen.last(),
        Some(&(State::Completed, Some("done: complete hello".into()))),
        "{seen:?}"
    );
    let t = get_task(&s.delegate, &task.id).await;
    assert_eq!(t.artifacts.len(), 1, "{t:?}");
    assert_eq!(first_text(&t.artifacts[0].parts), "echo: complete hello");

    let task = send(&s.delegate, message_to(&s.peer, "input please")).await;
    let seen = statuses_until(
        &s.delegate,
        &task.id,
        &[State::InputRequired, State::Failed],
    )
    .await;
    assert_eq!(
        seen.last(),
        Some(&(State::InputRequired, Some("which one?".into()))),
        "{seen:?}"
    );
    send(&s.delegate, task_message(&task.id, "the blue one")).await;
    let seen = statuses_until(&s.delegate, &task.id, &[State::Completed, State::Failed]).await;
    assert_eq!(
        seen.last(),
        Some(&(State::Completed, Some("got: the blue one".into()))),
        "{seen:?}"
    );

    let task = send(&s.delegate, message_to(&s.peer, "slow work")).await;
    statuses_until(&s.delegate, &task.id, &[State::Working]).await;
    cancel(&s.delegate, &task.id).await;
    until_called(&fake, "tasks/cancel").await;
    let canceled = fake.calls_of("tasks/cancel")[0]["id"].clone();
    assert_eq!(
        fake.tasks.lock()[canceled.as_str().expect("an id")]["history"][0]["parts"][0]["text"],
        "slow work"
    );
    assert_eq!(
        get_task(&s.delegate, &task.id).await.status.state,
        State::Canceled
    );

    // What went over the wire: v0.3's method and shapes, never a v1.0 name.
    let sent = fake.calls_of(if streaming {
        "message/stream"
    } else {
        "message/send"
    });
    assert_eq!(sent.len(), 4, "{sent:?}");
    assert_eq!(
        (
            &sent[0]["message"]["kind"],
            &sent[0]["message"]["role"],
            &sent[0]["message"]["parts"]
        ),
        (
            &json!("message"),
            &json!("user"),
            &json!([{"kind": "text", "text": "complete hello"}])
        )
    );
    let input_task = fake.order.lock()[1].clone();
    assert_eq!(sent[2]["message"]["taskId"], json!(input_task));
    if !streaming {
        // The bridge's returnImmediately, as v0.3's inverse flag.
        assert!(
            sent[0]["configuration"]["blocking"].is_boolean(),
            "{sent:?}"
        );
        assert!(sent[0]["configuration"].get("returnImmediately").is_none());
    }
    let calls = fake.calls.lock();
    assert!(
        calls
            .iter()
            .all(|(m, _, v)| m.contains('/') && v.as_deref() == Some("0.3")),
        "{calls:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_v03_remote_is_spoken_to_in_v03_through_a_whole_delegation() {
    a_v03_remote_runs_a_whole_delegation(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unary_v03_remote_is_spoken_to_in_v03_through_a_whole_delegation() {
    a_v03_remote_runs_a_whole_delegation(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unary_remote_answers_tasks_and_direct_messages() {
    let (fake, url) = serve_fake(false).await;
    let s = setup(&url).await;
    let task = send(&s.delegate, message_to(&s.peer, "message hi")).await;
    let seen = statuses_until(&s.delegate, &task.id, &[State::Completed, State::Failed]).await;
    assert_eq!(
        seen.last(),
        Some(&(State::Completed, Some("reply: message hi".into())))
    );
    let task = send(&s.delegate, message_to(&s.peer, "complete again")).await;
    let seen = statuses_until(&s.delegate, &task.id, &[State::Completed, State::Failed]).await;
    assert_eq!(
        seen.last(),
        Some(&(State::Completed, Some("done: complete again".into())))
    );
    assert_eq!(
        first_text(&get_task(&s.delegate, &task.id).await.artifacts[0].parts),
        "echo: complete again"
    );
    assert_eq!(fake.calls_of("SendMessage").len(), 2);
    assert!(fake.calls_of("SendStreamingMessage").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_error_fails_the_task_with_the_reason() {
    let (_fake, url) = serve_fake(true).await;
    let s = setup(&url).await;
    let task = send(&s.delegate, message_to(&s.peer, "error now")).await;
    let seen = statuses_until(&s.delegate, &task.id, &[State::Completed, State::Failed]).await;
    let (state, text) = seen.last().cloned().expect("a status");
    assert_eq!(state, State::Failed);
    let text = text.expect("a reason");
    assert!(
        text.contains("fake-remote") && text.contains("scripted failure"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_that_moved_is_found_again_through_its_card() {
    let (fake, url) = serve_fake(true).await;
    let s = setup(&url).await;
    let fetches = fake.card_fetches.load(Ordering::Relaxed);
    fake.moved.store(true, Ordering::Relaxed);
    let task = send(&s.delegate, message_to(&s.peer, "complete after the move")).await;
    let seen = statuses_until(&s.delegate, &task.id, &[State::Completed, State::Failed]).await;
    assert_eq!(seen.last().map(|s| s.0), Some(State::Completed), "{seen:?}");
    assert!(
        fake.card_fetches.load(Ordering::Relaxed) > fetches,
        "the card was not fetched again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_remote_cannot_be_added() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_broker, socket, secret) = broker_in(dir.path());
    let client = gateway_conn(&socket, &secret).await;
    // A port nothing listens on: bind one, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let err = add_remote(
        &client,
        RemoteSpec::new(format!("http://127.0.0.1:{port}")),
        &OutboundOptions::default(),
    )
    .await
    .expect_err("no card, no peer");
    assert!(err.to_string().contains("unreachable"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_comes_back_fails_the_tasks_it_lost() {
    let (_fake, url, s, task) = a_working_remote_task().await;
    // The gateway dies (its bridge, actors and broker connection go), and
    // comes back without its state file.
    let dead = s.gateway_dies().await;
    let _again = dead.add_again(&url, &OutboundOptions::default()).await;
    let seen = statuses_until(&dead.delegate, &task.id, &[State::Failed, State::Completed]).await;
    let (state, text) = seen.last().cloned().expect("a status");
    assert_eq!(state, State::Failed);
    assert!(text.unwrap_or_default().contains("restarted"), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_remote_cancels_its_remote_tasks_and_leaves_the_broker() {
    let (fake, _url, s, task) = a_working_remote_task().await;
    let Setup {
        _dir,
        _broker,
        _remote: remote,
        delegate,
        peer,
    } = s;
    tokio::time::timeout(TIMEOUT, remote.stop())
        .await
        .expect("stops in time");
    // Leaving fails the tasks the peer served (docs/protocol.md §5, `a2a.agents.deregister`).
    let seen = statuses_until(
        &delegate,
        &task.id,
        &[State::Failed, State::Canceled, State::Completed],
    )
    .await;
    assert_eq!(seen.last().map(|s| s.0), Some(State::Failed), "{seen:?}");
    until_called(&fake, "CancelTask").await;
    assert!(!listed(&delegate, &peer).await, "the peer left");
}

// ------------------------------------------------------------ the HTTP client alone

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_is_refreshed_periodically_even_while_tasks_flow() {
    let (fake, url) = serve_fake(true).await;
    let mut opts = OutboundOptions::default();
    // The card says max-age=3600; the clamp makes it 100 ms here.
    opts.rpc.refresh_min = Duration::from_millis(100);
    opts.rpc.refresh_max = Duration::from_millis(100);
    let s = setup_with(&url, opts).await;
    let initial = fake.card_fetches.load(Ordering::Relaxed);
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    // Events keep reaching the bridge meanwhile: they must not postpone
    // the refresh.
    // (Bounded below the broker's 200 sends per registration.)
    let mut sends = 0;
    while fake.card_fetches.load(Ordering::Relaxed) < initial + 2 {
        assert!(
            tokio::time::Instant::now() < deadline && sends < 150,
            "the card was not refreshed ({sends} tasks sent)"
        );
        sends += 1;
        let task = send(&s.delegate, message_to(&s.peer, "complete tick")).await;
        statuses_until(&s.delegate, &task.id, &[State::Completed, State::Failed]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_goes_only_to_the_origin_that_was_added() {
    // The card is served on one origin and names its interface on another:
    // the card fetch carries the token, the call to the other origin not.
    let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let elsewhere = {
        let seen = seen.clone();
        let app = Router::new().route(
            "/rpc",
            post(move |h: HeaderMap, Json(req): Json<Value>| {
                let seen = seen.clone();
                async move {
                    let a = h.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                    seen.lock().push(("rpc".into(), a));
                    let task = json!({"id": "rt-1", "contextId": "rc-1",
                        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00Z"}});
                    Json(json!({"jsonrpc": "2.0", "id": req["id"], "result": {"task": task}}))
                }
            }),
        );
        let port = common::serve_loopback(app).await;
        format!("http://127.0.0.1:{port}/rpc")
    };
    let elsewhere_url = elsewhere.clone();
    let card_origin = {
        let seen = seen.clone();
        let app = Router::new().route(
            "/.well-known/agent-card.json",
            get(move |h: HeaderMap| {
                let (seen, elsewhere) = (seen.clone(), elsewhere.clone());
                async move {
                    let a = h.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                    seen.lock().push(("card".into(), a));
                    Json(json!({"name": "two-origins", "supportedInterfaces": [
                        {"url": elsewhere, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}))
                }
            }),
        );
        let port = common::serve_loopback(app).await;
        format!("http://127.0.0.1:{port}")
    };
    let mut spec = RemoteSpec::new(&card_origin);
    spec.bearer = Some("tok-123".into());
    // Calls go to another origin only when the operator allows it.
    spec.allow_origins = vec![a2a_gateway::origin_of(&elsewhere_url).expect("origin")];
    let s = setup_spec(spec, OutboundOptions::default()).await;
    let task = send(&s.delegate, message_to(&s.peer, "hi")).await;
    statuses_until(&s.delegate, &task.id, &[State::Completed, State::Failed]).await;
    let seen = seen.lock().clone();
    assert!(
        seen.contains(&("card".into(), "Bearer tok-123".into())),
        "{seen:?}"
    );
    assert!(seen.contains(&("rpc".into(), String::new())), "{seen:?}");
    assert!(
        !seen.iter().any(|(w, a)| w == "rpc" && !a.is_empty()),
        "{seen:?}"
    );
}

/// `a2a-gateway remote add [extra...] url` as a process, not yet waited on.
fn remote_add_command(
    socket: &std::path::Path,
    state: &std::path::Path,
    extra: &[&str],
    url: &str,
) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-gateway"));
    cmd.args(["remote", "add", "--socket"])
        .arg(socket)
        .arg("--state")
        .arg(state)
        .args(extra)
        .arg(url)
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped());
    cmd
}

/// `a2a-gateway remote add` as a process: its stdout line, then its pid.
fn remote_add_process(
    socket: &std::path::Path,
    state: &std::path::Path,
    url: &str,
) -> std::process::Child {
    remote_add_process_with(socket, state, &[], url)
}

/// [`remote_add_process`] with further arguments before the URL.
fn remote_add_process_with(
    socket: &std::path::Path,
    state: &std::path::Path,
    extra: &[&str],
    url: &str,
) -> std::process::Child {
    use std::io::BufRead;
    let mut child = remote_add_command(socket, state, extra, url)
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("remote add starts");
    let out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .expect("its line");
    assert!(line.starts_with("remote "), "{line}");
    child
}

fn sigterm_and_wait(child: &mut std::process::Child) -> std::process::ExitStatus {
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "remote add did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_add_stopped_by_sigterm_resumes_when_started_again() {
    let (fake, url) = serve_fake(false).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (_broker, socket, secret) = broker_in(dir.path());
    let state = dir.path().join("remotes.db");
    let mut first = remote_add_process(&socket, &state, &url);
    let client = Client::connect(&socket, &secret).expect("delegate connects");
    let delegate = client
        .register_async("session-s", agent_card("delegate"), Delivery::Push)
        .expect("submit")
        .await
        .expect("registers");
    let task = send(&delegate, message_to("fake-remote", "slow work")).await;
    statuses_until(&delegate, &task.id, &[State::Working]).await;
    // SIGTERM: a clean exit that cancels nothing and fails nothing.
    let status = sigterm_and_wait(&mut first);
    assert!(status.success(), "{status}");
    assert!(fake.calls_of("CancelTask").is_empty());
    assert_eq!(
        get_task(&delegate, &task.id).await.status.state,
        State::Working
    );
    // Started again on the same state file: resumed, never sent again,
    // and a cancel reaches the remote.
    let mut second = remote_add_process(&socket, &state, &url);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        get_task(&delegate, &task.id).await.status.state,
        State::Working
    );
    assert_eq!(fake.calls_of("SendMessage").len(), 1);
    cancel(&delegate, &task.id).await;
    until_called(&fake, "CancelTask").await;
    let _ = second.kill();
    let _ = second.wait();
}

/// A gateway's broker connection, as `remote add` makes it.
async fn gateway_conn(socket: &std::path::Path, secret: &str) -> BrokerConn {
    let addr = BrokerAddr {
        socket: socket.to_path_buf(),
        secret: secret.to_owned(),
        options: a2a_client::ClientOptions::default(),
    };
    BrokerConn::connect(&addr)
        .await
        .expect("the gateway connects")
}

// ------------------------------------------------------------ calls stay at the card's origin

/// A card served on a port of its own whose JSON-RPC interface is
/// `interface`: the card's base URL.
async fn serve_card_naming(interface: String) -> String {
    let app = Router::new().route(
        "/.well-known/agent-card.json",
        get(move || {
            let interface = interface.clone();
            async move {
                Json(json!({"name": "steering", "supportedInterfaces": [
                    {"url": interface, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}))
            }
        }),
    );
    let port = common::serve_loopback(app).await;
    format!("http://127.0.0.1:{port}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_cannot_steer_calls_to_another_origin_unless_allowed() {
    // The service a card tries to aim the gateway at: another port of the
    // same host (here the scripted remote, which records every call).
    let (victim, victim_url) = serve_fake(false).await;
    let card = serve_card_naming(format!("{victim_url}/rpc-a")).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (_broker, socket, secret) = broker_in(dir.path());
    let gateway = gateway_conn(&socket, &secret).await;
    let err = add_remote(
        &gateway,
        RemoteSpec::new(&card),
        &OutboundOptions::default(),
    )
    .await
    .expect_err("a card naming another port is refused");
    let text = err.to_string();
    assert!(
        text.contains(&format!("served at {card} "))
            && text.contains(&format!("at {victim_url}, another origin"))
            && text.contains("--allow-origin"),
        "{text}"
    );
    // Another host than the card's (IPv6 loopback), the same port.
    let port = card.rsplit(':').next().expect("port");
    let v6 = serve_card_naming(format!("http://[::1]:{port}/rpc")).await;
    let err = add_remote(&gateway, RemoteSpec::new(&v6), &OutboundOptions::default())
        .await
        .expect_err("a card naming [::1] is refused");
    assert!(
        err.to_string()
            .contains(&format!("at http://[::1]:{port}, another origin")),
        "{err}"
    );
    assert!(victim.calls.lock().is_empty(), "a call reached the victim");
    // Allowed by the operator: bridged, and the calls go there.
    let mut spec = RemoteSpec::new(&card);
    spec.allow_origins = vec![victim_url.clone()];
    let remote = add_remote(&gateway, spec, &OutboundOptions::default())
        .await
        .expect("allowed");
    let client = Client::connect(&socket, &secret).expect("delegate connects");
    let delegate = client
        .register_async("session-o", agent_card("delegate"), Delivery::Push)
        .expect("submit")
        .await
        .expect("registers");
    let task = send(&delegate, message_to(&remote.peer_id, "complete it")).await;
    let seen = statuses_until(&delegate, &task.id, &[State::Completed, State::Failed]).await;
    assert_eq!(seen.last().map(|s| s.0), Some(State::Completed), "{seen:?}");
    assert_eq!(victim.calls_of("SendMessage").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refreshed_card_aiming_elsewhere_is_not_taken() {
    let (victim, victim_url) = serve_fake(false).await;
    let (fake, url) = serve_fake(false).await;
    let mut opts = OutboundOptions::default();
    opts.rpc.refresh_min = Duration::from_millis(100);
    opts.rpc.refresh_max = Duration::from_millis(100);
    let s = setup_with(&url, opts).await;
    // The remote's card now names another origin's interface.
    *fake.elsewhere.lock() = Some(format!("{victim_url}/rpc-a"));
    let fetches = fake.card_fetches.load(Ordering::Relaxed);
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while fake.card_fetches.load(Ordering::Relaxed) < fetches + 2 {
        assert!(tokio::time::Instant::now() < deadline, "no refresh");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Calls still go to the origin the remote was added by.
    let task = send(&s.delegate, message_to(&s.peer, "complete after")).await;
    let seen = statuses_until(&s.delegate, &task.id, &[State::Completed, State::Failed]).await;
    assert_eq!(seen.last().map(|s| s.0), Some(State::Completed), "{seen:?}");
    assert_eq!(fake.calls_of("SendMessage").len(), 1);
    assert!(
        victim.calls.lock().is_empty(),
        "a call reached the other origin"
    );
}

/// Runs `cmd` (stderr captured) to its exit; one still running after
/// TIMEOUT (a `remote add` that bridged what it should have refused) is
/// killed and the test fails.
fn exits_within_timeout(mut cmd: std::process::Command) -> std::process::Output {
    let mut child = cmd
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("remote add starts");
    let deadline = std::time::Instant::now() + TIMEOUT;
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "remote add kept running (it bridged the card): {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_add_refuses_a_card_aiming_elsewhere_and_takes_allow_origin() {
    let (victim, victim_url) = serve_fake(false).await;
    let card = serve_card_naming(format!("{victim_url}/rpc-a")).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (_broker, socket, _secret) = broker_in(dir.path());
    let state = dir.path().join("remotes.db");
    let out = exits_within_timeout(remote_add_command(&socket, &state, &[], &card));
    assert!(!out.status.success(), "{:?}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("served at {card} "))
            && stderr.contains(&format!("at {victim_url}, another origin")),
        "{stderr}"
    );
    assert!(victim.calls.lock().is_empty());
    // A value that is not an origin is refused, naming the flag.
    let out = exits_within_timeout(remote_add_command(
        &socket,
        &state,
        &["--allow-origin", "ftp://x"],
        &card,
    ));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--allow-origin ftp://x: not an http(s) origin"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut child =
        remote_add_process_with(&socket, &state, &["--allow-origin", &victim_url], &card);
    let status = sigterm_and_wait(&mut child);
    assert!(status.success(), "{status}");
}
