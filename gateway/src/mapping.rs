//! A2A v1.0 <-> `a2a.*` translation: pure functions, no I/O.
//!
//! - States: `TASK_STATE_*` <-> the broker's kebab-case states.
//! - Roles: `ROLE_USER`/`ROLE_AGENT` <-> `user`/`agent`.
//! - Parts: v1.0 `text`/`raw`/`url`/`data` <-> the broker's text, file and
//!   data parts. v1.0 `data` may be any JSON value; the broker keeps
//!   objects only, so another value travels wrapped as `{"value": v}` with a
//!   part-metadata marker and is unwrapped on the way out.
//! - Message ids: A2A clients reuse `messageId`s freely, while the broker
//!   treats a repeated one as a retry of the same send (its idempotency).
//!   Every message the gateway forwards therefore gets a fresh broker id,
//!   and the client's id rides in the message's metadata (under
//!   [`GATEWAY_KEY`]) and is restored when the message is read back: two
//!   HTTP requests are never merged.
//! - Contexts: each A2A `contextId` of each caller identity is a broker
//!   context of its own (`gw1/<identity>/<contextId>`), so the v1.0 id is
//!   recovered from any task the broker returns.
//! - Errors: [`GatewayError`], written as JSON-RPC errors with v1.0 codes
//!   and a `google.rpc.ErrorInfo` in `data`.
//! - Message responses: a worker answers with a v1.0 `Message` instead of
//!   a `Task` by ending the task with a status message whose metadata holds
//!   [`GATEWAY_KEY`]`: {"messageResponse": true}`.

use crate::v1;
use a2a_client::ClientError;
use a2a_proto::error::A2aErrorCode;
use a2a_proto::types::{
    Artifact, FileContent, Message, Object, Part, Role, State, StreamEvent, Task,
};
use serde_json::{json, Map, Value};

/// The metadata key under which the gateway keeps what the broker's shapes
/// have no place for (original message id, the message-response marker,
/// wrapped data values).
pub const GATEWAY_KEY: &str = "a2a-gateway";

/// The prefix of every broker context the gateway registers requesters in.
pub const CONTEXT_PREFIX: &str = "gw1/";

/// Longest A2A `contextId` accepted: the broker context adds the prefix and
/// the identity and must stay within `A2A_MAX_ID_BYTES` (256).
pub const MAX_V1_CONTEXT_BYTES: usize = 160;

/// Longest identity name (tokens are named by the operator).
pub const MAX_IDENTITY_BYTES: usize = 64;

/// A failed call, as the A2A client sees it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GatewayError {
    /// `TaskNotFoundError` (-32001): unknown, or not the caller's.
    #[error("task not found: {0}")]
    TaskNotFound(String),
    /// `TaskNotCancelableError` (-32002).
    #[error("task cannot be canceled: {0}")]
    TaskNotCancelable(String),
    /// `PushNotificationNotSupportedError` (-32003).
    #[error("push notifications are not supported")]
    PushNotSupported,
    /// `UnsupportedOperationError` (-32004), e.g. a message to a terminal
    /// task.
    #[error("unsupported operation: {0}")]
    Unsupported(String),
    /// `ContentTypeNotSupportedError` (-32005).
    #[error("content type not supported: {0}")]
    ContentType(String),
    /// `ExtendedAgentCardNotConfiguredError` (-32007).
    #[error("no extended agent card is configured")]
    ExtendedCardNotConfigured,
    /// `ExtensionSupportRequiredError` (-32008): the card declares a
    /// required extension the request did not list in `A2A-Extensions`.
    #[error("extension support required: {0}")]
    ExtensionRequired(String),
    /// `VersionNotSupportedError` (-32009).
    #[error("A2A version not supported: {0}")]
    Version(String),
    /// JSON-RPC -32700.
    #[error("parse error: {0}")]
    Parse(String),
    /// JSON-RPC -32600.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// JSON-RPC -32601.
    #[error("method not found: {0}")]
    MethodNotFound(String),
    /// JSON-RPC -32602.
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// JSON-RPC -32603: the broker failed or is gone, or a bound of the
    /// broker's was hit.
    #[error("internal error: {0}")]
    Internal(String),
    /// A bound of the caller's share was reached (its blocking sends
    /// waiting, its open tasks, its contexts): JSON-RPC -32602 with
    /// `data: {reason, limit, max}`, as the broker reports its own
    /// `A2A_MAX_PARKED_WAITS`, and HTTP 429, so that a client can tell it
    /// from a failure and try again once one of its calls has ended.
    #[error("{0}")]
    Limit(Limit),
    /// Too many calls from one identity (JSON-RPC -32600 with HTTP 429 and
    /// `Retry-After`).
    #[error("rate limit exceeded")]
    RateLimited,
    /// Missing or wrong bearer token (HTTP 401).
    #[error("unauthenticated")]
    Unauthenticated,
}

