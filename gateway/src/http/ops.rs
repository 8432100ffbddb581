//! The A2A v1.0 operations, one function each, shared by both HTTP
//! bindings: JSON-RPC ([`super::jsonrpc`]) reads a method name and its
//! params from its envelope, HTTP+JSON ([`super::rest`]) from the verb, the
//! path, the query and the body; both then call [`call`], and only the
//! framing of the answer differs ([`Framing`]). So an operation's checks,
//! its mapping and its audit line are the same whichever binding asked.

use super::{rest, rpc_error, sse, App};
use crate::compat::v03;
use crate::core::{self, SendOutcome};
use crate::mapping::{self, GatewayError as E, TaskView};
use crate::security::{audit, AuditLog};
use crate::v1;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::time::Instant;

/// How a binding frames its answers.
#[derive(Debug, Clone)]
pub enum Framing {
    /// JSON-RPC 2.0: a result or an error object in an envelope with the
    /// request's id (errors on HTTP 200, but 429 for a bound of the
    /// caller's share), each SSE event a whole JSON-RPC response.
    JsonRpc(Value),
    /// HTTP+JSON: the result itself as the body, an error as the HTTP
    /// status with an AIP-193 body, each SSE event a bare `StreamResponse`.
    Rest,
}

impl Framing {
    /// A success answer with this result.
    fn ok(&self, result: &RawValue) -> Response {
        match self {
            // Serialised once, straight to the body (no `Value` tree of
            // the answer: it cost time on every call).
            Framing::JsonRpc(id) => (
                StatusCode::OK,
                axum::Json(Reply {
                    jsonrpc: "2.0",
                    id,
                    result,
                }),
            )
                .into_response(),
            Framing::Rest => (
                StatusCode::OK,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                result.get().to_owned(),
            )
                .into_response(),
        }
    }

    /// An error answer.
    pub fn error(&self, e: &E) -> Response {
        match self {
            Framing::JsonRpc(id) => {
                let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::OK);
                rpc_error(status, id.clone(), e.to_json())
            }
            Framing::Rest => rest::error(rest::status_of(e), e),
        }
    }

    /// The JSON-RPC id each SSE event is wrapped with (none: bare events).
    fn stream_envelope(&self) -> Option<Value> {
        match self {
            Framing::JsonRpc(id) => Some(id.clone()),
            Framing::Rest => None,
        }
    }
}

/// Is this `A2A-Version` one the gateway speaks? `1.0` and its patch
/// versions (which the spec says to ignore); absent is taken as the
/// current version (only the card GET is expected without it, but plain
/// HTTP tools omit it too).
pub fn version_supported(v: Option<&str>) -> bool {
    match v {
        None => true,
        Some(v) => {
            let v = v.trim();
            v == "1"
                || v == "1.0"
                || v.strip_prefix("1.0.")
                    .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        }
    }
}

/// Checks the headers every call of both bindings carries: a
/// `Content-Type`, when there is one, is JSON, and the `A2A-Version` is one
/// the gateway speaks ([`version_supported`]).
pub fn check_headers(headers: &HeaderMap) -> Result<(), E> {
    check_content_type(headers)?;
    let version = headers
        .get("a2a-version")
        .map(|v| v.to_str().unwrap_or("?"));
    if !version_supported(version) {
        return Err(E::Version(version.unwrap_or("").to_owned()));
    }
    Ok(())
}

/// A `Content-Type`, when there is one, is JSON.
pub fn check_content_type(headers: &HeaderMap) -> Result<(), E> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|s| {
            s.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
    if let Some(ct) = ct {
        if ct != "application/json" && !ct.ends_with("+json") {
            return Err(E::ContentType(ct));
        }
    }
    Ok(())
}

/// Who a request is from, for its audit line.
pub struct Who<'a> {
    pub log: &'a AuditLog,
    pub identity: &'a str,
    pub agent: &'a str,
    /// The A2A v0.3 method a JSON-RPC request called: its answers are
    /// translated back (`compat::v03`).
    pub v03: Option<v03::Method>,
}

