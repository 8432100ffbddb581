//! Push notifications end to end: config CRUD keyed by task and id
//! (delete idempotent), and delivery of the task's updates to a webhook
//! (a loopback receiver, allowed by the loopback switch) with the
//! config's authentication, as v1.0 `StreamResponse` bodies.

mod common;

use a2a_gateway::WebhookPolicy;
use axum::http::HeaderMap;
use common::{message, string, Harness, TIMEOUT};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// A webhook receiver on loopback: each POST's Authorization, token header
/// and JSON body.
async fn receiver() -> (
    String,
    mpsc::UnboundedReceiver<(Option<String>, Option<String>, Value)>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/webhook",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let tx = tx.clone();
            async move {
                let h = |n: &str| {
                    headers
                        .get(n)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned)
                };
                let v = serde_json::from_str(&body).unwrap_or(Value::Null);
                let _ = tx.send((h("authorization"), h("x-a2a-notification-token"), v));
                "ok"
            }
        }),
    );
    let port = common::serve_loopback(app).await;
    (format!("http://127.0.0.1:{port}/webhook"), rx)
}

fn loopback(o: &mut a2a_gateway::ServeOptions) {
    o.webhooks = WebhookPolicy {
        allow_hosts: vec![],
        allow_loopback: true,
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configs_are_created_read_listed_and_deleted_idempotently() {
    let h = Harness::start(loopback).await;
    let card = h.card().await;
    assert_eq!(card["capabilities"]["pushNotifications"], true);
    let r = h.send("tck-complete-task-1", "x").await;
    let id = string(&r["task"]["id"]);
    let created = h
        .ok(
            "CreateTaskPushNotificationConfig",
            json!({"task_id": id, "id": "cfg-1", "url": "http://127.0.0.1:9/webhook",
                   "authentication": {"scheme": "Bearer", "credentials": "c"}}),
        )
        .await;
    assert_eq!(created["id"], "cfg-1");
    assert_eq!(created["taskId"], id.as_str());
    assert_eq!(created["authentication"]["scheme"], "Bearer");
    let got = h
        .ok(
            "GetTaskPushNotificationConfig",
            json!({"task_id": id, "id": "cfg-1"}),
        )
        .await;
    assert_eq!(got, created);
    let listed = h
        .ok("ListTaskPushNotificationConfigs", json!({"task_id": id}))
        .await;
    assert_eq!(listed["configs"], json!([created]));
    for _ in 0..2 {
        let d = h
            .rpc(
                "DeleteTaskPushNotificationConfig",
                json!({"taskId": id, "id": "cfg-1"}),
            )
            .await;
        assert!(d.get("result").is_some(), "{d}");
    }
    let gone = h
        .rpc(
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": "cfg-1"}),
        )
        .await;
    assert!(gone.get("error").is_some());
    let unknown = h
        .rpc(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "nope", "url": "http://127.0.0.1:9/w"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32001);
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_are_posted_to_the_webhook_with_its_authentication() {
    let (url, mut rx) = receiver().await;
    let h = Harness::start(loopback).await;
    let r = h
        .ok(
            "SendMessage",
            json!({"message": message("tck-input-required-1", "x"),
                   "configuration": {"taskPushNotificationConfig": {
                       "id": "hook", "url": url, "token": "tok-1",
                       "authentication": {"scheme": "Bearer", "credentials": "webhook-cred"}}}}),
        )
        .await;
    let id = string(&r["task"]["id"]);
    let mut m = message("tck-complete-task-2", "go");
    m["taskId"] = json!(id);
    let done = h.ok("SendMessage", json!({"message": m})).await;
    assert_eq!(done["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    // Updates arrive in order; wait for the completion.
    let mut states = Vec::new();
    loop {
        let (auth, token, body) = tokio::time::timeout(TIMEOUT, rx.recv())
            .await
            .expect("a webhook POST in time")
            .expect("receiver open");
        assert_eq!(auth.as_deref(), Some("Bearer webhook-cred"));
        assert_eq!(token.as_deref(), Some("tok-1"));
        let su = &body["statusUpdate"];
        assert_eq!(su["taskId"], id.as_str(), "{body}");
        assert_eq!(body.as_object().unwrap().len(), 1);
        let st = string(&su["status"]["state"]);
        states.push(st.clone());
        if st == "TASK_STATE_COMPLETED" {
            break;
        }
    }
    assert!(
        states.ends_with(&["TASK_STATE_COMPLETED".to_owned()]),
        "{states:?}"
    );
    // Each update is posted once: the completion reaches the gateway twice
    // (the broker's event, and the answer to its own blocking send), and
    // must not be posted twice. Nothing follows it.
    let mut seen = states.clone();
    seen.dedup();
    assert_eq!(seen, states, "an update posted twice: {states:?}");
    let extra = tokio::time::timeout(std::time::Duration::from_millis(500), rx.recv()).await;
    assert!(
        extra.is_err(),
        "a post after the terminal update: {extra:?}"
    );
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_given_in_a_blocking_send_hears_every_update() {
    // The config rides on a blocking SendMessage: it is stored before the
    // task can move, so the webhook hears the updates before the answer
    // as well as the final one.
    let (url, mut rx) = receiver().await;
    let h = Harness::start(loopback).await;
    let r = h
        .ok(
            "SendMessage",
            json!({"message": message("tck-stream-001-push", "x"),
                   "configuration": {"taskPushNotificationConfig": {"id": "in-send", "url": url}}}),
        )
        .await;
    let id = string(&r["task"]["id"]);
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let mut kinds = Vec::new();
    loop {
        let (_, _, body) = tokio::time::timeout(TIMEOUT, rx.recv())
            .await
            .expect("a webhook POST in time")
            .expect("receiver open");
        if let Some(su) = body.get("statusUpdate") {
            assert_eq!(su["taskId"], id.as_str());
            let st = string(&su["status"]["state"]);
            kinds.push(st.clone());
            if st == "TASK_STATE_COMPLETED" {
                break;
            }
        } else {
            kinds.push("artifact".into());
        }
    }
    assert!(
        kinds.contains(&"TASK_STATE_WORKING".to_owned()),
        "only the end was pushed: {kinds:?}"
    );
    let got = h
        .ok(
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": "in-send"}),
        )
        .await;
    assert_eq!(got["url"], url.as_str());
    h.gateway.stop().await;
}
