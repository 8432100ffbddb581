//! A restart of the gateway changes nothing a client can observe: the
//! real `a2a-gateway serve` binary on a state file, in front of a real
//! broker, killed (SIGTERM, and SIGKILL) and started again. Tasks in every
//! state are made first, with a push config; after the restart GetTask,
//! ListTasks (with and without a context, agreeing with GetTask),
//! CancelTask of a running task, a follow-up on an input-required task,
//! SubscribeToTask and the push getters answer as before, and the webhook
//! hears the terminal state of a task that ends after the restart.

mod common;

use a2a_client::{agent_card, Agent, Client, Delivery, State};
use axum::http::HeaderMap;
use common::tck;
use common::{message, sse_events, string, GatewayProc};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;

const TIMEOUT: Duration = Duration::from_secs(20);
/// A webhook receiver on loopback: each POST's JSON body.
async fn receiver() -> (String, mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/webhook",
        axum::routing::post(move |_h: HeaderMap, body: String| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(serde_json::from_str(&body).unwrap_or(Value::Null));
                "ok"
            }
        }),
    );
    let port = common::serve_loopback(app).await;
    (format!("http://127.0.0.1:{port}/webhook"), rx)
}

/// Waits for a webhook POST whose status is `state` for `task`.
async fn hears(rx: &mut mpsc::UnboundedReceiver<Value>, task: &str, state: &str) {
    loop {
        let body = tokio::time::timeout(TIMEOUT, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("the webhook never heard {state}"))
            .expect("receiver open");
        let su = &body["statusUpdate"];
        if su["taskId"] == task && su["status"]["state"] == state {
            return;
        }
    }
}