/// Runs one operation, `method` (its v1.0 name) with `params` (its request
/// object), and answers in `framing`. Unary methods answer one JSON body;
/// the streaming ones an SSE stream (or a plain error when they fail
/// before it starts).
pub async fn call(
    app: &App,
    who: &Who<'_>,
    headers: &HeaderMap,
    method: &str,
    params: &Value,
    framing: Framing,
    started: Instant,
) -> Response {
    // Capabilities are checked before extensions (a streaming call to an
    // agent without streaming is -32004 whatever its headers).
    let streaming_call = matches!(method, "SendStreamingMessage" | "SubscribeToTask");
    let message_call = matches!(method, "SendMessage" | "SendStreamingMessage");
    if message_call && (app.config.streaming || !streaming_call) {
        let listed: Vec<&str> = headers
            .get_all("a2a-extensions")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect();
        if let Some(missing) = app
            .config
            .required_extensions
            .iter()
            .find(|uri| !listed.contains(&uri.as_str()))
        {
            return fail(
                who,
                method,
                None,
                started,
                E::ExtensionRequired(missing.clone()),
                &framing,
            );
        }
    }
    // The streaming methods answer an SSE stream (or an error).
    match method {
        "SendStreamingMessage" if app.config.streaming => {
            let call = Streaming {
                who,
                method,
                started,
                framing,
            };
            return send_streaming(app, call, params).await;
        }
        "SubscribeToTask" if app.config.streaming => {
            let call = Streaming {
                who,
                method,
                started,
                framing,
            };
            return subscribe(app, call, params).await;
        }
        _ => {}
    }
    match unary(app, who, method, params)
        .await
        .and_then(|(v, task)| Ok((v03_result(who.v03, v)?, task)))
    {
        Ok((v, task)) => {
            audit(
                who.log,
                who.identity,
                who.agent,
                method,
                task.as_deref(),
                Ok(()),
                started.elapsed().as_micros(),
            );
            framing.ok(&v)
        }
        Err(e) => fail(who, method, None, started, e, &framing),
    }
}

/// A v1.0 result made the v0.3 method's (for a v0.3 request).
fn v03_result(m: Option<v03::Method>, v: Box<RawValue>) -> Result<Box<RawValue>, E> {
    let Some(m) = m else { return Ok(v) };
    let tree: Value = serde_json::from_str(v.get()).map_err(|e| E::Internal(e.to_string()))?;
    to_raw(&v03::result_out(m, &tree)?)
}

/// What a unary method answers: its result, serialised once, and the task
/// it concerns (for the audit line).
type Unary = Result<(Box<RawValue>, Option<String>), E>;

/// A JSON-RPC success answer.
#[derive(serde::Serialize)]
struct Reply<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: &'a RawValue,
}

/// Dispatches a unary method (one JSON answer).
async fn unary(app: &App, who: &Who<'_>, method: &str, params: &Value) -> Unary {
    match method {
        "SendMessage" => send_message(app, who, params).await,
        // Reached only when streaming is not offered.
        "SendStreamingMessage" | "SubscribeToTask" => {
            Err(E::Unsupported("streaming is not offered".into()))
        }
        "GetTask" => get_task(app, who, params).await,
        "CancelTask" => cancel_task(app, who, params).await,
        "ListTasks" => list_tasks(app, who, params).await,
        "CreateTaskPushNotificationConfig" => {
            push_create(app, who.identity, who.agent, params).await
        }
        "GetTaskPushNotificationConfig" => push_get(app, who, params),
        "ListTaskPushNotificationConfigs" => push_list(app, who, params),
        "DeleteTaskPushNotificationConfig" => push_delete(app, who, params),
        "GetExtendedAgentCard" => extended_card(app, who),
        other => Err(match v03_method(other) {
            Some(v1) => E::MethodNotFound(format!(
                "{other} (an A2A v0.3 method name: this gateway speaks A2A v1.0, where it is {v1})"
            )),
            None => E::MethodNotFound(other.to_owned()),
        }),
    }
}

/// How a task is rendered for a request with this `historyLength`.
fn view_of(history_length: Option<i64>) -> TaskView {
    TaskView {
        history_length: mapping::history_length(history_length),
        artifacts: true,
    }
}

/// `SendMessage`.
async fn send_message(app: &App, who: &Who<'_>, params: &Value) -> Unary {
    let req = parse_send(params)?;
    let conf = req.configuration.clone().unwrap_or_default();
    let (_, task, _) = app
        .core
        .send(
            who.identity,
            who.agent,
            &req,
            !conf.return_immediately,
            false,
        )
        .await?;
    let tid = task.id.clone();
    let out = match core::send_outcome(task) {
        SendOutcome::Message(t) => core::response_message(&t)
            .map(v1::SendMessageResponse::Message)
            .unwrap_or_else(|| {
                v1::SendMessageResponse::Task(core::render(&t, view_of(conf.history_length)))
            }),
        SendOutcome::Task(t) => {
            v1::SendMessageResponse::Task(core::render(&t, view_of(conf.history_length)))
        }
    };
    to_raw(&out).map(|v| (v, Some(tid)))
}

