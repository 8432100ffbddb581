//! The HTTP+JSON binding as the gateway calls a remote in it (a remote
//! whose card offers no JSON-RPC interface): each operation's verb, path
//! and body under the interface URL (the routes `gateway/src/http/rest.rs`
//! serves), and an error answer read back as the A2A error its
//! `google.rpc.ErrorInfo` names, so that the bridge meets the same
//! [`RemoteError::Rpc`] codes whichever binding the remote speaks.

use super::rpc::RemoteError;
use reqwest::{Method, Url};
use serde_json::{Map, Value};

/// One operation as an HTTP request.
#[derive(Debug, PartialEq)]
pub struct Request {
    pub verb: Method,
    pub url: String,
    /// The JSON body (POST only).
    pub body: Option<Value>,
}

/// The request of operation `method` (its v1.0 name) with `params` (its
/// request object) at the interface `base`: path parameters taken out of
/// the params, the rest the body of a POST or the query of a GET.
pub fn request(base: &str, method: &str, params: Value) -> Result<Request, RemoteError> {
    let Value::Object(mut p) = params else {
        return Err(RemoteError::BadUrl(format!(
            "{method}: params must be an object"
        )));
    };
    let mut url = Url::parse(base.trim()).map_err(|_| RemoteError::BadUrl(base.to_owned()))?;
    let mut take_id = |key: &str| match p.remove(key) {
        Some(Value::String(id)) if !id.is_empty() => Ok(id),
        _ => Err(RemoteError::BadUrl(format!("{method}: no `{key}`"))),
    };
    let (verb, segments) = match method {
        "SendMessage" => (Method::POST, vec!["message:send".to_owned()]),
        "SendStreamingMessage" => (Method::POST, vec!["message:stream".to_owned()]),
        "GetTask" => (Method::GET, vec!["tasks".to_owned(), take_id("id")?]),
        "ListTasks" => (Method::GET, vec!["tasks".to_owned()]),
        "CancelTask" => (
            Method::POST,
            vec!["tasks".to_owned(), format!("{}:cancel", take_id("id")?)],
        ),
        "SubscribeToTask" => (
            Method::POST,
            vec!["tasks".to_owned(), format!("{}:subscribe", take_id("id")?)],
        ),
        other => {
            return Err(RemoteError::BadUrl(format!(
                "{other} has no HTTP+JSON route the gateway calls"
            )))
        }
    };
    {
        let mut path = url
            .path_segments_mut()
            .map_err(|()| RemoteError::BadUrl(base.to_owned()))?;
        path.pop_if_empty();
        for s in &segments {
            // Percent-encoded: an id with a `/` or `?` stays one segment.
            path.push(s);
        }
    }
    let body = if verb == Method::POST {
        Some(Value::Object(p))
    } else {
        query(&mut url, p);
        None
    };
    Ok(Request {
        verb,
        url: url.to_string(),
        body,
    })
}

/// A GET's params as its query: each scalar field under its own name
/// (strings as they are, numbers and booleans as their JSON text).
fn query(url: &mut Url, params: Map<String, Value>) {
    if params.is_empty() {
        return;
    }
    let mut q = url.query_pairs_mut();
    for (k, v) in params {
        match v {
            Value::String(s) => {
                q.append_pair(&k, &s);
            }
            Value::Number(_) | Value::Bool(_) => {
                q.append_pair(&k, &v.to_string());
            }
            // No nested values in a query (the binding has none for GET).
            _ => {}
        }
    }
}

/// The JSON-RPC code of an A2A error reason (`google.rpc.ErrorInfo`).
fn code_of_reason(reason: &str) -> Option<i64> {
    Some(match reason {
        "TASK_NOT_FOUND" => -32001,
        "TASK_NOT_CANCELABLE" => -32002,
        "PUSH_NOTIFICATION_NOT_SUPPORTED" => -32003,
        "UNSUPPORTED_OPERATION" => -32004,
        "CONTENT_TYPE_NOT_SUPPORTED" => -32005,
        "INVALID_AGENT_RESPONSE" => -32006,
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED" => -32007,
        "EXTENSION_SUPPORT_REQUIRED" => -32008,
        "VERSION_NOT_SUPPORTED" => -32009,
        _ => return None,
    })
}

/// An error answer (`status`, `body`) as the bridge reads errors: an
/// AIP-193 body naming an A2A error is that error's [`RemoteError::Rpc`];
/// one without an A2A reason is the remote refusing the request (400:
/// invalid params) or failing at it (500: internal error); anything else
/// (a proxy's page, a path not there) is [`RemoteError::Status`], which
/// the bridge may take as "the remote moved or is down".
pub fn error(status: u16, body: &[u8]) -> RemoteError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let Some(err) = parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .filter(|e| e.is_object())
    else {
        return RemoteError::Status(status);
    };
    error_object(status, err)
}