/// Task ids of a ListTasks answer.
fn ids(list: &Value) -> Vec<String> {
    list["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| string(&t["id"]))
        .collect()
}

/// A broker with the TCK agent and a sink that leaves its tasks to the
/// test: the broker, its socket and secret, and the two agents.
async fn broker_with_sink() -> (tck::BrokerChild, PathBuf, String, (Agent, Agent)) {
    let bin = a2a_testkit::bin::broker_bin().to_path_buf();
    let broker = tokio::task::spawn_blocking(move || tck::spawn_broker(&bin))
        .await
        .unwrap()
        .expect("broker starts");
    let (socket, secret) = (broker.socket.clone(), broker.secret.clone());
    let agents = {
        let (socket, secret) = (socket.clone(), secret.clone());
        tokio::task::spawn_blocking(move || {
            let c = Client::connect(&socket, &secret).expect("connect");
            let sut = tck::register_sut(&c).expect("sut");
            let sink = c
                .register("sink-ctx", agent_card("sink"), Delivery::Push)
                .expect("sink");
            (sut, sink)
        })
        .await
        .unwrap()
    };
    (broker, socket, secret, agents)
}

async fn restart_changes_nothing(signal: &str) {
    let (_broker, socket, secret, (_sut, sink)) = broker_with_sink().await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("gateway.db");
    let (hook, mut heard) = receiver().await;
    let g = GatewayProc::start(
        &socket,
        &secret,
        &state,
        &["--expose", "sink", "--allow-loopback-webhooks"],
    );

    // Before: a completed task, an input-required one (in context c1), and
    // two the sink holds open, one with a webhook.
    let done = g
        .ok(
            "tck",
            "SendMessage",
            json!({"message": message("tck-complete-task-r", "x")}),
        )
        .await;
    let done_id = string(&done["task"]["id"]);
    let mut m = message("tck-input-required-r", "x");
    m["contextId"] = json!("c1");
    let asks = g.ok("tck", "SendMessage", json!({"message": m})).await;
    let asks_id = string(&asks["task"]["id"]);
    assert_eq!(asks["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let open = |id: &str| json!({"message": message(id, "hold"), "configuration": {"returnImmediately": true}});
    let held = g.ok("sink", "SendMessage", open("h-1")).await;
    let held_id = string(&held["task"]["id"]);
    let to_cancel = g.ok("sink", "SendMessage", open("h-2")).await;
    let cancel_id = string(&to_cancel["task"]["id"]);
    let cfg = g
        .ok(
            "sink",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": held_id, "id": "hook-1", "url": hook, "token": "t"}),
        )
        .await;
    let before_all = g.ok("tck", "ListTasks", json!({})).await;
    let before_c1 = g.ok("tck", "ListTasks", json!({"contextId": "c1"})).await;
    let before_done = g.ok("tck", "GetTask", json!({"id": done_id})).await;

    g.kill(signal);
    let g = GatewayProc::start(
        &socket,
        &secret,
        &state,
        &["--expose", "sink", "--allow-loopback-webhooks"],
    );

    // GetTask, completed tasks too, exactly as before.
    assert_eq!(
        g.ok("tck", "GetTask", json!({"id": done_id})).await,
        before_done
    );
    // ListTasks with and without a context: the same tasks, each fetchable.
    let all = g.ok("tck", "ListTasks", json!({})).await;
    assert_eq!(ids(&all), ids(&before_all));
    assert_eq!(all["totalSize"], 2);
    let c1 = g.ok("tck", "ListTasks", json!({"contextId": "c1"})).await;
    assert_eq!(ids(&c1), ids(&before_c1));
    assert_eq!(ids(&c1), vec![asks_id.clone()]);
    for id in ids(&all) {
        g.ok("tck", "GetTask", json!({"id": id})).await;
    }
    // The push getters.
    assert_eq!(
        g.ok(
            "sink",
            "GetTaskPushNotificationConfig",
            json!({"taskId": held_id, "id": "hook-1"})
        )
        .await,
        cfg
    );
    let listed = g
        .ok(
            "sink",
            "ListTaskPushNotificationConfigs",
            json!({"taskId": held_id}),
        )
        .await;
    assert_eq!(listed["configs"], json!([cfg]));
    // A follow-up on the input-required task completes it.
    let mut f = message("tck-complete-task-f", "more");
    f["taskId"] = json!(asks_id);
    let followed = g.ok("tck", "SendMessage", json!({"message": f})).await;
    assert_eq!(followed["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    // CancelTask of a task still open.
    let canceled = g.ok("sink", "CancelTask", json!({"id": cancel_id})).await;
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
    // SubscribeToTask on the held task, which then ends: the stream sees
    // it, and so does the webhook registered before the restart.
    let resp = reqwest::Client::new()
        .post(format!("{}/agents/sink", g.base))
        .header("a2a-version", "1.0")
        .header("accept", "text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": held_id}}))
        .timeout(TIMEOUT)
        .send()
        .await
        .expect("subscribe");
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .contains("text/event-stream"));
    let finish = {
        let (sink, id) = (sink.clone(), held_id.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            sink.set_status_async(&id, State::Completed, None)
                .expect("submit")
                .await
                .expect("completed")
        })
    };
    let body = tokio::time::timeout(TIMEOUT, resp.text())
        .await
        .expect("the stream ends after the terminal state")
        .expect("body");
    finish.await.unwrap();
    let events = sse_events(&body);
    assert_eq!(
        events[0]["result"]["task"]["id"],
        held_id.as_str(),
        "{body}"
    );
    assert_eq!(
        events.last().unwrap()["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{body}"
    );
    hears(&mut heard, &held_id, "TASK_STATE_COMPLETED").await;
    // After all that, ListTasks still agrees with GetTask.
    let all = g.ok("sink", "ListTasks", json!({})).await;
    for t in all["tasks"].as_array().unwrap() {
        let got = g.ok("sink", "GetTask", json!({"id": t["id"]})).await;
        assert_eq!(got["status"]["state"], t["status"]["state"]);
    }
    drop(g);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_gateway_comes_back_with_every_task() {
    restart_changes_nothing("KILL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_gateway_comes_back_with_every_task() {
    restart_changes_nothing("TERM").await;
}

/// SIGTERM with a subscriber's stream open: the stream ends and the
/// gateway exits at once, not after its 10 s grace for calls in flight
/// (the client subscribes again to the gateway started next).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_gateway_ends_its_open_streams_at_once() {
    let (_broker, socket, secret, _agents) = broker_with_sink().await;
    let dir = tempfile::tempdir().unwrap();
    let g = GatewayProc::start(
        &socket,
        &secret,
        &dir.path().join("g.db"),
        &["--expose", "sink"],
    );
    let held = g
        .ok(
            "sink",
            "SendMessage",
            json!({"message": message("s-1", "hold"), "configuration": {"returnImmediately": true}}),
        )
        .await;
    let id = string(&held["task"]["id"]);
    let mut resp = reqwest::Client::new()
        .post(format!("{}/agents/sink", g.base))
        .header("a2a-version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": id}}),
        )
        .send()
        .await
        .expect("subscribe");
    let first = tokio::time::timeout(TIMEOUT, resp.chunk())
        .await
        .expect("the task's event in time")
        .expect("body");
    assert!(first.is_some_and(|c| String::from_utf8_lossy(&c).contains(&id)));
    let started = std::time::Instant::now();
    tokio::task::spawn_blocking(move || g.kill("TERM"))
        .await
        .unwrap();
    let took = started.elapsed();
    // The grace for calls in flight is 10 s; a stream is not one.
    assert!(took < Duration::from_secs(5), "exit took {took:?}");
    let rest = tokio::time::timeout(TIMEOUT, resp.chunk())
        .await
        .expect("the stream's end in time");
    assert!(
        matches!(rest, Ok(None) | Err(_)),
        "the stream ended: {rest:?}"
    );
}
