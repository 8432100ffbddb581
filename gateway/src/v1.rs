//! The A2A v1.0 JSON shapes (ProtoJSON of `lf.a2a.v1`), as the JSON-RPC
//! binding carries them.
//!
//! Output is written in exactly one form: lowerCamel names, enum values as
//! their proto names (`TASK_STATE_COMPLETED`, `ROLE_AGENT`), no `kind`
//! members, absent fields omitted. The specification's JSON schema is
//! closed (`additionalProperties: false`), so these types carry nothing
//! else. Input is read the ProtoJSON way: lowerCamel *or* proto snake_case
//! names, enum names or numbers, int32 as a number or a string, unknown
//! members ignored.

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `lf.a2a.v1.TaskState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TaskState {
    #[serde(rename = "TASK_STATE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
}

impl TaskState {
    /// Every state, in proto number order (0..=8).
    pub const ALL: [TaskState; 9] = [
        TaskState::Unspecified,
        TaskState::Submitted,
        TaskState::Working,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::InputRequired,
        TaskState::Rejected,
        TaskState::AuthRequired,
    ];

    /// The proto enum name, e.g. `TASK_STATE_WORKING`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Unspecified => "TASK_STATE_UNSPECIFIED",
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }

    /// Reads a state as ProtoJSON allows: its name or its number.
    /// `UNRECOGNIZED` (what ts-proto, under `@a2a-js/sdk`, writes for an
    /// unset enum) reads as `TASK_STATE_UNSPECIFIED`.
    pub fn from_json(v: &Value) -> Option<TaskState> {
        match v {
            Value::String(s) if s == "UNRECOGNIZED" => Some(TaskState::Unspecified),
            Value::String(s) => TaskState::ALL.into_iter().find(|st| st.as_str() == s),
            Value::Number(n) => n
                .as_u64()
                .and_then(|i| TaskState::ALL.get(usize::try_from(i).ok()?).copied()),
            _ => None,
        }
    }
}

/// `lf.a2a.v1.Role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Role {
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "ROLE_USER")]
    User,
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        match &v {
            Value::String(s) => match s.as_str() {
                "ROLE_USER" | "user" => Ok(Role::User),
                "ROLE_AGENT" | "agent" => Ok(Role::Agent),
                "ROLE_UNSPECIFIED" | "" => Ok(Role::Unspecified),
                other => Err(de::Error::custom(format!("unknown role `{other}`"))),
            },
            Value::Number(n) => match n.as_u64() {
                Some(0) => Ok(Role::Unspecified),
                Some(1) => Ok(Role::User),
                Some(2) => Ok(Role::Agent),
                _ => Err(de::Error::custom(format!("unknown role {n}"))),
            },
            Value::Null => Ok(Role::Unspecified),
            _ => Err(de::Error::custom("role must be a string or a number")),
        }
    }
}

/// An int32 as ProtoJSON writes it: a number or a decimal string.
fn lenient_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| de::Error::custom("expected an integer")),
        Some(Value::String(s)) => s
            .parse::<i64>()
            .map(Some)
            .map_err(|_| de::Error::custom("expected an integer")),
        Some(_) => Err(de::Error::custom("expected an integer")),
    }
}

/// `lf.a2a.v1.Part`: exactly one of `text`, `raw`, `url`, `data`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Base64 (standard alphabet, padded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Any JSON value (the broker keeps objects only; see `mapping`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(default, alias = "media_type", skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// `lf.a2a.v1.Message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(default, alias = "message_id")]
    pub message_id: String,
    #[serde(default, alias = "context_id", skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, alias = "task_id", skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub role: Role,
    #[serde(default)]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(
        default,
        alias = "reference_task_ids",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reference_task_ids: Vec<String>,
}

/// `lf.a2a.v1.TaskStatus`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// RFC 3339 with a literal `Z`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// `lf.a2a.v1.Artifact`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<Part>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// `lf.a2a.v1.Task`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
}