/// An AIP-193 `error` object (also the body of an error event on a
/// stream) as a [`RemoteError`].
pub fn error_object(status: u16, err: &Value) -> RemoteError {
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let details = err.get("details").cloned();
    let reason_code = details
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.ErrorInfo"))
        })
        .find_map(|d| {
            d.get("reason")
                .and_then(Value::as_str)
                .and_then(code_of_reason)
        });
    let code = match (reason_code, status) {
        (Some(c), _) => c,
        (None, 400) => -32602,
        (None, 500) => -32603,
        (None, _) => return RemoteError::Status(status),
    };
    RemoteError::Rpc {
        code,
        message,
        data: details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_operation_has_its_verb_path_and_body() {
        let base = "http://h:8/a2a/rest/";
        let r = request(base, "SendMessage", json!({"message": {"messageId": "m"}})).unwrap();
        assert_eq!(
            r,
            Request {
                verb: Method::POST,
                url: "http://h:8/a2a/rest/message:send".into(),
                body: Some(json!({"message": {"messageId": "m"}}))
            }
        );
        let r = request(base, "SendStreamingMessage", json!({})).unwrap();
        assert_eq!(r.url, "http://h:8/a2a/rest/message:stream");
        let r = request(base, "GetTask", json!({"id": "t/1", "historyLength": 0})).unwrap();
        assert_eq!(
            (r.verb, r.url.as_str(), r.body),
            (
                Method::GET,
                "http://h:8/a2a/rest/tasks/t%2F1?historyLength=0",
                None
            )
        );
        let r = request(
            base,
            "CancelTask",
            json!({"id": "t1", "metadata": {"reason": "r"}}),
        )
        .unwrap();
        assert_eq!(
            (r.verb, r.url.as_str(), r.body),
            (
                Method::POST,
                "http://h:8/a2a/rest/tasks/t1:cancel",
                Some(json!({"metadata": {"reason": "r"}}))
            )
        );
        let r = request(
            "http://h:8/a2a/rest",
            "ListTasks",
            json!({"contextId": "c 1", "pageSize": 2, "includeArtifacts": true}),
        )
        .unwrap();
        assert_eq!(r.verb, Method::GET);
        let u = Url::parse(&r.url).unwrap();
        assert_eq!(u.path(), "/a2a/rest/tasks");
        let mut pairs: Vec<(String, String)> = u.query_pairs().into_owned().collect();
        pairs.sort();
        assert_eq!(
            pairs,
            [
                ("contextId".into(), "c 1".into()),
                ("includeArtifacts".into(), "true".into()),
                ("pageSize".into(), "2".into())
            ]
        );
        let r = request(base, "SubscribeToTask", json!({"id": "t1"})).unwrap();
        assert_eq!(r.url, "http://h:8/a2a/rest/tasks/t1:subscribe");
        assert!(request(base, "GetTask", json!({})).is_err());
        assert!(request(base, "Frobnicate", json!({})).is_err());
        assert!(request("not a url", "SendMessage", json!({})).is_err());
    }

    #[test]
    fn error_bodies_name_their_a2a_error() {
        let body = json!({"error": {"code": 404, "status": "NOT_FOUND", "message": "task not found: t",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org"}]}});
        let e = error(404, body.to_string().as_bytes());
        assert!(
            matches!(&e, RemoteError::Rpc { code: -32001, message, data: Some(_) } if message == "task not found: t"),
            "{e:?}"
        );
        let not_cancelable = json!({"error": {"code": 409, "message": "m",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_CANCELABLE"}]}});
        assert!(matches!(
            error(409, not_cancelable.to_string().as_bytes()),
            RemoteError::Rpc { code: -32002, .. }
        ));
        let bad = json!({"error": {"code": 400, "message": "bad", "details": []}});
        assert!(matches!(
            error(400, bad.to_string().as_bytes()),
            RemoteError::Rpc { code: -32602, .. }
        ));
        // A 404 with no A2A reason, or no JSON at all, is a path not there.
        let plain = json!({"error": {"code": 404, "message": "no route"}});
        assert!(matches!(
            error(404, plain.to_string().as_bytes()),
            RemoteError::Status(404)
        ));
        assert!(matches!(error(503, b"<html>"), RemoteError::Status(503)));
    }
}
