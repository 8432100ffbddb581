//! The MCP server's hold on the broker: the session of the agent it
//! registered, found through the client's locator (so that no broker is
//! told apart from a secret that cannot be read), waited for at start when
//! asked (`--wait`), and registered again under the same name on a new
//! connection once the old one is lost (the broker restarted), with the
//! model told so in the result of the call that found out.

use a2a_client::{ClientError, ClientOptions, CloseReason, Located, TaskQuery};
use a2a_tool::{
    excerpt, Registration, Session, SessionOptions, ToolError, ToolResult, WaitControl,
    DEFAULT_WAIT_SECONDS,
};
use parking_lot::Mutex;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a broker that is not there (yet, or again) is looked for.
const RETRY_EVERY: Duration = Duration::from_millis(100);

/// How long one call looks for the broker again once its connection is
/// lost: a restarted broker listens again within a second or two, and a
/// call should not hold the model much longer than that when none comes
/// (the next call looks again).
const RECONNECT_FOR: Duration = Duration::from_secs(10);

/// The newest tasks of the agent that the notice of a restart looks through
/// for open ones (listed by id and state: no peer's text in it).
const TASKS_LISTED: u64 = 20;

/// The broker, the registration to repeat, and the session in use.
pub struct Link {
    broker: Located,
    /// As asked (`--as`): a new registration asks for this name again.
    reg: Registration,
    session: Mutex<Arc<Session>>,
    /// Held while one call connects again, so that calls under way at
    /// once register the agent once.
    reconnecting: Mutex<()>,
}

/// How a call that found the connection lost got a new one.
struct Reconnected {
    session: Arc<Session>,
    /// What the model is told, for the call that registered the agent
    /// again (another call under way at the same time says nothing more).
    notice: Option<String>,
}

impl Link {
    /// Connects (waiting up to `wait` for a broker to listen) and
    /// registers; `Err` is the line to print.
    pub fn start(broker: Located, reg: Registration, wait: Duration) -> Result<Link, String> {
        // A wait too long to add to the clock is a wait without end.
        let deadline = Instant::now().checked_add(wait);
        let mut said = false;
        let session = register_within(
            &broker,
            &reg.name,
            deadline,
            &|| false,
            &mut |e| {
                if !said && matches!(e, ClientError::NoBroker(_)) {
                    said = true;
                    eprintln!(
                        "a2a-broker mcp: no broker is listening at {} yet: waiting up to {} s \
                         for `a2a-broker serve --socket {}` to start",
                        broker.socket.display(),
                        wait.as_secs(),
                        broker.given
                    );
                }
            },
            |client| Session::register(client, &reg, SessionOptions::default()),
        )?;
        if said {
            eprintln!(
                "a2a-broker mcp: a broker is listening at {}",
                broker.socket.display()
            );
        }
        if session.agent().id() != reg.name {
            eprintln!("{}", renamed_line(&reg.name, session.agent().id()));
        }
        Ok(Link {
            broker,
            reg,
            session: Mutex::new(Arc::new(session)),
            reconnecting: Mutex::new(()),
        })
    }

    /// The session in use now.
    pub fn session(&self) -> Arc<Session> {
        self.session.lock().clone()
    }

    /// The name asked for with `--as`.
    pub fn asked(&self) -> &str {
        &self.reg.name
    }

