//! A2A v0.3 over the JSON-RPC binding, translated to and from v1.0.
//!
//! Most deployed A2A clients still speak v0.3: slash method names
//! (`message/send`), `kind` discriminators on every object, lowercase
//! kebab-case states (`input-required`), roles `user`/`agent`, parts as
//! `{kind: text|file|data}`, push configs nested under
//! `pushNotificationConfig`, and a card with `url`/`preferredTransport`.
//! The gateway serves them with its v1.0 operations: a v0.3 request's
//! params are rewritten into the v1.0 params ([`params_in`]), the v1.0
//! result into the v0.3 result ([`result_out`], [`event_out`]), and error
//! codes v0.3 does not define become `-32603` ([`error_out`]), as the
//! official SDKs' compatibility layers do. The shapes are those of the
//! official Python SDK 0.3 (`a2a/types.py`), which follows the v0.3
//! specification's JSON schema.
//!
//! The other directions, for the gateway as a client of a v0.3 remote
//! agent, are in [`remote`].
//!
//! Everything works on JSON trees; nothing here does I/O.

use crate::mapping::GatewayError as E;
use crate::v1;
use serde_json::{json, Map, Value};

pub mod remote;

/// The `protocolVersion` of the v0.3 card fields.
pub const PROTOCOL_VERSION: &str = "0.3.0";

/// The `protocolVersion` of the v0.3 entry in `supportedInterfaces` (the
/// v1.0 entries say `1.0`).
const INTERFACE_VERSION: &str = "0.3";

/// A v0.3 JSON-RPC method the gateway serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Send,
    Stream,
    Get,
    Cancel,
    Resubscribe,
    PushSet,
    PushGet,
    PushList,
    PushDelete,
    ExtendedCard,
}

impl Method {
    /// Every method, for tests and tables.
    pub const ALL: [Method; 10] = [
        Method::Send,
        Method::Stream,
        Method::Get,
        Method::Cancel,
        Method::Resubscribe,
        Method::PushSet,
        Method::PushGet,
        Method::PushList,
        Method::PushDelete,
        Method::ExtendedCard,
    ];

    /// The method of a v0.3 name.
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Its v0.3 name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Send => "message/send",
            Method::Stream => "message/stream",
            Method::Get => "tasks/get",
            Method::Cancel => "tasks/cancel",
            Method::Resubscribe => "tasks/resubscribe",
            Method::PushSet => "tasks/pushNotificationConfig/set",
            Method::PushGet => "tasks/pushNotificationConfig/get",
            Method::PushList => "tasks/pushNotificationConfig/list",
            Method::PushDelete => "tasks/pushNotificationConfig/delete",
            Method::ExtendedCard => "agent/getAuthenticatedExtendedCard",
        }
    }

    /// The v1.0 method that does its work.
    pub fn v1(self) -> &'static str {
        match self {
            Method::Send => "SendMessage",
            Method::Stream => "SendStreamingMessage",
            Method::Get => "GetTask",
            Method::Cancel => "CancelTask",
            Method::Resubscribe => "SubscribeToTask",
            Method::PushSet => "CreateTaskPushNotificationConfig",
            Method::PushGet => "GetTaskPushNotificationConfig",
            Method::PushList => "ListTaskPushNotificationConfigs",
            Method::PushDelete => "DeleteTaskPushNotificationConfig",
            Method::ExtendedCard => "GetExtendedAgentCard",
        }
    }
}

/// Does this `A2A-Version` header name v0.3? `0.3` and its patch versions
/// (`0.3.0`); an absent header is decided by the method name alone.
pub fn is_version(v: Option<&str>) -> bool {
    v.map(str::trim).is_some_and(|v| {
        v == "0.3"
            || v.strip_prefix("0.3.")
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    })
}

// ------------------------------------------------------------------ in

fn bad(msg: impl Into<String>) -> E {
    E::InvalidParams(msg.into())
}

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, E> {
    v.as_object()
        .ok_or_else(|| bad(format!("{what} must be an object")))
}

/// Copies the members `names` of `from` that are present into `to`.
fn copy(from: &Map<String, Value>, to: &mut Map<String, Value>, names: &[&str]) {
    for n in names {
        if let Some(v) = from.get(*n) {
            to.insert((*n).to_owned(), v.clone());
        }
    }
}