/// Which bound a [`GatewayError::Limit`] hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// What the client is told.
    pub message: String,
    /// `data.reason`: `"too many waits"` for blocking sends (the broker's
    /// word for the same bound), else what ran out.
    pub reason: &'static str,
    /// `data.limit`: the bound's name (a constant of `limits`, or the
    /// broker's `A2A_MAX_PARKED_WAITS`).
    pub limit: &'static str,
    /// `data.max`: the bound.
    pub max: u64,
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// `data.reason` of the refusal of a blocking send over its bound, the
/// gateway's and the broker's alike.
pub const TOO_MANY_WAITS: &str = "too many waits";

impl GatewayError {
    /// A bound of the caller's share was reached (see [`Limit`]).
    pub fn limit(message: String, reason: &'static str, limit: &'static str, max: usize) -> Self {
        GatewayError::Limit(Limit {
            message,
            reason,
            limit,
            max: max as u64,
        })
    }

    /// The HTTP status of the answer carrying this error: 200 (the
    /// JSON-RPC binding carries errors in the body), but 429 for a bound
    /// of the caller's share, as for its rate limit.
    pub fn http_status(&self) -> u16 {
        match self {
            GatewayError::Limit(_) | GatewayError::RateLimited => 429,
            _ => 200,
        }
    }

    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            GatewayError::TaskNotFound(_) => -32001,
            GatewayError::TaskNotCancelable(_) => -32002,
            GatewayError::PushNotSupported => -32003,
            GatewayError::Unsupported(_) => -32004,
            GatewayError::ContentType(_) => -32005,
            GatewayError::ExtendedCardNotConfigured => -32007,
            GatewayError::ExtensionRequired(_) => -32008,
            GatewayError::Version(_) => -32009,
            GatewayError::Parse(_) => -32700,
            GatewayError::InvalidRequest(_)
            | GatewayError::RateLimited
            | GatewayError::Unauthenticated => -32600,
            GatewayError::MethodNotFound(_) => -32601,
            GatewayError::InvalidParams(_) | GatewayError::Limit(_) => -32602,
            GatewayError::Internal(_) => -32603,
        }
    }

    /// The `google.rpc.ErrorInfo` reason of an A2A error (`None` for the
    /// plain JSON-RPC ones).
    pub fn reason(&self) -> Option<&'static str> {
        Some(match self {
            GatewayError::TaskNotFound(_) => "TASK_NOT_FOUND",
            GatewayError::TaskNotCancelable(_) => "TASK_NOT_CANCELABLE",
            GatewayError::PushNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            GatewayError::Unsupported(_) => "UNSUPPORTED_OPERATION",
            GatewayError::ContentType(_) => "CONTENT_TYPE_NOT_SUPPORTED",
            GatewayError::ExtendedCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            GatewayError::ExtensionRequired(_) => "EXTENSION_SUPPORT_REQUIRED",
            GatewayError::Version(_) => "VERSION_NOT_SUPPORTED",
            _ => return None,
        })
    }

    /// The JSON-RPC error object: `{code, message, data?}` and nothing
    /// else; A2A errors carry `data: [ErrorInfo]`.
    pub fn to_json(&self) -> Value {
        let mut e = json!({"code": self.code(), "message": self.to_string()});
        if let GatewayError::Limit(l) = self {
            e["data"] = json!({"reason": l.reason, "limit": l.limit, "max": l.max});
        }
        if let Some(reason) = self.reason() {
            e["data"] = json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "a2a-protocol.org",
            }]);
        }
        e
    }

    /// The error of a failed broker call. `op` says what was attempted, for
    /// the errors whose v1.0 meaning depends on it.
    pub fn from_client(e: &ClientError, op: Op, task_id: &str) -> GatewayError {
        if let Some(code) = e.a2a_code() {
            return match code {
                // A task of another party is not the caller's to know of.
                A2aErrorCode::UnknownTask | A2aErrorCode::CrossContextDenied => {
                    GatewayError::TaskNotFound(task_id.to_owned())
                }
                A2aErrorCode::TaskTerminal | A2aErrorCode::InvalidTransition => match op {
                    Op::Cancel => GatewayError::TaskNotCancelable(task_id.to_owned()),
                    _ => {
                        GatewayError::Unsupported(format!("task {task_id} is in a terminal state"))
                    }
                },
                A2aErrorCode::PayloadTooLarge => GatewayError::InvalidParams(rpc_message(e)),
                A2aErrorCode::UnknownAgent | A2aErrorCode::NoPeers => {
                    GatewayError::Internal("the agent is not available".into())
                }
                // The gateway takes no lease: these never answer its calls.
                A2aErrorCode::SendCap
                | A2aErrorCode::UnknownToken
                | A2aErrorCode::LeaseConflict
                | A2aErrorCode::UnknownLease => GatewayError::Internal(rpc_message(e)),
            };
        }
        match e.rpc() {
            // The broker's bound of parked waits on the identity's
            // connection: the same limit error as the gateway's own.
            Some(r)
                if r.code == a2a_proto::error::INVALID_PARAMS
                    && r.data.as_ref().and_then(|d| d.get("reason"))
                        == Some(&Value::from(TOO_MANY_WAITS)) =>
            {
                GatewayError::limit(
                    r.message.clone(),
                    TOO_MANY_WAITS,
                    "A2A_MAX_PARKED_WAITS",
                    a2a_proto::limits::A2A_MAX_PARKED_WAITS,
                )
            }
            Some(r) if r.code == a2a_proto::error::INVALID_PARAMS => {
                GatewayError::InvalidParams(r.message.clone())
            }
            _ => GatewayError::Internal(e.to_string()),
        }
    }
}

