//! The outbound direction of the translation: a broker message becomes a
//! v1.0 `SendMessage` request for the remote agent, and what the remote
//! answers (a `Task`, a `Message`, `statusUpdate` / `artifactUpdate`
//! events) becomes broker states, messages and artifacts.
//!
//! Pure functions over JSON values, so that every rule has a unit test and
//! the bridge only sequences them. States and parts go through the inbound
//! direction's [`crate::mapping`] (`state_in`, `part_in`, `part_out`), so
//! both directions translate them alike; what is new here is the shape of
//! the outgoing request, the reading of remote answers and events, and the
//! broker transitions that reflect them. The v1.0 side is read leniently
//! (ProtoJSON: lowerCamel or snake_case names; unknown fields ignored),
//! because remote agents are written against many SDKs.

use crate::{mapping, v1};
use a2a_proto::types::{Artifact, Message, Object, Part, Role, State};
use serde_json::{json, Map, Value};

/// A broker state from a v1.0 `TASK_STATE_*` name (`None` for
/// `TASK_STATE_UNSPECIFIED` and unknown names: nothing to reflect).
pub fn state_from_v1(name: &str) -> Option<State> {
    v1::TaskState::from_json(&Value::String(name.to_owned())).and_then(mapping::state_in)
}

/// A v1.0 member, under its lowerCamel name or its proto snake_case one.
pub fn field<'a>(obj: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    obj.get(camel).or_else(|| obj.get(snake))
}

/// A v1.0 string member (camel or snake), if present and a string.
pub fn str_field<'a>(obj: &'a Value, camel: &str, snake: &str) -> Option<&'a str> {
    field(obj, camel, snake).and_then(Value::as_str)
}

/// One broker part as a v1.0 part (the inbound direction's
/// [`mapping::part_out`], so both directions write parts alike).
pub fn part_to_v1(part: &Part) -> Value {
    serde_json::to_value(mapping::part_out(part)).unwrap_or(Value::Null)
}

/// One v1.0 part as a broker part ([`mapping::part_in`]): `None` for a
/// part that is not exactly one of `text`, `raw`, `url`, `data`. A `data`
/// part holding a non-object is wrapped as `{"value": ...}`, the broker's
/// data parts being objects.
pub fn part_from_v1(v: &Value) -> Option<Part> {
    let p: v1::Part = serde_json::from_value(v.clone()).ok()?;
    mapping::part_in(&p).ok()
}

/// The `params` of a v1.0 `SendMessage` / `SendStreamingMessage` carrying a
/// broker message to the remote agent: a fresh `messageId` (broker ids are
/// unique per sender, not per remote), the remote's task and context ids
/// when this continues a remote task, and a blocking configuration.
pub fn send_params(
    message: &Message,
    message_id: &str,
    remote_task_id: Option<&str>,
    remote_context_id: Option<&str>,
    return_immediately: bool,
) -> Value {
    let mut m = Map::new();
    m.insert("messageId".into(), Value::String(message_id.to_owned()));
    m.insert("role".into(), Value::String("ROLE_USER".into()));
    m.insert(
        "parts".into(),
        Value::Array(message.parts.iter().map(part_to_v1).collect()),
    );
    if let Some(t) = remote_task_id {
        m.insert("taskId".into(), Value::String(t.to_owned()));
    }
    if let Some(c) = remote_context_id {
        m.insert("contextId".into(), Value::String(c.to_owned()));
    }
    if let Some(md) = &message.metadata {
        m.insert("metadata".into(), Value::Object(md.0.clone()));
    }
    json!({ "message": Value::Object(m), "configuration": { "returnImmediately": return_immediately } })
}

/// A remote (agent) message as the message of a broker status change:
/// its parts translated (unreadable ones dropped), its `messageId` kept
/// when it has one so that history can be matched with the remote's.
/// `None` when no part survives (the broker keeps no empty status text).
pub fn message_from_v1(v: &Value, fallback_id: impl FnOnce() -> String) -> Option<Message> {
    let parts: Vec<Part> = v
        .get("parts")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().filter_map(part_from_v1).collect())
        .unwrap_or_default();
    if parts.is_empty() {
        return None;
    }
    let message_id = str_field(v, "messageId", "message_id")
        .filter(|s| !s.is_empty())
        .map_or_else(fallback_id, str::to_owned);
    Some(Message {
        role: Role::Agent,
        parts,
        message_id,
        task_id: None,
        context_id: None,
        from: None,
        to: None,
        metadata: v
            .get("metadata")
            .and_then(Value::as_object)
            .map(|m| Object::from(m.clone())),
    })
}