/// The task id a request's params name as `id` (both directions).
pub(crate) fn task_id(p: &Map<String, Value>) -> Result<Value, E> {
    match p.get("id") {
        Some(Value::String(s)) => Ok(Value::String(s.clone())),
        _ => Err(bad("id (the task id) must be a string")),
    }
}

/// The v1.0 params of a v0.3 request.
pub fn params_in(m: Method, params: &Value) -> Result<Value, E> {
    if m == Method::ExtendedCard && params.is_null() {
        return Ok(json!({}));
    }
    let p = object(params, "params")?;
    Ok(match m {
        Method::Send | Method::Stream => send_in(p)?,
        Method::Get => {
            let mut out = Map::new();
            out.insert("id".into(), task_id(p)?);
            if let Some(h) = history_length(p)? {
                out.insert("historyLength".into(), json!(h));
            }
            Value::Object(out)
        }
        Method::Cancel => {
            let mut out = Map::new();
            out.insert("id".into(), task_id(p)?);
            copy(p, &mut out, &["metadata"]);
            Value::Object(out)
        }
        Method::Resubscribe => json!({"id": task_id(p)?}),
        Method::PushSet => {
            let Some(Value::String(tid)) = p.get("taskId") else {
                return Err(bad("taskId must be a string"));
            };
            let cfg = p
                .get("pushNotificationConfig")
                .ok_or_else(|| bad("pushNotificationConfig is required"))?;
            let mut out = push_config_in(cfg)?;
            out.insert("taskId".into(), Value::String(tid.clone()));
            // v0.3 servers name a config without an id after its task, so
            // a later get without `pushNotificationConfigId` finds it.
            if out
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                out.insert("id".into(), Value::String(tid.clone()));
            }
            Value::Object(out)
        }
        Method::PushGet | Method::PushDelete => {
            let tid = task_id(p)?;
            let cid = match p.get("pushNotificationConfigId") {
                Some(Value::String(s)) => Value::String(s.clone()),
                None | Some(Value::Null) if m == Method::PushGet => tid.clone(),
                _ => return Err(bad("pushNotificationConfigId must be a string")),
            };
            json!({"taskId": tid, "id": cid})
        }
        Method::PushList => json!({"taskId": task_id(p)?}),
        Method::ExtendedCard => json!({}),
    })
}

/// A `historyLength` member: absent, or a count (v0.3's schema says an
/// integer; a negative one is refused, not read as "all").
fn history_length(o: &Map<String, Value>) -> Result<Option<u64>, E> {
    match o.get("historyLength") {
        None | Some(Value::Null) => Ok(None),
        Some(h) => h.as_u64().map(Some).ok_or_else(|| {
            bad(format!(
                "historyLength must be a count (0 or more), not {h}"
            ))
        }),
    }
}

/// `MessageSendParams` -> v1.0 `SendMessageRequest`.
fn send_in(p: &Map<String, Value>) -> Result<Value, E> {
    let msg = p.get("message").ok_or_else(|| bad("message is required"))?;
    let mut out = Map::new();
    out.insert("message".into(), message_in(msg)?);
    if let Some(c) = p.get("configuration").filter(|c| !c.is_null()) {
        let c = object(c, "configuration")?;
        let mut conf = Map::new();
        copy(c, &mut conf, &["acceptedOutputModes"]);
        // v0.3 reads 0 as "no limit" where v1.0 reads it as "none": left
        // unset, as the official compatibility layers do.
        if let Some(h) = history_length(c)?.filter(|h| *h != 0) {
            conf.insert("historyLength".into(), json!(h));
        }
        match c.get("blocking") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => {
                conf.insert("returnImmediately".into(), Value::Bool(!b));
            }
            Some(_) => return Err(bad("configuration.blocking must be a boolean")),
        }
        if let Some(pc) = c.get("pushNotificationConfig").filter(|v| !v.is_null()) {
            conf.insert(
                "taskPushNotificationConfig".into(),
                Value::Object(push_config_in(pc)?),
            );
        }
        out.insert("configuration".into(), Value::Object(conf));
    }
    copy(p, &mut out, &["metadata"]);
    Ok(Value::Object(out))
}

