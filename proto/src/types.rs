//! The JSON shapes of docs/protocol.md §3 and the event notifications of §6.
//!
//! Parts are read leniently (A2A v1.0 forms without `kind` are normalised to
//! the v0.3 shapes) and written in exactly one form. Checks that need more
//! than the shape (base64, sizes) live in the broker's validation module.

pub use crate::json::JsonObject as Object;
use bincode::{Decode, Encode};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;

/// Task lifecycle state (§7 Task states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Canceled,
    Failed,
    Rejected,
}

impl State {
    pub const ALL: [State; 8] = [
        State::Submitted,
        State::Working,
        State::InputRequired,
        State::AuthRequired,
        State::Completed,
        State::Canceled,
        State::Failed,
        State::Rejected,
    ];

    /// The wire name, e.g. `input-required`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Submitted => "submitted",
            State::Working => "working",
            State::InputRequired => "input-required",
            State::AuthRequired => "auth-required",
            State::Completed => "completed",
            State::Canceled => "canceled",
            State::Failed => "failed",
            State::Rejected => "rejected",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Terminal states never move again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            State::Completed | State::Canceled | State::Failed | State::Rejected
        )
    }

    /// May a task move from this state to `to`? (The table of docs/protocol.md
    /// §7; the broker refuses every other move.)
    pub fn can_move(self, to: State) -> bool {
        use State::*;
        match self {
            Submitted | Working => to != Submitted,
            InputRequired | AuthRequired => matches!(to, Working | Canceled | Failed | Rejected),
            Completed | Canceled | Failed | Rejected => false,
        }
    }

    /// Interrupted states wait for the requester.
    pub fn is_interrupted(self) -> bool {
        matches!(self, State::InputRequired | State::AuthRequired)
    }
}

/// Who speaks a message: the requester (`user`) or the worker (`agent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[default]
    User,
    Agent,
}

/// The content of a file part: exactly one of `uri` and `bytes` (base64).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct FileContent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
}

/// One part of a message or artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Encode, Decode)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Part {
    Text {
        text: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Object>,
    },
    File {
        file: FileContent,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Object>,
    },
    Data {
        data: Object,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Object>,
    },
}

impl Part {
    /// The text of a text part (`None` for data and file parts).
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Part::Text { text, .. } => Some(text),
            _ => None,
        }
    }

    /// A text part without metadata.
    pub fn text(text: impl Into<String>) -> Part {
        Part::Text {
            text: text.into(),
            metadata: None,
        }
    }
}

fn take_str<E: serde::de::Error>(
    obj: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<String>, E> {
    match obj.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(E::custom(format!("part field `{key}` must be a string"))),
    }
}

fn take_object<E: serde::de::Error>(
    obj: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<Object>, E> {
    match obj.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(Some(Object::from(o))),
        Some(_) => Err(E::custom(format!("part field `{key}` must be an object"))),
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut obj = Map::<String, Value>::deserialize(d)?;
        let metadata = take_object(&mut obj, "metadata")?;
        let kind = take_str::<D::Error>(&mut obj, "kind")?;
        match kind.as_deref() {
            Some("text") => {
                let text = take_str(&mut obj, "text")?
                    .ok_or_else(|| D::Error::custom("text part needs `text`"))?;
                Ok(Part::Text { text, metadata })
            }
            Some("file") => {
                let file = obj
                    .remove("file")
                    .ok_or_else(|| D::Error::custom("file part needs `file`"))?;
                let file: FileContent = serde_json::from_value(file)
                    .map_err(|e| D::Error::custom(format!("file part: {e}")))?;
                Ok(Part::File { file, metadata })
            }
            Some("data") => {
                let data = take_object(&mut obj, "data")?
                    .ok_or_else(|| D::Error::custom("data part needs a `data` object"))?;
                Ok(Part::Data { data, metadata })
            }
            Some(other) => Err(D::Error::custom(format!("unknown part kind `{other}`"))),
            // A2A v1.0 forms: the member present says which part it is.
            None => {
                let filename = take_str(&mut obj, "filename")?;
                let media_type = take_str(&mut obj, "mediaType")?;
                if let Some(text) = take_str(&mut obj, "text")? {
                    Ok(Part::Text { text, metadata })
                } else if let Some(raw) = take_str(&mut obj, "raw")? {
                    Ok(Part::File {
                        file: FileContent {
                            name: filename,
                            mime_type: media_type,
                            uri: None,
                            bytes: Some(raw),
                        },
                        metadata,
                    })
                } else if let Some(url) = take_str(&mut obj, "url")? {
                    Ok(Part::File {
                        file: FileContent {
                            name: filename,
                            mime_type: media_type,
                            uri: Some(url),
                            bytes: None,
                        },
                        metadata,
                    })
                } else if let Some(data) = take_object(&mut obj, "data")? {
                    Ok(Part::Data { data, metadata })
                } else {
                    Err(D::Error::custom(
                        "part has no `kind` and none of `text`, `raw`, `url`, `data`",
                    ))
                }
            }
        }
    }
}

