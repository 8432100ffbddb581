//! The HTTP+JSON (REST) binding of A2A v1.0 (`docs/gateway.md` shows it
//! in use), on the same base URL as the JSON-RPC one:
//!
//! | verb and path under `/agents/NAME`           | operation                          |
//! |----------------------------------------------|------------------------------------|
//! | `POST /message:send`                         | `SendMessage`                      |
//! | `POST /message:stream` (SSE)                 | `SendStreamingMessage`             |
//! | `GET /tasks/{id}`                            | `GetTask`                          |
//! | `GET /tasks`                                 | `ListTasks`                        |
//! | `POST /tasks/{id}:cancel`                    | `CancelTask`                       |
//! | `POST` or `GET /tasks/{id}:subscribe` (SSE)  | `SubscribeToTask`                  |
//! | `POST /tasks/{id}/pushNotificationConfigs`   | `CreateTaskPushNotificationConfig` |
//! | `GET /tasks/{id}/pushNotificationConfigs/{c}`| `GetTaskPushNotificationConfig`    |
//! | `GET /tasks/{id}/pushNotificationConfigs`    | `ListTaskPushNotificationConfigs`  |
//! | `DELETE /tasks/{id}/pushNotificationConfigs/{c}` | `DeleteTaskPushNotificationConfig` |
//! | `GET /extendedAgentCard`                     | `GetExtendedAgentCard`             |
//!
//! A request becomes the operation's name and its request object (the
//! body, then the query's camelCase fields typed as the request type has
//! them, then the path's ids, which win), which [`ops::call`] runs exactly
//! as for JSON-RPC. A success is the result itself; an error is its HTTP
//! status (the table of the A2A v1.0.0 specification, which the TCK
//! checks: task not found 404, not cancelable 409, content type 415, the
//! other A2A errors 400, a bad body 400, an internal error 500) with an
//! AIP-193 body, `{"error": {code, status, message,
//! details: [google.rpc.ErrorInfo]}}`. An unknown path is 404 and a known
//! path with the wrong verb 405 with `Allow`, both with such a body.
//! Subscribing is offered on POST (the specification's text) and GET (its
//! `a2a.proto` annotation).

use super::ops::{self, Framing, Who};
use super::{admit, App};
use crate::mapping::GatewayError as E;
use crate::security::audit_refusal;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Instant;

