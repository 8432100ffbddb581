//! The directions the gateway needs as a v0.3 client of a remote agent
//! (`remote add` of an agent whose card speaks v0.3): the bridge writes
//! v1.0 requests and reads v1.0 answers, so a v1.0 request becomes the
//! v0.3 request ([`params_out`], the inverse of [`super::params_in`]) and
//! the v0.3 result or stream event becomes the v1.0 one ([`result_in`],
//! [`event_in`], the inverses of [`super::result_out`] and
//! [`super::event_out`]). Parts and messages go through the same
//! functions as the inbound direction ([`super::message_out`],
//! [`super::message_in`], [`super::part_in`]), so one mapping serves
//! both.

use super::{bad, copy, get, message_in, message_out, object, part_in, put, task_id, Method, E};
use crate::v1;
use serde_json::{json, Map, Value};

/// The v0.3 method that does the work of the v1.0 method `v1_name`, among
/// those the gateway calls on a remote (a push config or card operation
/// has no use there: `None`).
pub fn method_of(v1_name: &str) -> Option<Method> {
    [
        Method::Send,
        Method::Stream,
        Method::Get,
        Method::Cancel,
        Method::Resubscribe,
    ]
    .into_iter()
    .find(|m| m.v1() == v1_name)
}

/// The v0.3 params of a v1.0 request of `m`.
pub fn params_out(m: Method, params: &Value) -> Result<Value, E> {
    let p = object(params, "params")?;
    Ok(match m {
        Method::Send | Method::Stream => send_out(p)?,
        Method::Get => {
            let mut out = Map::new();
            out.insert("id".into(), task_id(p)?);
            copy(p, &mut out, &["historyLength"]);
            Value::Object(out)
        }
        Method::Cancel => {
            let mut out = Map::new();
            out.insert("id".into(), task_id(p)?);
            copy(p, &mut out, &["metadata"]);
            Value::Object(out)
        }
        Method::Resubscribe => json!({"id": task_id(p)?}),
        other => {
            return Err(bad(format!(
                "{} is not called on a v0.3 remote",
                other.name()
            )))
        }
    })
}

/// v1.0 `SendMessageRequest` -> v0.3 `MessageSendParams`.
fn send_out(p: &Map<String, Value>) -> Result<Value, E> {
    let msg = p.get("message").ok_or_else(|| bad("message is required"))?;
    object(msg, "message")?;
    let mut out = Map::new();
    put(&mut out, "message", message_out(msg));
    if let Some(c) = p.get("configuration").filter(|c| !c.is_null()) {
        let c = object(c, "configuration")?;
        let mut conf = Map::new();
        copy(c, &mut conf, &["acceptedOutputModes", "historyLength"]);
        match c.get("returnImmediately") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(r)) => put(&mut conf, "blocking", Value::Bool(!r)),
            Some(_) => return Err(bad("configuration.returnImmediately must be a boolean")),
        }
        if let Some(pc) = c.get("taskPushNotificationConfig").filter(|v| !v.is_null()) {
            put(
                &mut conf,
                "pushNotificationConfig",
                get(&super::push_config_out(pc), "pushNotificationConfig").clone(),
            );
        }
        put(&mut out, "configuration", Value::Object(conf));
    }
    copy(p, &mut out, &["metadata"]);
    Ok(Value::Object(out))
}

/// The v1.0 result of `m` from a v0.3 remote's result: a `Task` or
/// `Message` (`message/send`) wrapped as v1.0's `{task}` / `{message}`,
/// a `Task` (`tasks/get`, `tasks/cancel`) as itself.
pub fn result_in(m: Method, r: &Value) -> Result<Value, E> {
    match m {
        Method::Send | Method::Stream | Method::Resubscribe => event_in(r),
        Method::Get | Method::Cancel => task_in(r),
        other => Err(bad(format!(
            "{} is not called on a v0.3 remote",
            other.name()
        ))),
    }
}

