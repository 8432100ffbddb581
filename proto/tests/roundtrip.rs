//! Every message type round-trips through both codecs: JSON (method name +
//! params, result, notification) and binary frames (bincode payloads).

use a2a_proto::binary::{decode_payload, encode_frame, split_frames, ClientFrame, ServerFrame};
use a2a_proto::call::{Call, Outcome};
use a2a_proto::error::{A2aErrorCode, RpcError};
use a2a_proto::params::*;
use a2a_proto::types::*;
use serde_json::json;
use std::sync::Arc;

fn obj(v: serde_json::Value) -> Object {
    Object::from(v.as_object().unwrap().clone())
}

fn message() -> Message {
    Message {
        role: Role::Agent,
        parts: vec![
            Part::Text {
                text: "hi ✓".into(),
                metadata: Some(obj(json!({"k": [1, 2]}))),
            },
            Part::File {
                file: FileContent {
                    name: Some("a.bin".into()),
                    mime_type: Some("application/octet-stream".into()),
                    uri: None,
                    bytes: Some("AAEC".into()),
                },
                metadata: None,
            },
            Part::File {
                file: FileContent {
                    uri: Some("file:///x".into()),
                    ..Default::default()
                },
                metadata: None,
            },
            Part::Data {
                data: obj(json!({"n": 1.5, "nested": {"a": null}})),
                metadata: None,
            },
        ],
        message_id: "m1".into(),
        task_id: Some("t1".into()),
        context_id: Some("c1".into()),
        from: Some("a".into()),
        to: Some("b".into()),
        metadata: Some(obj(json!({"trace": "x"}))),
    }
}

fn status() -> TaskStatus {
    TaskStatus {
        state: State::InputRequired,
        message: Some(Arc::new(message())),
        timestamp: "2026-11-30T00:00:00.000Z".into(),
    }
}

fn artifact() -> Artifact {
    Artifact {
        artifact_id: "a1".into(),
        name: Some("out".into()),
        description: None,
        parts: vec![Part::text("x")],
        metadata: None,
    }
}

fn task() -> Task {
    Task {
        kind: "task".into(),
        id: "t1".into(),
        context_id: "c1".into(),
        status: status(),
        history: vec![Arc::new(message())],
        artifacts: vec![artifact()],
        agent_name: "b".into(),
        requester_name: "a".into(),
        version: 7,
    }
}

fn card() -> AgentCard {
    AgentCard {
        name: "w".into(),
        description: "d".into(),
        version: "1".into(),
        skills: vec![AgentSkill {
            id: "s".into(),
            name: "S".into(),
            description: "".into(),
            tags: vec!["t".into()],
        }],
        capabilities: Capabilities {
            streaming: true,
            push_notifications: false,
        },
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["application/json".into()],
        context_id: Some("c".into()),
        kind: Some(AgentKind::Parent),
    }
}

fn push() -> PushConfig {
    PushConfig {
        id: "p".into(),
        url: Some("http://x".into()),
        token: Some("k".into()),
    }
}

fn tok() -> Option<String> {
    Some("tok".into())
}

