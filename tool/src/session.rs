//! [`Session`]: the tool bound to one registered agent. `call(args)` runs
//! one action through `a2a-client` and answers with text for the model, a
//! structured value for programs, and an error flag.

use crate::args::{self, Action};
use crate::error::ToolError;
use crate::render::{self, nearest, peer_text, UNTRUSTED_NOTE};
use crate::DEFAULT_TURN_CAP;
use a2a_client::proto::types::{AgentKind, LeaseReleasedParams, StreamEvent};
use a2a_client::{
    agent_card, task_message, A2aErrorCode, Agent, AgentCard, Artifact, Client, ClientError,
    Delivery, Event, Message, Part, State, Task, TaskQuery,
};
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What one call gives back.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// For the model: what happened and what to do next.
    pub text: String,
    /// For programs: the action's result (see the crate docs), or
    /// `{"error": {code, message}}`.
    pub structured: Value,
    /// The call did not do what was asked (a tool error, with the fix in
    /// `text`).
    pub is_error: bool,
}

impl ToolResult {
    fn ok(text: String, structured: Value) -> ToolResult {
        ToolResult {
            text,
            structured,
            is_error: false,
        }
    }

    fn error(e: ToolError) -> ToolResult {
        ToolResult {
            structured: e.structured(),
            text: e.message,
            is_error: true,
        }
    }

    /// `{"text", "structured", "isError"}`, as the adapters hand it on.
    pub fn to_json(&self) -> Value {
        json!({"text": self.text, "structured": self.structured, "isError": self.is_error})
    }
}

/// What a caller lets a `wait` know while it blocks: whether to stop early
/// (an aborted tool call) and where to report progress.
pub trait WaitControl: Sync {
    /// True once the call should end: the wait returns what it has.
    fn cancelled(&self) -> bool {
        false
    }
    /// Called about once a second while a wait blocks.
    fn progress(&self, _waited: Duration, _limit: Duration) {}
}

/// A wait nobody interrupts.
pub struct NoControl;
impl WaitControl for NoControl {}

/// How often a blocking wait looks at its [`WaitControl`]: the latency of
/// an abort (a wait on the agent's local queue costs nothing per slice).
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// A session's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionOptions {
    /// Messages this agent may put on one task (a new task's first message,
    /// follow-ups, questions) before the tool refuses more and asks it to
    /// settle the task. Completing, failing and canceling stay allowed.
    pub turn_cap: u32,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            turn_cap: DEFAULT_TURN_CAP,
        }
    }
}

/// How to register the agent a session is bound to.
#[derive(Debug, Clone, Default)]
pub struct Registration {
    /// The context (session) to register under.
    pub context_id: String,
    /// The name asked for (the broker may add a suffix).
    pub name: String,
    /// What peers read about it in `discover`.
    pub description: String,
    /// Subagent (the default) or parent (ADR 0164).
    pub kind: Option<AgentKind>,
}

/// What the session remembers of a task: its parties and last state.
#[derive(Debug, Clone)]
struct Known {
    requester: String,
    worker: String,
    state: State,
}

/// The tool bound to one agent. `Send + Sync`: calls may come from any
/// thread (an MCP server's, a Node worker's); they do not hold a lock while
/// talking to the broker.
pub struct Session {
    agent: Agent,
    options: SessionOptions,
    known: Mutex<HashMap<String, Known>>,
    /// Messages this agent put on each task.
    turns: Mutex<HashMap<String, u32>>,
}

/// Which side of a task this agent is on.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    Requester,
    Worker,
}

impl Session {
    /// A session over an agent registered by the caller (a push agent: the
    /// tool reads its events from the client's queue).
    pub fn new(agent: Agent) -> Session {
        Session::with_options(agent, SessionOptions::default())
    }

    /// [`Session::new`] with explicit options.
    pub fn with_options(agent: Agent, options: SessionOptions) -> Session {
        Session {
            agent,
            options,
            known: Mutex::new(HashMap::new()),
            turns: Mutex::new(HashMap::new()),
        }
    }

    /// Registers an agent on `client` as `r` says and binds a session to it.
    pub fn register(
        client: &Client,
        r: &Registration,
        options: SessionOptions,
    ) -> Result<Session, ClientError> {
        let card = AgentCard {
            description: r.description.clone(),
            kind: r.kind,
            ..agent_card(&r.name)
        };
        let agent = client.register(&r.context_id, card, Delivery::Push)?;
        Ok(Session::with_options(agent, options))
    }

    /// The agent it is bound to.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// Runs one tool call.
    pub fn call(&self, args: &Value) -> ToolResult {
        self.call_with(args, &NoControl)
    }