/// A streaming call under way: who asked, the method, when it started
/// (for its audit line) and the framing of its answers.
struct Streaming<'a> {
    who: &'a Who<'a>,
    method: &'a str,
    started: Instant,
    framing: Framing,
}

impl Streaming<'_> {
    /// Its error answer, with its audit line.
    fn fail(self, task: Option<&str>, e: E) -> Response {
        if let (Some(_), Some(id)) = (self.who.v03, self.framing.stream_envelope()) {
            // v0.3 servers answer a failed stream inside the stream (one
            // error event), where v0.3 clients read it.
            let w = self.who;
            let elapsed = self.started.elapsed().as_micros();
            audit(
                w.log,
                w.identity,
                w.agent,
                self.method,
                task,
                Err(e.code()),
                elapsed,
            );
            return sse::error_event(id, v03::error_out(e.to_json()));
        }
        fail(self.who, self.method, task, self.started, e, &self.framing)
    }

    /// Its audit line once the stream is granted.
    fn audit_ok(&self, task: &str) {
        audit(
            self.who.log,
            self.who.identity,
            self.who.agent,
            self.method,
            Some(task),
            Ok(()),
            self.started.elapsed().as_micros(),
        );
    }
}

/// `SendStreamingMessage`: the task, then its updates, as SSE.
async fn send_streaming(app: &App, call: Streaming<'_>, params: &Value) -> Response {
    let req = match parse_send(params) {
        Ok(r) => r,
        Err(e) => return call.fail(None, e),
    };
    let conf = req.configuration.clone().unwrap_or_default();
    let who = call.who;
    match app
        .core
        .send(who.identity, who.agent, &req, false, true)
        .await
    {
        Err(e) => call.fail(None, e),
        Ok((_, task, rx)) => {
            call.audit_ok(&task.id);
            match rx {
                Some(rx) => sse::stream_task(
                    call.framing.stream_envelope(),
                    task,
                    rx,
                    view_of(conf.history_length),
                    true,
                    app.config.max_stream,
                    app.config.stopping.clone(),
                    who.v03.is_some(),
                ),
                None => call.fail(None, E::Internal("no subscription".into())),
            }
        }
    }
}

/// `SubscribeToTask`: the task as it is, then its updates, as SSE.
async fn subscribe(app: &App, call: Streaming<'_>, params: &Value) -> Response {
    let req = match parse::<v1::TaskIdRequest>(params) {
        Ok(r) => r,
        Err(e) => return call.fail(None, e),
    };
    let who = call.who;
    match app.core.subscribe(who.identity, who.agent, &req.id).await {
        Err(e) => call.fail(Some(&req.id), e),
        Ok(sub) => {
            call.audit_ok(&req.id);
            sse::stream_task(
                call.framing.stream_envelope(),
                sub.snapshot,
                sub.rx,
                TaskView::FULL,
                false,
                app.config.max_stream,
                app.config.stopping.clone(),
                who.v03.is_some(),
            )
        }
    }
}

/// `GetTask`.
async fn get_task(app: &App, who: &Who<'_>, params: &Value) -> Unary {
    let req = parse::<v1::GetTaskRequest>(params)?;
    let t = app.core.get(who.identity, who.agent, &req.id).await?;
    to_raw(&core::render(&t, view_of(req.history_length))).map(|v| (v, Some(req.id)))
}

/// `CancelTask`, with its reason: `metadata.reason` (a string), as a
/// bridging gateway sends its requester's (outbound `bridge`).
async fn cancel_task(app: &App, who: &Who<'_>, params: &Value) -> Unary {
    let req = parse::<v1::TaskIdRequest>(params)?;
    let reason = params
        .get("metadata")
        .and_then(|m| m.get("reason"))
        .and_then(Value::as_str);
    let t = app
        .core
        .cancel_with_reason(who.identity, who.agent, &req.id, reason)
        .await?;
    to_raw(&core::render(&t, TaskView::FULL)).map(|v| (v, Some(req.id)))
}

/// `ListTasks`.
async fn list_tasks(app: &App, who: &Who<'_>, params: &Value) -> Unary {
    let req = parse::<v1::ListTasksRequest>(params)?;
    let r = app.core.list(who.identity, who.agent, &req).await?;
    to_raw(&r).map(|v| (v, None))
}

