//! [`Agent`]: a registered agent, its token, and one typed method per
//! `a2a.*` call (PROTOCOL.md §5), plus [`Agent::wait`] for its events.
//!
//! The token never leaves this type: every method fills it in, so a caller
//! cannot act as another agent by mistake.

use crate::client::{unexpected, Client};
use crate::error::ClientError;
use crate::Event;
use a2a_proto::call::{Call, Outcome};
use a2a_proto::limits::A2A_MAX_STREAM_WAIT_SECONDS;
use a2a_proto::params::{
    ArtifactParams, CancelParams, GetParams, ListAgentsParams, ListRole, ListTasksParams,
    PushGetParams, PushSetParams, RegisterResult, ResubscribeParams, SendConfiguration, SendParams,
    StatusParams, TaskListResult, TokenParams, WaitParams,
};
use a2a_proto::types::{AgentCard, Artifact, Delivery, Message, PushConfig, State, Task};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which of an agent's tasks [`Agent::list_tasks`] returns, and which page.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskQuery {
    /// Tasks it serves, requested, or both (the default).
    pub role: ListRole,
    /// Only tasks in this state.
    pub state: Option<State>,
    /// Page size (broker default 100).
    pub limit: Option<u64>,
    /// The `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

/// A registered agent. Cheap to clone, `Send + Sync`; clones share one
/// event queue (each event goes to one `wait`er). It keeps its client's
/// connection open while it lives.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<AgentInner>,
}

struct AgentInner {
    /// The connection it was registered on (kept open by this handle).
    client: Client,
    /// The peer id the broker gave it (also its card's `name`).
    id: String,
    /// The capability token every call carries.
    token: String,
    /// With `id`, the identity events are routed by.
    context_id: String,
    /// The card as the broker stamped it.
    card: AgentCard,
    delivery: Delivery,
    /// The push queue the demux fills; `None` for a pull agent.
    events: Option<Receiver<Event>>,
    /// Pull agents: the highest `seq` already handed to a caller, sent as
    /// `afterSeq` by the next wait. The lock also keeps two waits of one
    /// agent from running at once (they would return the same events).
    pull_ack: Mutex<Option<u64>>,
    deregistered: AtomicBool,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.inner.id)
            .field("context_id", &self.inner.context_id)
            .field("delivery", &self.inner.delivery)
            .finish()
    }
}

macro_rules! expect {
    ($outcome:expr, $method:literal, $pat:pat => $val:expr) => {
        match $outcome {
            $pat => Ok($val),
            other => Err(unexpected($method, &other)),
        }
    };
}

impl Agent {
    pub(crate) fn new(
        client: Client,
        context_id: &str,
        r: RegisterResult,
        delivery: Delivery,
        events: Option<Receiver<Event>>,
    ) -> Agent {
        Agent {
            inner: Arc::new(AgentInner {
                client,
                id: r.agent_id,
                token: r.token,
                context_id: context_id.to_owned(),
                card: r.card,
                delivery,
                events,
                pull_ack: Mutex::new(None),
                deregistered: AtomicBool::new(false),
            }),
        }
    }

    /// The peer id (`agentId`).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The capability token (for [`Client::call_json`] callers).
    pub fn token(&self) -> &str {
        &self.inner.token
    }

    /// The context it registered under.
    pub fn context_id(&self) -> &str {
        &self.inner.context_id
    }

    /// The card as the broker stamped it (name = peer id, context, kind).
    pub fn card(&self) -> &AgentCard {
        &self.inner.card
    }

    /// Push or pull.
    pub fn delivery(&self) -> Delivery {
        self.inner.delivery
    }