fn rpc_message(e: &ClientError) -> String {
    e.rpc().map_or_else(|| e.to_string(), |r| r.message.clone())
}

/// Which operation a broker error came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Send,
    Get,
    Cancel,
    Other,
}

/// The broker state of a v1.0 state (`None` for `TASK_STATE_UNSPECIFIED`).
pub fn state_in(s: v1::TaskState) -> Option<State> {
    Some(match s {
        v1::TaskState::Unspecified => return None,
        v1::TaskState::Submitted => State::Submitted,
        v1::TaskState::Working => State::Working,
        v1::TaskState::Completed => State::Completed,
        v1::TaskState::Failed => State::Failed,
        v1::TaskState::Canceled => State::Canceled,
        v1::TaskState::InputRequired => State::InputRequired,
        v1::TaskState::Rejected => State::Rejected,
        v1::TaskState::AuthRequired => State::AuthRequired,
    })
}

/// The v1.0 state of a broker state.
pub fn state_out(s: State) -> v1::TaskState {
    match s {
        State::Submitted => v1::TaskState::Submitted,
        State::Working => v1::TaskState::Working,
        State::InputRequired => v1::TaskState::InputRequired,
        State::AuthRequired => v1::TaskState::AuthRequired,
        State::Completed => v1::TaskState::Completed,
        State::Canceled => v1::TaskState::Canceled,
        State::Failed => v1::TaskState::Failed,
        State::Rejected => v1::TaskState::Rejected,
    }
}

/// A timestamp as v1.0 writes it: RFC 3339 in UTC with a literal `Z`.
/// The broker's already is; anything else is re-rendered, and what cannot
/// be read is dropped rather than sent malformed.
pub fn timestamp_out(ts: &str) -> Option<String> {
    if ts.ends_with('Z') && ts.parse::<jiff::Timestamp>().is_ok() {
        return Some(ts.to_owned());
    }
    ts.parse::<jiff::Timestamp>().ok().map(|t| t.to_string())
}

/// The broker part of a v1.0 part: exactly one of `text`, `raw`, `url`,
/// `data` must be set.
pub fn part_in(p: &v1::Part) -> Result<Part, GatewayError> {
    let set = [
        p.text.is_some(),
        p.raw.is_some(),
        p.url.is_some(),
        p.data.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if set != 1 {
        return Err(GatewayError::InvalidParams(
            "a part needs exactly one of `text`, `raw`, `url`, `data`".into(),
        ));
    }
    let mut metadata = p.metadata.clone();
    // Media type and file name of a text or data part have no place in the
    // broker's shapes: kept in the part's metadata.
    let keep_extras = |metadata: &mut Option<Map<String, Value>>| {
        let mut extra = Map::new();
        if let Some(m) = &p.media_type {
            extra.insert("mediaType".into(), json!(m));
        }
        if let Some(f) = &p.filename {
            extra.insert("filename".into(), json!(f));
        }
        if !extra.is_empty() {
            gateway_meta(metadata).extend(extra);
        }
    };
    if let Some(text) = &p.text {
        keep_extras(&mut metadata);
        return Ok(Part::Text {
            text: text.clone(),
            metadata: metadata.map(Object::from),
        });
    }
    if let Some(data) = &p.data {
        keep_extras(&mut metadata);
        let data = match data {
            Value::Object(o) => o.clone(),
            other => {
                gateway_meta(&mut metadata).insert("dataValue".into(), json!(true));
                let mut m = Map::new();
                m.insert("value".into(), other.clone());
                m
            }
        };
        return Ok(Part::Data {
            data: Object::from(data),
            metadata: metadata.map(Object::from),
        });
    }
    Ok(Part::File {
        file: FileContent {
            name: p.filename.clone(),
            mime_type: p.media_type.clone(),
            uri: p.url.clone(),
            bytes: p.raw.clone(),
        },
        metadata: metadata.map(Object::from),
    })
}

/// The gateway's object in a metadata map, made if missing.
fn gateway_meta(metadata: &mut Option<Map<String, Value>>) -> &mut Map<String, Value> {
    let m = metadata.get_or_insert_with(Map::new);
    let entry = m
        .entry(GATEWAY_KEY)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(o) => o,
        // Made an object just above.
        _ => unreachable!("gateway metadata is an object"),
    }
}