/// One v0.3 event (`kind` task, message, status-update, artifact-update)
/// -> the v1.0 `StreamResponse`. v0.3's `final` is dropped: v1.0 tells the
/// last event by the end of the stream, which the remote ends as well.
pub fn event_in(ev: &Value) -> Result<Value, E> {
    let o = object(ev, "a v0.3 result")?;
    match o.get("kind").and_then(Value::as_str) {
        Some("task") => Ok(json!({"task": task_in(ev)?})),
        Some("message") => Ok(json!({"message": message_in(ev)?})),
        Some("status-update") => {
            let mut out = Map::new();
            copy(o, &mut out, &["taskId", "contextId", "metadata"]);
            put(&mut out, "status", status_in(get(ev, "status"))?);
            Ok(json!({"statusUpdate": out}))
        }
        Some("artifact-update") => {
            let mut out = Map::new();
            copy(
                o,
                &mut out,
                &["taskId", "contextId", "append", "lastChunk", "metadata"],
            );
            put(&mut out, "artifact", artifact_in(get(ev, "artifact"))?);
            Ok(json!({"artifactUpdate": out}))
        }
        Some(other) => Err(bad(format!(
            "unknown result kind `{other}` (v0.3 results are task, message, status-update or artifact-update)"
        ))),
        None => Err(bad("a v0.3 result needs a kind")),
    }
}

/// The v1.0 state of a v0.3 one (`input-required` ->
/// `TASK_STATE_INPUT_REQUIRED`), the inverse of [`super::state_out`].
pub fn state_in(v03_state: &str) -> Option<&'static str> {
    use v1::TaskState as S;
    let name = |s: S| match s {
        S::Unspecified => "TASK_STATE_UNSPECIFIED",
        S::Submitted => "TASK_STATE_SUBMITTED",
        S::Working => "TASK_STATE_WORKING",
        S::Completed => "TASK_STATE_COMPLETED",
        S::Failed => "TASK_STATE_FAILED",
        S::Canceled => "TASK_STATE_CANCELED",
        S::InputRequired => "TASK_STATE_INPUT_REQUIRED",
        S::Rejected => "TASK_STATE_REJECTED",
        S::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
    };
    [
        S::Unspecified,
        S::Submitted,
        S::Working,
        S::Completed,
        S::Failed,
        S::Canceled,
        S::InputRequired,
        S::Rejected,
        S::AuthRequired,
    ]
    .into_iter()
    .map(name)
    .find(|n| super::state_out(n) == v03_state)
}

/// v0.3 `TaskStatus` -> v1.0 `TaskStatus`.
fn status_in(s: &Value) -> Result<Value, E> {
    let o = object(s, "status")?;
    let state = match o.get("state") {
        Some(Value::String(st)) => {
            state_in(st).ok_or_else(|| bad(format!("unknown task state `{st}`")))?
        }
        _ => return Err(bad("status.state must be a string")),
    };
    let mut out = Map::new();
    put(&mut out, "state", json!(state));
    if let Some(m) = o.get("message").filter(|m| !m.is_null()) {
        put(&mut out, "message", message_in(m)?);
    }
    copy(o, &mut out, &["timestamp"]);
    Ok(Value::Object(out))
}

/// v0.3 `Artifact` -> v1.0 `Artifact` (the same but for its parts).
fn artifact_in(a: &Value) -> Result<Value, E> {
    let mut out = object(a, "artifact")?.clone();
    let parts = match a.get("parts") {
        Some(Value::Array(ps)) => ps.iter().map(part_in).collect::<Result<Vec<_>, _>>()?,
        _ => return Err(bad("artifact.parts must be an array")),
    };
    put(&mut out, "parts", Value::Array(parts));
    Ok(Value::Object(out))
}