/// `lf.a2a.v1.TaskStatusUpdateEvent`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
}

/// `lf.a2a.v1.TaskArtifactUpdateEvent`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    pub append: bool,
    pub last_chunk: bool,
}

/// `lf.a2a.v1.StreamResponse` (one event of a stream, and the body of a
/// push notification): exactly one member. The v1.0 union also has a
/// `message` member; the gateway's streams never carry one (an agent's
/// message travels in a status update), so it is not here.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    Task(Task),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// `lf.a2a.v1.SendMessageResponse`: `{"task"}` or `{"message"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

/// `lf.a2a.v1.AuthenticationInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AuthenticationInfo {
    #[serde(default)]
    pub scheme: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

/// `lf.a2a.v1.TaskPushNotificationConfig` (the request of
/// `CreateTaskPushNotificationConfig` too: it is flat in v1.0).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    #[serde(default)]
    pub id: String,
    #[serde(default, alias = "task_id")]
    pub task_id: String,
    #[serde(default)]
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

/// `lf.a2a.v1.SendMessageConfiguration`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    #[serde(default, alias = "accepted_output_modes")]
    pub accepted_output_modes: Vec<String>,
    #[serde(default, alias = "history_length", deserialize_with = "lenient_i64")]
    pub history_length: Option<i64>,
    #[serde(default, alias = "return_immediately")]
    pub return_immediately: bool,
    /// v1.0's name; `pushNotificationConfig` (v0.3) is read too.
    #[serde(
        default,
        alias = "task_push_notification_config",
        alias = "pushNotificationConfig",
        alias = "push_notification_config"
    )]
    pub task_push_notification_config: Option<TaskPushNotificationConfig>,
}

/// `SendMessage` / `SendStreamingMessage` params.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SendMessageRequest {
    pub message: Message,
    #[serde(default)]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

/// `GetTask` params.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    pub id: String,
    #[serde(default, alias = "history_length", deserialize_with = "lenient_i64")]
    pub history_length: Option<i64>,
}

/// `CancelTask` and `SubscribeToTask` params.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TaskIdRequest {
    pub id: String,
}

/// `ListTasks` params.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    #[serde(default, alias = "context_id")]
    pub context_id: Option<String>,
    /// A `TaskState` name or number (checked in `mapping`).
    #[serde(default)]
    pub status: Option<Value>,
    #[serde(default, alias = "page_size", deserialize_with = "lenient_i64")]
    pub page_size: Option<i64>,
    #[serde(default, alias = "page_token")]
    pub page_token: Option<String>,
    #[serde(default, alias = "history_length", deserialize_with = "lenient_i64")]
    pub history_length: Option<i64>,
    #[serde(default, alias = "include_artifacts")]
    pub include_artifacts: Option<bool>,
    #[serde(default, alias = "status_timestamp_after")]
    pub status_timestamp_after: Option<String>,
}

/// `ListTasks` result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    pub tasks: Vec<Task>,
    /// `""` on the last page (the field is required).
    pub next_page_token: String,
    pub page_size: i64,
    pub total_size: i64,
}

/// `Get`/`DeleteTaskPushNotificationConfig` params.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigIdRequest {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(default)]
    pub id: String,
}

/// `ListTaskPushNotificationConfigs` params.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsRequest {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(default, alias = "page_size", deserialize_with = "lenient_i64")]
    pub page_size: Option<i64>,
    #[serde(default, alias = "page_token")]
    pub page_token: Option<String>,
}

/// `ListTaskPushNotificationConfigs` result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsResponse {
    pub configs: Vec<TaskPushNotificationConfig>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub next_page_token: String,
}

/// `lf.a2a.v1.AgentCard` (the members a gateway card uses).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    pub version: String,
    pub supported_interfaces: Vec<AgentInterface>,
    pub capabilities: AgentCapabilities,
    pub default_input_modes: Vec<String>,
    pub default_output_modes: Vec<String>,
    pub skills: Vec<AgentSkill>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_schemes: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_requirements: Option<Value>,
}