/// Takes the gateway's object out of a metadata map (dropping the map if
/// nothing else is left in it).
fn take_gateway_meta(metadata: &mut Option<Map<String, Value>>) -> Map<String, Value> {
    let Some(m) = metadata else {
        return Map::new();
    };
    let ours = match m.remove(GATEWAY_KEY) {
        Some(Value::Object(o)) => o,
        _ => Map::new(),
    };
    if m.is_empty() {
        *metadata = None;
    }
    ours
}

fn object_to_map(o: &Option<Object>) -> Option<Map<String, Value>> {
    o.as_ref().map(|o| o.0.clone())
}

/// The v1.0 part of a broker part.
pub fn part_out(p: &Part) -> v1::Part {
    match p {
        Part::Text { text, metadata } => {
            let mut metadata = object_to_map(metadata);
            let ours = take_gateway_meta(&mut metadata);
            v1::Part {
                text: Some(text.clone()),
                media_type: ours.get("mediaType").and_then(as_string),
                filename: ours.get("filename").and_then(as_string),
                metadata,
                ..Default::default()
            }
        }
        Part::Data { data, metadata } => {
            let mut metadata = object_to_map(metadata);
            let ours = take_gateway_meta(&mut metadata);
            let data = if ours.get("dataValue") == Some(&json!(true)) {
                data.0.get("value").cloned().unwrap_or(Value::Null)
            } else {
                Value::Object(data.0.clone())
            };
            v1::Part {
                data: Some(data),
                media_type: ours.get("mediaType").and_then(as_string),
                filename: ours.get("filename").and_then(as_string),
                metadata,
                ..Default::default()
            }
        }
        Part::File { file, metadata } => {
            let mut metadata = object_to_map(metadata);
            take_gateway_meta(&mut metadata);
            // A file part with neither bytes nor uri (a reference by name)
            // becomes an empty url, the nearest v1.0 form.
            let (raw, url) = match (&file.bytes, &file.uri) {
                (Some(b), _) => (Some(b.clone()), None),
                (None, Some(u)) => (None, Some(u.clone())),
                (None, None) => (None, Some(String::new())),
            };
            v1::Part {
                raw,
                url,
                filename: file.name.clone(),
                media_type: file.mime_type.clone(),
                metadata,
                ..Default::default()
            }
        }
    }
}

fn as_string(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

/// The broker message of a client's v1.0 message: parts translated, a
/// fresh broker `messageId` (`fresh_id`), the client's id kept in the
/// metadata. `taskId` is the broker task (follow-ups); `to` the exposed
/// agent (creations).
pub fn message_in(
    m: &v1::Message,
    fresh_id: String,
    to: Option<&str>,
) -> Result<Message, GatewayError> {
    if m.message_id.is_empty() {
        return Err(GatewayError::InvalidParams(
            "message.messageId is required".into(),
        ));
    }
    if m.parts.is_empty() {
        return Err(GatewayError::InvalidParams(
            "message.parts must not be empty".into(),
        ));
    }
    let parts = m.parts.iter().map(part_in).collect::<Result<Vec<_>, _>>()?;
    let mut metadata = m.metadata.clone();
    let ours = gateway_meta(&mut metadata);
    ours.insert("messageId".into(), json!(m.message_id));
    if !m.extensions.is_empty() {
        ours.insert("extensions".into(), json!(m.extensions));
    }
    if !m.reference_task_ids.is_empty() {
        ours.insert("referenceTaskIds".into(), json!(m.reference_task_ids));
    }
    Ok(Message {
        role: Role::User,
        parts,
        message_id: fresh_id,
        task_id: m.task_id.clone().filter(|t| !t.is_empty()),
        context_id: None,
        from: None,
        to: to.map(str::to_owned),
        metadata: metadata.map(Object::from),
    })
}

/// The v1.0 message of a broker message, in the A2A context `context_id`.
pub fn message_out(m: &Message, context_id: &str) -> v1::Message {
    let mut metadata = object_to_map(&m.metadata);
    let ours = take_gateway_meta(&mut metadata);
    let strings = |key: &str| -> Vec<String> {
        ours.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(as_string).collect())
            .unwrap_or_default()
    };
    v1::Message {
        message_id: ours
            .get("messageId")
            .and_then(as_string)
            .unwrap_or_else(|| m.message_id.clone()),
        context_id: Some(context_id.to_owned()),
        task_id: m.task_id.clone(),
        role: match m.role {
            Role::User => v1::Role::User,
            Role::Agent => v1::Role::Agent,
        },
        parts: m.parts.iter().map(part_out).collect(),
        metadata,
        extensions: strings("extensions"),
        reference_task_ids: strings("referenceTaskIds"),
    }
}

/// Does this broker message mark a direct message response (see the
/// module doc)?
pub fn is_message_response(m: &Message) -> bool {
    object_to_map(&m.metadata)
        .and_then(|mut md| md.remove(GATEWAY_KEY))
        .and_then(|g| g.get("messageResponse").cloned())
        == Some(json!(true))
}