/// v0.3 `Task` -> v1.0 `Task` (the inverse of [`super::task_out`]).
pub fn task_in(t: &Value) -> Result<Value, E> {
    let o = object(t, "task")?;
    if !matches!(o.get("id"), Some(Value::String(_))) {
        return Err(bad("task.id must be a string"));
    }
    let mut out = Map::new();
    copy(o, &mut out, &["id", "contextId", "metadata"]);
    put(&mut out, "status", status_in(get(t, "status"))?);
    if let Some(Value::Array(a)) = o.get("artifacts") {
        let arts = a.iter().map(artifact_in).collect::<Result<Vec<_>, _>>()?;
        put(&mut out, "artifacts", Value::Array(arts));
    }
    if let Some(Value::Array(h)) = o.get("history") {
        let hist = h.iter().map(message_in).collect::<Result<Vec<_>, _>>()?;
        put(&mut out, "history", Value::Array(hist));
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::super::{event_out, params_in, task_out};
    use super::*;

    fn v1_message() -> Value {
        json!({"messageId": "m1", "role": "ROLE_USER", "taskId": "t1", "contextId": "c1",
            "parts": [{"text": "hi"}, {"data": {"k": 1}}, {"url": "http://f", "mediaType": "text/plain", "filename": "f.txt"},
                      {"data": [1, 2]}],
            "metadata": {"a": 1}})
    }

    #[test]
    fn methods_are_those_the_bridge_calls() {
        assert_eq!(method_of("SendMessage"), Some(Method::Send));
        assert_eq!(method_of("SendStreamingMessage"), Some(Method::Stream));
        assert_eq!(method_of("GetTask"), Some(Method::Get));
        assert_eq!(method_of("CancelTask"), Some(Method::Cancel));
        assert_eq!(method_of("SubscribeToTask"), Some(Method::Resubscribe));
        assert_eq!(method_of("CreateTaskPushNotificationConfig"), None);
        assert_eq!(method_of("message/send"), None);
    }

    #[test]
    fn a_send_request_round_trips_through_params_in() {
        let v1 = json!({"message": v1_message(),
            "configuration": {"returnImmediately": true, "acceptedOutputModes": ["text/plain"], "historyLength": 3},
            "metadata": {"m": true}});
        let out = params_out(Method::Send, &v1).unwrap();
        // v0.3's shapes: kinds, lowercase role, `blocking` the inverse.
        assert_eq!(out["message"]["kind"], "message");
        assert_eq!(out["message"]["role"], "user");
        assert_eq!(
            out["message"]["parts"][0],
            json!({"kind": "text", "text": "hi"})
        );
        assert_eq!(
            out["message"]["parts"][2]["file"],
            json!({"uri": "http://f", "mimeType": "text/plain", "name": "f.txt"})
        );
        assert_eq!(out["configuration"]["blocking"], false);
        assert!(out["configuration"].get("returnImmediately").is_none());
        // And back: the inbound direction reads it as the request it was.
        assert_eq!(params_in(Method::Send, &out).unwrap(), v1);
        let blocking = params_out(
            Method::Stream,
            &json!({"message": v1_message(), "configuration": {"returnImmediately": false}}),
        )
        .unwrap();
        assert_eq!(blocking["configuration"], json!({"blocking": true}));
    }

    #[test]
    fn task_requests_round_trip_and_bad_ones_are_refused() {
        for (m, v1) in [
            (Method::Get, json!({"id": "t1", "historyLength": 2})),
            (
                Method::Cancel,
                json!({"id": "t1", "metadata": {"reason": "r"}}),
            ),
            (Method::Resubscribe, json!({"id": "t1"})),
        ] {
            let out = params_out(m, &v1).unwrap();
            assert_eq!(params_in(m, &out).unwrap(), v1, "{m:?}");
        }
        assert!(params_out(Method::Get, &json!({})).is_err());
        assert!(params_out(Method::Send, &json!({})).is_err());
        assert!(params_out(Method::Send, &json!({"message": 1})).is_err());
        assert!(params_out(
            Method::Send,
            &json!({"message": v1_message(), "configuration": {"returnImmediately": "yes"}})
        )
        .is_err());
        assert!(params_out(Method::PushSet, &json!({"taskId": "t"})).is_err());
        assert!(params_out(Method::Get, &json!([])).is_err());
    }

    fn v1_task() -> Value {
        json!({"id": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2026-01-01T00:00:00Z",
                       "message": {"messageId": "a1", "role": "ROLE_AGENT", "parts": [{"text": "which one?"}]}},
            "artifacts": [{"artifactId": "x", "name": "echo", "parts": [{"text": "echo: hi"}, {"data": 5}]}],
            "history": [{"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}],
            "metadata": {"k": "v"}})
    }

    #[test]
    fn results_round_trip_through_the_outbound_translations() {
        let task = v1_task();
        assert_eq!(task_in(&task_out(&task)).unwrap(), task);
        assert_eq!(result_in(Method::Get, &task_out(&task)).unwrap(), task);
        assert_eq!(result_in(Method::Cancel, &task_out(&task)).unwrap(), task);
        // `message/send` answers a task or a message: v1.0 wraps each.
        assert_eq!(
            result_in(Method::Send, &task_out(&task)).unwrap(),
            json!({"task": task})
        );
        let msg = json!({"messageId": "r1", "role": "ROLE_AGENT", "contextId": "c1", "parts": [{"text": "reply"}]});
        let wrapped = json!({"message": msg});
        assert_eq!(
            result_in(Method::Send, &event_out(&wrapped, false)).unwrap(),
            wrapped
        );
    }

    #[test]
    fn stream_events_round_trip_and_final_is_dropped() {
        for state in [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED",
            "TASK_STATE_FAILED",
            "TASK_STATE_CANCELED",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_REJECTED",
            "TASK_STATE_AUTH_REQUIRED",
        ] {
            let ev = json!({"statusUpdate": {"taskId": "t1", "contextId": "c1", "status": {"state": state}}});
            let out = event_out(&ev, true);
            assert_eq!(out["final"], true);
            assert_eq!(event_in(&out).unwrap(), ev, "{state}");
        }
        let ev = json!({"artifactUpdate": {"taskId": "t1", "contextId": "c1", "append": true, "lastChunk": false,
            "artifact": {"artifactId": "x", "parts": [{"text": "chunk"}]}}});
        assert_eq!(event_in(&event_out(&ev, false)).unwrap(), ev);
        let ev = json!({"task": v1_task()});
        assert_eq!(event_in(&event_out(&ev, false)).unwrap(), ev);
    }

    #[test]
    fn bad_v03_results_are_errors_not_guesses() {
        for bad in [
            json!([]),
            json!({"id": "t1"}),
            json!({"kind": "frob"}),
            json!({"kind": "task", "status": {"state": "working"}}),
            json!({"kind": "task", "id": "t1", "status": {"state": "pondering"}}),
            json!({"kind": "task", "id": "t1", "status": {}}),
            json!({"kind": "message", "role": "robot", "parts": []}),
            json!({"kind": "artifact-update", "taskId": "t", "artifact": {"artifactId": "x"}}),
            json!({"kind": "status-update", "taskId": "t", "status": {"state": "working",
                "message": {"role": "agent", "parts": [{"text": "no kind"}]}}}),
        ] {
            assert!(event_in(&bad).is_err(), "{bad}");
        }
        assert!(result_in(Method::Get, &json!({"kind": "message"})).is_err());
        assert!(result_in(Method::PushList, &json!([])).is_err());
        assert_eq!(state_in("unknown"), Some("TASK_STATE_UNSPECIFIED"));
        assert_eq!(
            state_in("input-required"),
            Some("TASK_STATE_INPUT_REQUIRED")
        );
        assert_eq!(state_in("TASK_STATE_WORKING"), None);
    }
}