/// v0.3 `PushNotificationConfig` -> the members of a v1.0
/// `TaskPushNotificationConfig` (without its task id).
fn push_config_in(v: &Value) -> Result<Map<String, Value>, E> {
    let c = object(v, "pushNotificationConfig")?;
    let mut out = Map::new();
    copy(c, &mut out, &["id", "url", "token"]);
    if let Some(a) = c.get("authentication").filter(|a| !a.is_null()) {
        let a = object(a, "authentication")?;
        let scheme = match a.get("schemes") {
            Some(Value::Array(s)) => s.first().and_then(Value::as_str).unwrap_or(""),
            None => "",
            Some(_) => return Err(bad("authentication.schemes must be an array")),
        };
        let mut auth = Map::new();
        auth.insert("scheme".into(), Value::String(scheme.to_owned()));
        copy(a, &mut auth, &["credentials"]);
        out.insert("authentication".into(), Value::Object(auth));
    }
    Ok(out)
}

/// v0.3 `Message` -> v1.0 `Message`.
pub fn message_in(v: &Value) -> Result<Value, E> {
    let m = object(v, "message")?;
    let mut out = Map::new();
    copy(
        m,
        &mut out,
        &[
            "messageId",
            "contextId",
            "taskId",
            "metadata",
            "extensions",
            "referenceTaskIds",
        ],
    );
    let role = match m.get("role").and_then(Value::as_str) {
        Some("user") => "ROLE_USER",
        Some("agent") => "ROLE_AGENT",
        Some(other) => {
            return Err(bad(format!(
                "unknown role `{other}` (v0.3 roles are user and agent)"
            )))
        }
        None => return Err(bad("message.role is required")),
    };
    out.insert("role".into(), json!(role));
    let Some(Value::Array(parts)) = m.get("parts") else {
        return Err(bad("message.parts must be an array"));
    };
    let parts = parts.iter().map(part_in).collect::<Result<Vec<_>, _>>()?;
    out.insert("parts".into(), Value::Array(parts));
    Ok(Value::Object(out))
}

/// The metadata flag of a data part whose v1.0 data was not an object
/// (v0.3 data parts hold objects only): the value is under `data.value`.
/// The official SDKs' name, so their clients read such parts back.
const DATA_COMPAT: &str = "data_part_compat";

/// v0.3 `Part` (`TextPart`, `FilePart`, `DataPart`) -> v1.0 `Part`.
pub fn part_in(v: &Value) -> Result<Value, E> {
    let p = object(v, "a part")?;
    // `kind` is the discriminator, required by v0.3's schema: a part
    // without it (or with another member naming its type) is refused
    // rather than guessed at.
    let kind = match p.get("kind") {
        Some(Value::String(k)) => k.as_str(),
        Some(_) => return Err(bad("part kind must be a string")),
        None => return Err(bad("a part needs a kind (text, file or data)")),
    };
    let mut out = Map::new();
    let mut metadata = p.get("metadata").and_then(Value::as_object).cloned();
    match kind {
        "text" => match p.get("text") {
            Some(Value::String(t)) => {
                out.insert("text".into(), Value::String(t.clone()));
            }
            _ => return Err(bad("a text part needs a string text")),
        },
        "file" => {
            let f = object(p.get("file").unwrap_or(&Value::Null), "a file part's file")?;
            match (f.get("bytes"), f.get("uri")) {
                (Some(Value::String(b)), _) => out.insert("raw".into(), Value::String(b.clone())),
                (_, Some(Value::String(u))) => out.insert("url".into(), Value::String(u.clone())),
                _ => return Err(bad("a file part needs file.bytes or file.uri (a string)")),
            };
            if let Some(Value::String(mt)) = f.get("mimeType") {
                out.insert("mediaType".into(), Value::String(mt.clone()));
            }
            if let Some(Value::String(n)) = f.get("name") {
                out.insert("filename".into(), Value::String(n.clone()));
            }
        }
        "data" => {
            let d = object(p.get("data").unwrap_or(&Value::Null), "a data part's data")?;
            let wrapped = metadata
                .as_mut()
                .and_then(|m| m.remove(DATA_COMPAT))
                .is_some_and(|f| f == Value::Bool(true));
            let data = if wrapped {
                d.get("value").cloned().unwrap_or(Value::Null)
            } else {
                Value::Object(d.clone())
            };
            out.insert("data".into(), data);
        }
        other => {
            return Err(bad(format!(
                "unknown part kind `{other}` (v0.3 parts are text, file or data)"
            )))
        }
    }
    if let Some(m) = metadata.filter(|m| !m.is_empty()) {
        out.insert("metadata".into(), Value::Object(m));
    }
    Ok(Value::Object(out))
}

