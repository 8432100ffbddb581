//! ProtoJSON round trips of the v1 messages: JSON as the gateway's JSON-RPC
//! binding takes and writes it (payloads of docs/gateway.md and
//! gateway/tests/inbound.rs) parses into the prost types through pbjson,
//! survives the protobuf wire encoding unchanged, and serializes back to the
//! same JSON. Where the gateway writes a field at its default value that has
//! no presence in proto3 (`"append": false`, `"nextPageToken": ""`, an empty
//! `list`), ProtoJSON leaves it out, and the JSON-RPC reader takes the two
//! forms alike: those samples name the JSON they come back as. Numbers in
//! `data` and `metadata` come back as written (`42`, not `42.0`: see
//! grpc/src/json.rs).

use a2a_grpc::v1;
use prost::Message;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::{json, Value};

/// `input` through `T` and the protobuf wire, back to JSON.
fn through<T>(input: &Value) -> Value
where
    T: Message + Default + PartialEq + std::fmt::Debug + Serialize + DeserializeOwned,
{
    let m: T = serde_json::from_value(input.clone())
        .unwrap_or_else(|e| panic!("{} does not read {input}: {e}", std::any::type_name::<T>()));
    let wire = T::decode(m.encode_to_vec().as_slice()).expect("decodes what it encoded");
    assert_eq!(wire, m, "the protobuf encoding changed {input}");
    a2a_grpc::json::to_value(&m).expect("serializes")
}

fn same<T>(input: Value)
where
    T: Message + Default + PartialEq + std::fmt::Debug + Serialize + DeserializeOwned,
{
    assert_eq!(through::<T>(&input), input);
}

fn message(id: &str, text: &str) -> Value {
    json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]})
}

fn task(state: &str) -> Value {
    json!({
        "id": "019a1b2c-3d4e-7f00-8a9b-0c1d2e3f4a5b",
        "contextId": "019a1b2c-3d4e-7f00-8a9b-0c1d2e3f4a5c",
        "status": {
            "state": state,
            "message": {
                "messageId": "019a1b2c-3d4e-7f00-8a9b-0c1d2e3f4a5d",
                "contextId": "019a1b2c-3d4e-7f00-8a9b-0c1d2e3f4a5c",
                "taskId": "019a1b2c-3d4e-7f00-8a9b-0c1d2e3f4a5b",
                "role": "ROLE_AGENT", "parts": [{"text": "HELLO, CODER"}]
            },
            "timestamp": "2026-11-28T05:24:21.123Z"
        },
        "history": [
            {
                "messageId": "m1", "contextId": "019a1b2c-3d4e-7f00-8a9b-0c1d2e3f4a5c",
                "taskId": "019a1b2c-3d4e-7f00-8a9b-0c1d2e3f4a5b",
                "role": "ROLE_USER", "parts": [{"text": "hello, coder"}]
            }
        ]
    })
}

#[test]
fn send_message_requests() {
    same::<v1::SendMessageRequest>(json!({"message": message("m1", "hello, coder")}));
    same::<v1::SendMessageRequest>(json!({
        "message": message("m2", "later"),
        "configuration": {"returnImmediately": true}
    }));
    // Every member a request can carry, parts of each kind among them.
    same::<v1::SendMessageRequest>(json!({
        "tenant": "team-a",
        "message": {
            "messageId": "m3", "contextId": "ctx-1", "taskId": "task-1",
            "role": "ROLE_USER",
            "parts": [
                {"text": "Generated text content", "mediaType": "text/plain"},
                {"data": {"key": "value", "count": 42}},
                {"data": [1, "two", null, true]},
                {"url": "https://example.com/output.txt", "filename": "output.txt", "mediaType": "text/plain"},
                {"raw": "aGVsbG8=", "filename": "hello.bin", "mediaType": "application/octet-stream",
                 "metadata": {"origin": "test"}}
            ],
            "metadata": {"trace": {"id": "abc", "depth": 2}},
            "extensions": ["https://example.com/ext/v1"],
            "referenceTaskIds": ["task-0"]
        },
        "configuration": {
            "acceptedOutputModes": ["text/plain", "application/json"],
            "taskPushNotificationConfig": {
                "url": "https://example.com/hook", "token": "tok",
                "authentication": {"scheme": "Bearer", "credentials": "secret"}
            },
            // Set to zero, and so written: it has presence (`optional`).
            "historyLength": 0,
            "returnImmediately": true
        },
        "metadata": {"priority": "high"}
    }));
}

#[test]
fn responses_and_stream_events() {
    same::<v1::SendMessageResponse>(json!({"task": task("TASK_STATE_COMPLETED")}));
    same::<v1::SendMessageResponse>(json!({"message": {
        "messageId": "a1", "contextId": "c", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]
    }}));
    same::<v1::StreamResponse>(json!({"task": task("TASK_STATE_SUBMITTED")}));
    same::<v1::StreamResponse>(json!({"statusUpdate": {
        "taskId": "t", "contextId": "c",
        "status": {"state": "TASK_STATE_WORKING", "timestamp": "2026-11-28T05:24:21.007Z"}
    }}));
    same::<v1::StreamResponse>(json!({"artifactUpdate": {
        "taskId": "t", "contextId": "c",
        "artifact": {"artifactId": "a", "name": "out", "parts": [{"text": "x"}]},
        "append": true, "lastChunk": true
    }}));
    let first_chunk = json!({"artifactUpdate": {
        "taskId": "t", "contextId": "c",
        "artifact": {"artifactId": "a", "parts": [{"text": "x"}]},
        "append": false, "lastChunk": false
    }});
    assert_eq!(
        through::<v1::StreamResponse>(&first_chunk),
        json!({"artifactUpdate": {
            "taskId": "t", "contextId": "c",
            "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}
        }})
    );
    let mut t = task("TASK_STATE_COMPLETED");
    t["artifacts"] = json!([{
        "artifactId": "art-1", "name": "result", "description": "the answer",
        "parts": [{"text": "Generated text content"}, {"data": {"key": "value", "count": 42}}],
        "metadata": {"k": "v"}
    }]);
    same::<v1::Task>(t);
}