/// `GetTaskPushNotificationConfig`.
fn push_get(app: &App, who: &Who<'_>, params: &Value) -> Unary {
    let req = parse::<v1::PushConfigIdRequest>(params)?;
    push_task(app, who.identity, who.agent, &req.task_id)?;
    let found = app.core.pusher.get(&req.task_id, &req.id).or_else(|| {
        // A v0.3 server answers the task's config whatever id is asked
        // (the v0.3 SDK's own does; its TCK asks for `default`).
        who.v03
            .and_then(|_| app.core.pusher.list(&req.task_id).into_iter().next())
    });
    match found {
        Some(c) => to_raw(&c).map(|v| (v, Some(req.task_id.clone()))),
        None => Err(E::InvalidParams(format!(
            "no push config `{}` on task {}",
            req.id, req.task_id
        ))),
    }
}

/// `ListTaskPushNotificationConfigs`.
fn push_list(app: &App, who: &Who<'_>, params: &Value) -> Unary {
    let req = parse::<v1::ListPushConfigsRequest>(params)?;
    push_task(app, who.identity, who.agent, &req.task_id)?;
    let r = v1::ListPushConfigsResponse {
        configs: app.core.pusher.list(&req.task_id),
        next_page_token: String::new(),
    };
    to_raw(&r).map(|v| (v, Some(req.task_id.clone())))
}

/// `DeleteTaskPushNotificationConfig`.
fn push_delete(app: &App, who: &Who<'_>, params: &Value) -> Unary {
    let req = parse::<v1::PushConfigIdRequest>(params)?;
    push_task(app, who.identity, who.agent, &req.task_id)?;
    app.core.pusher.delete(&req.task_id, &req.id);
    to_raw(&json!({})).map(|v| (v, Some(req.task_id.clone())))
}

/// `GetExtendedAgentCard`.
fn extended_card(app: &App, who: &Who<'_>) -> Unary {
    if !app.config.extended_card {
        return Err(E::Unsupported("no extended agent card is offered".into()));
    }
    match app.cards.get(who.agent) {
        None => Err(E::ExtendedCardNotConfigured),
        Some(c) => RawValue::from_string(c.body.clone())
            .map(|v| (v, None))
            .map_err(|e| E::Internal(e.to_string())),
    }
}

/// Checks push is on and the task is the caller's.
fn push_task(app: &App, identity: &str, agent: &str, task_id: &str) -> Result<(), E> {
    if !app.core.pusher.enabled() {
        return Err(E::PushNotSupported);
    }
    app.core.task_row(identity, agent, task_id).map(|_| ())
}

async fn push_create(app: &App, identity: &str, agent: &str, params: &Value) -> Unary {
    // v1.0 sends the flat TaskPushNotificationConfig; an older nesting
    // (`{taskId, pushNotificationConfig: {...}}`) is read too.
    let mut cfg: v1::TaskPushNotificationConfig = parse(params)?;
    if cfg.url.is_empty() {
        if let Some(inner) = params
            .get("pushNotificationConfig")
            .or_else(|| params.get("push_notification_config"))
            .or_else(|| params.get("config"))
        {
            let task_id = cfg.task_id.clone();
            cfg = parse(inner)?;
            cfg.task_id = task_id;
        }
    }
    if cfg.task_id.is_empty() {
        return Err(E::InvalidParams("taskId is required".into()));
    }
    push_task(app, identity, agent, &cfg.task_id)?;
    let task_id = cfg.task_id.clone();
    let checked = app.core.pusher.check(&cfg)?;
    let stored = app.core.pusher.store(identity, &task_id, checked)?;
    to_raw(&stored).map(|v| (v, Some(task_id)))
}

/// The v1.0 name of an A2A v0.3 JSON-RPC method (a v0.3 client
/// is told what to call, not only that its method is unknown).
fn v03_method(method: &str) -> Option<&'static str> {
    Some(match method {
        "message/send" => "SendMessage",
        "message/stream" => "SendStreamingMessage",
        "tasks/get" => "GetTask",
        "tasks/list" => "ListTasks",
        "tasks/cancel" => "CancelTask",
        "tasks/resubscribe" => "SubscribeToTask",
        "tasks/pushNotificationConfig/set" => "CreateTaskPushNotificationConfig",
        "tasks/pushNotificationConfig/get" => "GetTaskPushNotificationConfig",
        "tasks/pushNotificationConfig/list" => "ListTaskPushNotificationConfigs",
        "tasks/pushNotificationConfig/delete" => "DeleteTaskPushNotificationConfig",
        "agent/getAuthenticatedExtendedCard" => "GetExtendedAgentCard",
        _ => return None,
    })
}