    /// Runs one tool call on a live connection: a lost one is replaced
    /// first, and one lost during the call is replaced after it (a read is
    /// then run again; anything else is reported as perhaps not done).
    pub fn call(&self, args: &Value, control: &dyn WaitControl) -> ToolResult {
        let started = Instant::now();
        let action = args.get("action").and_then(Value::as_str);
        // A wait looks for the broker as long as it would have waited.
        let wait_for = match action {
            Some("wait") => wait_seconds(args).map(Duration::from_secs),
            _ => None,
        };
        let look_for = |left: Duration| left.max(RECONNECT_FOR);
        let mut session = self.session();
        let mut notice = None;
        if is_lost(&session) {
            let looked = look_for(wait_for.unwrap_or_default());
            match self.reconnect(&session, looked, control) {
                Ok(r) => {
                    session = r.session;
                    notice = r.notice;
                }
                Err(e) => return e,
            }
        }
        let result = session.call_with(args, control);
        if !(is_unavailable(&result) && is_lost(&session)) {
            return with_notice(notice, result);
        }
        // The connection broke under this call: a wait keeps waiting for
        // what is left of its time once connected again.
        let left = wait_for.map(|w| w.saturating_sub(started.elapsed()));
        let look_for = look_for(left.unwrap_or_default());
        let r = match self.reconnect(&session, look_for, control) {
            Ok(r) => r,
            Err(e) => return e,
        };
        let notice = r.notice.or(notice);
        match (action, left) {
            (Some("discover" | "get"), _) => {
                with_notice(notice, r.session.call_with(args, control))
            }
            (Some("wait"), Some(left)) if !control.cancelled() => {
                let mut again = args.clone();
                again["timeoutSeconds"] = left.as_secs().into();
                with_notice(notice, r.session.call_with(&again, control))
            }
            (Some("wait"), _) => with_notice(
                notice,
                ToolResult {
                    text: "Nothing new arrived before the connection was lost.".into(),
                    structured: serde_json::json!({"events": []}),
                    is_error: false,
                },
            ),
            _ => with_notice(
                notice,
                lost_under_call(&ToolError::new(
                    "broker-restarted",
                    "The connection to the A2A broker broke while it made this call, so the \
                     call may or may not have been done: check with get(taskId) (or discover) \
                     before you repeat it."
                        .to_string(),
                )),
            ),
        }
    }

    /// A new connection and registration in place of `dead` (unless another
    /// call made them already), looking for the broker for up to `look_for`.
    /// `Err` is the result to give the model: no broker came back.
    fn reconnect(
        &self,
        dead: &Arc<Session>,
        look_for: Duration,
        control: &dyn WaitControl,
    ) -> Result<Reconnected, ToolResult> {
        let _one = self.reconnecting.lock();
        let now = self.session();
        if !Arc::ptr_eq(&now, dead) {
            return Ok(Reconnected {
                session: now,
                notice: None,
            });
        }
        let reason = dead.agent().client().close_reason();
        let why = reason
            .as_ref()
            .map_or_else(|| "closed".to_string(), |r| r.to_string());
        eprintln!(
            "a2a-broker mcp: the connection to the broker at {} was lost ({why}): connecting again",
            self.broker.socket.display()
        );
        let session = register_within(
            &self.broker,
            &self.reg.name,
            Instant::now().checked_add(look_for),
            &|| control.cancelled(),
            &mut |_| {},
            |client| dead.register_again(client, &self.reg),
        );
        let session = match session {
            Ok(s) => Arc::new(s),
            Err(line) => {
                eprintln!("a2a-broker mcp: {line}");
                return Err(unreachable(&line, look_for));
            }
        };
        let name = session.agent().id().to_owned();
        if name == self.reg.name {
            eprintln!("a2a-broker mcp: registered again as {name}");
        } else {
            eprintln!("{}", renamed_line(&self.reg.name, &name));
        }
        let notice = self.restart_notice(&session, reason.as_ref());
        *self.session.lock() = session.clone();
        Ok(Reconnected {
            session,
            notice: Some(notice),
        })
    }

    /// What the model hears once the agent is registered again: that the
    /// broker restarted (or, when it said why, that it closed the
    /// connection), its name, and its open tasks as the broker has them.
    fn restart_notice(&self, session: &Session, reason: Option<&CloseReason>) -> String {
        let agent = session.agent();
        let name = agent.id();
        let what = match reason {
            Some(CloseReason::Fatal(e)) => {
                format!("The A2A broker closed this tool's connection ({e})")
            }
            _ => "The A2A broker restarted (this tool lost its connection to it)".to_string(),
        };
        let mut t = format!(
            "{what}, and you are registered again as agent \"{name}\" (context {}).",
            agent.context_id()
        );
        if name != self.reg.name {
            t.push_str(&format!(
                " The name \"{}\" is held by another agent now, so peers reach you as \"{name}\".",
                self.reg.name
            ));
        }
        let page = agent.list_tasks(TaskQuery {
            limit: Some(TASKS_LISTED),
            ..TaskQuery::default()
        });
        match page {
            Ok(page) => {
                let open: Vec<String> = page
                    .tasks
                    .iter()
                    .filter(|t| !t.status.state.is_terminal())
                    .map(|t| {
                        let side = if t.agent_name == name {
                            "you serve it"
                        } else {
                            "you asked for it"
                        };
                        format!("{} ({side}; {})", t.id, t.status.state.as_str())
                    })
                    .collect();
                if open.is_empty() {
                    t.push_str(" You have no open tasks on the broker now.");
                } else {
                    t.push_str(&format!(
                        " Your open tasks, as the broker has them now: {}.",
                        open.join("; ")
                    ));
                }
            }
            Err(_) => t.push_str(" Your tasks are as the broker has them now."),
        }
        t.push_str(
            " Updates sent while the broker was down may not come through wait: \
             get(taskId) shows where a task stands.",
        );
        t
    }
}