#[test]
fn task_reads_and_lists() {
    same::<v1::GetTaskRequest>(json!({"id": "t", "historyLength": 10}));
    same::<v1::GetTaskRequest>(json!({"id": "t", "historyLength": 0}));
    same::<v1::CancelTaskRequest>(json!({"id": "t"}));
    same::<v1::SubscribeToTaskRequest>(json!({"id": "t"}));
    same::<v1::ListTasksRequest>(json!({"contextId": "ctx", "pageSize": 3, "pageToken": "tok"}));
    same::<v1::ListTasksRequest>(json!({
        "status": "TASK_STATE_WORKING", "statusTimestampAfter": "2026-11-28T05:24:21.123Z",
        "includeArtifacts": true, "historyLength": 2
    }));
    let mut listed = json!({"tasks": [task("TASK_STATE_COMPLETED")], "nextPageToken": "", "pageSize": 3, "totalSize": 1});
    let back = through::<v1::ListTasksResponse>(&listed);
    listed.as_object_mut().unwrap().remove("nextPageToken");
    assert_eq!(back, listed);
    // An empty repeated field is a default too.
    assert_eq!(
        through::<v1::ListTasksResponse>(
            &json!({"tasks": [], "nextPageToken": "next", "pageSize": 50, "totalSize": 51})
        ),
        json!({"nextPageToken": "next", "pageSize": 50, "totalSize": 51})
    );
}

#[test]
fn push_configs() {
    same::<v1::TaskPushNotificationConfig>(json!({"taskId": "t", "url": "https://example.com/w"}));
    same::<v1::TaskPushNotificationConfig>(json!({
        "id": "cfg-1", "taskId": "t", "url": "https://example.com/w", "token": "tok",
        "authentication": {"scheme": "Bearer", "credentials": "secret"}
    }));
    same::<v1::GetTaskPushNotificationConfigRequest>(json!({"taskId": "t", "id": "cfg-1"}));
    same::<v1::DeleteTaskPushNotificationConfigRequest>(json!({"taskId": "t", "id": "cfg-1"}));
    same::<v1::ListTaskPushNotificationConfigsRequest>(
        json!({"taskId": "t", "pageSize": 2, "pageToken": "p"}),
    );
    same::<v1::ListTaskPushNotificationConfigsResponse>(json!({
        "configs": [{"id": "cfg-1", "taskId": "t", "url": "https://example.com/w"}],
        "nextPageToken": "p2"
    }));
}

#[test]
fn agent_card_as_the_gateway_writes_it() {
    let card = json!({
        "name": "coder",
        "description": "coder (a local agent, served by a2a-gateway)",
        "version": "0.0.0",
        "supportedInterfaces": [{
            "url": "http://127.0.0.1:8080/agents/coder", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"
        }],
        // `optional` bools: written when false too.
        "capabilities": {
            "streaming": true, "pushNotifications": true, "extendedAgentCard": false,
            "extensions": [{"uri": "https://example.com/ext/v1", "required": true}]
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "code", "name": "code", "description": "writes code", "tags": ["code"]}],
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}]
    });
    let back = through::<v1::AgentCard>(&card);
    let mut want = card;
    want["securityRequirements"] = json!([{"schemes": {"bearer": {}}}]);
    assert_eq!(back, want);
}

#[test]
fn input_read_the_protojson_way() {
    // Proto field names, enum numbers, int32 as a string: ProtoJSON reads
    // them all (the gateway's tests send such params), and writes one form.
    assert_eq!(
        through::<v1::GetTaskRequest>(&json!({"id": "t", "history_length": "1"})),
        json!({"id": "t", "historyLength": 1})
    );
    assert_eq!(
        through::<v1::TaskStatus>(&json!({"state": 3})),
        json!({"state": "TASK_STATE_COMPLETED"})
    );
    assert_eq!(
        through::<v1::ListTasksRequest>(&json!({"context_id": "c", "page_size": 3})),
        json!({"contextId": "c", "pageSize": 3})
    );
    // A member this version does not know is skipped, as on the wire.
    assert_eq!(
        through::<v1::CancelTaskRequest>(&json!({"id": "t", "fromTheFuture": 1})),
        json!({"id": "t"})
    );
}

#[test]
fn bad_input_is_an_error() {
    let bad = [
        json!({"message": {"messageId": "m", "role": "ROLE_BOSS", "parts": []}}),
        json!({"message": {"messageId": 7, "role": "ROLE_USER", "parts": []}}),
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a", "url": "b"}]}}),
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "not base64!"}]}}),
        json!({"configuration": {"historyLength": 1.5}}),
        json!({"configuration": {"historyLength": 4294967296u64}}),
        json!({"message": "hello"}),
        json!([1, 2]),
    ];
    for b in bad {
        assert!(
            serde_json::from_value::<v1::SendMessageRequest>(b.clone()).is_err(),
            "{b} was read"
        );
    }
    assert!(serde_json::from_value::<v1::TaskStatus>(json!({"timestamp": "yesterday"})).is_err());
}