fn every_call() -> Vec<Call> {
    let send = SendParams {
        token: tok(),
        message: message(),
        configuration: Some(SendConfiguration {
            blocking: Some(true),
            history_length: Some(2),
            push_notification_config: Some(push()),
        }),
    };
    vec![
        Call::Handshake(HandshakeParams {
            protocol_version: 10,
            client: Some("c".into()),
            client_version: Some("1".into()),
            locale: Some("en".into()),
            secret: Some("s".into()),
            event_ring: Some(EventRingRequest { bytes: 65536 }),
        }),
        Call::Register(RegisterParams {
            context_id: "c".into(),
            card: card(),
            delivery: Some(Delivery::Pull),
            hidden: true,
        }),
        Call::Deregister(TokenParams { token: tok() }),
        Call::ListAgents(ListAgentsParams {
            token: tok(),
            skill: Some("s".into()),
        }),
        Call::Send(send.clone()),
        Call::Stream(SendParams {
            configuration: None,
            ..send
        }),
        Call::Get(GetParams {
            token: tok(),
            id: "t".into(),
            history_length: Some(1),
        }),
        Call::Status(StatusParams {
            token: tok(),
            id: "t".into(),
            state: State::Completed,
            message: Some(message()),
        }),
        Call::Cancel(CancelParams {
            token: tok(),
            id: "t".into(),
            message: None,
        }),
        Call::Resubscribe(ResubscribeParams {
            token: tok(),
            id: "t".into(),
            after_version: Some(3),
        }),
        Call::PushSet(PushSetParams {
            token: tok(),
            task_id: "t".into(),
            config: push(),
        }),
        Call::PushGet(PushGetParams {
            token: tok(),
            task_id: "t".into(),
        }),
        Call::ListTasks(ListTasksParams {
            token: tok(),
            role: ListRole::Worker,
            state: Some(State::Working),
            limit: Some(5),
            cursor: Some("9".into()),
        }),
        Call::Artifact(ArtifactParams {
            token: tok(),
            id: "t".into(),
            artifact: artifact(),
            append: true,
            last_chunk: false,
        }),
        Call::Wait(WaitParams {
            token: tok(),
            timeout_seconds: Some(1.5),
            after_seq: Some(4),
        }),
        Call::LeaseAcquire(AcquireLeaseParams {
            token: tok(),
            paths: vec!["src/**".into(), "Cargo.toml".into()],
            ttl_seconds: 60,
            exclusive: false,
            reason: Some("refactor".into()),
            wait_seconds: Some(5),
        }),
        Call::LeaseRenew(RenewLeaseParams {
            token: tok(),
            lease_id: "l".into(),
            ttl_seconds: 30,
        }),
        Call::LeaseRelease(ReleaseLeaseParams {
            token: tok(),
            lease_id: "l".into(),
        }),
        Call::LeaseList(ListLeasesParams {
            token: tok(),
            path: Some("src/lib.rs".into()),
        }),
    ]
}

fn lease() -> Lease {
    Lease {
        id: "l".into(),
        paths: vec!["src/**".into()],
        holder: "w".into(),
        exclusive: true,
        expires_at: "2026-12-01T00:00:00.000Z".into(),
        reason: Some("refactor".into()),
    }
}

fn every_notification() -> Vec<Notification> {
    vec![
        Notification::TaskEvent(TaskEventParams {
            recipient: "a".into(),
            recipient_context_id: "c".into(),
            context_id: "c".into(),
            seq: 1,
            task_version: 2,
            event: StreamEvent::Status(StatusUpdate {
                task_id: "t".into(),
                context_id: "c".into(),
                status: status(),
                is_final: false,
            }),
        }),
        Notification::TaskEvent(TaskEventParams {
            recipient: "a".into(),
            recipient_context_id: "c".into(),
            context_id: "c".into(),
            seq: 2,
            task_version: 3,
            event: StreamEvent::Artifact(ArtifactUpdate {
                task_id: "t".into(),
                context_id: "c".into(),
                artifact: artifact(),
                append: true,
                last_chunk: true,
            }),
        }),
        Notification::Push(PushParams {
            recipient: "a".into(),
            recipient_context_id: "c".into(),
            context_id: "c".into(),
            seq: 3,
            task_id: "t".into(),
            token: Some("k".into()),
            status: status(),
        }),
        Notification::Lagged(LaggedParams {
            recipient: "a".into(),
            recipient_context_id: "c".into(),
            dropped: 9,
        }),
        Notification::LeaseReleased(LeaseReleasedParams {
            recipient: "a".into(),
            recipient_context_id: "c".into(),
            seq: 4,
            lease: lease(),
            reason: LeaseEnd::Expired,
        }),
    ]
}

