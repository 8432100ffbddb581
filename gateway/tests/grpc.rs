//! The gateway's gRPC binding (`lf.a2a.v1.A2AService`) driven by the
//! generated tonic client over a real HTTP/2 connection, on the port and
//! at the address the card's `GRPC` interface states, against a real
//! broker and the TCK's agent: the card, SendMessage, GetTask, ListTasks,
//! CancelTask, both streams, push configs, errors as gRPC statuses with
//! their `ErrorInfo`, the tenant naming the agent, and the bearer token.
//! Each call goes through the JSON-RPC binding's own handler: what one
//! binding writes, the other reads.

mod common;

use a2a_grpc::v1::{self, a2a_service_client::A2aServiceClient};
use common::{string, Harness};
use serde_json::{json, Value};
use tonic::transport::Channel;
use tonic::{Code, Request};

/// The card's gRPC interface of the TCK agent: its address and tenant.
async fn grpc_interface(h: &Harness) -> (String, String) {
    let card = h
        .http
        .get(format!(
            "{}/agents/{}/.well-known/agent-card.json",
            h.base,
            h.agent.id()
        ))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let ifaces = card["supportedInterfaces"].as_array().unwrap();
    // JSON-RPC stays the preferred (first) interface.
    assert_eq!(ifaces[0]["protocolBinding"], "JSONRPC");
    let g = ifaces
        .iter()
        .find(|i| i["protocolBinding"] == "GRPC")
        .unwrap_or_else(|| panic!("no GRPC interface in {card}"));
    assert_eq!(g["protocolVersion"], "1.0");
    (string(&g["url"]), string(&g["tenant"]))
}

async fn client(addr: &str) -> A2aServiceClient<Channel> {
    let ch = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .timeout(common::TIMEOUT)
        .connect()
        .await
        .expect("an HTTP/2 connection to the gateway's port");
    A2aServiceClient::new(ch)
}

