//! The arguments of one call, read from the JSON a model wrote: checked
//! against the schema by hand (models send what they send), each mistake
//! answered with what to write instead.

use crate::error::ToolError;
use crate::schema::{ACTIONS, COMPLETE_STATES};
use crate::MAX_WAIT_SECONDS;
use a2a_client::State;
use serde_json::{Map, Value};

/// The wait when `timeoutSeconds` is absent (the broker's own default for
/// a stream wait).
pub const DEFAULT_WAIT_SECONDS: u64 = a2a_client::proto::limits::A2A_DEFAULT_STREAM_WAIT_SECONDS;

/// One action with what it needs, checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Discover,
    /// A new task for `to`.
    SendNew {
        to: String,
        text: String,
    },
    /// A message on an existing task.
    SendOn {
        task_id: String,
        text: String,
    },
    Get {
        task_id: String,
    },
    Wait {
        timeout_seconds: u64,
    },
    Complete {
        task_id: String,
        state: State,
        text: String,
        artifact: Option<(String, String)>,
    },
    Cancel {
        task_id: String,
        text: Option<String>,
    },
}

const FIELDS: [&str; 8] = [
    "action",
    "to",
    "text",
    "taskId",
    "timeoutSeconds",
    "state",
    "artifact",
    "artifactName",
];

/// Reads `args` (a JSON object) into an [`Action`].
pub fn parse(args: &Value) -> Result<Action, ToolError> {
    let Some(obj) = args.as_object() else {
        return Err(ToolError::new(
            "bad-arguments",
            "The arguments must be a JSON object, e.g. {\"action\": \"discover\"}.".to_string(),
        ));
    };
    if let Some(k) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ToolError::new(
            "unknown-argument",
            format!(
                "There is no argument `{k}`. The arguments are: {}.",
                FIELDS.join(", ")
            ),
        ));
    }
    let action = match obj.get("action") {
        Some(Value::String(a)) => a.as_str(),
        None | Some(Value::Null) => {
            return Err(ToolError::new(
                "missing-action",
                format!(
                    "Say what to do with `action`: one of {}. Start with {{\"action\": \"discover\"}} to see your peers, or {{\"action\": \"wait\"}} to hear from them.",
                    ACTIONS.join(", ")
                ),
            ))
        }
        Some(_) => return Err(not_a_string("action")),
    };
    let text = string(obj, "text")?;
    let task_id = string(obj, "taskId")?;
    match action {
        "discover" => Ok(Action::Discover),
        "send" => {
            let to = string(obj, "to")?;
            let text = text.ok_or_else(|| {
                ToolError::new(
                    "missing-text",
                    "send needs `text`: the task for the peer, or your message on the task."
                        .to_string(),
                )
            })?;
            match (to, task_id) {
                (Some(to), None) => Ok(Action::SendNew { to, text }),
                (None, Some(task_id)) => Ok(Action::SendOn { task_id, text }),
                (Some(_), Some(_)) => Err(ToolError::new(
                    "to-and-task",
                    "Give either `to` (a new task for that peer) or `taskId` (a message on an existing task), not both.".to_string(),
                )),
                (None, None) => Err(ToolError::new(
                    "missing-to",
                    "send needs `to` (the peer to give a new task; discover lists them) or `taskId` (to add a message to an existing task).".to_string(),
                )),
            }
        }
        "get" => Ok(Action::Get {
            task_id: need_task(task_id, "get")?,
        }),
        "wait" => Ok(Action::Wait {
            timeout_seconds: timeout(obj)?,
        }),
        "complete" => {
            let task_id = need_task(task_id, "complete")?;
            let state = match string(obj, "state")? {
                None => State::Completed,
                Some(s) if COMPLETE_STATES.contains(&s.as_str()) => {
                    State::parse(&s).expect("the listed states parse")
                }
                Some(s) => {
                    return Err(ToolError::new(
                        "bad-state",
                        format!(
                            "complete cannot set state `{s}`. Use one of: {} (completed is the default).",
                            COMPLETE_STATES.join(", ")
                        ),
                    ))
                }
            };
            let text = text.ok_or_else(|| {
                ToolError::new(
                    "missing-text",
                    "complete needs `text`: your result, your question (state input-required), or why the task failed or is rejected.".to_string(),
                )
            })?;
            let artifact = match (string(obj, "artifact")?, string(obj, "artifactName")?) {
                (Some(body), name) => Some((name.unwrap_or_else(|| "result".into()), body)),
                (None, Some(_)) => {
                    return Err(ToolError::new(
                        "missing-artifact",
                        "`artifactName` names an artifact: give its text in `artifact` too."
                            .to_string(),
                    ))
                }
                (None, None) => None,
            };
            Ok(Action::Complete {
                task_id,
                state,
                text,
                artifact,
            })
        }
        "cancel" => Ok(Action::Cancel {
            task_id: need_task(task_id, "cancel")?,
            text,
        }),
        other => Err(ToolError::new(
            "unknown-action",
            format!(
                "There is no action `{other}`. The actions are: {}.{}",
                ACTIONS.join(", "),
                match other {
                    "delegate" | "ask" | "message" | "reply" | "answer" => {
                        " To give a peer work or answer on a task, use send."
                    }
                    "list" | "peers" | "agents" => " To list peers, use discover.",
                    "finish" | "done" | "respond" => {
                        " To finish a task you serve, use complete."
                    }
                    "status" | "read" => " To read a task, use get.",
                    _ => "",
                }
            ),
        )),
    }
}