// ------------------------------------------------------------------ out

/// The v0.3 name of a v1.0 state (`TASK_STATE_INPUT_REQUIRED` ->
/// `input-required`); an unspecified or unknown one is `unknown`.
pub fn state_out(v1_state: &str) -> &'static str {
    match v1::TaskState::from_json(&Value::String(v1_state.to_owned())) {
        Some(v1::TaskState::Submitted) => "submitted",
        Some(v1::TaskState::Working) => "working",
        Some(v1::TaskState::Completed) => "completed",
        Some(v1::TaskState::Failed) => "failed",
        Some(v1::TaskState::Canceled) => "canceled",
        Some(v1::TaskState::InputRequired) => "input-required",
        Some(v1::TaskState::Rejected) => "rejected",
        Some(v1::TaskState::AuthRequired) => "auth-required",
        Some(v1::TaskState::Unspecified) | None => "unknown",
    }
}

/// A field of a JSON object (or `Null`).
fn get<'a>(v: &'a Value, k: &str) -> &'a Value {
    v.get(k).unwrap_or(&Value::Null)
}

fn put(out: &mut Map<String, Value>, k: &str, v: Value) {
    out.insert(k.to_owned(), v);
}

/// v1.0 `Part` -> v0.3 `Part`.
pub fn part_out(p: &Value) -> Value {
    let mut out = Map::new();
    let mut metadata = p.get("metadata").and_then(Value::as_object).cloned();
    if let Some(t) = p.get("text") {
        put(&mut out, "kind", json!("text"));
        put(&mut out, "text", t.clone());
    } else if p.get("raw").is_some() || p.get("url").is_some() {
        let mut f = Map::new();
        match p.get("raw") {
            Some(b) => put(&mut f, "bytes", b.clone()),
            None => put(&mut f, "uri", get(p, "url").clone()),
        }
        if let Some(mt) = p.get("mediaType") {
            put(&mut f, "mimeType", mt.clone());
        }
        if let Some(n) = p.get("filename") {
            put(&mut f, "name", n.clone());
        }
        put(&mut out, "kind", json!("file"));
        put(&mut out, "file", Value::Object(f));
    } else if let Some(d) = p.get("data") {
        put(&mut out, "kind", json!("data"));
        if d.is_object() {
            put(&mut out, "data", d.clone());
        } else {
            put(&mut out, "data", json!({"value": d}));
            metadata
                .get_or_insert_with(Map::new)
                .insert(DATA_COMPAT.into(), Value::Bool(true));
        }
    } else {
        // A v1.0 part with no content: the nearest v0.3 part.
        put(&mut out, "kind", json!("text"));
        put(&mut out, "text", json!(""));
    }
    if let Some(m) = metadata {
        put(&mut out, "metadata", Value::Object(m));
    }
    Value::Object(out)
}

fn parts_out(v: &Value) -> Value {
    Value::Array(
        v.as_array()
            .map(|ps| ps.iter().map(part_out).collect())
            .unwrap_or_default(),
    )
}

/// v1.0 `Message` -> v0.3 `Message`.
pub fn message_out(m: &Value) -> Value {
    let mut out = Map::new();
    put(&mut out, "kind", json!("message"));
    put(&mut out, "messageId", get(m, "messageId").clone());
    let role = if get(m, "role") == "ROLE_USER" {
        "user"
    } else {
        "agent"
    };
    put(&mut out, "role", json!(role));
    put(&mut out, "parts", parts_out(get(m, "parts")));
    if let Some(mo) = m.as_object() {
        copy(
            mo,
            &mut out,
            &[
                "contextId",
                "taskId",
                "metadata",
                "extensions",
                "referenceTaskIds",
            ],
        );
    }
    Value::Object(out)
}

/// v1.0 `TaskStatus` -> v0.3 `TaskStatus`.
fn status_out(s: &Value) -> Value {
    let mut out = Map::new();
    put(
        &mut out,
        "state",
        json!(state_out(get(s, "state").as_str().unwrap_or(""))),
    );
    if let Some(m) = s.get("message") {
        put(&mut out, "message", message_out(m));
    }
    if let Some(t) = s.get("timestamp") {
        put(&mut out, "timestamp", t.clone());
    }
    Value::Object(out)
}

/// v1.0 `Artifact` -> v0.3 `Artifact` (the same but for its parts).
fn artifact_out(a: &Value) -> Value {
    let mut out = a.as_object().cloned().unwrap_or_default();
    put(&mut out, "parts", parts_out(get(a, "parts")));
    Value::Object(out)
}