/// `SendMessage` params. v0.3's `configuration.blocking: false`, which
/// the v1.0 reading would ignore (and block), is read as v1.0's
/// `returnImmediately: true` unless that is given, as the official SDKs'
/// compatibility layers read it.
fn parse_send(params: &Value) -> Result<v1::SendMessageRequest, E> {
    let mut req: v1::SendMessageRequest = parse(params)?;
    let conf = params.get("configuration");
    if conf.and_then(|c| c.get("blocking")) == Some(&Value::Bool(false))
        && conf.and_then(|c| c.get("returnImmediately")).is_none()
    {
        if let Some(c) = req.configuration.as_mut() {
            c.return_immediately = true;
        }
    }
    Ok(req)
}

fn parse<T: DeserializeOwned>(params: &Value) -> Result<T, E> {
    if !params.is_object() {
        return Err(E::InvalidParams("params must be an object".into()));
    }
    // From the tree as it is (no copy of it first).
    T::deserialize(params).map_err(|e| E::InvalidParams(e.to_string()))
}

/// A result serialised to its JSON text (once: no `Value` tree between).
fn to_raw<T: serde::Serialize>(v: &T) -> Result<Box<RawValue>, E> {
    serde_json::value::to_raw_value(v).map_err(|e| E::Internal(e.to_string()))
}

/// An error answer in the binding's framing, with its audit line.
pub fn fail(
    who: &Who<'_>,
    method: &str,
    task: Option<&str>,
    started: Instant,
    e: E,
    framing: &Framing,
) -> Response {
    audit(
        who.log,
        who.identity,
        who.agent,
        method,
        task,
        Err(e.code()),
        started.elapsed().as_micros(),
    );
    match (who.v03, framing) {
        (Some(_), Framing::JsonRpc(id)) => {
            let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::OK);
            rpc_error(status, id.clone(), v03::error_out(e.to_json()))
        }
        _ => framing.error(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer serialised once (a typed envelope around the result's
    /// text) is the same JSON as the `Value` tree it replaced.
    #[test]
    fn a_reply_serialised_once_is_the_envelope_of_its_result() {
        let m: v1::Message = serde_json::from_value(json!({
            "messageId": "m", "contextId": "c", "role": "ROLE_AGENT",
            "parts": [{"text": "done"}]
        }))
        .unwrap();
        let out = v1::SendMessageResponse::Message(m);
        let raw = to_raw(&out).unwrap();
        let id = json!(7);
        let body = serde_json::to_vec(&Reply {
            jsonrpc: "2.0",
            id: &id,
            result: &raw,
        })
        .unwrap();
        let got: Value = serde_json::from_slice(&body).unwrap();
        let want =
            json!({"jsonrpc": "2.0", "id": 7, "result": serde_json::to_value(&out).unwrap()});
        assert_eq!(got, want);
        assert_eq!(got["result"]["message"]["parts"][0]["text"], "done");
    }

    #[test]
    fn v03_names_get_the_v1_hint_and_blocking_false_returns_immediately() {
        assert_eq!(v03_method("message/send"), Some("SendMessage"));
        assert_eq!(v03_method("tasks/resubscribe"), Some("SubscribeToTask"));
        assert_eq!(v03_method("SendMessage"), None);
        let p = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
                       "configuration": {"blocking": false}});
        let conf = parse_send(&p).unwrap().configuration.unwrap();
        assert!(conf.return_immediately);
        let mut blocks = p.clone();
        blocks["configuration"] = json!({"blocking": true});
        assert!(
            !parse_send(&blocks)
                .unwrap()
                .configuration
                .unwrap()
                .return_immediately
        );
        // The v1.0 field, when given, is the one read.
        let mut both = p.clone();
        both["configuration"] = json!({"blocking": false, "returnImmediately": false});
        assert!(
            !parse_send(&both)
                .unwrap()
                .configuration
                .unwrap()
                .return_immediately
        );
    }

    #[test]
    fn versions_one_point_zero_and_patches_are_spoken() {
        for ok in [None, Some("1.0"), Some("1.0.3"), Some(" 1.0 "), Some("1")] {
            assert!(version_supported(ok), "{ok:?}");
        }
        for bad in [
            Some("99.0"),
            Some(""),
            Some("0.3"),
            Some("1.1"),
            Some("1.0.x"),
        ] {
            assert!(!version_supported(bad), "{bad:?}");
        }
    }
}