/// A remote artifact as a broker artifact (`None` without an id).
pub fn artifact_from_v1(v: &Value) -> Option<Artifact> {
    let artifact_id = str_field(v, "artifactId", "artifact_id").filter(|s| !s.is_empty())?;
    let parts = v
        .get("parts")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().filter_map(part_from_v1).collect())
        .unwrap_or_default();
    Some(Artifact {
        artifact_id: artifact_id.to_owned(),
        name: v.get("name").and_then(Value::as_str).map(str::to_owned),
        description: v
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned),
        parts,
        metadata: v
            .get("metadata")
            .and_then(Value::as_object)
            .map(|m| Object::from(m.clone())),
    })
}

/// The broker states a task must go through to reflect a remote state,
/// given where the broker task is: none when there is nothing to do
/// (nothing moves to `submitted`; a terminal task stays; an interrupted
/// task cannot be interrupted again), one step when the broker allows the
/// move, and `working` first when the broker task is interrupted but the
/// remote one has moved on (the broker resumes a task only through
/// `working`). A `working` update with a message is a progress update.
pub fn status_steps(current: State, target: State, has_message: bool) -> Vec<State> {
    if target == State::Submitted || current.is_terminal() {
        return Vec::new();
    }
    if current == target {
        return if target == State::Working && has_message {
            vec![State::Working]
        } else {
            Vec::new()
        };
    }
    if current.can_move(target) {
        return vec![target];
    }
    if current.can_move(State::Working) && State::Working.can_move(target) {
        return vec![State::Working, target];
    }
    Vec::new()
}

/// What one remote answer or stream event says, in the order it says it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reflect {
    /// The remote task's ids (learned from a task or an event).
    Ids {
        task_id: String,
        context_id: Option<String>,
    },
    /// The remote task's state, with the message that went with it.
    Status {
        state: State,
        message: Option<Value>,
    },
    /// An artifact, new or (with `append`) extended.
    Artifact {
        artifact: Value,
        append: bool,
        last_chunk: bool,
    },
    /// A message outside any status (a direct answer, or an agent message
    /// in a stream).
    Message(Value),
}

/// Splits a v1.0 `StreamResponse` (or a `SendMessage` result, which has
/// the same `task` / `message` wrapper) into what the bridge reflects. A
/// task snapshot yields its ids, its artifacts, then its status, so that
/// a completed task's artifacts reach the requester before the completion.
pub fn reflect(response: &Value) -> Vec<Reflect> {
    let mut out = Vec::new();
    if let Some(task) = response.get("task") {
        if let Some(id) = task.get("id").and_then(Value::as_str) {
            out.push(Reflect::Ids {
                task_id: id.to_owned(),
                context_id: str_field(task, "contextId", "context_id").map(str::to_owned),
            });
        }
        if let Some(arts) = task.get("artifacts").and_then(Value::as_array) {
            for a in arts {
                out.push(Reflect::Artifact {
                    artifact: a.clone(),
                    append: false,
                    last_chunk: true,
                });
            }
        }
        if let Some(st) = task.get("status") {
            push_status(st, &mut out);
        }
    } else if let Some(msg) = response.get("message").filter(|m| !is_user_message(m)) {
        out.push(Reflect::Message(msg.clone()));
    } else if let Some(ev) = field(response, "statusUpdate", "status_update") {
        push_ids(ev, &mut out);
        if let Some(st) = ev.get("status") {
            push_status(st, &mut out);
        }
    } else if let Some(ev) = field(response, "artifactUpdate", "artifact_update") {
        push_ids(ev, &mut out);
        if let Some(a) = ev.get("artifact") {
            out.push(Reflect::Artifact {
                artifact: a.clone(),
                append: ev.get("append").and_then(Value::as_bool).unwrap_or(false),
                last_chunk: field(ev, "lastChunk", "last_chunk")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
            });
        }
    }
    out
}

fn push_ids(ev: &Value, out: &mut Vec<Reflect>) {
    if let Some(id) = str_field(ev, "taskId", "task_id") {
        out.push(Reflect::Ids {
            task_id: id.to_owned(),
            context_id: str_field(ev, "contextId", "context_id").map(str::to_owned),
        });
    }
}

fn push_status(st: &Value, out: &mut Vec<Reflect>) {
    if let Some(state) = st
        .get("state")
        .and_then(Value::as_str)
        .and_then(state_from_v1)
    {
        out.push(Reflect::Status {
            state,
            message: st.get("message").filter(|m| !is_user_message(m)).cloned(),
        });
    }
}