/// v1.0 `Task` -> v0.3 `Task`.
pub fn task_out(t: &Value) -> Value {
    let mut out = Map::new();
    put(&mut out, "kind", json!("task"));
    put(&mut out, "id", get(t, "id").clone());
    put(&mut out, "contextId", get(t, "contextId").clone());
    put(&mut out, "status", status_out(get(t, "status")));
    if let Some(Value::Array(a)) = t.get("artifacts") {
        put(
            &mut out,
            "artifacts",
            Value::Array(a.iter().map(artifact_out).collect()),
        );
    }
    if let Some(Value::Array(h)) = t.get("history") {
        put(
            &mut out,
            "history",
            Value::Array(h.iter().map(message_out).collect()),
        );
    }
    if let Some(m) = t.get("metadata") {
        put(&mut out, "metadata", m.clone());
    }
    Value::Object(out)
}

/// One v1.0 `StreamResponse` (`{task}`, `{message}`, `{statusUpdate}`,
/// `{artifactUpdate}`) -> the v0.3 event (`kind` task, message,
/// status-update, artifact-update). `last` says the stream ends after this
/// event: a status update's `final` (v0.3's "the last event of this
/// interaction", which v1.0 tells by the end of the stream).
pub fn event_out(ev: &Value, last: bool) -> Value {
    if let Some(t) = ev.get("task") {
        return task_out(t);
    }
    if let Some(m) = ev.get("message") {
        return message_out(m);
    }
    if let Some(s) = ev.get("statusUpdate") {
        let mut out = Map::new();
        put(&mut out, "kind", json!("status-update"));
        put(&mut out, "taskId", get(s, "taskId").clone());
        put(&mut out, "contextId", get(s, "contextId").clone());
        put(&mut out, "status", status_out(get(s, "status")));
        put(&mut out, "final", Value::Bool(last));
        if let Some(m) = s.get("metadata") {
            put(&mut out, "metadata", m.clone());
        }
        return Value::Object(out);
    }
    if let Some(a) = ev.get("artifactUpdate") {
        let mut out = Map::new();
        put(&mut out, "kind", json!("artifact-update"));
        put(&mut out, "taskId", get(a, "taskId").clone());
        put(&mut out, "contextId", get(a, "contextId").clone());
        put(&mut out, "artifact", artifact_out(get(a, "artifact")));
        put(
            &mut out,
            "append",
            json!(get(a, "append").as_bool().unwrap_or(false)),
        );
        put(
            &mut out,
            "lastChunk",
            json!(get(a, "lastChunk").as_bool().unwrap_or(false)),
        );
        if let Some(m) = a.get("metadata") {
            put(&mut out, "metadata", m.clone());
        }
        return Value::Object(out);
    }
    ev.clone()
}

/// v1.0 `TaskPushNotificationConfig` (flat) -> v0.3
/// `TaskPushNotificationConfig` (`{taskId, pushNotificationConfig}`).
pub fn push_config_out(c: &Value) -> Value {
    let mut inner = Map::new();
    if let Some(co) = c.as_object() {
        copy(co, &mut inner, &["id", "url", "token"]);
    }
    if let Some(a) = c.get("authentication") {
        let scheme = get(a, "scheme").as_str().unwrap_or("");
        let mut auth = Map::new();
        let schemes: Vec<Value> = if scheme.is_empty() {
            vec![]
        } else {
            vec![json!(scheme)]
        };
        put(&mut auth, "schemes", Value::Array(schemes));
        if let Some(cr) = a.get("credentials") {
            put(&mut auth, "credentials", cr.clone());
        }
        put(&mut inner, "authentication", Value::Object(auth));
    }
    json!({"taskId": get(c, "taskId"), "pushNotificationConfig": inner})
}

/// The v0.3 result of a method from its v1.0 result.
pub fn result_out(m: Method, r: &Value) -> Result<Value, E> {
    Ok(match m {
        Method::Send | Method::Stream => event_out(r, false),
        Method::Get | Method::Cancel | Method::Resubscribe => task_out(r),
        Method::PushSet | Method::PushGet => push_config_out(r),
        Method::PushList => Value::Array(
            get(r, "configs")
                .as_array()
                .map(|cs| cs.iter().map(push_config_out).collect())
                .unwrap_or_default(),
        ),
        // v0.3 answers a delete with a null result.
        Method::PushDelete => Value::Null,
        // The gateway's card carries the v0.3 fields already ([`card`]);
        // v0.3's extended card is the authenticated one, so a gateway
        // without authentication has none to give ([`card`] says so).
        Method::ExtendedCard => {
            if r.get("supportsAuthenticatedExtendedCard") != Some(&Value::Bool(true)) {
                return Err(E::ExtendedCardNotConfigured);
            }
            r.clone()
        }
    })
}

