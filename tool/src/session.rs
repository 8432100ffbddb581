//! [`Session`]: the tool bound to one registered agent. `call(args)` runs
//! one action through `a2a-client` and answers with text for the model, a
//! structured value for programs, and an error flag.

use crate::args::{self, Action};
use crate::error::ToolError;
use crate::inbox::{self, Feed, Inbox};
use crate::render::{self, name, nearest, quoted, PEERS_NOTE, UNTRUSTED_NOTE};
use crate::{DEFAULT_TURN_CAP, QUOTE_MAX_CHARS, RESULT_MAX_CHARS, WAIT_MAX_EVENTS};
use a2a_client::proto::types::{AgentKind, LeaseReleasedParams, StreamEvent};
use a2a_client::{
    agent_card, task_message, A2aErrorCode, Agent, AgentCard, Artifact, Client, ClientError,
    Delivery, Event, Message, Part, State, Task, TaskQuery,
};
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
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
///
/// The session takes the agent's events: it installs the agent's event
/// handler, which keeps each event slim, within [`crate::INBOX_MAX_BYTES`],
/// until the model's next `wait` (so the agent's own `wait` and event
/// stream see nothing while the session lives; dropping the session
/// removes the handler). If another handler replaces it, `wait` reads the
/// agent's queue instead.
pub struct Session {
    agent: Agent,
    options: SessionOptions,
    /// The agent's events, kept for the model's next `wait`.
    inbox: Arc<Inbox>,
    known: Mutex<HashMap<String, Known>>,
    /// Messages this agent put on each task.
    turns: Mutex<HashMap<String, u32>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // Events queue for the agent's own `wait` again, unless another
        // handler already took the agent's events.
        if !self.inbox.is_closed() {
            self.agent.set_event_handler(None);
        }
    }
}

/// Which side of a task this agent is on.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    Requester,
    Worker,
}

impl Session {
    /// A session over an agent registered by the caller; it takes the
    /// agent's events (see [`Session`]).
    pub fn new(agent: Agent) -> Session {
        Session::with_options(agent, SessionOptions::default())
    }

    /// [`Session::new`] with explicit options.
    pub fn with_options(agent: Agent, options: SessionOptions) -> Session {
        let inbox = Inbox::new();
        let feed = Feed(inbox.clone());
        agent.set_event_handler(Some(Box::new(move |_agent, ev| feed.0.push(ev))));
        Session {
            agent,
            options,
            inbox,
            known: Mutex::new(HashMap::new()),
            turns: Mutex::new(HashMap::new()),
        }
    }