/// A message (§3). `from`, `role`, `taskId` and `contextId` are stamped by the broker.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(default)]
    pub role: Role,
    pub parts: Vec<Part>,
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Object>,
}

impl Message {
    /// Its text parts, joined by newlines (data and file parts left out).
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self.parts.iter().filter_map(Part::as_text).collect();
        texts.join("\n")
    }
}

/// A named, multi-part output of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Object>,
}

/// A task's state, with the message that went with its last transition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct TaskStatus {
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Arc<Message>>,
    pub timestamp: String,
}

/// A task as clients read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    #[serde(default = "task_kind")]
    pub kind: String,
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    pub history: Vec<Arc<Message>>,
    pub artifacts: Vec<Artifact>,
    pub agent_name: String,
    pub requester_name: String,
    /// (ext) Starts at 1, +1 per change.
    #[serde(default)]
    pub version: u64,
}

fn task_kind() -> String {
    "task".into()
}

/// One skill an agent card advertises.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub tags: Vec<String>,
}

/// What an agent can do besides plain request/response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    #[serde(default = "yes")]
    pub streaming: bool,
    #[serde(default = "yes")]
    pub push_notifications: bool,
}

impl Default for Capabilities {
    fn default() -> Self {
        Self {
            streaming: true,
            push_notifications: true,
        }
    }
}

fn yes() -> bool {
    true
}

fn text_plain() -> Vec<String> {
    vec!["text/plain".into()]
}

/// Registry role: parents and subagents never address each other.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, Encode, Decode,
)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    Parent,
    #[default]
    Subagent,
}

/// An agent card; missing fields take the defaults of §5 register.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub skills: Vec<AgentSkill>,
    #[serde(default)]
    pub capabilities: Capabilities,
    #[serde(default = "text_plain")]
    pub default_input_modes: Vec<String>,
    #[serde(default = "text_plain")]
    pub default_output_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<AgentKind>,
}

/// A push notification config; `url` is stored, never contacted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct PushConfig {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// How an agent receives its notifications (ext).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "lowercase")]
pub enum Delivery {
    /// On the connection that registered it.
    #[default]
    Push,
    /// Only through `a2a.events.wait`.
    Pull,
}

/// A task's status changed (A2A `TaskStatusUpdateEvent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct StatusUpdate {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(rename = "final")]
    pub is_final: bool,
}

/// A task produced or extended an artifact (A2A `TaskArtifactUpdateEvent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactUpdate {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    pub append: bool,
    pub last_chunk: bool,
}

/// A streaming event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(tag = "kind")]
pub enum StreamEvent {
    #[serde(rename = "status-update")]
    Status(StatusUpdate),
    #[serde(rename = "artifact-update")]
    Artifact(ArtifactUpdate),
}

impl StreamEvent {
    /// A `status-update` of a task carrying `status`: final when its state
    /// is terminal (§6 Events).
    pub fn status(task_id: String, context_id: String, status: TaskStatus) -> StreamEvent {
        StreamEvent::Status(StatusUpdate {
            task_id,
            context_id,
            is_final: status.state.is_terminal(),
            status,
        })
    }
}

/// Params of `a2a.task.event`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct TaskEventParams {
    pub recipient: String,
    pub recipient_context_id: String,
    pub context_id: String,
    pub seq: u64,
    pub task_version: u64,
    pub event: StreamEvent,
}

/// Params of `a2a.push`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct PushParams {
    pub recipient: String,
    pub recipient_context_id: String,
    pub context_id: String,
    pub seq: u64,
    pub task_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    pub status: TaskStatus,
}

/// Params of `a2a.lagged` (ext).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct LaggedParams {
    pub recipient: String,
    pub recipient_context_id: String,
    pub dropped: u64,
}

