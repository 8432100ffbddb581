//! The arguments of one call, read from the JSON a model wrote: checked
//! against the schema by hand (models send what they send), each mistake
//! answered with what to write instead.

use crate::error::ToolError;
use crate::schema::{ACTIONS, COMPLETE_STATES, DEFAULT_LEASE_TTL_SECONDS};
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
    /// Leases `paths` (exclusive unless `exclusive` is false), waiting up
    /// to `wait_seconds` for a conflicting lease to end.
    Lease {
        paths: Vec<String>,
        ttl_seconds: u64,
        exclusive: bool,
        reason: Option<String>,
        wait_seconds: u64,
    },
    Release {
        lease_id: String,
    },
}

const FIELDS: [&str; 12] = [
    "action",
    "to",
    "text",
    "taskId",
    "timeoutSeconds",
    "state",
    "artifact",
    "artifactName",
    "paths",
    "ttlSeconds",
    "exclusive",
    "leaseId",
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
                "There is no argument {}. The arguments are: {}.",
                excerpt(k),
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
        "complete" => complete(obj, text, task_id),
        "cancel" => Ok(Action::Cancel {
            task_id: need_task(task_id, "cancel")?,
            text,
        }),
        "lease" => lease(obj, text),
        "release" => Ok(Action::Release {
            lease_id: string(obj, "leaseId")?.ok_or_else(|| {
                ToolError::new(
                    "missing-lease",
                    "release needs `leaseId`: the id lease gave you.".to_string(),
                )
            })?,
        }),
        other => Err(unknown_action(other)),
    }
}

/// `complete`: the state (completed unless one of the others is named),
/// the text, and an artifact if one is given.
fn complete(
    obj: &Map<String, Value>,
    text: Option<String>,
    task_id: Option<String>,
) -> Result<Action, ToolError> {
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
                    "complete cannot set state {}. Use one of: {} (completed is the default).",
                    excerpt(&s),
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
                "`artifactName` names an artifact: give its text in `artifact` too.".to_string(),
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

/// `lease`: the paths, their time to live, exclusive unless said, the
/// reason, and how long to wait for a conflict (none unless asked).
fn lease(obj: &Map<String, Value>, text: Option<String>) -> Result<Action, ToolError> {
    Ok(Action::Lease {
        paths: paths(obj)?,
        ttl_seconds: ttl(obj)?,
        exclusive: match obj.get("exclusive") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(ToolError::new(
                    "bad-arguments",
                    "`exclusive` must be true (the default: nobody else may lease these paths) or false (a shared lease, for reading).".to_string(),
                ))
            }
        },
        reason: text,
        // A lease does not wait unless asked to.
        wait_seconds: if obj.get("timeoutSeconds").is_some_and(|v| !v.is_null()) {
            timeout(obj)?
        } else {
            0
        },
    })
}

/// An action that does not exist, with the one meant where it is guessable.
fn unknown_action(other: &str) -> ToolError {
    ToolError::new(
        "unknown-action",
        format!(
            "There is no action {}. The actions are: {}.{}",
            excerpt(other),
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
                "lock" | "claim" | "reserve" | "acquire" => {
                    " To reserve files before you edit them, use lease."
                }
                "unlock" | "unclaim" | "free" => " To give up a lease, use release.",
                _ => "",
            }
        ),
    )
}

/// The most characters of a string the model wrote that an error quotes
/// back (an unknown action, argument, state or tool name): enough to
/// recognise the mistake, while a mistaken megabyte does not come back into
/// the model's context.
pub const EXCERPT_CHARS: usize = 40;