    /// Bytes of updates the session holds for the model's next `wait` (the
    /// estimate of their strings it bounds by [`crate::INBOX_MAX_BYTES`]).
    pub fn held_bytes(&self) -> usize {
        self.inbox.held_bytes()
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
                "{PEERS_NOTE}\n{} you can send tasks to:\n",
                count(cards.len(), "peer")
            );
            let tail =
                "Next: send(to=<name>, text=<the task>) to delegate, then wait for the answer.";
            for (i, c) in cards.iter().enumerate() {
                let mut l = format!("- {}", name(&c.name));
                if !c.description.is_empty() {
                    l.push_str(&format!(": {}", render::line(&c.description)));
                }
                if !c.skills.is_empty() {
                    let skills: Vec<String> = c
                        .skills
                        .iter()
                        .map(|s| {
                            if s.description.is_empty() {
                                render::line(&s.name)
                            } else {
                                format!(
                                    "{} ({})",
                                    render::line(&s.name),
                                    render::line(&s.description)
                                )
                            }
                        })
                        .collect();
                    l.push_str(&format!(" Skills: {}.", skills.join(", ")));
                }
                if t.len() + l.len() + tail.len() + 200 > RESULT_MAX_CHARS {
                    t.push_str(&format!(
                        "({} more not shown: the structured result lists every peer.)\n",
                        count(cards.len() - i, "peer")
                    ));
                    break;
                }
                t.push_str(&l);
                t.push('\n');
            }
            t.push_str(tail);
            t
        };
        Ok(ToolResult::ok(text, json!({ "peers": peers })))
    }

    // ---- send -----------------------------------------------------------

    fn send_new(&self, to: &str, text: &str) -> Result<ToolResult, ToolError> {
        if to == self.me() {
            return Err(ToolError::new(
                "send-to-self",
                format!(
                    "{} is you. Send tasks to a peer: discover lists them.",
                    quoted(to)
                ),
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
                "Sent task {id} to {to} (state: {state}). {to} has not answered yet.\nNext: wait to hear back (answers, questions and the result arrive there); keep taskId {qid} to follow up, get or cancel it.",
                id = name(&task.id),
                qid = quoted(&task.id),
                to = name(to),
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
        let (id, who) = (name(task_id), name(peer));
        let what = match role {
            Role::Requester => format!(
                "Sent your message on task {id} to {who}; the task is {}.",
                state.as_str()
            ),
            Role::Worker => format!(
                "Sent your message on task {id} to {who} (the requester); the task stays {}.",
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
        let (id, who) = (name(task_id), name(peer));
        let head = match role {
            Role::Requester => format!("Task {id}: you asked {who}; it is {}.", state.as_str()),
            Role::Worker => format!("Task {id}: {who} asked you; it is {}.", state.as_str()),
        };
        // Each message and artifact as a block of text, with its structured
        // form; the newest that fit in one result are shown.
        let mut blocks: Vec<(String, bool, Value)> = Vec::new();
        for (i, m) in task.history.iter().enumerate() {
            let from = m.from.as_deref().unwrap_or("?");
            let body = Body::of(&m.parts);
            let value = json!({"from": m.from.clone().unwrap_or_default(), "text": body.clipped()});
            if from == self.me() {
                blocks.push((format!("\n{}. you: {}", i + 1, body.own()), false, value));
            } else {
                blocks.push((
                    format!("\n{}. {}:\n{}", i + 1, name(from), body.framed(from)),
                    true,
                    value,
                ));
            }
        }
        let messages = blocks.len();
        for a in &task.artifacts {
            let body = Body::of(&a.parts);
            blocks.push((
                format!(
                    "\nArtifact {} from {}:\n{}",
                    quoted(&artifact_name(a)),
                    name(&task.agent_name),
                    body.framed(&task.agent_name)
                ),
                true,
                json!({"name": artifact_name(a), "text": body.clipped()}),
            ));
        }
        let next = format!("\nNext: {}", next_step(role, state, task_id, peer));
        // Leave out the oldest messages, then the oldest artifacts, until
        // the rest fits (the head, the note and a line saying so included).
        let fixed = UNTRUSTED_NOTE.len() + head.len() + next.len() + 200;
        // A block costs its text or its structured value, the longer (JSON
        // escapes quotes and newlines): both stay within the bound.
        let cost =
            |b: &(String, bool, Value)| b.0.chars().count().max(b.2.to_string().chars().count());
        let mut total: usize = fixed + blocks.iter().map(cost).sum::<usize>();
        let mut skip = 0;
        while total > RESULT_MAX_CHARS && skip < blocks.len() {
            total -= cost(&blocks[skip]);
            skip += 1;
        }
        let mut text = head;
        let shown = &blocks[skip..];
        let (left_msgs, left_arts) = (skip.min(messages), skip.saturating_sub(messages));
        if skip > 0 {
            text.push_str(&format!(
                "\n({} not shown, to keep this result short; the newest are below.)",
                render::list(
                    &[
                        (left_msgs > 0).then(|| count(left_msgs, "earlier message")),
                        (left_arts > 0).then(|| count(left_arts, "earlier artifact")),
                    ]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                )
            ));
        }
        if skip < messages {
            text.push_str("\nMessages, oldest first:");
        }
        for (block, _, _) in shown {
            text.push_str(block);
        }
        text.push_str(&next);
        if shown.iter().any(|b| b.1) {
            text = format!("{UNTRUSTED_NOTE}\n{text}");
        }
        let history: Vec<Value> = blocks[skip.min(messages)..messages]
            .iter()
            .map(|b| b.2.clone())
            .collect();
        let artifacts: Vec<Value> = blocks[messages.max(skip)..]
            .iter()
            .map(|b| b.2.clone())
            .collect();
        let mut structured = json!({
            "taskId": task.id,
            "state": state.as_str(),
            "requester": task.requester_name,
            "worker": task.agent_name,
            "history": history,
            "artifacts": artifacts,
        });
        if skip > 0 {
            structured["omitted"] = skip.into();
        }
        Ok(ToolResult::ok(text, structured))
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
        let taken = loop {
            let taken = self.inbox.take(WAIT_MAX_EVENTS);
            if !taken.events.is_empty() || taken.dropped > 0 {
                break taken;
            }
            let left = limit.saturating_sub(start.elapsed());
            if left.is_zero() || control.cancelled() {
                break taken;
            }
            let slice = left.min(WAIT_SLICE);
            if self.inbox.is_closed() {
                // Another handler took the agent's events, or none can
                // come any more: read the agent's queue (which says which).
                let got = self.agent.wait(slice).map_err(|e| self.failed(e))?;
                for ev in got {
                    self.inbox.push(ev);
                }
            } else {
                self.inbox.wait_until(Instant::now() + slice);
            }
            if last_report.elapsed() >= Duration::from_secs(1) {
                last_report = Instant::now();
                control.progress(start.elapsed(), limit);
            }
        };
        let dropped_here = taken.dropped;
        if taken.events.is_empty() && dropped_here == 0 {
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
        // Describe the events in order while the result has room; what does
        // not fit goes back to the front of the inbox for the next wait.
        let mut updates = Vec::new();
        let mut out = Vec::new();
        let mut dropped = dropped_here;
        let mut quoted_any = false;
        let mut used = UNTRUSTED_NOTE.len() + 400;
        let mut events = taken.events.into_iter();
        let mut back = Vec::new();
        for ev in events.by_ref() {
            match self.describe(&ev) {
                Described::Update {
                    text,
                    next,
                    value,
                    quotes,
                } => {
                    // The structured value may be the longer (JSON escapes
                    // quotes and newlines): both stay within the bound.
                    let n = (text.chars().count() + next.chars().count())
                        .max(value.to_string().chars().count())
                        + 20;
                    if !updates.is_empty() && used + n > RESULT_MAX_CHARS {
                        back.push(ev);
                        break;
                    }
                    used += n;
                    quoted_any |= quotes;
                    updates.push((text, next));
                    out.push(value);
                }
                Described::Dropped(n) => dropped += n,
                Described::Ignored => {}
            }
        }
        back.extend(events);
        self.inbox.put_back(back);
        let waiting = self.inbox.len();
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
        let mut parts = Vec::new();
        if quoted_any {
            parts.push(UNTRUSTED_NOTE.to_string());
        }
        if !lines.is_empty() || dropped == 0 {
            let mut list = format!("{}:", count(lines.len(), "update"));
            for (i, l) in lines.iter().enumerate() {
                list.push_str(&format!("\n{}. {l}", i + 1));
            }
            parts.push(list);
        }
        if dropped > 0 {
            parts.push(format!(
                "{dropped} older updates were dropped because they were not read in time: get(taskId) shows each task as it is now."
            ));
        }
        if waiting > 0 {
            parts.push(format!(
                "{waiting} more {} waiting: call wait again to read {}.",
                if waiting == 1 {
                    "update is"
                } else {
                    "updates are"
                },
                if waiting == 1 { "it" } else { "them" },
            ));
        }
        let text = parts.join("\n");
        let mut structured = json!({ "events": out });
        if dropped > 0 {
            structured["dropped"] = dropped.into();
        }
        if waiting > 0 {
            structured["pending"] = waiting.into();
        }
        Ok(ToolResult::ok(text, structured))
    }

    /// One event as a model reads it.
    fn describe(&self, ev: &Event) -> Described {
        match ev {
            Event::TaskEvent(p) => {
                match &p.event {
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
                        let body = msg.map_or_else(Body::default, |m| Body::of(&m.parts));
                        let (id, who) = (name(task_id), name(&peer));
                        let head = match (role, state) {
                            (Role::Worker, State::Submitted) => {
                                format!("New task {id} from {who} for you (submitted).")
                            }
                            (Role::Worker, State::Canceled) => {
                                format!("{who} canceled task {id}.")
                            }
                            (Role::Worker, _) => {
                                format!("Task {id} from {who} is {}.", state.as_str())
                            }
                            (Role::Requester, State::InputRequired) => {
                                format!("Task {id} for {who} is input-required: {who} asks you something.")
                            }
                            (Role::Requester, _) => {
                                format!("Task {id} for {who} is {}.", state.as_str())
                            }
                        };
                        let mut text = head;
                        let quotes = !body.is_empty() && from != self.me();
                        if !body.is_empty() {
                            if quotes {
                                text.push_str(&format!(
                                    " {} wrote:\n{}",
                                    name(&from),
                                    body.framed(&from)
                                ));
                            } else {
                                text.push_str(&format!(" You wrote: {}", body.own()));
                            }
                        }
                        Described::Update {
                            text,
                            next: next_step(role, state, task_id, &peer),
                            value: json!({"taskId": task_id, "state": state.as_str(), "from": from, "text": body.clipped()}),
                            quotes,
                        }
                    }
                    StreamEvent::Artifact(a) => {
                        let task_id = a.task_id.as_str();
                        let known = self.known_or_fetch(task_id);
                        let (peer, state) = known
                            .map(|k| (k.worker, k.state))
                            .unwrap_or_else(|| (String::new(), State::Working));
                        let title = artifact_name(&a.artifact);
                        let body = Body::of(&a.artifact.parts);
                        let verb = if a.append { "added to" } else { "attached" };
                        let who = name(&peer);
                        Described::Update {
                            text: format!(
                                "{who} {verb} artifact {} on task {}:\n{}",
                                quoted(&title),
                                name(task_id),
                                body.framed(&peer)
                            ),
                            next: if state.is_terminal() {
                                "nothing more to do on this task.".to_string()
                            } else {
                                format!(
                                    "the task is still {}: wait for {who} to finish it.",
                                    state.as_str()
                                )
                            },
                            value: json!({
                                "taskId": task_id, "state": state.as_str(), "from": peer, "text": "",
                                "artifact": {"name": title, "text": body.clipped()},
                            }),
                            quotes: true,
                        }
                    }
                }
            }
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
        if let Some((title, body)) = &artifact {
            let a = Artifact {
                artifact_id: a2a_client::new_id(),
                name: Some(title.clone()),
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
        let peer = name(&task.requester_name);
        let task_id = name(task_id);
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
        let (id, peer) = (name(task_id), name(counterpart(&task, role)));
        Ok(ToolResult::ok(
            format!(
                "Task {id} is canceled; {peer} has been told.\nNext: nothing more on this task."
            ),
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
                "You hold lease {id} ({kind}) on {paths} for {ttl_seconds} s.\nNext: edit the files, then release(leaseId={qid}) as soon as you are done; other agents wanting them wait until then.",
                id = name(&lease.id),
                qid = quoted(&lease.id),
                paths = render::names(&lease.paths),
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
                format!("Lease {} is released: other agents may lease those files now.\nNext: carry on; lease again before you edit more files.", name(lease_id)),
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
                    format!("You hold no lease {} (it may have expired, or is another agent's). Use the leaseId that lease gave you.", quoted(lease_id)),
                ))
            }
            Err(e) => Err(self.failed(e)),
        }
    }

    // ---- mistakes, with their fixes ----------------------------------------

    fn check_turns(&self, task_id: &str) -> Result<(), ToolError> {
        let used = self.turns.lock().get(task_id).copied().unwrap_or(0);
        if used >= self.options.turn_cap {
            let (id, qid) = (name(task_id), quoted(task_id));
            return Err(ToolError::new(
                "turn-cap",
                format!(
                    "You have put {used} messages on task {id}, the most allowed per task ({}). Stop the back-and-forth and settle it: if you serve it, complete(taskId={qid}, text=<your best result>) or state failed; if you requested it, cancel(taskId={qid}) or use what you have.",
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
        let to = said(to);
        let message = if names.is_empty() {
            format!("There is no peer {to}, and no peers are registered right now: do the work yourself, or discover again later.")
        } else if close.is_empty() {
            format!(
                "There is no peer {to}. The peers are: {}. Call discover to see what each does.",
                peer_names(&names)
            )
        } else {
            format!(
                "There is no peer {to}. Did you mean {}? The peers are: {}.",
                close
                    .iter()
                    .map(|n| quoted(n))
                    .collect::<Vec<_>>()
                    .join(" or "),
                peer_names(&names)
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
                                "You requested task {id} from {worker}: only {worker} can {doing} it. You can send(taskId={qid}, text=...) to tell {worker} something, cancel(taskId={qid}) it, or wait for {worker}'s result.",
                                id = name(task_id),
                                qid = quoted(task_id),
                                worker = name(&task.agent_name)
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
                        "Task {} is already {state}: it cannot change or take messages any more. If more work is needed, start a new task with send(to, text).",
                        name(task_id)
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
                        "Task {} is {} and cannot move that way now.{hint}",
                        name(task_id),
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
        let wanted = said(task_id);
        let message = if mine.is_empty() {
            format!("There is no task {wanted} of yours: you have no tasks yet. send(to, text) starts one; wait tells you when a peer gives you one.")
        } else {
            let list: Vec<String> = mine.iter().map(|t| self.task_line(t)).collect();
            format!(
                "There is no task {wanted} of yours. Your tasks (newest first): {}. Use one of these ids exactly.",
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
                format!("The A2A broker cannot be reached ({}). Other agents cannot be contacted now: carry on without them.", render::line(&e.to_string())),
            ),
            ClientError::Timeout(_) => ToolError::new(
                "broker-timeout",
                "The A2A broker did not answer in time. Try the call again once; if it fails again, carry on without other agents.".to_string(),
            ),
            ClientError::Rpc(r) => match e.a2a_code() {
                Some(A2aErrorCode::PayloadTooLarge) => ToolError::new(
                    "too-large",
                    format!("That is too large for the broker ({}). Send less text: summarise, or split it over several messages.", render::line(&r.message)),
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
                    ToolError::new(
                        "refused",
                        format!("The broker refused the call: {}.", render::line(reason)),
                    )
                }
            },
            _ => ToolError::new(
                "failed",
                format!("The call failed: {}.", render::line(&e.to_string())),
            ),
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
                name(&t.id),
                name(&t.requester_name),
                t.status.state.as_str()
            )
        } else {
            format!(
                "{} (you asked {}; {})",
                name(&t.id),
                name(&t.agent_name),
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
    let holder = field("holder").and_then(|v| v.as_str().map(str::to_owned));
    let paths: Vec<String> = field("paths")
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    let what = if paths.is_empty() {
        "those files".to_string()
    } else {
        render::names(&paths)
    };
    let waited = if waited > 0 {
        format!(" (still, after waiting {waited} s)")
    } else {
        String::new()
    };
    let mut details = Map::new();
    details.insert(
        "holder".into(),
        json!(holder.as_deref().unwrap_or("another agent")),
    );
    if let Some(id) = field("leaseId") {
        details.insert("leaseId".into(), id);
    }
    details.insert("paths".into(), json!(paths));
    let (who, them) = match &holder {
        Some(h) => (format!("Agent {}", name(h)), name(h)),
        None => ("Another agent".to_string(), "it".to_string()),
    };
    ToolError::new(
        "lease-conflict",
        format!(
            "{who} holds a lease on {what}{waited}: an edit there now could overwrite its work. Work on other files, lease again with timeoutSeconds to wait for it, or send {them} a message to coordinate."
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
    let (id, peer) = (quoted(id), name(peer));
    match (role, state) {
        (_, State::Completed) if role == Role::Requester => format!(
            "use the result; get(taskId={id}) shows its messages and artifacts. Nothing more to do on this task."
        ),
        (Role::Requester, State::InputRequired | State::AuthRequired) => format!(
            "answer with send(taskId={id}, text=<your answer>), or cancel(taskId={id})."
        ),
        (Role::Requester, State::Failed | State::Rejected) => format!(
            "{peer} did not do it: try another peer (discover), or do it yourself."
        ),
        (Role::Requester, State::Canceled) => "nothing more on this task.".to_string(),
        (Role::Requester, _) => format!("{peer} is on it: wait for its next update."),
        (Role::Worker, State::Submitted | State::Working) => format!(
            "do the work, then complete(taskId={id}, text=<your result>). If something is unclear, complete(taskId={id}, state=\"input-required\", text=<your question>); if you cannot do it, state \"failed\" or \"rejected\" with the reason."
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

/// A message's or artifact's parts as text, and how many characters of
/// them the session already left out (a slim event's, see `inbox`).
#[derive(Default)]
struct Body {
    text: String,
    cut: usize,
}

impl Body {
    fn of(parts: &[Part]) -> Body {
        Body {
            text: parts_text(parts),
            cut: parts.iter().filter_map(inbox::cut_of).sum(),
        }
    }

    fn is_empty(&self) -> bool {
        self.text.is_empty() && self.cut == 0
    }

    /// Framed as peer `from`'s text.
    fn framed(&self, from: &str) -> String {
        render::peer_text(from, &self.text, self.cut)
    }

    /// The agent's own text, quoted back to it.
    fn own(&self) -> String {
        render::body(&self.text, self.cut)
    }

    /// For the structured result: cut to [`QUOTE_MAX_CHARS`] as the text
    /// result cuts it, not escaped (programs read it).
    fn clipped(&self) -> String {
        let s = &self.text;
        let (kept, left) = match s.char_indices().nth(QUOTE_MAX_CHARS) {
            Some((b, _)) => (&s[..b], s[b..].chars().count()),
            None => (s.as_str(), 0),
        };
        format!("{kept}{}", render::cut_note(left + self.cut))
    }
}

/// The peers' names, as many as fit on a line of an error.
fn peer_names(names: &[String]) -> String {
    const SHOWN: usize = 20;
    let mut shown: Vec<String> = names.iter().take(SHOWN).map(|n| name(n)).collect();
    if names.len() > SHOWN {
        shown.push(format!("{} more", names.len() - SHOWN));
    }
    render::list(&shown)
}

/// A message's parts as text: text parts as written, data as JSON, files
/// by name or URI.
pub fn message_text(m: &Message) -> String {
    parts_text(&m.parts)
}

fn parts_text(parts: &[Part]) -> String {
    parts
        .iter()
        .filter(|p| inbox::cut_of(p).is_none())
        .map(|p| match p {
            Part::Text { text, .. } => text.clone(),
            Part::Data { data, .. } => serde_json::to_string(data).unwrap_or_default(),
            Part::File { file, metadata } => {
                let size = inbox::file_size(metadata)
                    .or_else(|| file.bytes.as_deref().map(|b| inbox::decoded_len(b) as u64));
                // Names on one line even inside a frame: where a name ends
                // stays plain to see.
                let about: Vec<String> = [
                    file.mime_type.as_deref().map(render::attr),
                    size.map(|n| format!("{n} bytes")),
                ]
                .into_iter()
                .flatten()
                .collect();
                format!(
                    "[file {}{}]",
                    file.name
                        .as_deref()
                        .or(file.uri.as_deref())
                        .map_or_else(|| "(unnamed)".to_string(), name),
                    if about.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", about.join(", "))
                    }
                )
            }
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
    let paths = render::names(&l.paths);
    Described::Update {
        text: format!(
            "The lease of {} on {paths} ended ({}): you may lease those files now.",
            name(&l.holder),
            p.reason.as_str()
        ),
        next: format!(
            "lease them (action lease, paths {}) before you edit them, if you still need to.",
            render::array(&l.paths)
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

/// A peer name or task id the model wrote, quoted back: whole when it could
/// be one (`A2A_MAX_ID_BYTES` at most), else a short excerpt, so that a
/// megabyte written by mistake is not read back into the model's context.
fn said(s: &str) -> String {
    if s.len() <= a2a_client::proto::limits::A2A_MAX_ID_BYTES {
        quoted(s)
    } else {
        crate::args::excerpt(s)
    }
}
