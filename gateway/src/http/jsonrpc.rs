//! The JSON-RPC binding: header checks, the envelope, and dispatch of the
//! v1.0 methods to the core. Unary methods answer one JSON body; the
//! streaming ones an SSE stream (or a plain JSON error when they fail
//! before it starts). A v0.3 method name (`message/send`) is served by its
//! v1.0 method, through the translation of `compat::v03` both ways.

use super::{rpc_error, sse, App};
use crate::compat::v03;
use crate::core::{self, SendOutcome};
use crate::mapping::{self, GatewayError as E, TaskView};
use crate::security::{audit, AuditLog};
use crate::v1;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

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

/// Handles one JSON-RPC POST.
pub async fn handle(
    app: Arc<App>,
    identity: String,
    agent: String,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let started = Instant::now();
    let mut who = Who {
        log: &app.config.audit,
        identity: &identity,
        agent: &agent,
        v03: None,
    };
    let Envelope {
        id,
        method,
        params,
        v03_header,
    } = match envelope(headers, body) {
        Ok(env) => env,
        Err((e, id)) => return fail(&who, "-", None, started, e, id),
    };
    // A v0.3 name is v0.3 unless the header names another version (then
    // it is told the v1.0 name); the v0.3 header on a v1.0 name is refused.
    let v1_header = headers.contains_key("a2a-version") && !v03_header;
    who.v03 = v03::Method::from_name(&method).filter(|_| !v1_header);
    let (method, params) = match who.v03 {
        Some(m) => match v03::params_in(m, &params) {
            Ok(p) => (m.v1().to_owned(), p),
            Err(e) => return fail(&who, m.v1(), None, started, e, id),
        },
        None if v03_header => {
            let e = E::Version("0.3 (with an A2A v1.0 method name)".into());
            return fail(&who, &method, None, started, e, id);
        }
        None => (method, params),
    };
    // Capabilities are checked before extensions (a streaming call to an
    // agent without streaming is -32004 whatever its headers).
    let streaming_call = matches!(method.as_str(), "SendStreamingMessage" | "SubscribeToTask");
    let message_call = matches!(method.as_str(), "SendMessage" | "SendStreamingMessage");
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
                &who,
                &method,
                None,
                started,
                E::ExtensionRequired(missing.clone()),
                id,
            );
        }
    }
    // The streaming methods answer an SSE stream (or a JSON error).
    match method.as_str() {
        "SendStreamingMessage" if app.config.streaming => {
            let call = Streaming {
                who: &who,
                method: &method,
                started,
                id,
            };
            return send_streaming(&app, call, &params).await;
        }
        "SubscribeToTask" if app.config.streaming => {
            let call = Streaming {
                who: &who,
                method: &method,
                started,
                id,
            };
            return subscribe(&app, call, &params).await;
        }
        _ => {}
    }
    match unary(&app, &who, &method, &params)
        .await
        .and_then(|(v, task)| Ok((v03_result(who.v03, v)?, task)))
    {
        Ok((v, task)) => {
            audit(
                who.log,
                who.identity,
                who.agent,
                &method,
                task.as_deref(),
                Ok(()),
                started.elapsed().as_micros(),
            );
            // Serialised once, straight to the body (no `Value` tree of
            // the answer: it cost time on every call).
            (
                StatusCode::OK,
                axum::Json(Reply {
                    jsonrpc: "2.0",
                    id: &id,
                    result: &v,
                }),
            )
                .into_response()
        }
        Err(e) => fail(&who, &method, None, started, e, id),
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
/// (for its audit line) and its JSON-RPC id.
struct Streaming<'a> {
    who: &'a Who<'a>,
    method: &'a str,
    started: Instant,
    id: Value,
}

impl Streaming<'_> {
    /// Its error answer, with its audit line.
    fn fail(self, task: Option<&str>, e: E) -> Response {
        if self.who.v03.is_some() {
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
            return sse::error_event(self.id, v03::error_out(e.to_json()));
        }
        fail(self.who, self.method, task, self.started, e, self.id)
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
                    call.id,
                    task,
                    rx,
                    view_of(conf.history_length),
                    true,
                    app.config.max_stream,
                    app.config.stopping.clone(),
                    who.v03.is_some(),
                ),
                None => Streaming {
                    id: Value::Null,
                    ..call
                }
                .fail(None, E::Internal("no subscription".into())),
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
                call.id,
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

/// A request's envelope, checked.
struct Envelope {
    id: Value,
    method: String,
    params: Value,
    /// The `A2A-Version` header names v0.3.
    v03_header: bool,
}

/// Checks the headers and the JSON-RPC envelope of a POST: Content-Type
/// first (a body that is not JSON is -32005, not -32700), then the
/// `A2A-Version`, then the request object. The error comes with the
/// request's id once it is known.
fn envelope(headers: &HeaderMap, body: &[u8]) -> Result<Envelope, (E, Value)> {
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
            return Err((E::ContentType(ct), Value::Null));
        }
    }
    let version = headers
        .get("a2a-version")
        .map(|v| v.to_str().unwrap_or("?"));
    let v03_header = v03::is_version(version);
    if !version_supported(version) && !v03_header {
        return Err((E::Version(version.unwrap_or("").to_owned()), Value::Null));
    }
    let req: Value =
        serde_json::from_slice(body).map_err(|e| (E::Parse(e.to_string()), Value::Null))?;
    let Value::Object(mut obj) = req else {
        return Err((
            E::InvalidRequest("not a request object".into()),
            Value::Null,
        ));
    };
    let id = obj.remove("id").unwrap_or(Value::Null);
    if !matches!(id, Value::Null | Value::String(_) | Value::Number(_)) {
        return Err((E::InvalidRequest("bad id".into()), Value::Null));
    }
    if obj.get("jsonrpc") != Some(&json!("2.0")) {
        return Err((E::InvalidRequest("jsonrpc must be \"2.0\"".into()), id));
    }
    let Some(Value::String(method)) = obj.remove("method") else {
        return Err((E::InvalidRequest("method must be a string".into()), id));
    };
    let params = obj.remove("params").unwrap_or(Value::Null);
    Ok(Envelope {
        id,
        method,
        params,
        v03_header,
    })
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

/// Who a request is from, for its audit line.
struct Who<'a> {
    log: &'a AuditLog,
    identity: &'a str,
    agent: &'a str,
    /// The v0.3 method the request called (its answer is translated).
    v03: Option<v03::Method>,
}

/// An error answer (HTTP 200: the binding carries errors in the body; 429
/// for a bound of the caller's share), with its audit line.
fn fail(
    who: &Who<'_>,
    method: &str,
    task: Option<&str>,
    started: Instant,
    e: E,
    id: Value,
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
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::OK);
    let error = match who.v03 {
        Some(_) => v03::error_out(e.to_json()),
        None => e.to_json(),
    };
    rpc_error(status, id, error)
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