/// The error codes v0.3 defines: JSON-RPC's and A2A's -32001..=-32007.
fn v03_code(code: i64) -> bool {
    matches!(code, -32700 | -32600 | -32601 | -32602 | -32603) || (-32007..=-32001).contains(&code)
}

/// A v1.0 JSON-RPC error object made a v0.3 one: a code v0.3 does not
/// define (v1.0's -32008 extension required, -32009 version not
/// supported) is -32603, as the official SDKs answer v0.3 clients.
pub fn error_out(mut e: Value) -> Value {
    if let Some(code) = e.get("code").and_then(Value::as_i64) {
        if !v03_code(code) {
            e["code"] = json!(-32603);
        }
    }
    e
}

// ------------------------------------------------------------------ card

/// The v1.0 card with the v0.3 fields beside its own (one card for both
/// clients, as the official SDKs serve it): a v0.3 entry in
/// `supportedInterfaces` at the JSON-RPC interface's URL (after the v1.0
/// ones, which v1.0 clients prefer), and `protocolVersion`, `url`,
/// `preferredTransport`, `additionalInterfaces`,
/// `supportsAuthenticatedExtendedCard` (with authentication), `security`,
/// and the `type` member
/// of each security scheme, which v1.0 readers ignore. The members both
/// versions share (`name`, `capabilities`, `skills`, the modes) are one.
pub fn card(c: &v1::AgentCard) -> Value {
    let mut v = serde_json::to_value(c).unwrap_or_else(|_| json!({}));
    let Some(url) = c
        .supported_interfaces
        .iter()
        .find(|i| i.protocol_binding == "JSONRPC")
        .map(|i| i.url.clone())
    else {
        // No JSON-RPC interface: nothing a v0.3 client could call.
        return v;
    };
    let Some(o) = v.as_object_mut() else {
        return v;
    };
    if let Some(Value::Array(ifaces)) = o.get_mut("supportedInterfaces") {
        ifaces.push(json!({
            "url": url, "protocolBinding": "JSONRPC", "protocolVersion": INTERFACE_VERSION
        }));
    }
    put(o, "protocolVersion", json!(PROTOCOL_VERSION));
    put(o, "url", json!(url));
    put(o, "preferredTransport", json!("JSONRPC"));
    put(
        o,
        "additionalInterfaces",
        json!([{"url": url, "transport": "JSONRPC"}]),
    );
    // v0.3's extended card is for authenticated callers: declared only
    // when the card asks for authentication.
    if c.capabilities.extended_agent_card && c.security_schemes.is_some() {
        put(o, "supportsAuthenticatedExtendedCard", json!(true));
    }
    if let Some(Value::Object(schemes)) = o.get_mut("securitySchemes") {
        for s in schemes.values_mut() {
            if let Some(h) = s.get("httpAuthSecurityScheme").cloned() {
                if let Some(so) = s.as_object_mut() {
                    put(so, "type", json!("http"));
                    put(so, "scheme", get(&h, "scheme").clone());
                    if let Some(bf) = h.get("bearerFormat") {
                        put(so, "bearerFormat", bf.clone());
                    }
                }
            }
        }
    }
    // v1.0 `[{schemes: {NAME: {list: [scopes]}}}]` -> v0.3
    // `[{NAME: [scopes]}]`.
    if let Some(Value::Array(reqs)) = o.get("securityRequirements") {
        let security: Vec<Value> = reqs
            .iter()
            .map(|r| {
                let mut m = Map::new();
                if let Some(Value::Object(s)) = r.get("schemes") {
                    for (name, scopes) in s {
                        let list = get(scopes, "list").as_array().cloned();
                        put(&mut m, name, Value::Array(list.unwrap_or_default()));
                    }
                }
                Value::Object(m)
            })
            .collect();
        put(o, "security", Value::Array(security));
    }
    v
}

#[cfg(test)]
mod tests;