/// The v1.0 artifact of a broker artifact.
pub fn artifact_out(a: &Artifact) -> v1::Artifact {
    let mut metadata = object_to_map(&a.metadata);
    take_gateway_meta(&mut metadata);
    v1::Artifact {
        artifact_id: a.artifact_id.clone(),
        name: a.name.clone(),
        description: a.description.clone(),
        parts: a.parts.iter().map(part_out).collect(),
        metadata,
    }
}

/// The v1.0 status of a broker status.
pub fn status_out(s: &a2a_proto::types::TaskStatus, context_id: &str) -> v1::TaskStatus {
    v1::TaskStatus {
        state: state_out(s.state),
        message: s.message.as_deref().map(|m| message_out(m, context_id)),
        timestamp: timestamp_out(&s.timestamp),
    }
}

/// How much of a task to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskView {
    /// The last N history messages (`None`: all; 0: none).
    pub history_length: Option<usize>,
    /// Include the artifacts.
    pub artifacts: bool,
}

impl TaskView {
    /// Everything.
    pub const FULL: TaskView = TaskView {
        history_length: None,
        artifacts: true,
    };
}

/// A v1.0 `historyLength`: negative means no limit.
pub fn history_length(h: Option<i64>) -> Option<usize> {
    h.and_then(|h| usize::try_from(h).ok())
}

/// The v1.0 task of a broker task.
pub fn task_out(t: &Task, view: TaskView) -> v1::Task {
    let ctx = v1_context(&t.context_id);
    let history = &t.history;
    let skip = match view.history_length {
        Some(n) => history.len().saturating_sub(n),
        None => 0,
    };
    v1::Task {
        id: t.id.clone(),
        context_id: ctx.clone(),
        status: status_out(&t.status, &ctx),
        artifacts: if view.artifacts {
            t.artifacts.iter().map(artifact_out).collect()
        } else {
            Vec::new()
        },
        history: history[skip..]
            .iter()
            .map(|m| message_out(m, &ctx))
            .collect(),
    }
}

/// The v1.0 stream event of a broker task event.
pub fn event_out(e: &StreamEvent) -> v1::StreamResponse {
    match e {
        StreamEvent::Status(s) => {
            let ctx = v1_context(&s.context_id);
            v1::StreamResponse::StatusUpdate(v1::TaskStatusUpdateEvent {
                task_id: s.task_id.clone(),
                status: status_out(&s.status, &ctx),
                context_id: ctx,
            })
        }
        StreamEvent::Artifact(a) => {
            let ctx = v1_context(&a.context_id);
            v1::StreamResponse::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                task_id: a.task_id.clone(),
                artifact: artifact_out(&a.artifact),
                append: a.append,
                last_chunk: a.last_chunk,
                context_id: ctx,
            })
        }
    }
}

/// The broker context of an A2A context of a caller identity.
pub fn broker_context(identity: &str, v1_context: &str) -> String {
    format!("{CONTEXT_PREFIX}{identity}/{v1_context}")
}

/// The A2A context of a broker context (one the gateway did not make is
/// returned as it is).
pub fn v1_context(broker_context: &str) -> String {
    broker_context
        .strip_prefix(CONTEXT_PREFIX)
        .and_then(|rest| rest.split_once('/'))
        .map_or_else(|| broker_context.to_owned(), |(_, ctx)| ctx.to_owned())
}

/// The identity a broker context belongs to, if the gateway made it.
pub fn context_identity(broker_context: &str) -> Option<&str> {
    broker_context
        .strip_prefix(CONTEXT_PREFIX)
        .and_then(|rest| rest.split_once('/'))
        .map(|(id, _)| id)
}

/// Is this a usable identity name (`[A-Za-z0-9._-]`, 1..=64 bytes)?
pub fn valid_identity(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_IDENTITY_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Checks a client-supplied `contextId`.
pub fn check_v1_context(ctx: &str) -> Result<(), GatewayError> {
    if ctx.is_empty() || ctx.len() > MAX_V1_CONTEXT_BYTES {
        return Err(GatewayError::InvalidParams(format!(
            "contextId must be 1..={MAX_V1_CONTEXT_BYTES} bytes"
        )));
    }
    Ok(())
}

/// The peer name the gateway registers a context's requester under:
/// stable across restarts (FNV-1a of the broker context), so a gateway
/// that registers again is the same party to its tasks.
pub fn requester_name(broker_context: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in broker_context.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("a2a-gateway-{h:016x}")
}

/// A `ListTasks` page token: the offset into the sorted list, written as
/// text (opaque to clients).
pub fn page_token_in(token: Option<&str>) -> Result<usize, GatewayError> {
    match token {
        None | Some("") => Ok(0),
        Some(t) => t
            .strip_prefix("o")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| GatewayError::InvalidParams("bad pageToken".into())),
    }
}

/// The page token of the page starting at `offset`.
pub fn page_token_out(offset: usize) -> String {
    format!("o{offset}")
}