/// Whether a v1.0 message is the user's (`ROLE_USER`, or `user` as some
/// SDKs write it). A remote echoes the requester's own message in the
/// status that follows it (the `working` of a follow-up, the `canceled` of
/// a cancel with a reason): the requester's host holds that message
/// already, so it is never reflected back as a new one (an echo
/// came back as an agent message, and the two hosts' histories differed).
pub fn is_user_message(m: &Value) -> bool {
    matches!(
        m.get("role"),
        Some(Value::String(r)) if r == "ROLE_USER" || r == "user"
    ) || m.get("role") == Some(&json!(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_proto::types::FileContent;

    #[test]
    fn every_v1_state_maps_and_unknown_ones_do_not() {
        for s in State::ALL {
            let v1 = format!("TASK_STATE_{}", s.as_str().replace('-', "_").to_uppercase());
            assert_eq!(state_from_v1(&v1), Some(s), "{v1}");
        }
        assert_eq!(state_from_v1("TASK_STATE_UNSPECIFIED"), None);
        assert_eq!(state_from_v1("completed"), None);
    }

    #[test]
    fn parts_round_trip_through_v1() {
        let parts = vec![
            Part::text("hi"),
            Part::File {
                file: FileContent {
                    name: Some("a.txt".into()),
                    mime_type: Some("text/plain".into()),
                    uri: None,
                    bytes: Some("aGk=".into()),
                },
                metadata: None,
            },
            Part::File {
                file: FileContent {
                    name: None,
                    mime_type: None,
                    uri: Some("https://example.com/x".into()),
                    bytes: None,
                },
                metadata: Some(Object::from(json!({"k": 1}).as_object().unwrap().clone())),
            },
            Part::Data {
                data: Object::from(json!({"key": "value"}).as_object().unwrap().clone()),
                metadata: None,
            },
        ];
        for p in &parts {
            let v1 = part_to_v1(p);
            assert!(v1.get("kind").is_none(), "v1.0 parts carry no kind: {v1}");
            assert_eq!(part_from_v1(&v1).as_ref(), Some(p), "{v1}");
        }
        assert_eq!(
            part_to_v1(&parts[1]),
            json!({"raw": "aGk=", "filename": "a.txt", "mediaType": "text/plain"})
        );
    }

    #[test]
    fn v1_parts_are_read_leniently() {
        assert_eq!(
            part_from_v1(&json!({"url": "u", "media_type": "image/png"})),
            Some(Part::File {
                file: FileContent {
                    name: None,
                    mime_type: Some("image/png".into()),
                    uri: Some("u".into()),
                    bytes: None
                },
                metadata: None
            })
        );
        let Some(Part::Data { data, .. }) = part_from_v1(&json!({"data": [1, 2]})) else {
            panic!("data part")
        };
        assert_eq!(Value::Object(data.0), json!({"value": [1, 2]}));
        assert_eq!(part_from_v1(&json!({"unknown": 1})), None);
    }

    #[test]
    fn send_params_are_a_v1_user_message() {
        let mut m = a2a_client::message_to("remote", "hello");
        m.task_id = Some("broker-task".into());
        let p = send_params(&m, "fresh-1", Some("rt"), Some("rc"), false);
        assert_eq!(
            p,
            json!({"message": {"messageId": "fresh-1", "role": "ROLE_USER", "parts": [{"text": "hello"}],
                                "taskId": "rt", "contextId": "rc"},
                   "configuration": {"returnImmediately": false}})
        );
        let first = send_params(&m, "fresh-2", None, None, true);
        assert!(
            first["message"].get("taskId").is_none() && first["message"].get("contextId").is_none()
        );
        assert_eq!(first["configuration"]["returnImmediately"], true);
    }

    #[test]
    fn status_steps_follow_the_broker_table() {
        use State::*;
        assert_eq!(status_steps(Submitted, Working, false), vec![Working]);
        assert_eq!(
            status_steps(Submitted, Submitted, true),
            Vec::<State>::new()
        );
        assert_eq!(status_steps(Working, Working, false), Vec::<State>::new());
        assert_eq!(status_steps(Working, Working, true), vec![Working]);
        assert_eq!(status_steps(Working, Completed, true), vec![Completed]);
        // The remote finished a task the broker still has interrupted.
        assert_eq!(
            status_steps(InputRequired, Completed, false),
            vec![Working, Completed]
        );
        assert_eq!(
            status_steps(InputRequired, AuthRequired, false),
            vec![Working, AuthRequired]
        );
        assert_eq!(
            status_steps(InputRequired, InputRequired, true),
            Vec::<State>::new()
        );
        assert_eq!(status_steps(InputRequired, Failed, false), vec![Failed]);
        assert_eq!(status_steps(Completed, Working, false), Vec::<State>::new());
        assert_eq!(status_steps(Canceled, Failed, false), Vec::<State>::new());
        // Every step the function plans is one the broker allows.
        for a in State::ALL {
            for b in State::ALL {
                let mut cur = a;
                for s in status_steps(a, b, true) {
                    assert!(cur.can_move(s), "{a:?} -> {b:?} plans {cur:?} -> {s:?}");
                    cur = s;
                }
            }
        }
    }

    #[test]
    fn a_task_snapshot_reflects_ids_then_artifacts_then_status() {
        let r = reflect(&json!({"task": {
            "id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED", "message": {"role": "ROLE_AGENT", "parts": [{"text": "done"}], "messageId": "m"}},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "x"}]}]
        }}));
        assert!(
            matches!(&r[0], Reflect::Ids { task_id, context_id } if task_id == "t" && context_id.as_deref() == Some("c"))
        );
        assert!(matches!(
            &r[1],
            Reflect::Artifact {
                append: false,
                last_chunk: true,
                ..
            }
        ));
        assert!(matches!(
            &r[2],
            Reflect::Status {
                state: State::Completed,
                message: Some(_)
            }
        ));
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn events_reflect_in_both_spellings() {
        let r = reflect(
            &json!({"status_update": {"task_id": "t", "status": {"state": "TASK_STATE_WORKING"}}}),
        );
        assert_eq!(
            r,
            vec![
                Reflect::Ids {
                    task_id: "t".into(),
                    context_id: None
                },
                Reflect::Status {
                    state: State::Working,
                    message: None
                }
            ]
        );
        let r = reflect(
            &json!({"artifactUpdate": {"taskId": "t", "artifact": {"artifactId": "a", "parts": []}, "append": true, "lastChunk": false}}),
        );
        assert!(matches!(
            &r[1],
            Reflect::Artifact {
                append: true,
                last_chunk: false,
                ..
            }
        ));
        assert!(matches!(
            &reflect(&json!({"message": {"parts": []}}))[0],
            Reflect::Message(_)
        ));
        assert!(reflect(&json!({"somethingElse": {}})).is_empty());
    }

    #[test]
    fn the_remote_echo_of_the_users_message_is_not_reflected() {
        // A follow-up's `working`, as `a2a-gateway serve` streams it: the
        // status carries the user's own message.
        for role in [json!("ROLE_USER"), json!("user"), json!(1)] {
            let r = reflect(&json!({"statusUpdate": {"taskId": "t", "status": {
                "state": "TASK_STATE_WORKING",
                "message": {"role": role, "parts": [{"text": "the blue one"}], "messageId": "u2"}}}}));
            assert_eq!(
                r[1],
                Reflect::Status {
                    state: State::Working,
                    message: None
                },
                "{role}"
            );
            let r = reflect(&json!({"task": {"id": "t", "status": {
                "state": "TASK_STATE_CANCELED",
                "message": {"role": role, "parts": [{"text": "not needed"}], "messageId": "u3"}}}}));
            assert_eq!(
                r[1],
                Reflect::Status {
                    state: State::Canceled,
                    message: None
                }
            );
        }
        // The agent's messages still are.
        let r = reflect(&json!({"statusUpdate": {"taskId": "t", "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"role": "ROLE_AGENT", "parts": [{"text": "which?"}], "messageId": "a1"}}}}));
        assert!(matches!(
            &r[1],
            Reflect::Status {
                message: Some(_),
                ..
            }
        ));
        assert!(
            reflect(&json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}))
                .is_empty()
        );
    }

    #[test]
    fn remote_messages_and_artifacts_translate() {
        let m = message_from_v1(
            &json!({"role": "ROLE_AGENT", "parts": [{"text": "a"}, {"bogus": 1}]}),
            || "gen".into(),
        )
        .unwrap();
        assert_eq!(
            (m.role, m.parts.len(), m.message_id.as_str()),
            (Role::Agent, 1, "gen")
        );
        assert!(message_from_v1(&json!({"parts": [{"bogus": 1}]}), || "gen".into()).is_none());
        let a = artifact_from_v1(
            &json!({"artifactId": "a1", "name": "n", "parts": [{"data": {"k": 1}}]}),
        )
        .unwrap();
        assert_eq!(
            (a.artifact_id.as_str(), a.name.as_deref(), a.parts.len()),
            ("a1", Some("n"), 1)
        );
        assert!(artifact_from_v1(&json!({"parts": []})).is_none());
    }
}