fn not_a_string(field: &str) -> ToolError {
    ToolError::new("bad-arguments", format!("`{field}` must be a string."))
}

/// A string field; blank counts as absent (as the protocol reads `to`
/// and `taskId`).
fn string(obj: &Map<String, Value>, field: &str) -> Result<Option<String>, ToolError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(not_a_string(field)),
    }
}

fn need_task(task_id: Option<String>, action: &str) -> Result<String, ToolError> {
    task_id.ok_or_else(|| {
        ToolError::new(
            "missing-task",
            format!(
                "{action} needs `taskId`: the id of one of your tasks (send and wait give them)."
            ),
        )
    })
}

fn timeout(obj: &Map<String, Value>) -> Result<u64, ToolError> {
    let bad = || {
        ToolError::new(
            "bad-timeout",
            format!(
                "`timeoutSeconds` must be a whole number from 0 to {MAX_WAIT_SECONDS}. To wait longer, call wait again."
            ),
        )
    };
    match obj.get("timeoutSeconds") {
        None | Some(Value::Null) => Ok(DEFAULT_WAIT_SECONDS),
        Some(Value::Number(n)) => {
            // Models write 30.0 as often as 30.
            let secs = n
                .as_u64()
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                        .map(|f| f as u64)
                })
                .ok_or_else(bad)?;
            if secs > MAX_WAIT_SECONDS {
                return Err(bad());
            }
            Ok(secs)
        }
        Some(_) => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(v: Value) -> String {
        parse(&v).unwrap_err().code
    }

    #[test]
    fn actions_parse() {
        assert_eq!(
            parse(&json!({"action": "discover"})).unwrap(),
            Action::Discover
        );
        assert_eq!(
            parse(&json!({"action": "wait", "timeoutSeconds": 5.0})).unwrap(),
            Action::Wait { timeout_seconds: 5 }
        );
        assert_eq!(
            parse(&json!({"action": "complete", "taskId": "t", "text": "ok"})).unwrap(),
            Action::Complete {
                task_id: "t".into(),
                state: State::Completed,
                text: "ok".into(),
                artifact: None
            }
        );
    }

    #[test]
    fn mistakes_are_named() {
        assert_eq!(code(json!([])), "bad-arguments");
        assert_eq!(code(json!({})), "missing-action");
        assert_eq!(code(json!({"action": "delegate"})), "unknown-action");
        assert_eq!(code(json!({"action": "send", "text": "x"})), "missing-to");
        assert_eq!(
            code(json!({"action": "send", "to": "a", "taskId": "t", "text": "x"})),
            "to-and-task"
        );
        assert_eq!(
            code(json!({"action": "wait", "timeoutSeconds": 121})),
            "bad-timeout"
        );
        assert_eq!(
            code(json!({"action": "wait", "timeoutSeconds": -1})),
            "bad-timeout"
        );
        assert_eq!(
            code(json!({"action": "complete", "taskId": "t", "text": "x", "state": "done"})),
            "bad-state"
        );
        assert_eq!(
            code(json!({"action": "get", "token": "x"})),
            "unknown-argument"
        );
    }
}