/// A `ListTasks` request, checked: the page and the filters.
#[derive(Debug, Clone, PartialEq)]
pub struct ListQuery {
    pub page_size: usize,
    pub offset: usize,
    /// Only tasks in this state (`None`: any).
    pub state: Option<State>,
    /// Only tasks whose status time is after this (ms since the epoch).
    pub after_ms: Option<i64>,
    pub view: TaskView,
}

/// Checks a `ListTasks` request.
pub fn list_query(req: &v1::ListTasksRequest) -> Result<ListQuery, GatewayError> {
    let page_size = match req.page_size {
        None | Some(0) => 50,
        Some(n) if (1..=100).contains(&n) => n as usize,
        Some(n) => {
            return Err(GatewayError::InvalidParams(format!(
                "pageSize {n} is outside 1..=100"
            )))
        }
    };
    let offset = page_token_in(req.page_token.as_deref())?;
    // UNSPECIFIED (and the JS SDK's UNRECOGNIZED, read as it) filters nothing.
    let state = match &req.status {
        None => None,
        Some(st) => state_in(
            v1::TaskState::from_json(st)
                .ok_or_else(|| GatewayError::InvalidParams("unknown status".into()))?,
        ),
    };
    let after_ms = match &req.status_timestamp_after {
        None => None,
        Some(after) => Some(
            after
                .parse::<jiff::Timestamp>()
                .map_err(|_| GatewayError::InvalidParams("bad statusTimestampAfter".into()))?
                .as_millisecond(),
        ),
    };
    Ok(ListQuery {
        page_size,
        offset,
        state,
        after_ms,
        view: TaskView {
            history_length: history_length(req.history_length),
            artifacts: req.include_artifacts.unwrap_or(false),
        },
    })
}

/// The answer for one page (`page`, already cut) of `total` matching tasks.
pub fn list_response(page: &[Task], q: &ListQuery, total: usize) -> v1::ListTasksResponse {
    let end = q.offset.saturating_add(page.len()).min(total);
    v1::ListTasksResponse {
        tasks: page.iter().map(|t| task_out(t, q.view)).collect(),
        next_page_token: if end < total && !page.is_empty() {
            page_token_out(end)
        } else {
            String::new()
        },
        page_size: q.page_size as i64,
        total_size: total as i64,
    }
}