    /// Runs one tool call; a `wait` watches `control`.
    pub fn call_with(&self, args: &Value, control: &dyn WaitControl) -> ToolResult {
        let action = match args::parse(args) {
            Ok(a) => a,
            Err(e) => return ToolResult::error(e),
        };
        let result = match action {
            Action::Discover => self.discover(),
            Action::SendNew { to, text } => self.send_new(&to, &text),
            Action::SendOn { task_id, text } => self.send_on(&task_id, &text),
            Action::Get { task_id } => self.get(&task_id),
            Action::Wait { timeout_seconds } => self.wait(timeout_seconds, control),
            Action::Complete {
                task_id,
                state,
                text,
                artifact,
            } => self.complete(&task_id, state, &text, artifact),
            Action::Cancel { task_id, text } => self.cancel(&task_id, text.as_deref()),
            Action::Lease {
                paths,
                ttl_seconds,
                exclusive,
                reason,
                wait_seconds,
            } => self.lease(paths, ttl_seconds, exclusive, reason, wait_seconds),
            Action::Release { lease_id } => self.release(&lease_id),
        };
        result.unwrap_or_else(ToolResult::error)
    }

    fn me(&self) -> &str {
        self.agent.id()
    }

    // ---- discover -------------------------------------------------------

    fn discover(&self) -> Result<ToolResult, ToolError> {
        let cards = self.agent.list_agents(None).map_err(|e| self.failed(e))?;
        let peers: Vec<Value> = cards
            .iter()
            .map(|c| {
                json!({
                    "name": c.name,
                    "description": c.description,
                    "kind": kind_name(c.kind),
                    "skills": c.skills.iter().map(|s| json!({
                        "id": s.id, "name": s.name, "description": s.description, "tags": s.tags,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let text = if cards.is_empty() {
            "No peers are registered right now, so nobody can take a task. Do the work yourself, or discover again later.".to_string()
        } else {
            let mut t = format!(
                "{} you can send tasks to (descriptions are written by the peers themselves):\n",
                count(cards.len(), "peer")
            );
            for c in &cards {
                t.push_str(&format!("- {}", c.name));
                if !c.description.is_empty() {
                    t.push_str(&format!(": {}", one_line(&c.description)));
                }
                if !c.skills.is_empty() {
                    let skills: Vec<String> = c
                        .skills
                        .iter()
                        .map(|s| {
                            if s.description.is_empty() {
                                s.name.clone()
                            } else {
                                format!("{} ({})", s.name, one_line(&s.description))
                            }
                        })
                        .collect();
                    t.push_str(&format!(" Skills: {}.", skills.join(", ")));
                }
                t.push('\n');
            }
            t.push_str(
                "Next: send(to=<name>, text=<the task>) to delegate, then wait for the answer.",
            );
            t
        };
        Ok(ToolResult::ok(text, json!({ "peers": peers })))
    }

    // ---- send -----------------------------------------------------------

    fn send_new(&self, to: &str, text: &str) -> Result<ToolResult, ToolError> {
        if to == self.me() {
            return Err(ToolError::new(
                "send-to-self",
                format!("\"{to}\" is you. Send tasks to a peer: discover lists them."),
            ));
        }
        let message = a2a_client::message_to(to, text);
        let task = match self.agent.send(message, None) {
            Ok(t) => t,
            Err(e) if e.a2a_code() == Some(A2aErrorCode::UnknownAgent) => {
                return Err(self.unknown_peer(to))
            }
            Err(e) => return Err(self.failed(e)),
        };
        self.remember(&task);
        *self.turns.lock().entry(task.id.clone()).or_insert(0) += 1;
        let state = task.status.state;
        Ok(ToolResult::ok(
            format!(
                "Sent task {id} to {to} (state: {state}). {to} has not answered yet.\nNext: wait to hear back (answers, questions and the result arrive there); keep taskId \"{id}\" to follow up, get or cancel it.",
                id = task.id,
                state = state.as_str()
            ),
            json!({"taskId": task.id, "state": state.as_str()}),
        ))
    }

    fn send_on(&self, task_id: &str, text: &str) -> Result<ToolResult, ToolError> {
        self.check_turns(task_id)?;
        let task = match self.agent.send(task_message(task_id, text), None) {
            Ok(t) => t,
            Err(e) => return Err(self.task_error(e, task_id, "send a message on")),
        };
        self.remember(&task);
        *self.turns.lock().entry(task.id.clone()).or_insert(0) += 1;
        let role = self.role(&task);
        let peer = counterpart(&task, role);
        let state = task.status.state;
        let what = match role {
            Role::Requester => format!(
                "Sent your message on task {task_id} to {peer}; the task is {}.",
                state.as_str()
            ),
            Role::Worker => format!(
                "Sent your message on task {task_id} to {peer} (the requester); the task stays {}.",
                state.as_str()
            ),
        };
        Ok(ToolResult::ok(
            format!("{what}\nNext: {}", next_step(role, state, task_id, peer)),
            json!({"taskId": task.id, "state": state.as_str()}),
        ))
    }

    // ---- get ------------------------------------------------------------

    fn get(&self, task_id: &str) -> Result<ToolResult, ToolError> {
        let task = self
            .agent
            .get_task(task_id, None)
            .map_err(|e| self.task_error(e, task_id, "read"))?;
        self.remember(&task);
        let role = self.role(&task);
        let peer = counterpart(&task, role);
        let state = task.status.state;
        let history: Vec<Value> = task
            .history
            .iter()
            .map(|m| json!({"from": m.from.clone().unwrap_or_default(), "text": message_text(m)}))
            .collect();
        let artifacts: Vec<Value> = task
            .artifacts
            .iter()
            .map(|a| json!({"name": artifact_name(a), "text": parts_text(&a.parts)}))
            .collect();
        let mut text = match role {
            Role::Requester => format!(
                "Task {task_id}: you asked {peer}; it is {}.",
                state.as_str()
            ),
            Role::Worker => format!(
                "Task {task_id}: {peer} asked you; it is {}.",
                state.as_str()
            ),
        };
        let mut quoted = false;
        if !task.history.is_empty() {
            text.push_str("\nMessages, oldest first:");
            for (i, m) in task.history.iter().enumerate() {
                let from = m.from.as_deref().unwrap_or("?");
                if from == self.me() {
                    text.push_str(&format!("\n{}. you: {}", i + 1, message_text(m)));
                } else {
                    quoted = true;
                    text.push_str(&format!(
                        "\n{}. {from}:\n{}",
                        i + 1,
                        peer_text(from, &message_text(m))
                    ));
                }
            }
        }
        for a in &task.artifacts {
            quoted = true;
            text.push_str(&format!(
                "\nArtifact \"{}\" from {}:\n{}",
                artifact_name(a),
                task.agent_name,
                peer_text(&task.agent_name, &parts_text(&a.parts))
            ));
        }
        text.push_str(&format!(
            "\nNext: {}",
            next_step(role, state, task_id, peer)
        ));
        if quoted {
            text = format!("{UNTRUSTED_NOTE}\n{text}");
        }
        Ok(ToolResult::ok(
            text,
            json!({
                "taskId": task.id,
                "state": state.as_str(),
                "requester": task.requester_name,
                "worker": task.agent_name,
                "history": history,
                "artifacts": artifacts,
            }),
        ))
    }

    // ---- wait -----------------------------------------------------------

    fn wait(
        &self,
        timeout_seconds: u64,
        control: &dyn WaitControl,
    ) -> Result<ToolResult, ToolError> {
        let limit = Duration::from_secs(timeout_seconds);
        let start = Instant::now();
        let mut last_report = start;
        let mut events = Vec::new();
        loop {
            let left = limit.saturating_sub(start.elapsed());
            let got = self
                .agent
                .wait(left.min(WAIT_SLICE))
                .map_err(|e| self.failed(e))?;
            if !got.is_empty() {
                events = got;
                break;
            }
            if start.elapsed() >= limit || control.cancelled() {
                break;
            }
            if last_report.elapsed() >= Duration::from_secs(1) {
                last_report = Instant::now();
                control.progress(start.elapsed(), limit);
            }
        }
        if events.is_empty() {
            let why = if control.cancelled() && start.elapsed() < limit {
                format!(
                    "The wait was stopped after {} s, with no updates.",
                    start.elapsed().as_secs()
                )
            } else {
                format!("No updates within {timeout_seconds} s.")
            };
            let open = self.open_tasks();
            let next = if open.is_empty() {
                "You have no open tasks: send one (discover lists peers), or wait again to be given one.".to_string()
            } else {
                format!("Your open tasks: {}. wait again to keep listening, or get(taskId) to check one.", open.join("; "))
            };
            return Ok(ToolResult::ok(
                format!("{why}\n{next}"),
                json!({"events": []}),
            ));
        }
        let mut updates = Vec::new();
        let mut out = Vec::new();
        let mut dropped = 0u64;
        let mut quoted = false;
        for ev in &events {
            match self.describe(ev) {
                Described::Update {
                    text,
                    next,
                    value,
                    quotes,
                } => {
                    quoted |= quotes;
                    updates.push((text, next));
                    out.push(value);
                }
                Described::Dropped(n) => dropped += n,
                Described::Ignored => {}
            }
        }
        let lines: Vec<String> = updates
            .iter()
            .enumerate()
            .map(|(i, (text, next))| {
                let task = &out[i]["taskId"];
                let later = out[i + 1..].iter().any(|v| &v["taskId"] == task);
                if later {
                    text.clone()
                } else {
                    format!("{text}\n   Next: {next}")
                }
            })
            .collect();
        let mut text = String::new();
        if quoted {
            text.push_str(UNTRUSTED_NOTE);
            text.push('\n');
        }
        text.push_str(&format!("{}:", count(lines.len(), "update")));
        for (i, l) in lines.iter().enumerate() {
            text.push_str(&format!("\n{}. {l}", i + 1));
        }
        if dropped > 0 {
            text.push_str(&format!(
                "\n{dropped} older updates were dropped because they were not read in time: get(taskId) shows each task as it is now."
            ));
        }
        let mut structured = json!({ "events": out });
        if dropped > 0 {
            structured["dropped"] = dropped.into();
        }
        Ok(ToolResult::ok(text, structured))
    }

    /// One event as a model reads it.
    fn describe(&self, ev: &Event) -> Described {
        match ev {
            Event::TaskEvent(p) => match &p.event {
                StreamEvent::Status(s) => {
                    let task_id = s.task_id.as_str();
                    let state = s.status.state;
                    if let Some(m) = &s.status.message {
                        self.learn_from_message(task_id, m, state);
                    }
                    let known = self.known_or_fetch(task_id);
                    if known.is_some() {
                        self.set_state(task_id, state);
                    }
                    let role = known
                        .as_ref()
                        .map(|k| {
                            if k.worker == self.me() {
                                Role::Worker
                            } else {
                                Role::Requester
                            }
                        })
                        .unwrap_or(Role::Requester);
                    let peer = known
                        .as_ref()
                        .map(|k| match role {
                            Role::Worker => k.requester.clone(),
                            Role::Requester => k.worker.clone(),
                        })
                        .unwrap_or_default();
                    let msg = s.status.message.as_ref();
                    let from = msg
                        .and_then(|m| m.from.clone())
                        .unwrap_or_else(|| peer.clone());
                    let body = msg.map(|m| message_text(m)).unwrap_or_default();
                    let head = match (role, state) {
                        (Role::Worker, State::Submitted) => {
                            format!("New task {task_id} from {peer} for you (submitted).")
                        }
                        (Role::Worker, State::Canceled) => {
                            format!("{peer} canceled task {task_id}.")
                        }
                        (Role::Worker, _) => {
                            format!("Task {task_id} from {peer} is {}.", state.as_str())
                        }
                        (Role::Requester, State::InputRequired) => {
                            format!("Task {task_id} for {peer} is input-required: {peer} asks you something.")
                        }
                        (Role::Requester, _) => {
                            format!("Task {task_id} for {peer} is {}.", state.as_str())
                        }
                    };
                    let mut text = head;
                    let quotes = !body.is_empty() && from != self.me();
                    if !body.is_empty() {
                        if quotes {
                            text.push_str(&format!(" {from} wrote:\n{}", peer_text(&from, &body)));
                        } else {
                            text.push_str(&format!(" You wrote: {body}"));
                        }
                    }
                    Described::Update {
                        text,
                        next: next_step(role, state, task_id, &peer),
                        value: json!({"taskId": task_id, "state": state.as_str(), "from": from, "text": body}),
                        quotes,
                    }
                }
                StreamEvent::Artifact(a) => {
                    let task_id = a.task_id.as_str();
                    let known = self.known_or_fetch(task_id);
                    let (peer, state) = known
                        .map(|k| (k.worker, k.state))
                        .unwrap_or_else(|| (String::new(), State::Working));
                    let name = artifact_name(&a.artifact);
                    let body = parts_text(&a.artifact.parts);
                    let verb = if a.append { "added to" } else { "attached" };
                    Described::Update {
                        text: format!(
                            "{peer} {verb} artifact \"{name}\" on task {task_id}:\n{}",
                            peer_text(&peer, &body)
                        ),
                        next: if state.is_terminal() {
                            "nothing more to do on this task.".to_string()
                        } else {
                            format!(
                                "the task is still {}: wait for {peer} to finish it.",
                                state.as_str()
                            )
                        },
                        value: json!({
                            "taskId": task_id, "state": state.as_str(), "from": peer, "text": "",
                            "artifact": {"name": name, "text": body},
                        }),
                        quotes: true,
                    }
                }
            },
            Event::Push(_) => Described::Ignored,
            Event::Lagged(l) => Described::Dropped(l.dropped),
            Event::LeaseReleased(p) => describe_lease_end(p),
        }
    }

    // ---- complete -------------------------------------------------------

    fn complete(
        &self,
        task_id: &str,
        state: State,
        text: &str,
        artifact: Option<(String, String)>,
    ) -> Result<ToolResult, ToolError> {
        if state == State::InputRequired {
            self.check_turns(task_id)?;
        }
        if let Some((name, body)) = &artifact {
            let a = Artifact {
                artifact_id: a2a_client::new_id(),
                name: Some(name.clone()),
                description: None,
                parts: vec![Part::text(body.as_str())],
                metadata: None,
            };
            self.agent
                .add_artifact(task_id, a, false, true)
                .map_err(|e| self.task_error(e, task_id, "complete"))?;
        }
        let task = self
            .agent
            .set_status(task_id, state, Some(task_message(task_id, text)))
            .map_err(|e| self.task_error(e, task_id, "complete"))?;
        self.remember(&task);
        if state == State::InputRequired {
            *self.turns.lock().entry(task.id.clone()).or_insert(0) += 1;
        }
        let peer = &task.requester_name;
        let what = match state {
            State::InputRequired => format!(
                "Task {task_id} is input-required: your question went to {peer}.\nNext: wait for the answer (it arrives as a message on this task); then carry on and complete it."
            ),
            State::Completed => format!(
                "Task {task_id} is completed; {peer} has your result{}.\nNext: nothing more on this task. wait for other tasks, or carry on with your own work.",
                if artifact.is_some() { " and the artifact" } else { "" }
            ),
            _ => format!(
                "Task {task_id} is {}; {peer} has been told why.\nNext: nothing more on this task.",
                state.as_str()
            ),
        };
        Ok(ToolResult::ok(
            what,
            json!({"taskId": task.id, "state": task.status.state.as_str()}),
        ))
    }

    // ---- cancel ---------------------------------------------------------

    fn cancel(&self, task_id: &str, text: Option<&str>) -> Result<ToolResult, ToolError> {
        let message = text.map(|t| task_message(task_id, t));
        let task = self
            .agent
            .cancel(task_id, message)
            .map_err(|e| self.task_error(e, task_id, "cancel"))?;
        self.remember(&task);
        let role = self.role(&task);
        let peer = counterpart(&task, role);
        Ok(ToolResult::ok(
            format!("Task {task_id} is canceled; {peer} has been told.\nNext: nothing more on this task."),
            json!({"taskId": task.id, "state": task.status.state.as_str()}),
        ))
    }

    // ---- lease, release ----------------------------------------------------

    fn lease(
        &self,
        paths: Vec<String>,
        ttl_seconds: u64,
        exclusive: bool,
        reason: Option<String>,
        wait_seconds: u64,
    ) -> Result<ToolResult, ToolError> {
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        let lease = match self.agent.acquire_lease(
            &paths,
            ttl_seconds,
            exclusive,
            reason.as_deref(),
            (wait_seconds > 0).then_some(wait_seconds),
        ) {
            Ok(l) => l,
            Err(e) if e.a2a_code() == Some(A2aErrorCode::LeaseConflict) => {
                return Err(lease_conflict(&e, wait_seconds))
            }
            Err(e) => return Err(self.failed(e)),
        };
        let kind = if lease.exclusive {
            "exclusive"
        } else {
            "shared"
        };
        Ok(ToolResult::ok(
            format!(
                "You hold lease {id} ({kind}) on {paths} for {ttl_seconds} s.\nNext: edit the files, then release(leaseId=\"{id}\") as soon as you are done; other agents wanting them wait until then.",
                id = lease.id,
                paths = render::list(&lease.paths),
            ),
            json!({
                "leaseId": lease.id,
                "paths": lease.paths,
                "exclusive": lease.exclusive,
                "expiresAt": lease.expires_at,
            }),
        ))
    }

    fn release(&self, lease_id: &str) -> Result<ToolResult, ToolError> {
        match self.agent.release_lease(lease_id) {
            Ok(()) => Ok(ToolResult::ok(
                format!("Lease {lease_id} is released: other agents may lease those files now.\nNext: carry on; lease again before you edit more files."),
                json!({"leaseId": lease_id, "released": true}),
            )),
            Err(e)
                if matches!(
                    e.a2a_code(),
                    Some(A2aErrorCode::UnknownLease | A2aErrorCode::CrossContextDenied)
                ) =>
            {
                Err(ToolError::new(
                    "unknown-lease",
                    format!("You hold no lease \"{lease_id}\" (it may have expired, or is another agent's). Use the leaseId that lease gave you."),
                ))
            }
            Err(e) => Err(self.failed(e)),
        }
    }

    // ---- mistakes, with their fixes ----------------------------------------

    fn check_turns(&self, task_id: &str) -> Result<(), ToolError> {
        let used = self.turns.lock().get(task_id).copied().unwrap_or(0);
        if used >= self.options.turn_cap {
            return Err(ToolError::new(
                "turn-cap",
                format!(
                    "You have put {used} messages on task {task_id}, the most allowed per task ({}). Stop the back-and-forth and settle it: if you serve it, complete(taskId=\"{task_id}\", text=<your best result>) or state failed; if you requested it, cancel(taskId=\"{task_id}\") or use what you have.",
                    self.options.turn_cap
                ),
            ));
        }
        Ok(())
    }

    fn unknown_peer(&self, to: &str) -> ToolError {
        let names: Vec<String> = match self.agent.list_agents(None) {
            Ok(cards) => cards.into_iter().map(|c| c.name).collect(),
            Err(e) => return self.failed(e),
        };
        let close = nearest(to, &names);
        let message = if names.is_empty() {
            format!("There is no peer \"{to}\", and no peers are registered right now: do the work yourself, or discover again later.")
        } else if close.is_empty() {
            format!(
                "There is no peer \"{to}\". The peers are: {}. Call discover to see what each does.",
                render::list(&names)
            )
        } else {
            format!(
                "There is no peer \"{to}\". Did you mean {}? The peers are: {}.",
                close
                    .iter()
                    .map(|n| format!("\"{n}\""))
                    .collect::<Vec<_>>()
                    .join(" or "),
                render::list(&names)
            )
        };
        ToolError::new("unknown-peer", message)
    }

    /// A failed call on a task, told as the model's mistake when it is one.
    fn task_error(&self, e: ClientError, task_id: &str, doing: &str) -> ToolError {
        match e.a2a_code() {
            Some(A2aErrorCode::UnknownTask) => self.unknown_task(task_id),
            Some(A2aErrorCode::CrossContextDenied) => {
                // Either not a party (an unknown task to this agent) or the
                // requester trying the worker's move.
                match self.agent.get_task(task_id, Some(0)) {
                    Ok(task) if task.requester_name == self.me() => {
                        self.remember(&task);
                        ToolError::new(
                            "not-worker",
                            format!(
                                "You requested task {task_id} from {worker}: only {worker} can {doing} it. You can send(taskId=\"{task_id}\", text=...) to tell {worker} something, cancel(taskId=\"{task_id}\") it, or wait for {worker}'s result.",
                                worker = task.agent_name
                            ),
                        )
                    }
                    _ => self.unknown_task(task_id),
                }
            }
            Some(A2aErrorCode::TaskTerminal) => {
                let state = self
                    .agent
                    .get_task(task_id, Some(0))
                    .map(|t| t.status.state.as_str())
                    .unwrap_or("finished");
                ToolError::new(
                    "task-finished",
                    format!(
                        "Task {task_id} is already {state}: it cannot change or take messages any more. If more work is needed, start a new task with send(to, text)."
                    ),
                )
            }
            Some(A2aErrorCode::InvalidTransition) => {
                let state = self
                    .agent
                    .get_task(task_id, Some(0))
                    .map(|t| t.status.state)
                    .ok();
                let hint = match state {
                    Some(State::InputRequired) => " It is waiting for the requester's answer: wait for it before you complete the task or ask again.",
                    _ => "",
                };
                ToolError::new(
                    "bad-move",
                    format!(
                        "Task {task_id} is {} and cannot move that way now.{hint}",
                        state.map(State::as_str).unwrap_or("in a state that")
                    ),
                )
            }
            _ => self.failed(e),
        }
    }

    fn unknown_task(&self, task_id: &str) -> ToolError {
        let mine = match self.agent.list_tasks(TaskQuery {
            limit: Some(10),
            ..TaskQuery::default()
        }) {
            Ok(page) => page.tasks,
            Err(e) => return self.failed(e),
        };
        let message = if mine.is_empty() {
            format!("There is no task \"{task_id}\" of yours: you have no tasks yet. send(to, text) starts one; wait tells you when a peer gives you one.")
        } else {
            let list: Vec<String> = mine.iter().map(|t| self.task_line(t)).collect();
            format!(
                "There is no task \"{task_id}\" of yours. Your tasks (newest first): {}. Use one of these ids exactly.",
                list.join("; ")
            )
        };
        ToolError::new("unknown-task", message)
    }

    /// Any other failure: said plainly, with what the model can still do.
    fn failed(&self, e: ClientError) -> ToolError {
        match &e {
            ClientError::Closed(_) | ClientError::Deregistered(_) | ClientError::Io(_) => ToolError::new(
                "broker-unavailable",
                format!("The A2A broker cannot be reached ({e}). Other agents cannot be contacted now: carry on without them."),
            ),
            ClientError::Timeout(_) => ToolError::new(
                "broker-timeout",
                "The A2A broker did not answer in time. Try the call again once; if it fails again, carry on without other agents.".to_string(),
            ),
            ClientError::Rpc(r) => match e.a2a_code() {
                Some(A2aErrorCode::PayloadTooLarge) => ToolError::new(
                    "too-large",
                    format!("That is too large for the broker ({}). Send less text: summarise, or split it over several messages.", r.message),
                ),
                Some(A2aErrorCode::SendCap) => ToolError::new(
                    "send-cap",
                    "You have reached the broker's limit of messages for this run: finish your tasks with what you have.".to_string(),
                ),
                _ => {
                    let reason = r
                        .data
                        .as_ref()
                        .and_then(|d| d.get("reason"))
                        .and_then(Value::as_str)
                        .unwrap_or(&r.message);
                    ToolError::new("refused", format!("The broker refused the call: {reason}."))
                }
            },
            _ => ToolError::new("failed", format!("The call failed: {e}.")),
        }
    }

    // ---- what the session remembers -------------------------------------

    fn remember(&self, task: &Task) {
        self.known.lock().insert(
            task.id.clone(),
            Known {
                requester: task.requester_name.clone(),
                worker: task.agent_name.clone(),
                state: task.status.state,
            },
        );
    }

    fn learn_from_message(&self, task_id: &str, m: &Message, state: State) {
        let (Some(from), Some(to)) = (&m.from, &m.to) else {
            return;
        };
        let (requester, worker) = match m.role {
            a2a_client::proto::types::Role::User => (from.clone(), to.clone()),
            a2a_client::proto::types::Role::Agent => (to.clone(), from.clone()),
        };
        self.known.lock().insert(
            task_id.to_owned(),
            Known {
                requester,
                worker,
                state,
            },
        );
    }

    fn set_state(&self, task_id: &str, state: State) {
        if let Some(k) = self.known.lock().get_mut(task_id) {
            k.state = state;
        }
    }

    fn known_or_fetch(&self, task_id: &str) -> Option<Known> {
        if let Some(k) = self.known.lock().get(task_id) {
            return Some(k.clone());
        }
        let task = self.agent.get_task(task_id, Some(0)).ok()?;
        self.remember(&task);
        self.known.lock().get(task_id).cloned()
    }

    fn role(&self, task: &Task) -> Role {
        if task.agent_name == self.me() {
            Role::Worker
        } else {
            Role::Requester
        }
    }

    fn task_line(&self, t: &Task) -> String {
        if t.agent_name == self.me() {
            format!(
                "{} ({} asked you; {})",
                t.id,
                t.requester_name,
                t.status.state.as_str()
            )
        } else {
            format!(
                "{} (you asked {}; {})",
                t.id,
                t.agent_name,
                t.status.state.as_str()
            )
        }
    }

    /// This agent's tasks that are not finished, as one line each.
    fn open_tasks(&self) -> Vec<String> {
        let Ok(page) = self.agent.list_tasks(TaskQuery {
            limit: Some(20),
            ..TaskQuery::default()
        }) else {
            return Vec::new();
        };
        page.tasks
            .iter()
            .filter(|t| !t.status.state.is_terminal())
            .map(|t| self.task_line(t))
            .collect()
    }

    /// A session for this one's agent registered again as `r` says on
    /// `client` (a new connection, once the broker restarted), keeping the
    /// messages it put on each task (the turn cap holds across a restart);
    /// what it knew of its tasks is read from the broker again.
    pub fn register_again(
        &self,
        client: &Client,
        r: &Registration,
    ) -> Result<Session, ClientError> {
        let s = Session::register(client, r, self.options.clone())?;
        *s.turns.lock() = self.turns.lock().clone();
        Ok(s)
    }
}

/// A lease refused because another agent holds an overlapping one: who, and
/// what to do (the broker's `data.holder`, `data.leaseId`, `data.paths`).
fn lease_conflict(e: &ClientError, waited: u64) -> ToolError {
    let data = e.rpc().and_then(|r| r.data.as_ref());
    let field = |k: &str| data.and_then(|d| d.get(k)).cloned();
    let holder = field("holder")
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "another agent".into());
    let paths: Vec<String> = field("paths")
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    let what = if paths.is_empty() {
        "those files".to_string()
    } else {
        render::list(&paths)
    };
    let waited = if waited > 0 {
        format!(" (still, after waiting {waited} s)")
    } else {
        String::new()
    };
    let mut details = Map::new();
    details.insert("holder".into(), json!(holder));
    if let Some(id) = field("leaseId") {
        details.insert("leaseId".into(), id);
    }
    details.insert("paths".into(), json!(paths));
    ToolError::new(
        "lease-conflict",
        format!(
            "{holder} holds a lease on {what}{waited}: an edit there now could overwrite its work. Work on other files, lease again with timeoutSeconds to wait for it, or send {holder} a message to coordinate."
        ),
    )
    .with_details(details)
}

enum Described {
    /// `next` is shown only under a task's last update of the batch (an
    /// earlier question may already be answered by a later update).
    Update {
        text: String,
        next: String,
        value: Value,
        quotes: bool,
    },
    Dropped(u64),
    Ignored,
}

/// What to do next with a task, by side and state.
fn next_step(role: Role, state: State, id: &str, peer: &str) -> String {
    match (role, state) {
        (_, State::Completed) if role == Role::Requester => format!(
            "use the result; get(taskId=\"{id}\") shows its messages and artifacts. Nothing more to do on this task."
        ),
        (Role::Requester, State::InputRequired | State::AuthRequired) => format!(
            "answer with send(taskId=\"{id}\", text=<your answer>), or cancel(taskId=\"{id}\")."
        ),
        (Role::Requester, State::Failed | State::Rejected) => format!(
            "{peer} did not do it: try another peer (discover), or do it yourself."
        ),
        (Role::Requester, State::Canceled) => "nothing more on this task.".to_string(),
        (Role::Requester, _) => format!("{peer} is on it: wait for its next update."),
        (Role::Worker, State::Submitted | State::Working) => format!(
            "do the work, then complete(taskId=\"{id}\", text=<your result>). If something is unclear, complete(taskId=\"{id}\", state=\"input-required\", text=<your question>); if you cannot do it, state \"failed\" or \"rejected\" with the reason."
        ),
        (Role::Worker, State::InputRequired | State::AuthRequired) => {
            format!("wait for {peer}'s answer.")
        }
        (Role::Worker, _) => "nothing more on this task: stop working on it.".to_string(),
    }
}

fn counterpart(task: &Task, role: Role) -> &str {
    match role {
        Role::Requester => &task.agent_name,
        Role::Worker => &task.requester_name,
    }
}

fn kind_name(kind: Option<AgentKind>) -> &'static str {
    match kind {
        Some(AgentKind::Parent) => "parent",
        _ => "subagent",
    }
}

fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A message's parts as text: text parts as written, data as JSON, files
/// by name or URI.
pub fn message_text(m: &Message) -> String {
    parts_text(&m.parts)
}

fn parts_text(parts: &[Part]) -> String {
    parts
        .iter()
        .map(|p| match p {
            Part::Text { text, .. } => text.clone(),
            Part::Data { data, .. } => serde_json::to_string(data).unwrap_or_default(),
            Part::File { file, .. } => format!(
                "[file {}]",
                file.name
                    .as_deref()
                    .or(file.uri.as_deref())
                    .unwrap_or("(unnamed)")
            ),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn artifact_name(a: &Artifact) -> String {
    a.name.clone().unwrap_or_else(|| a.artifact_id.clone())
}

/// A lease another agent held (one this agent was refused or waited on)
/// ended, as a model reads it.
fn describe_lease_end(p: &LeaseReleasedParams) -> Described {
    let l = &p.lease;
    let paths = render::list(&l.paths);
    Described::Update {
        text: format!(
            "The lease of {} on {paths} ended ({}): you may lease those files now.",
            l.holder,
            p.reason.as_str()
        ),
        next: format!(
            "lease them (action lease, paths {}) before you edit them, if you still need to.",
            serde_json::to_string(&l.paths).unwrap_or_default()
        ),
        value: json!({
            "leaseId": l.id,
            "paths": l.paths,
            "holder": l.holder,
            "state": format!("lease-{}", p.reason.as_str()),
        }),
        quotes: false,
    }
}