    /// The connection it lives on.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    fn token_opt(&self) -> Option<String> {
        Some(self.inner.token.clone())
    }

    fn call(&self, call: Call) -> Result<Outcome, ClientError> {
        if self.inner.deregistered.load(Ordering::Acquire) {
            return Err(ClientError::Deregistered(self.inner.id.clone()));
        }
        self.inner.client.call(call)
    }

    /// `a2a.agents.list`: the cards it may address, optionally only those
    /// with a skill of that id or tag.
    pub fn list_agents(&self, skill: Option<&str>) -> Result<Vec<AgentCard>, ClientError> {
        let call = Call::ListAgents(ListAgentsParams {
            token: self.token_opt(),
            skill: skill.map(str::to_owned),
        });
        expect!(self.call(call)?, "a2a.agents.list", Outcome::Agents(r) => r.agents)
    }

    /// `a2a.message.send`: creates a task (no `taskId`; addressed by `to`)
    /// or adds the message to one. For `to: "*"` use [`Agent::broadcast`].
    pub fn send(
        &self,
        message: Message,
        configuration: Option<SendConfiguration>,
    ) -> Result<Task, ClientError> {
        let call = Call::Send(SendParams {
            token: self.token_opt(),
            message,
            configuration,
        });
        expect!(self.call(call)?, "a2a.message.send", Outcome::Task(r) => r.task)
    }

    /// `a2a.message.send` with `to: "*"`: one task per addressable peer.
    pub fn broadcast(
        &self,
        mut message: Message,
        configuration: Option<SendConfiguration>,
    ) -> Result<Vec<Task>, ClientError> {
        message.to = Some("*".into());
        let call = Call::Send(SendParams {
            token: self.token_opt(),
            message,
            configuration,
        });
        expect!(self.call(call)?, "a2a.message.send", Outcome::Tasks(r) => r.tasks)
    }

    /// `a2a.message.stream`: a send that also emits the task's current
    /// status to this agent.
    pub fn stream(&self, message: Message) -> Result<Task, ClientError> {
        let call = Call::Stream(SendParams {
            token: self.token_opt(),
            message,
            configuration: None,
        });
        expect!(self.call(call)?, "a2a.message.stream", Outcome::Task(r) => r.task)
    }

    /// `a2a.tasks.get`, with the last `history_length` messages if given.
    pub fn get_task(&self, id: &str, history_length: Option<u64>) -> Result<Task, ClientError> {
        let call = Call::Get(GetParams {
            token: self.token_opt(),
            id: id.to_owned(),
            history_length,
        });
        expect!(self.call(call)?, "a2a.tasks.get", Outcome::Task(r) => r.task)
    }

    /// `a2a.tasks.status` (the worker's): moves the task, optionally with a
    /// message.
    pub fn set_status(
        &self,
        id: &str,
        state: State,
        message: Option<Message>,
    ) -> Result<Task, ClientError> {
        let call = Call::Status(StatusParams {
            token: self.token_opt(),
            id: id.to_owned(),
            state,
            message,
        });
        expect!(self.call(call)?, "a2a.tasks.status", Outcome::Task(r) => r.task)
    }

    /// `a2a.tasks.cancel` (either party's).
    pub fn cancel(&self, id: &str, message: Option<Message>) -> Result<Task, ClientError> {
        let call = Call::Cancel(CancelParams {
            token: self.token_opt(),
            id: id.to_owned(),
            message,
        });
        expect!(self.call(call)?, "a2a.tasks.cancel", Outcome::Task(r) => r.task)
    }

    /// `a2a.tasks.resubscribe`: re-emits the task's status to this agent,
    /// after replaying its events above `after_version` if given.
    pub fn resubscribe(&self, id: &str, after_version: Option<u64>) -> Result<Task, ClientError> {
        let call = Call::Resubscribe(ResubscribeParams {
            token: self.token_opt(),
            id: id.to_owned(),
            after_version,
        });
        expect!(self.call(call)?, "a2a.tasks.resubscribe", Outcome::Task(r) => r.task)
    }

    /// `a2a.tasks.pushNotificationConfig.set`: this agent gets an `a2a.push`
    /// when the task ends.
    pub fn set_push_config(
        &self,
        task_id: &str,
        config: PushConfig,
    ) -> Result<Option<PushConfig>, ClientError> {
        let call = Call::PushSet(PushSetParams {
            token: self.token_opt(),
            task_id: task_id.to_owned(),
            config,
        });
        expect!(self.call(call)?, "a2a.tasks.pushNotificationConfig.set", Outcome::Config(r) => r.config)
    }

    /// `a2a.tasks.pushNotificationConfig.get`: `None` when none is set.
    pub fn push_config(&self, task_id: &str) -> Result<Option<PushConfig>, ClientError> {
        let call = Call::PushGet(PushGetParams {
            token: self.token_opt(),
            task_id: task_id.to_owned(),
        });
        expect!(self.call(call)?, "a2a.tasks.pushNotificationConfig.get", Outcome::Config(r) => r.config)
    }

    /// `a2a.tasks.list`: one page of this agent's tasks, newest first.
    pub fn list_tasks(&self, query: TaskQuery) -> Result<TaskListResult, ClientError> {
        let call = Call::ListTasks(ListTasksParams {
            token: self.token_opt(),
            role: query.role,
            state: query.state,
            limit: query.limit,
            cursor: query.cursor,
        });
        expect!(self.call(call)?, "a2a.tasks.list", Outcome::TaskList(r) => r)
    }

    /// `a2a.tasks.artifact` (the worker's): adds an artifact, or with
    /// `append` extends the one with the same `artifactId`.
    pub fn add_artifact(
        &self,
        id: &str,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<Task, ClientError> {
        let call = Call::Artifact(ArtifactParams {
            token: self.token_opt(),
            id: id.to_owned(),
            artifact,
            append,
            last_chunk,
        });
        expect!(self.call(call)?, "a2a.tasks.artifact", Outcome::Task(r) => r.task)
    }

    /// `a2a.agents.deregister`: the token dies at once; the broker fails the
    /// tasks it serves and cancels those it requested. Events already
    /// queued stay readable; then `wait` reports [`ClientError::Deregistered`].
    pub fn deregister(&self) -> Result<(), ClientError> {
        let call = Call::Deregister(TokenParams {
            token: self.token_opt(),
        });
        let ok = expect!(self.call(call)?, "a2a.agents.deregister", Outcome::Ok(r) => r.ok)?;
        if !ok {
            return Err(ClientError::Protocol(
                "deregister answered ok: false".into(),
            ));
        }
        self.inner.deregistered.store(true, Ordering::Release);
        self.inner
            .client
            .inner_demux()
            .detach(&self.inner.id, &self.inner.context_id);
        Ok(())
    }

    /// This agent's events: what is queued, at once; else blocks until
    /// something arrives or `timeout` passes (then `Ok` and empty).
    ///
    /// A push agent reads the queue the connection's reader fills. A pull
    /// agent calls `a2a.events.wait` and acknowledges, on its next wait,
    /// the events this one returned (`afterSeq`), so an event is returned
    /// once unless a response is lost.
    ///
    /// Fails with [`ClientError::Closed`] once the connection is gone and
    /// the queue is empty, and [`ClientError::Deregistered`] after
    /// [`Agent::deregister`].
    pub fn wait(&self, timeout: Duration) -> Result<Vec<Event>, ClientError> {
        match &self.inner.events {
            Some(rx) => self.wait_push(rx, timeout),
            None => self.wait_pull(timeout),
        }
    }

    fn wait_push(
        &self,
        rx: &Receiver<Event>,
        timeout: Duration,
    ) -> Result<Vec<Event>, ClientError> {
        let mut out: Vec<Event> = rx.try_iter().collect();
        if out.is_empty() {
            match rx.recv_timeout(timeout) {
                Ok(ev) => {
                    out.push(ev);
                    out.extend(rx.try_iter());
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(self.gone()),
            }
        }
        Ok(out)
    }

    fn wait_pull(&self, timeout: Duration) -> Result<Vec<Event>, ClientError> {
        let mut ack = self.inner.pull_ack.lock();
        let deadline = Instant::now() + timeout;
        let most = Duration::from_secs(A2A_MAX_STREAM_WAIT_SECONDS);
        loop {
            // The broker clamps a wait to A2A_MAX_STREAM_WAIT_SECONDS, so a
            // longer timeout is served by several waits.
            let left = deadline.saturating_duration_since(Instant::now()).min(most);
            let call = Call::Wait(WaitParams {
                token: self.token_opt(),
                timeout_seconds: Some(left.as_secs_f64()),
                after_seq: *ack,
            });
            let grace = self.inner.client.options().io_timeout;
            if self.inner.deregistered.load(Ordering::Acquire) {
                return Err(self.gone());
            }
            let r = expect!(
                self.inner.client.call_timeout(call, left + grace)?,
                "a2a.events.wait",
                Outcome::Events(r) => r
            )?;
            if let Some(max) = r.events.iter().filter_map(Event::seq).max() {
                *ack = Some(ack.map_or(max, |a| a.max(max)));
            }
            if !r.events.is_empty() || Instant::now() >= deadline {
                return Ok(r.events);
            }
        }
    }

    fn gone(&self) -> ClientError {
        if self.inner.deregistered.load(Ordering::Acquire) {
            return ClientError::Deregistered(self.inner.id.clone());
        }
        ClientError::Closed(
            self.inner
                .client
                .close_reason()
                .unwrap_or(crate::CloseReason::ByBroker),
        )
    }
}