/// One page of v1.0 tasks from all of them in memory: filtered, sorted by
/// status time, newest first (ties by id), then cut (what the gateway's
/// state file does with its index; the reference the tests hold the
/// query's reading to).
#[cfg(test)]
pub fn list_page(
    mut all: Vec<Task>,
    req: &v1::ListTasksRequest,
) -> Result<v1::ListTasksResponse, GatewayError> {
    let q = list_query(req)?;
    if let Some(st) = q.state {
        all.retain(|t| t.status.state == st);
    }
    if let Some(after) = q.after_ms {
        all.retain(|t| {
            t.status
                .timestamp
                .parse::<jiff::Timestamp>()
                .is_ok_and(|ts| ts.as_millisecond() > after)
        });
    }
    all.sort_by(|a, b| {
        b.status
            .timestamp
            .cmp(&a.status.timestamp)
            .then_with(|| b.id.cmp(&a.id))
    });
    let total = all.len();
    let end = q.offset.saturating_add(q.page_size).min(total);
    let page = all.get(q.offset.min(total)..end).unwrap_or_default();
    Ok(list_response(page, &q, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_proto::types::TaskStatus;
    use std::sync::Arc;

    fn msg(role: Role, text: &str, id: &str) -> Message {
        Message {
            role,
            parts: vec![Part::text(text)],
            message_id: id.into(),
            task_id: Some("t1".into()),
            context_id: Some("gw1/anon/c1".into()),
            from: None,
            to: None,
            metadata: None,
        }
    }

    fn task(id: &str, state: State, ts: &str, history: Vec<Message>) -> Task {
        Task {
            kind: "task".into(),
            id: id.into(),
            context_id: broker_context("anon", "c1"),
            status: TaskStatus {
                state,
                message: None,
                timestamp: ts.into(),
            },
            history: history.into_iter().map(Arc::new).collect(),
            artifacts: vec![Artifact {
                artifact_id: "a1".into(),
                name: None,
                description: None,
                parts: vec![Part::text("out")],
                metadata: None,
            }],
            agent_name: "w".into(),
            requester_name: "r".into(),
            version: 3,
        }
    }

    #[test]
    fn every_state_round_trips_and_unspecified_has_no_broker_state() {
        for s in State::ALL {
            assert_eq!(state_in(state_out(s)), Some(s));
        }
        assert_eq!(state_in(v1::TaskState::Unspecified), None);
        assert_eq!(
            serde_json::to_value(state_out(State::InputRequired)).unwrap(),
            "TASK_STATE_INPUT_REQUIRED"
        );
    }

    #[test]
    fn parts_round_trip_in_all_four_forms() {
        let cases = [
            json!({"text": "hi"}),
            json!({"text": "hi", "mediaType": "text/markdown"}),
            json!({"raw": "aGk=", "filename": "a.txt", "mediaType": "text/plain"}),
            json!({"url": "https://example.com/a", "filename": "a"}),
            json!({"data": {"key": "value", "count": 42}}),
            json!({"data": [1, 2, 3]}),
            json!({"data": "scalar", "metadata": {"m": 1}}),
        ];
        for c in cases {
            let p: v1::Part = serde_json::from_value(c.clone()).unwrap();
            let back = part_out(&part_in(&p).unwrap());
            assert_eq!(serde_json::to_value(back).unwrap(), c);
        }
        let bad: v1::Part = serde_json::from_value(json!({"text": "a", "url": "b"})).unwrap();
        assert!(matches!(part_in(&bad), Err(GatewayError::InvalidParams(_))));
        let none: v1::Part = serde_json::from_value(json!({"filename": "x"})).unwrap();
        assert!(part_in(&none).is_err());
    }

    #[test]
    fn a_reused_message_id_gets_a_fresh_broker_id_and_comes_back_as_sent() {
        let m: v1::Message = serde_json::from_value(json!({
            "messageId": "tck-complete-task-1", "role": "ROLE_USER",
            "parts": [{"text": "hi"}], "metadata": {"mine": true}
        }))
        .unwrap();
        let a = message_in(&m, "gw-1".into(), Some("worker")).unwrap();
        let b = message_in(&m, "gw-2".into(), Some("worker")).unwrap();
        assert_ne!(a.message_id, b.message_id);
        assert_eq!(a.to.as_deref(), Some("worker"));
        let out = message_out(&a, "c1");
        assert_eq!(out.message_id, "tck-complete-task-1");
        assert_eq!(
            out.metadata,
            Some(serde_json::from_value(json!({"mine": true})).unwrap())
        );
        assert_eq!(out.role, v1::Role::User);
        assert_eq!(out.context_id.as_deref(), Some("c1"));
        // A message the gateway did not make keeps its own id.
        assert_eq!(
            message_out(&msg(Role::Agent, "x", "agent-1"), "c1").message_id,
            "agent-1"
        );
        // A message without an id or parts is refused.
        let mut empty = m.clone();
        empty.message_id.clear();
        assert!(message_in(&empty, "x".into(), None).is_err());
        let mut no_parts = m;
        no_parts.parts.clear();
        assert!(message_in(&no_parts, "x".into(), None).is_err());
    }

    #[test]
    fn tasks_render_with_history_length_and_without_artifacts_on_request() {
        let t = task(
            "t1",
            State::Completed,
            "2026-01-01T00:00:00.123Z",
            vec![
                msg(Role::User, "one", "m1"),
                msg(Role::Agent, "two", "m2"),
                msg(Role::User, "three", "m3"),
            ],
        );
        let full = task_out(&t, TaskView::FULL);
        assert_eq!(full.context_id, "c1");
        assert_eq!(full.history.len(), 3);
        assert_eq!(full.artifacts.len(), 1);
        let one = task_out(
            &t,
            TaskView {
                history_length: Some(1),
                artifacts: false,
            },
        );
        assert_eq!(one.history.len(), 1);
        assert_eq!(one.history[0].parts[0].text.as_deref(), Some("three"));
        assert!(one.artifacts.is_empty());
        let v = serde_json::to_value(task_out(
            &t,
            TaskView {
                history_length: Some(0),
                artifacts: true,
            },
        ))
        .unwrap();
        assert!(v.get("history").is_none());
        assert_eq!(v["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(v["status"]["timestamp"], "2026-01-01T00:00:00.123Z");
        assert_eq!(history_length(Some(-1)), None);
    }

    #[test]
    fn timestamps_always_end_in_z() {
        assert_eq!(
            timestamp_out("2026-01-01T01:00:00+01:00").as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        assert_eq!(timestamp_out("yesterday"), None);
    }

    #[test]
    fn contexts_and_requester_names_are_derived_stably() {
        let b = broker_context("alice", "ctx/with/slashes");
        assert_eq!(v1_context(&b), "ctx/with/slashes");
        assert_eq!(context_identity(&b), Some("alice"));
        assert_eq!(v1_context("someone-else"), "someone-else");
        assert_eq!(requester_name(&b), requester_name(&b));
        assert_ne!(
            requester_name(&b),
            requester_name(&broker_context("bob", "ctx"))
        );
        assert!(valid_identity("ci-bot.1"));
        assert!(!valid_identity("a/b"));
        assert!(!valid_identity(""));
        assert!(check_v1_context(&"x".repeat(MAX_V1_CONTEXT_BYTES + 1)).is_err());
    }

    #[test]
    fn list_pages_newest_first_with_a_next_page_token_until_the_end() {
        let all: Vec<Task> = (0..5)
            .map(|i| {
                task(
                    &format!("t{i}"),
                    State::Working,
                    &format!("2026-01-01T00:00:0{i}.000Z"),
                    vec![],
                )
            })
            .collect();
        let mut req = v1::ListTasksRequest {
            page_size: Some(2),
            ..Default::default()
        };
        let p1 = list_page(all.clone(), &req).unwrap();
        assert_eq!(p1.total_size, 5);
        assert_eq!(
            p1.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["t4", "t3"]
        );
        assert!(p1.tasks[0].artifacts.is_empty());
        req.page_token = Some(p1.next_page_token.clone());
        let p2 = list_page(all.clone(), &req).unwrap();
        assert_eq!(p2.tasks[0].id, "t2");
        req.page_token = Some(p2.next_page_token);
        let p3 = list_page(all.clone(), &req).unwrap();
        assert_eq!(p3.tasks.len(), 1);
        assert_eq!(p3.next_page_token, "");
        req.page_token = Some("garbage".into());
        assert!(list_page(all.clone(), &req).is_err());
        let with_status = |v| v1::ListTasksRequest {
            status: Some(v),
            ..Default::default()
        };
        let filtered = list_page(all.clone(), &with_status(json!("TASK_STATE_COMPLETED"))).unwrap();
        assert_eq!(filtered.total_size, 0);
        assert_eq!(filtered.next_page_token, "");
        // An unset enum as the JS SDK writes it filters nothing; a name
        // that is no state is refused.
        assert_eq!(
            list_page(all.clone(), &with_status(json!("UNRECOGNIZED")))
                .unwrap()
                .total_size,
            5
        );
        assert!(list_page(all, &with_status(json!("TASK_STATE_NONE"))).is_err());
    }

    #[test]
    fn errors_carry_v1_codes_and_error_info() {
        let e = GatewayError::TaskNotFound("t".into()).to_json();
        assert_eq!(e["code"], -32001);
        assert_eq!(e["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(
            e["data"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
        assert_eq!(e["data"][0]["domain"], "a2a-protocol.org");
        let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["code", "data", "message"]);
        assert!(GatewayError::MethodNotFound("x".into())
            .to_json()
            .get("data")
            .is_none());
        let broker =
            |code: A2aErrorCode| ClientError::Rpc(a2a_proto::error::RpcError::a2a(code, "m", None));
        let cases = [
            (A2aErrorCode::UnknownTask, Op::Get, -32001),
            (A2aErrorCode::CrossContextDenied, Op::Get, -32001),
            (A2aErrorCode::TaskTerminal, Op::Cancel, -32002),
            (A2aErrorCode::InvalidTransition, Op::Cancel, -32002),
            (A2aErrorCode::TaskTerminal, Op::Send, -32004),
            (A2aErrorCode::PayloadTooLarge, Op::Send, -32602),
            (A2aErrorCode::NoPeers, Op::Send, -32603),
        ];
        for (code, op, want) in cases {
            assert_eq!(
                GatewayError::from_client(&broker(code), op, "t").code(),
                want,
                "{code:?}"
            );
        }
    }

    #[test]
    fn a_bound_reached_is_a_limit_error_with_its_bound_not_an_internal_one() {
        let e = GatewayError::limit(
            "too many blocking sends waiting for identity a (at most 64)".into(),
            TOO_MANY_WAITS,
            "MAX_BLOCKING_PER_IDENTITY",
            64,
        );
        assert_eq!(e.http_status(), 429);
        assert_eq!(
            e.to_json(),
            json!({"code": -32602,
                   "message": "too many blocking sends waiting for identity a (at most 64)",
                   "data": {"reason": "too many waits", "limit": "MAX_BLOCKING_PER_IDENTITY", "max": 64}})
        );
        // The broker's own bound of parked waits on the identity's
        // connection is the same error.
        let parked = ClientError::Rpc(a2a_proto::error::RpcError::new(
            -32602,
            "too many waits: this connection already has 64 unanswered waits or blocking sends",
            Some(
                json!({"reason": "too many waits", "limit": "A2A_MAX_PARKED_WAITS", "max": 64, "actual": 65}),
            ),
        ));
        let e = GatewayError::from_client(&parked, Op::Send, "");
        assert_eq!(e.http_status(), 429);
        let j = e.to_json();
        assert_eq!(j["code"], -32602);
        assert_eq!(j["data"]["reason"], "too many waits");
        assert_eq!(j["data"]["limit"], "A2A_MAX_PARKED_WAITS");
        assert_eq!(j["data"]["max"], 64);
        // Other invalid params stay what they were (HTTP 200).
        let other = ClientError::Rpc(a2a_proto::error::RpcError::new(-32602, "bad", None));
        let e = GatewayError::from_client(&other, Op::Send, "");
        assert_eq!(e, GatewayError::InvalidParams("bad".into()));
        assert_eq!(e.http_status(), 200);
    }

    #[test]
    fn a_status_message_marked_as_a_message_response_is_recognised() {
        let mut m = msg(Role::Agent, "Direct message response", "a1");
        assert!(!is_message_response(&m));
        m.metadata =
            Some(serde_json::from_value(json!({GATEWAY_KEY: {"messageResponse": true}})).unwrap());
        assert!(is_message_response(&m));
        assert!(message_out(&m, "c").metadata.is_none());
    }
}