/// Handles one request under `/agents/NAME/` (other than the card).
pub async fn handle(
    State(app): State<Arc<App>>,
    Path((agent, path)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let admitted = match admit(&app, &agent, &headers, body, error).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let started = Instant::now();
    let who = Who {
        log: &app.config.audit,
        identity: &admitted.identity,
        agent: &agent,
        // v0.3's REST paths are not served: v1.0's only.
        v03: None,
    };
    let route = match route(&method, &path) {
        Ok(r) => r,
        Err(refusal) => return refuse(&app, &who, refusal),
    };
    let params = ops::check_headers(&headers).and_then(|()| params(&route, &uri, &admitted.body));
    match params {
        Ok(p) => ops::call(&app, &who, &headers, route.op, &p, Framing::Rest, started).await,
        Err(e) => ops::fail(&who, route.op, None, started, e, &Framing::Rest),
    }
}

/// A request's operation and its path parameters.
#[derive(Debug, PartialEq, Eq)]
struct Route {
    /// The operation's v1.0 name.
    op: &'static str,
    /// The task id of the path (`id` of the task operations, `taskId` of
    /// the push config ones).
    task: Option<String>,
    /// The push config id of the path.
    config: Option<String>,
}

/// Why a path names no operation.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// No such path.
    NotFound,
    /// A known path, another verb: the verbs it takes.
    Verb(&'static str),
}

/// The operation of a verb and a path (the part after `/agents/NAME/`).
fn route(method: &Method, path: &str) -> Result<Route, Refusal> {
    let segs: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    let only = |verb: Method, allow: &'static str, op: &'static str| {
        if *method == verb {
            Ok(op)
        } else {
            Err(Refusal::Verb(allow))
        }
    };
    let plain = |op| Route {
        op,
        task: None,
        config: None,
    };
    let id_ok = |s: &str| !s.is_empty() && !s.contains(':');
    match segs.as_slice() {
        ["message:send"] => only(Method::POST, "POST", "SendMessage").map(plain),
        ["message:stream"] => only(Method::POST, "POST", "SendStreamingMessage").map(plain),
        ["extendedAgentCard"] => only(Method::GET, "GET", "GetExtendedAgentCard").map(plain),
        ["tasks"] => only(Method::GET, "GET", "ListTasks").map(plain),
        ["tasks", t] => {
            let (id, op) = if let Some(id) = t.strip_suffix(":cancel") {
                (id, only(Method::POST, "POST", "CancelTask")?)
            } else if let Some(id) = t.strip_suffix(":subscribe") {
                if *method != Method::POST && *method != Method::GET {
                    return Err(Refusal::Verb("GET, POST"));
                }
                (id, "SubscribeToTask")
            } else {
                (*t, only(Method::GET, "GET", "GetTask")?)
            };
            if !id_ok(id) {
                return Err(Refusal::NotFound);
            }
            Ok(Route {
                op,
                task: Some(id.to_owned()),
                config: None,
            })
        }
        ["tasks", t, "pushNotificationConfigs"] if id_ok(t) => {
            let op = match *method {
                Method::POST => "CreateTaskPushNotificationConfig",
                Method::GET => "ListTaskPushNotificationConfigs",
                _ => return Err(Refusal::Verb("GET, POST")),
            };
            Ok(Route {
                op,
                task: Some((*t).to_owned()),
                config: None,
            })
        }
        ["tasks", t, "pushNotificationConfigs", c] if id_ok(t) && !c.is_empty() => {
            let op = match *method {
                Method::GET => "GetTaskPushNotificationConfig",
                Method::DELETE => "DeleteTaskPushNotificationConfig",
                _ => return Err(Refusal::Verb("DELETE, GET")),
            };
            Ok(Route {
                op,
                task: Some((*t).to_owned()),
                config: Some((*c).to_owned()),
            })
        }
        _ => Err(Refusal::NotFound),
    }
}

/// The operation's request object: the body (an object; none is `{}`),
/// then the query's fields, then the path's ids (which win: the path names
/// the resource).
fn params(route: &Route, uri: &Uri, body: &[u8]) -> Result<Value, E> {
    let mut obj = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return Err(E::InvalidParams(
                    "the request body must be a JSON object".into(),
                ))
            }
            Err(e) => return Err(E::Parse(e.to_string())),
        }
    };
    if uri.query().is_some() {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map_err(|e| E::InvalidParams(format!("bad query string: {}", e.body_text())))?;
        for (k, v) in pairs {
            let typed = query_value(&k, v)?;
            obj.insert(k, typed);
        }
    }
    let (task_field, config_field) = match route.config {
        Some(_) => ("taskId", Some("id")),
        None if route.op.contains("PushNotificationConfig") => ("taskId", None),
        None => ("id", None),
    };
    if let Some(task) = &route.task {
        if let Some(Value::String(b)) = obj.get(task_field) {
            if !b.is_empty() && b != task {
                return Err(E::InvalidParams(format!(
                    "{task_field} `{b}` in the body is not the path's task `{task}`"
                )));
            }
        }
        obj.insert(task_field.to_owned(), Value::String(task.clone()));
    }
    if let (Some(field), Some(config)) = (config_field, &route.config) {
        obj.insert(field.to_owned(), Value::String(config.clone()));
    }
    Ok(Value::Object(obj))
}

/// A query parameter as the request type reads it: the integer and
/// boolean fields typed, the rest strings.
fn query_value(key: &str, v: String) -> Result<Value, E> {
    match key {
        "pageSize" | "page_size" | "historyLength" | "history_length" => v
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| E::InvalidParams(format!("{key} must be an integer, not `{v}`"))),
        "includeArtifacts" | "include_artifacts" => match v.trim() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(E::InvalidParams(format!(
                "{key} must be true or false, not `{v}`"
            ))),
        },
        _ => Ok(Value::String(v)),
    }
}

/// The answer to a path that names no operation, with its audit line.
fn refuse(app: &App, who: &Who<'_>, refusal: Refusal) -> Response {
    let (status, why, e) = match refusal {
        Refusal::NotFound => (
            StatusCode::NOT_FOUND,
            "no such route",
            E::MethodNotFound("no such path in the HTTP+JSON binding".into()),
        ),
        Refusal::Verb(_) => (
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed",
            E::MethodNotFound("this path does not take this HTTP method".into()),
        ),
    };
    audit_refusal(
        &app.config.audit,
        Some(who.identity),
        who.agent,
        status.as_u16(),
        why,
    );
    let mut r = error(status, &e);
    if let Refusal::Verb(allow) = refusal {
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(allow));
    }
    r
}