fn every_outcome() -> Vec<Outcome> {
    vec![
        Outcome::Handshake(HandshakeResult {
            protocol_version: 10,
            host: "a2a-broker".into(),
            host_version: "0.1.0".into(),
            features: vec!["batch".into()],
            capabilities: vec!["a2a".into()],
            event_ring: Some(EventRingInfo {
                name: "/a2a-ring".into(),
                bytes: 65536,
            }),
        }),
        Outcome::Registered(RegisterResult {
            agent_id: "w".into(),
            token: "t".into(),
            card: card(),
        }),
        Outcome::Ok(OkResult { ok: true }),
        Outcome::Agents(AgentsResult {
            agents: vec![card()],
        }),
        Outcome::Task(TaskResult { task: task() }),
        Outcome::Tasks(TasksResult {
            tasks: vec![task(), task()],
        }),
        Outcome::TaskList(TaskListResult {
            tasks: vec![task()],
            next_cursor: Some("3".into()),
        }),
        Outcome::Config(ConfigResult {
            config: Some(push()),
        }),
        Outcome::Config(ConfigResult { config: None }),
        Outcome::Events(WaitResult {
            events: every_notification(),
            timed_out: false,
        }),
        Outcome::Lease(LeaseResult { lease: lease() }),
        Outcome::Leases(LeasesResult {
            leases: vec![lease(), lease()],
        }),
    ]
}

fn binary<T: bincode::Encode + bincode::Decode<()> + PartialEq + std::fmt::Debug>(v: &T) {
    let mut buf = Vec::new();
    encode_frame(v, &mut buf).unwrap();
    let (frames, used) = split_frames(&buf).unwrap();
    assert_eq!((frames.len(), used), (1, buf.len()));
    let back: T = decode_payload(&buf[frames[0].clone()]).unwrap();
    assert_eq!(&back, v);
}

#[test]
fn every_call_round_trips_in_both_codecs() {
    for call in every_call() {
        let json = serde_json::to_string(&call.params_json()).unwrap();
        let back = Call::from_json(call.method(), &json).unwrap();
        assert_eq!(back, call, "JSON round trip of {}", call.method());
        binary(&ClientFrame::Request {
            id: 7,
            call: call.clone(),
        });
        binary(&ClientFrame::Notify { call });
    }
}

#[test]
fn params_written_straight_are_the_params_json() {
    for call in every_call() {
        let mut out = Vec::new();
        call.write_params_json(&mut out).unwrap();
        let written: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(written, call.params_json(), "{}", call.method());
    }
}

/// The binary codec numbers `Call`'s variants in the method table's order:
/// these are the numbers every binary client already sends, so the table
/// may grow at its end but never reorder (docs/protocol.md §1 Framing).
#[test]
fn the_method_table_keeps_the_binary_numbers_and_routes() {
    use a2a_proto::call::Route::{self, *};
    let wire: [(&str, Route); 19] = [
        ("app.handshake", Session),
        ("a2a.agents.register", Write),
        ("a2a.agents.deregister", Write),
        ("a2a.agents.list", Read),
        ("a2a.message.send", Write),
        ("a2a.message.stream", Write),
        ("a2a.tasks.get", Read),
        ("a2a.tasks.status", Write),
        ("a2a.tasks.cancel", Write),
        ("a2a.tasks.resubscribe", Write),
        ("a2a.tasks.pushNotificationConfig.set", Write),
        ("a2a.tasks.pushNotificationConfig.get", Read),
        ("a2a.tasks.list", Read),
        ("a2a.tasks.artifact", Write),
        ("a2a.events.wait", Wait),
        ("a2a.leases.acquire", Write),
        ("a2a.leases.renew", Write),
        ("a2a.leases.release", Write),
        ("a2a.leases.list", Write),
    ];
    let calls = every_call();
    assert_eq!(calls.len(), wire.len(), "one sample call per method");
    assert_eq!(
        a2a_proto::methods::ALL,
        wire.map(|(name, _)| name).as_slice(),
        "the table's names, in its order"
    );
    let cfg = bincode::config::standard();
    for (i, (call, (name, route))) in calls.iter().zip(wire).enumerate() {
        assert_eq!((call.method(), call.route()), (name, route));
        assert!(Call::is_method(name));
        let whole = bincode::encode_to_vec(call, cfg).unwrap();
        let tag = bincode::encode_to_vec(i as u32, cfg).unwrap();
        assert!(whole.starts_with(&tag), "{name} is variant {i} on the wire");
    }
    assert!(!Call::is_method("a2a.tasks.nope"));
}