/// `lf.a2a.v1.AgentInterface`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    pub url: String,
    pub protocol_binding: String,
    pub protocol_version: String,
    /// The agent this interface serves, where the URL alone does not say
    /// (the gRPC interface: one service for every agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// `lf.a2a.v1.AgentCapabilities`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    pub streaming: bool,
    pub push_notifications: bool,
    pub extended_agent_card: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<AgentExtension>,
}

/// `lf.a2a.v1.AgentExtension`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentExtension {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub required: bool,
}

/// `lf.a2a.v1.AgentSkill`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn states_and_roles_are_proto_names_out_and_names_or_numbers_in() {
        assert_eq!(
            serde_json::to_value(TaskState::InputRequired).unwrap(),
            json!("TASK_STATE_INPUT_REQUIRED")
        );
        for (i, st) in TaskState::ALL.into_iter().enumerate() {
            assert_eq!(TaskState::from_json(&json!(st.as_str())), Some(st));
            assert_eq!(TaskState::from_json(&json!(i)), Some(st));
        }
        assert_eq!(TaskState::from_json(&json!("completed")), None);
        assert_eq!(
            TaskState::from_json(&json!("UNRECOGNIZED")),
            Some(TaskState::Unspecified)
        );
        assert_eq!(TaskState::from_json(&json!(9)), None);
        let r: Role = serde_json::from_value(json!("ROLE_AGENT")).unwrap();
        assert_eq!(r, Role::Agent);
        let r: Role = serde_json::from_value(json!(1)).unwrap();
        assert_eq!(r, Role::User);
        assert!(serde_json::from_value::<Role>(json!("ROLE_BOSS")).is_err());
        assert_eq!(
            serde_json::to_value(Role::User).unwrap(),
            json!("ROLE_USER")
        );
    }

    #[test]
    fn snake_case_params_and_unknown_members_are_read() {
        let g: GetTaskRequest =
            serde_json::from_value(json!({"id": "t", "history_length": "3", "extra": 1})).unwrap();
        assert_eq!(g.history_length, Some(3));
        let l: ListTasksRequest = serde_json::from_value(
            json!({"context_id": "c", "page_size": 5, "include_artifacts": true}),
        )
        .unwrap();
        assert_eq!(l.context_id.as_deref(), Some("c"));
        assert_eq!(l.page_size, Some(5));
        assert_eq!(l.include_artifacts, Some(true));
        let p: TaskPushNotificationConfig = serde_json::from_value(json!({
            "task_id": "t", "id": "p", "url": "http://h/w",
            "authentication": {"scheme": "Bearer", "credentials": "x"}
        }))
        .unwrap();
        assert_eq!(p.task_id, "t");
        assert_eq!(p.authentication.unwrap().credentials.as_deref(), Some("x"));
        let s: SendMessageRequest = serde_json::from_value(json!({
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}],
                        "tckUnknownField": 1},
            "configuration": {"returnImmediately": true, "historyLength": 0},
            "tckExtraParam": true
        }))
        .unwrap();
        let c = s.configuration.unwrap();
        assert!(c.return_immediately);
        assert_eq!(c.history_length, Some(0));
        assert!(serde_json::from_value::<GetTaskRequest>(json!({"history_length": 1})).is_err());
    }

    #[test]
    fn output_is_camel_case_without_kind_and_one_member_wrappers() {
        let t = Task {
            id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Completed,
                message: None,
                timestamp: Some("2026-01-01T00:00:00.000Z".into()),
            },
            artifacts: vec![],
            history: vec![],
        };
        let v = serde_json::to_value(SendMessageResponse::Task(t.clone())).unwrap();
        assert_eq!(
            v,
            json!({"task": {"id": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00.000Z"}}})
        );
        let e = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: t.status,
        });
        let v = serde_json::to_value(e).unwrap();
        assert_eq!(v["statusUpdate"]["taskId"], "t");
        assert!(v.get("kind").is_none());
    }
}