/// The HTTP status of an error in this binding (the A2A v1.0 table).
pub fn status_of(e: &E) -> StatusCode {
    match e {
        E::TaskNotFound(_) | E::MethodNotFound(_) => StatusCode::NOT_FOUND,
        E::TaskNotCancelable(_) => StatusCode::CONFLICT,
        E::ContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        E::PushNotSupported
        | E::Unsupported(_)
        | E::ExtendedCardNotConfigured
        | E::ExtensionRequired(_)
        | E::Version(_)
        | E::Parse(_)
        | E::InvalidRequest(_)
        | E::InvalidParams(_) => StatusCode::BAD_REQUEST,
        E::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        E::Limit(_) | E::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        E::Unauthenticated => StatusCode::UNAUTHORIZED,
    }
}

/// The `google.rpc.Code` name of an error: the A2A table's for the A2A
/// errors, else the one of its HTTP status.
fn code_name(status: StatusCode, e: &E) -> &'static str {
    match e {
        E::TaskNotFound(_) => "NOT_FOUND",
        E::TaskNotCancelable(_) | E::ExtendedCardNotConfigured | E::ExtensionRequired(_) => {
            "FAILED_PRECONDITION"
        }
        E::PushNotSupported | E::Unsupported(_) | E::Version(_) => "UNIMPLEMENTED",
        E::ContentType(_) => "INVALID_ARGUMENT",
        _ => match status.as_u16() {
            400 | 413 => "INVALID_ARGUMENT",
            401 => "UNAUTHENTICATED",
            403 => "PERMISSION_DENIED",
            404 => "NOT_FOUND",
            405 | 501 => "UNIMPLEMENTED",
            408 => "DEADLINE_EXCEEDED",
            409 => "ABORTED",
            429 => "RESOURCE_EXHAUSTED",
            503 => "UNAVAILABLE",
            _ => "INTERNAL",
        },
    }
}