fn text_message(id: &str, text: &str) -> v1::Message {
    v1::Message {
        message_id: id.into(),
        role: v1::Role::User as i32,
        parts: vec![v1::Part {
            content: Some(v1::part::Content::Text(text.into())),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn send(tenant: &str, m: v1::Message) -> v1::SendMessageRequest {
    v1::SendMessageRequest {
        tenant: tenant.into(),
        message: Some(m),
        ..Default::default()
    }
}

fn task_of(r: v1::SendMessageResponse) -> v1::Task {
    match r.payload {
        Some(v1::send_message_response::Payload::Task(t)) => t,
        other => panic!("not a task: {other:?}"),
    }
}

fn state(t: &v1::Task) -> v1::TaskState {
    v1::TaskState::try_from(t.status.as_ref().unwrap().state).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unary_calls_through_the_card_s_grpc_interface() {
    let h = Harness::start(|_| {}).await;
    let (addr, tenant) = grpc_interface(&h).await;
    assert_eq!(addr, h.gateway.addr.to_string());
    assert_eq!(tenant, h.agent.id());
    let mut c = client(&addr).await;

    // A message with a data part: blocking, answered with the done task.
    let mut m = text_message("tck-complete-task-g1", "hello");
    let data: pbjson_types::Value =
        serde_json::from_value(json!({"count": 42, "name": "x"})).unwrap();
    m.parts.push(v1::Part {
        content: Some(v1::part::Content::Data(data)),
        ..Default::default()
    });
    let t = task_of(c.send_message(send(&tenant, m)).await.unwrap().into_inner());
    assert_eq!(state(&t), v1::TaskState::Completed);
    let reply = t.status.as_ref().unwrap().message.as_ref().unwrap();
    assert_eq!(reply.role, v1::Role::Agent as i32);
    assert_eq!(
        reply.parts[0].content,
        Some(v1::part::Content::Text("Hello from TCK".into()))
    );

    // The JSON-RPC binding reads the same task, the data part as it was
    // sent (an integer, not 42.0).
    let via_json = h
        .ok("GetTask", json!({"id": t.id, "historyLength": 10}))
        .await;
    assert_eq!(via_json["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        via_json["history"][0]["parts"][1]["data"],
        json!({"count": 42, "name": "x"})
    );

    // GetTask with historyLength over gRPC.
    let got = c
        .get_task(v1::GetTaskRequest {
            tenant: tenant.clone(),
            id: t.id.clone(),
            history_length: Some(1),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.id, t.id);
    assert_eq!(got.history.len(), 1);

    // ListTasks sees it, in its context.
    let listed = c
        .list_tasks(v1::ListTasksRequest {
            tenant: tenant.clone(),
            context_id: t.context_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.tasks.len(), 1);
    assert_eq!(listed.tasks[0].id, t.id);

    // A task waiting for input is canceled; a second cancel is refused
    // with the A2A error's status and ErrorInfo.
    let open = task_of(
        c.send_message(send(&tenant, text_message("tck-input-required-g", "x")))
            .await
            .unwrap()
            .into_inner(),
    );
    assert_eq!(state(&open), v1::TaskState::InputRequired);
    let cancel = v1::CancelTaskRequest {
        tenant: tenant.clone(),
        id: open.id.clone(),
        metadata: None,
    };
    let canceled = c.cancel_task(cancel.clone()).await.unwrap().into_inner();
    assert_eq!(state(&canceled), v1::TaskState::Canceled);
    let again = c.cancel_task(cancel).await.unwrap_err();
    assert_eq!(again.code(), Code::FailedPrecondition);
    assert_eq!(
        a2a_grpc::status::reason_of(&again).as_deref(),
        Some("TASK_NOT_CANCELABLE")
    );

    let nf = c
        .get_task(v1::GetTaskRequest {
            tenant: tenant.clone(),
            id: "no-such-task".into(),
            history_length: None,
        })
        .await
        .unwrap_err();
    assert_eq!(nf.code(), Code::NotFound);
    assert_eq!(
        a2a_grpc::status::reason_of(&nf).as_deref(),
        Some("TASK_NOT_FOUND")
    );

    // The tenant names the agent: two are exposed here, so it is needed,
    // and one not exposed is not found.
    let no_tenant = c
        .get_task(v1::GetTaskRequest {
            id: t.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(no_tenant.code(), Code::InvalidArgument);
    let elsewhere = c
        .get_task(v1::GetTaskRequest {
            tenant: "nobody".into(),
            id: t.id.clone(),
            history_length: None,
        })
        .await
        .unwrap_err();
    assert_eq!(elsewhere.code(), Code::NotFound);
    assert_eq!(a2a_grpc::status::reason_of(&elsewhere), None);

    // A2A-Version travels as metadata: an unknown one is refused.
    let mut r = Request::new(v1::GetTaskRequest {
        tenant: tenant.clone(),
        id: t.id.clone(),
        history_length: None,
    });
    r.metadata_mut()
        .insert("a2a-version", "9.0".parse().unwrap());
    let v = c.get_task(r).await.unwrap_err();
    assert_eq!(v.code(), Code::FailedPrecondition);
    assert_eq!(
        a2a_grpc::status::reason_of(&v).as_deref(),
        Some("VERSION_NOT_SUPPORTED")
    );
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_and_push_configs() {
    let h = Harness::start(|o| o.webhooks.allow_loopback = true).await;
    let (addr, tenant) = grpc_interface(&h).await;
    let mut c = client(&addr).await;

    let mut s = c
        .send_streaming_message(send(&tenant, text_message("tck-stream-001-g", "hi")))
        .await
        .unwrap()
        .into_inner();
    let mut events = Vec::new();
    while let Some(e) = s.message().await.unwrap() {
        events.push(e.payload.expect("a payload"));
    }
    use v1::stream_response::Payload;
    let Some(Payload::Task(first)) = events.first() else {
        panic!("the task first: {events:?}")
    };
    let id = first.id.clone();
    assert!(
        events.iter().any(|e| matches!(e, Payload::ArtifactUpdate(a)
            if a.artifact.as_ref().unwrap().parts[0].content
                == Some(v1::part::Content::Text("Stream hello from TCK".into())))),
        "{events:?}"
    );
    let Some(Payload::StatusUpdate(last)) = events.last() else {
        panic!("a status update last: {events:?}")
    };
    assert_eq!(last.task_id, id);
    assert_eq!(
        last.status.as_ref().unwrap().state,
        v1::TaskState::Completed as i32
    );

    // Subscribing to the terminal task: refused before the stream.
    let sub = c
        .subscribe_to_task(v1::SubscribeToTaskRequest {
            tenant: tenant.clone(),
            id: id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(sub.code(), Code::FailedPrecondition);
    assert_eq!(
        a2a_grpc::status::reason_of(&sub).as_deref(),
        Some("UNSUPPORTED_OPERATION")
    );

    // Subscribing to an open task: its snapshot, then its cancel.
    let open = task_of(
        c.send_message(send(&tenant, text_message("tck-input-required-s", "x")))
            .await
            .unwrap()
            .into_inner(),
    );
    let mut sub = c
        .subscribe_to_task(v1::SubscribeToTaskRequest {
            tenant: tenant.clone(),
            id: open.id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let snap = sub.message().await.unwrap().unwrap();
    assert!(matches!(snap.payload, Some(Payload::Task(ref t)) if t.id == open.id));
    h.ok("CancelTask", json!({"id": open.id})).await;
    let mut states = Vec::new();
    while let Some(e) = sub.message().await.unwrap() {
        if let Some(Payload::StatusUpdate(u)) = e.payload {
            states.push(u.status.unwrap().state);
        }
    }
    assert_eq!(states.last(), Some(&(v1::TaskState::Canceled as i32)));

    // Push configs: create, get, list, delete.
    let cfg = c
        .create_task_push_notification_config(v1::TaskPushNotificationConfig {
            tenant: tenant.clone(),
            task_id: id.clone(),
            url: "http://127.0.0.1:9/hook".into(),
            token: "tok".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!cfg.id.is_empty());
    assert_eq!(cfg.task_id, id);
    let got = c
        .get_task_push_notification_config(v1::GetTaskPushNotificationConfigRequest {
            tenant: tenant.clone(),
            task_id: id.clone(),
            id: cfg.id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.url, "http://127.0.0.1:9/hook");
    let listed = c
        .list_task_push_notification_configs(v1::ListTaskPushNotificationConfigsRequest {
            tenant: tenant.clone(),
            task_id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.configs.len(), 1);
    c.delete_task_push_notification_config(v1::DeleteTaskPushNotificationConfigRequest {
        tenant: tenant.clone(),
        task_id: id.clone(),
        id: cfg.id.clone(),
    })
    .await
    .unwrap();
    let after = h
        .ok("ListTaskPushNotificationConfigs", json!({"taskId": id}))
        .await;
    assert_eq!(after["configs"], json!([]));
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_token_is_the_authorization_metadata() {
    let h = Harness::start(|o| {
        o.tokens = a2a_gateway::Tokens::parse(["carol=carol-secret-0123456789"]).unwrap();
    })
    .await;
    let (addr, tenant) = grpc_interface(&h).await;
    let mut c = client(&addr).await;
    let req = || Request::new(send(&tenant, text_message("tck-complete-task-auth", "x")));
    let none = c.send_message(req()).await.unwrap_err();
    assert_eq!(none.code(), Code::Unauthenticated);
    let mut bad = req();
    bad.metadata_mut()
        .insert("authorization", "Bearer wrong".parse().unwrap());
    assert_eq!(
        c.send_message(bad).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    let mut good = req();
    good.metadata_mut().insert(
        "authorization",
        "Bearer carol-secret-0123456789".parse().unwrap(),
    );
    let t = task_of(c.send_message(good).await.unwrap().into_inner());
    assert_eq!(state(&t), v1::TaskState::Completed);
    h.gateway.stop().await;
}