/// `s` quoted for an error message: in backticks, with control and
/// invisible characters escaped (`\n`, `\u{200b}`, and quotes), and cut to
/// [`EXCERPT_CHARS`] characters with its full length said.
pub fn excerpt(s: &str) -> String {
    match s.char_indices().nth(EXCERPT_CHARS) {
        None => format!("`{}`", s.escape_debug()),
        Some((cut, _)) => format!(
            "`{}`… (cut: {} characters in all)",
            s[..cut].escape_debug(),
            s.chars().count()
        ),
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

/// `paths`: a non-empty array of strings (the broker checks their form).
fn paths(obj: &Map<String, Value>) -> Result<Vec<String>, ToolError> {
    let bad = || {
        ToolError::new(
            "bad-paths",
            "lease needs `paths`: the files to reserve, relative to the project, e.g. [\"src/parser.rs\"] (a trailing / covers a directory, * and ** match names).".to_string(),
        )
    };
    let Some(Value::Array(items)) = obj.get("paths") else {
        return Err(bad());
    };
    let paths: Vec<String> = items
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    if paths.is_empty() {
        return Err(bad());
    }
    Ok(paths)
}

/// `ttlSeconds`: a whole number of seconds (the broker checks its range).
fn ttl(obj: &Map<String, Value>) -> Result<u64, ToolError> {
    match obj.get("ttlSeconds") {
        None | Some(Value::Null) => Ok(DEFAULT_LEASE_TTL_SECONDS),
        Some(v) => whole(v).filter(|n| *n > 0).ok_or_else(|| {
            ToolError::new(
                "bad-ttl",
                format!("`ttlSeconds` must be a whole number of seconds above 0 (default {DEFAULT_LEASE_TTL_SECONDS})."),
            )
        }),
    }
}

/// A whole number ≥ 0; models write 30.0 as often as 30.
fn whole(v: &Value) -> Option<u64> {
    let n = v.as_number()?;
    n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f <= u64::MAX as f64)
            .map(|f| f as u64)
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
        Some(v) => whole(v).filter(|s| *s <= MAX_WAIT_SECONDS).ok_or_else(bad),
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
        assert_eq!(code(json!({"action": "lease"})), "bad-paths");
        assert_eq!(code(json!({"action": "lease", "paths": []})), "bad-paths");
        assert_eq!(code(json!({"action": "lease", "paths": [1]})), "bad-paths");
        assert_eq!(
            code(json!({"action": "lease", "paths": ["a"], "ttlSeconds": 0})),
            "bad-ttl"
        );
        assert_eq!(
            code(json!({"action": "lease", "paths": ["a"], "exclusive": "yes"})),
            "bad-arguments"
        );
        assert_eq!(code(json!({"action": "release"})), "missing-lease");
        assert_eq!(code(json!({"action": "lock"})), "unknown-action");
    }

    #[test]
    fn what_the_model_wrote_is_quoted_back_short_and_escaped() {
        let huge = "x".repeat(1 << 20);
        for args in [
            json!({"action": huge}),
            json!({"action": "get", huge.clone(): 1}),
            json!({"action": "complete", "taskId": "t", "text": "x", "state": huge}),
        ] {
            let e = parse(&args).unwrap_err();
            assert!(e.message.len() < 400, "{} bytes", e.message.len());
            assert!(
                e.message.contains("1048576 characters in all"),
                "{}",
                e.message
            );
        }
        let e = parse(&json!({"action": "a\"b\nc\u{200b}d"})).unwrap_err();
        assert!(
            e.message.starts_with(
                r#"There is no action `a\"b\nc\u{200b}d`. The actions are: discover, send,"#
            ),
            "{}",
            e.message
        );
        // Cut on a character boundary, whatever the script.
        assert_eq!(
            excerpt(&"é".repeat(EXCERPT_CHARS + 1)),
            format!(
                "`{}`… (cut: 41 characters in all)",
                "é".repeat(EXCERPT_CHARS)
            )
        );
        assert_eq!(
            excerpt(&"é".repeat(EXCERPT_CHARS)),
            format!("`{}`", "é".repeat(EXCERPT_CHARS))
        );
    }

    #[test]
    fn a_lease_defaults_to_exclusive_without_waiting() {
        assert_eq!(
            parse(&json!({"action": "lease", "paths": ["src/a.rs"]})).unwrap(),
            Action::Lease {
                paths: vec!["src/a.rs".into()],
                ttl_seconds: DEFAULT_LEASE_TTL_SECONDS,
                exclusive: true,
                reason: None,
                wait_seconds: 0,
            }
        );
        assert_eq!(
            parse(
                &json!({"action": "lease", "paths": ["src/"], "exclusive": false,
                          "ttlSeconds": 60.0, "timeoutSeconds": 5, "text": "read"})
            )
            .unwrap(),
            Action::Lease {
                paths: vec!["src/".into()],
                ttl_seconds: 60,
                exclusive: false,
                reason: Some("read".into()),
                wait_seconds: 5,
            }
        );
    }
}