/// An error answer: `status` with the AIP-193 body. A2A errors carry a
/// `google.rpc.ErrorInfo` with their reason; a bound of the caller's share
/// carries what the JSON-RPC binding puts in `data` as its metadata.
pub fn error(status: StatusCode, e: &E) -> Response {
    let mut details = Vec::new();
    if let Some(reason) = e.reason() {
        details.push(json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": "a2a-protocol.org",
        }));
    }
    if let E::Limit(l) = e {
        details.push(json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "RESOURCE_EXHAUSTED",
            "domain": "a2a-gateway",
            "metadata": {"reason": l.reason, "limit": l.limit, "max": l.max.to_string()},
        }));
    }
    let body = json!({"error": {
        "code": status.as_u16(),
        "status": code_name(status, e),
        "message": e.to_string(),
        "details": details,
    }});
    (status, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(m: Method, p: &str) -> Result<Route, Refusal> {
        route(&m, p)
    }

    #[test]
    fn every_path_names_its_operation() {
        let op = |m, p| r(m, p).map(|x| x.op);
        assert_eq!(op(Method::POST, "message:send"), Ok("SendMessage"));
        assert_eq!(
            op(Method::POST, "message:stream"),
            Ok("SendStreamingMessage")
        );
        assert_eq!(op(Method::GET, "tasks"), Ok("ListTasks"));
        assert_eq!(op(Method::GET, "tasks/t1"), Ok("GetTask"));
        assert_eq!(op(Method::POST, "tasks/t1:cancel"), Ok("CancelTask"));
        assert_eq!(
            op(Method::POST, "tasks/t1:subscribe"),
            Ok("SubscribeToTask")
        );
        assert_eq!(op(Method::GET, "tasks/t1:subscribe"), Ok("SubscribeToTask"));
        assert_eq!(
            op(Method::POST, "tasks/t1/pushNotificationConfigs"),
            Ok("CreateTaskPushNotificationConfig")
        );
        assert_eq!(
            op(Method::GET, "tasks/t1/pushNotificationConfigs"),
            Ok("ListTaskPushNotificationConfigs")
        );
        assert_eq!(
            op(Method::GET, "tasks/t1/pushNotificationConfigs/c"),
            Ok("GetTaskPushNotificationConfig")
        );
        assert_eq!(
            op(Method::DELETE, "tasks/t1/pushNotificationConfigs/c"),
            Ok("DeleteTaskPushNotificationConfig")
        );
        assert_eq!(
            op(Method::GET, "extendedAgentCard"),
            Ok("GetExtendedAgentCard")
        );
        let c = r(Method::DELETE, "tasks/t1/pushNotificationConfigs/c").unwrap();
        assert_eq!(c.task.as_deref(), Some("t1"));
        assert_eq!(c.config.as_deref(), Some("c"));
    }

    #[test]
    fn unknown_paths_and_wrong_verbs_are_told_apart() {
        assert_eq!(r(Method::GET, "message:send"), Err(Refusal::Verb("POST")));
        assert_eq!(r(Method::DELETE, "tasks/t1"), Err(Refusal::Verb("GET")));
        assert_eq!(
            r(Method::GET, "tasks/t1:cancel"),
            Err(Refusal::Verb("POST"))
        );
        assert_eq!(
            r(Method::PUT, "tasks/t1:subscribe"),
            Err(Refusal::Verb("GET, POST"))
        );
        for p in ["message", "tasks/t1:frobnicate", "tasks/a/b", "x/y/z/w/v"] {
            assert_eq!(r(Method::GET, p), Err(Refusal::NotFound), "{p}");
        }
        assert_eq!(r(Method::POST, "tasks/:cancel"), Err(Refusal::NotFound));
    }

    #[test]
    fn params_take_the_body_the_query_typed_and_the_path() {
        let route = r(Method::GET, "tasks").unwrap();
        let uri: Uri = "/agents/a/tasks?contextId=c&pageSize=2&includeArtifacts=true&status=TASK_STATE_WORKING"
            .parse()
            .unwrap();
        let p = params(&route, &uri, b"").unwrap();
        assert_eq!(
            p,
            json!({"contextId": "c", "pageSize": 2, "includeArtifacts": true, "status": "TASK_STATE_WORKING"})
        );
        let uri: Uri = "/agents/a/tasks?pageSize=two".parse().unwrap();
        assert_eq!(params(&route, &uri, b"").unwrap_err().code(), -32602);

        let route = r(Method::POST, "tasks/t1/pushNotificationConfigs").unwrap();
        let uri: Uri = "/agents/a/tasks/t1/pushNotificationConfigs"
            .parse()
            .unwrap();
        let p = params(&route, &uri, br#"{"url": "http://h/w"}"#).unwrap();
        assert_eq!(p, json!({"url": "http://h/w", "taskId": "t1"}));
        let e = params(&route, &uri, br#"{"taskId": "t2", "url": "http://h/w"}"#).unwrap_err();
        assert!(e.to_string().contains("t2"), "{e}");
        assert!(matches!(params(&route, &uri, b"{nope"), Err(E::Parse(_))));
        assert!(matches!(
            params(&route, &uri, b"[1]"),
            Err(E::InvalidParams(_))
        ));

        let route = r(Method::GET, "tasks/t1/pushNotificationConfigs/c1").unwrap();
        let p = params(&route, &uri, b"").unwrap();
        assert_eq!(p, json!({"taskId": "t1", "id": "c1"}));
        let route = r(Method::POST, "tasks/t1:cancel").unwrap();
        let p = params(&route, &uri, b"  ").unwrap();
        assert_eq!(p, json!({"id": "t1"}));
    }

    #[test]
    fn errors_have_the_a2a_status_and_an_error_info() {
        assert_eq!(
            status_of(&E::TaskNotFound("t".into())),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            status_of(&E::TaskNotCancelable("t".into())),
            StatusCode::CONFLICT
        );
        assert_eq!(
            status_of(&E::ContentType("text/plain".into())),
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
        assert_eq!(status_of(&E::Version("9".into())), StatusCode::BAD_REQUEST);
        assert_eq!(
            status_of(&E::Internal("x".into())),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(
            code_name(StatusCode::NOT_FOUND, &E::TaskNotFound("t".into())),
            "NOT_FOUND"
        );
        assert_eq!(
            code_name(
                StatusCode::PAYLOAD_TOO_LARGE,
                &E::InvalidRequest("b".into())
            ),
            "INVALID_ARGUMENT"
        );
    }
}