/// Connects and registers with `register`, trying again every
/// [`RETRY_EVERY`] until `deadline` (`None`: no end) or `stop` on what a
/// broker that is starting or restarting answers: nothing listening, a
/// connection closed at once (a broker being killed), a secret file not
/// written yet or still the last broker's. `on_retry` hears each failure
/// tried again. `Err` is the line that says the last failure; a
/// registration the broker refuses is not tried again.
fn register_within(
    broker: &Located,
    name: &str,
    deadline: Option<Instant>,
    stop: &dyn Fn() -> bool,
    on_retry: &mut dyn FnMut(&ClientError),
    register: impl Fn(&a2a_client::Client) -> Result<Session, ClientError>,
) -> Result<Session, String> {
    loop {
        let e = match broker.connect(None, ClientOptions::default()) {
            Ok(client) => match register(&client) {
                Ok(session) => return Ok(session),
                Err(e @ ClientError::Rpc(_)) => return Err(format!("cannot register {name}: {e}")),
                Err(e) => e,
            },
            Err(e) => e,
        };
        if deadline.is_some_and(|d| Instant::now() >= d) || stop() {
            return Err(connect_error(broker, e));
        }
        on_retry(&e);
        std::thread::sleep(RETRY_EVERY);
    }
}

/// Has the session's connection ended?
fn is_lost(session: &Session) -> bool {
    session.agent().client().close_reason().is_some()
}

/// Did the call fail because the broker could not be reached?
fn is_unavailable(r: &ToolResult) -> bool {
    r.is_error && r.structured["error"]["code"] == "broker-unavailable"
}

/// A wait's `timeoutSeconds` as the tool reads it (absent: the default).
fn wait_seconds(args: &Value) -> Option<u64> {
    match args.get("timeoutSeconds") {
        None | Some(Value::Null) => Some(DEFAULT_WAIT_SECONDS),
        Some(v) => v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)),
    }
}

fn with_notice(notice: Option<String>, mut r: ToolResult) -> ToolResult {
    if let Some(n) = notice {
        r.text = format!("{n}\n\n{}", r.text);
    }
    r
}

fn lost_under_call(e: &ToolError) -> ToolResult {
    ToolResult {
        text: e.message.clone(),
        structured: e.structured(),
        is_error: true,
    }
}

/// The broker is gone and did not come back in time.
fn unreachable(line: &str, looked: Duration) -> ToolResult {
    lost_under_call(&ToolError::new(
        "broker-unavailable",
        format!(
            "The A2A broker cannot be reached ({line}; looked for {} s). Other agents cannot \
             be contacted now: carry on without them. Your next call looks for the broker again.",
            looked.as_secs()
        ),
    ))
}

/// A connect failure as a line: no broker and a bad secret say what they
/// are (the locator's words, as `call` and `watch` print them).
fn connect_error(broker: &Located, e: ClientError) -> String {
    match e {
        ClientError::NoBroker(_) | ClientError::Secret(_) => e.to_string(),
        e => format!("cannot connect to {}: {e}", broker.socket.display()),
    }
}

/// The stderr line for a name the broker suffixed.
fn renamed_line(asked: &str, got: &str) -> String {
    format!(
        "a2a-broker mcp: the name {} is held by another live agent: registered as {got} \
         (peers reach this agent as {got})",
        excerpt(asked)
    )
}