/// How a lease ended (ext, §11 Leases).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "lowercase")]
pub enum LeaseEnd {
    /// Its holder released it.
    Released,
    /// Its TTL ran out.
    Expired,
    /// Its holder deregistered.
    Deregistered,
    /// Its holder's connection closed (its token died).
    Disconnected,
    /// The broker restarted (every token died with its connection).
    Restart,
}

impl LeaseEnd {
    /// The wire name, also the stored one.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseEnd::Released => "released",
            LeaseEnd::Expired => "expired",
            LeaseEnd::Deregistered => "deregistered",
            LeaseEnd::Disconnected => "disconnected",
            LeaseEnd::Restart => "restart",
        }
    }
}

/// A lease (ext, docs/protocol.md §11 Leases): advisory, on paths, in the
/// holder's context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    pub id: String,
    /// Normalised (`src/` reads back as `src/**`).
    pub paths: Vec<String>,
    /// The holder's peer id.
    pub holder: String,
    pub exclusive: bool,
    /// RFC 3339 UTC, milliseconds.
    pub expires_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Params of `a2a.lease.released` (ext): a lease the recipient waited on
/// or was refused has ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct LeaseReleasedParams {
    pub recipient: String,
    pub recipient_context_id: String,
    pub seq: u64,
    pub lease: Lease,
    pub reason: LeaseEnd,
}

/// A notification from the broker, typed; `{method, params}` on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(tag = "method", content = "params")]
pub enum Notification {
    #[serde(rename = "a2a.task.event")]
    TaskEvent(TaskEventParams),
    #[serde(rename = "a2a.push")]
    Push(PushParams),
    #[serde(rename = "a2a.lagged")]
    Lagged(LaggedParams),
    /// (ext) Appended: the binary codec numbers the variants.
    #[serde(rename = "a2a.lease.released")]
    LeaseReleased(LeaseReleasedParams),
}

impl Notification {
    /// The per-recipient sequence number, if the notification has one.
    pub fn seq(&self) -> Option<u64> {
        match self {
            Notification::TaskEvent(p) => Some(p.seq),
            Notification::Push(p) => Some(p.seq),
            Notification::Lagged(_) => None,
            Notification::LeaseReleased(p) => Some(p.seq),
        }
    }
}

impl Notification {
    /// The recipient's peer id and context id.
    pub fn recipient(&self) -> (&str, &str) {
        match self {
            Notification::TaskEvent(p) => (&p.recipient, &p.recipient_context_id),
            Notification::Push(p) => (&p.recipient, &p.recipient_context_id),
            Notification::Lagged(p) => (&p.recipient, &p.recipient_context_id),
            Notification::LeaseReleased(p) => (&p.recipient, &p.recipient_context_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn part(v: Value) -> Result<Part, serde_json::Error> {
        serde_json::from_value(v)
    }

    #[test]
    fn v1_parts_are_normalised() {
        assert_eq!(part(json!({"text": "hi"})).unwrap(), Part::text("hi"));
        let p =
            part(json!({"raw": "aGk=", "mediaType": "text/plain", "filename": "a.txt"})).unwrap();
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"kind": "file", "file": {"name": "a.txt", "mimeType": "text/plain", "bytes": "aGk="}})
        );
        let p = part(json!({"url": "file:///x"})).unwrap();
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"kind": "file", "file": {"uri": "file:///x"}})
        );
        let p = part(json!({"data": {"a": 1}, "metadata": {"m": true}})).unwrap();
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"kind": "data", "data": {"a": 1}, "metadata": {"m": true}})
        );
    }

    #[test]
    fn bad_parts_are_refused() {
        assert!(part(json!({"kind": "video"})).is_err());
        assert!(part(json!({"kind": "text"})).is_err());
        assert!(part(json!({"kind": "text", "text": 5})).is_err());
        assert!(part(json!({"kind": "data", "data": [1]})).is_err());
        assert!(part(json!({})).is_err());
        assert!(part(json!("text")).is_err());
    }

    #[test]
    fn notification_wire_shape() {
        let n = Notification::Lagged(LaggedParams {
            recipient: "a".into(),
            recipient_context_id: "c".into(),
            dropped: 3,
        });
        assert_eq!(
            serde_json::to_value(&n).unwrap(),
            json!({"method": "a2a.lagged", "params": {"recipient": "a", "recipientContextId": "c", "dropped": 3}})
        );
    }

    #[test]
    fn states_round_trip() {
        for s in State::ALL {
            assert_eq!(State::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
        }
        assert_eq!(State::parse("done"), None);
    }
}