#[test]
fn every_result_round_trips_in_both_codecs() {
    let methods = [
        "app.handshake",
        "a2a.agents.register",
        "a2a.agents.deregister",
        "a2a.agents.list",
        "a2a.tasks.get",
        "a2a.message.send",
        "a2a.tasks.list",
        "a2a.tasks.pushNotificationConfig.get",
        "a2a.tasks.pushNotificationConfig.set",
        "a2a.events.wait",
        "a2a.leases.acquire",
        "a2a.leases.list",
    ];
    assert_eq!(every_outcome().len(), methods.len());
    for (outcome, method) in every_outcome().into_iter().zip(methods) {
        let json = outcome.to_json();
        assert_eq!(
            Outcome::from_json(method, json).unwrap(),
            outcome,
            "JSON round trip for {method}"
        );
        binary(&ServerFrame::Response {
            id: 1,
            result: Ok(outcome),
        });
    }
}

#[test]
fn every_notification_and_error_round_trips_in_both_codecs() {
    for n in every_notification() {
        let json = serde_json::to_string(&n).unwrap();
        assert_eq!(serde_json::from_str::<Notification>(&json).unwrap(), n);
        binary(&ServerFrame::Notification(n));
    }
    let errors = [
        RpcError::parse("x"),
        RpcError::invalid_request("handshake required"),
        RpcError::method_not_found("nope"),
        RpcError::invalid_params("bad"),
        RpcError::internal("oops"),
        RpcError::a2a(
            A2aErrorCode::SendCap,
            "cap",
            Some(json!({"limit": "A2A_MAX_SENDS_PER_RUN", "max": 200, "actual": 201})),
        ),
        RpcError::new(-1, "no data", None),
    ];
    for e in errors {
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<RpcError>(&json).unwrap(), e);
        binary(&ServerFrame::Response {
            id: 2,
            result: Err(e.clone()),
        });
        binary(&ServerFrame::Fatal(e));
    }
}

#[test]
fn bad_frames_are_errors_not_panics() {
    assert!(a2a_proto::binary::payload_len((64u32 << 20).to_le_bytes()).is_err());
    assert!(decode_payload::<ClientFrame>(&[0xff, 0xff, 0xff]).is_err());
    assert!(decode_payload::<ClientFrame>(&[]).is_err());
    let mut buf = Vec::new();
    encode_frame(
        &ClientFrame::Notify {
            call: every_call().remove(2),
        },
        &mut buf,
    )
    .unwrap();
    let mut extra = buf[4..].to_vec();
    extra.push(0);
    assert!(
        decode_payload::<ClientFrame>(&extra).is_err(),
        "trailing bytes are refused"
    );
    // A data part whose embedded JSON is not an object is refused.
    let mut bad = Vec::new();
    encode_frame(&(2u32, "not json"), &mut bad).unwrap();
    assert!(decode_payload::<Part>(&bad[4..]).is_err());
}

#[test]
fn forged_lengths_do_not_reserve_memory() {
    // A Register call whose context id claims 2^62 bytes.
    let mut payload = vec![0u8, 1u8]; // ClientFrame::Notify, Call::Register
    payload.push(0xfd); // varint u64 marker
    payload.extend_from_slice(&(1u64 << 62).to_le_bytes());
    assert!(decode_payload::<ClientFrame>(&payload).is_err());
}
