//! [`Agent`]: a registered agent, its token, and one typed method per
//! `a2a.*` call (docs/protocol.md §5 Methods), each in two forms: `name_async(..)`
//! submits the call and returns a [`Pending`] at once; `name(..)` is
//! `name_async(..)?.wait(call_timeout)`. Plus the agent's events: a handler
//! ([`Agent::set_event_handler`]), a non-blocking drain
//! ([`Agent::try_events`]), a `Stream` ([`Agent::events`]) and the blocking
//! [`Agent::wait`].
//!
//! The token never leaves this type: every method fills it in, so a caller
//! cannot act as another agent by mistake.

use crate::client::Client;
use crate::error::{ClientError, CloseReason};
use crate::events::{EventQueue, Owner, QueueHandler, SharedQueue};
use crate::pending::{on_reader_thread, Convert, Pending};
use crate::shared::Hook;
use crate::Event;
use a2a_proto::call::{Call, Outcome};
use a2a_proto::limits::A2A_MAX_STREAM_WAIT_SECONDS;
use a2a_proto::params::{
    AcquireLeaseParams, ArtifactParams, CancelParams, GetParams, Lease, ListAgentsParams,
    ListLeasesParams, ListRole, ListTasksParams, PushGetParams, PushSetParams, RegisterParams,
    RegisterResult, ReleaseLeaseParams, RenewLeaseParams, ResubscribeParams, SendConfiguration,
    SendParams, StatusParams, TaskListResult, TokenParams, WaitParams,
};
use a2a_proto::request::{self, Authed, Method};
use a2a_proto::types::{AgentCard, Artifact, Delivery, Message, PushConfig, State, Task};
use futures_core::Stream;
use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
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

/// How long one `a2a.events.wait` of a pull agent's pump may be held by
/// the broker: short, so that a pump no longer wanted stops soon.
const PUMP_WAIT: Duration = Duration::from_secs(10);

/// A registered agent.
///
/// Threads: cheap to clone (an `Arc`), `Send + Sync`; any thread may call
/// any method. Clones share one event queue (each event goes to one
/// reader). Lifetime: it keeps its client's connection open while it
/// lives; when its last handle is dropped its queue and handler go, and its
/// later events are the client's unclaimed events. The broker forgets it
/// at [`Agent::deregister`] or when the connection closes.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<AgentInner>,
}

pub(crate) struct AgentInner {
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
    /// The queue the demux fills (a push agent's; a pull agent's stays
    /// empty: its events are fetched by `wait`).
    queue: SharedQueue,
    /// Pull agents: the highest `seq` already handed to a caller, sent as
    /// `afterSeq` by the next `a2a.events.wait` (held only briefly).
    pull_ack: Mutex<Option<u64>>,
    /// Pull agents: held by a direct `wait` for its whole call, so that two
    /// waits of one agent never run at once (they would return the same
    /// events); a second wait queues for it at most its own timeout. The
    /// pump starts only under it.
    pull_turn: Mutex<()>,
    /// Pull agents: an `a2a.events.wait` of the pump is in flight (see
    /// [`Agent::kick_pump`]).
    pump_in_flight: AtomicBool,
    /// Pull agents: live [`Events`] streams, which keep the pump running.
    pub(crate) pump_streams: AtomicUsize,
    deregistered: AtomicBool,
}

impl AgentInner {
    /// The weak handle the reader side keeps of this agent.
    fn owner(self: &Arc<Self>) -> Owner {
        let weak: Weak<AgentInner> = Arc::downgrade(self);
        weak
    }
}

impl Drop for AgentInner {
    fn drop(&mut self) {
        // Nobody can read this queue again: stop routing to it (later
        // events become the client's unclaimed ones) and drop its handler.
        self.client
            .inner_demux()
            .detach(&self.id, &self.context_id, &self.queue);
        self.queue.close();
    }
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

/// Registration lives here, beside the [`Agent`] it makes: the client
/// (the connection) knows nothing of agents.
impl Client {
    /// Registers an agent in `context_id` (the card's `name` is the name it
    /// asks for; the broker may suffix it). A push agent's events are
    /// queued for [`Agent::wait`] from now on. Blocking:
    /// [`Client::register_async`] waited for at most `call_timeout`.
    pub fn register(
        &self,
        context_id: &str,
        card: AgentCard,
        delivery: Delivery,
    ) -> Result<Agent, ClientError> {
        self.register_async(context_id, card, delivery)?
            .wait(self.options().call_timeout)
    }

    /// `a2a.agents.register`, submitted. The [`Agent`] is made when the
    /// answer is taken (its events meanwhile wait among the unclaimed ones,
    /// and are handed to it then, in order); if the `Pending` is dropped
    /// untaken, the agent stays registered with no handle, like one made
    /// through [`Client::call_json`].
    pub fn register_async(
        &self,
        context_id: &str,
        card: AgentCard,
        delivery: Delivery,
    ) -> Result<Pending<Agent>, ClientError> {
        self.register_with_async(context_id, card, delivery, false)
    }

    /// [`Client::register_async`], `hidden` (ext) as asked: a hidden
    /// agent is left out of other agents' discovery (`a2a.agents.list`,
    /// `to: "*"`); the A2A gateway registers its requesters so.
    pub fn register_with_async(
        &self,
        context_id: &str,
        card: AgentCard,
        delivery: Delivery,
        hidden: bool,
    ) -> Result<Pending<Agent>, ClientError> {
        let call = Call::Register(RegisterParams {
            context_id: context_id.to_owned(),
            card,
            delivery: Some(delivery),
            hidden,
        });
        let client = self.clone();
        let context_id = context_id.to_owned();
        self.conn().submit(
            call,
            Convert::Boxed(Box::new(move |outcome| match outcome {
                Outcome::Registered(r) => Ok(Agent::new(client, &context_id, r, delivery)),
                other => Err(ClientError::unexpected("a2a.agents.register", &other)),
            })),
            None,
        )
    }
}

/// A conversion from the broker's result to a method's, as a plain
/// function (no allocation per call).
macro_rules! convert {
    ($method:literal, $pat:pat => $val:expr) => {
        Convert::Fn(|outcome| match outcome {
            $pat => Ok($val),
            other => Err(ClientError::unexpected($method, &other)),
        })
    };
}

/// Defines the blocking form of an `_async` method: the same arguments,
/// waited for at most the client's `call_timeout`.
macro_rules! blocking {
    ($(#[$doc:meta])* $name:ident => $async_name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty) => {
        $(#[$doc])*
        ///
        #[doc = concat!("Blocking: [`Agent::", stringify!($async_name), "`] waited for at most [`crate::ClientOptions::call_timeout`].")]
        pub fn $name(&self, $($arg: $ty),*) -> Result<$ret, ClientError> {
            self.$async_name($($arg),*)?.wait(self.call_timeout())
        }
    };
}

impl Agent {
    /// Builds the agent of a `register` answer; a push agent's queue is
    /// attached to the demux before the handle is returned.
    pub(crate) fn new(
        client: Client,
        context_id: &str,
        r: RegisterResult,
        delivery: Delivery,
    ) -> Agent {
        let queue: SharedQueue = crate::demux::new_queue();
        let inner = Arc::new(AgentInner {
            client,
            id: r.agent_id,
            token: r.token,
            context_id: context_id.to_owned(),
            card: r.card,
            delivery,
            queue,
            pull_ack: Mutex::new(None),
            pull_turn: Mutex::new(()),
            pump_in_flight: AtomicBool::new(false),
            pump_streams: AtomicUsize::new(0),
            deregistered: AtomicBool::new(false),
        });
        // A pull agent's queue is attached too: nothing is routed to it (its
        // events never travel as notifications), but it closes with the
        // connection, which ends its streams.
        inner.client.inner_demux().attach(
            &inner.id,
            &inner.context_id,
            &inner.queue,
            inner.owner(),
        );
        Agent { inner }
    }

    pub(crate) fn from_inner(inner: Arc<AgentInner>) -> Agent {
        Agent { inner }
    }

    pub(crate) fn queue(&self) -> &EventQueue {
        &self.inner.queue
    }

    pub(crate) fn pump_streams(&self) -> &AtomicUsize {
        &self.inner.pump_streams
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

    /// Has [`Agent::deregister`] (or its `_async` form) succeeded?
    pub fn is_deregistered(&self) -> bool {
        self.inner.deregistered.load(Ordering::Acquire)
    }

    fn call_timeout(&self) -> Duration {
        self.inner.client.options().call_timeout
    }

    fn token_opt(&self) -> Option<String> {
        Some(self.inner.token.clone())
    }

    /// The `a2a.message.send` of `message`, answered by one task or (to
    /// `"*"`) by one per peer.
    fn send_call(&self, message: Message, configuration: Option<SendConfiguration>) -> Call {
        Call::Send(SendParams {
            token: self.token_opt(),
            message,
            configuration,
        })
    }

    fn submit<T>(
        &self,
        call: Call,
        convert: Convert<T>,
        hook: Option<Hook>,
    ) -> Result<Pending<T>, ClientError> {
        if self.is_deregistered() {
            return Err(ClientError::Deregistered(self.inner.id.clone()));
        }
        self.inner.client.conn().submit(call, convert, hook)
    }

    /// Any method of the table, submitted as this agent: `M`'s params with
    /// the agent's token filled in, answered by `M`'s result. Every typed
    /// method below is this call with its arguments gathered into params
    /// and a field taken out of the result; a method added to the table is
    /// reachable here before it has a typed method of its own.
    ///
    /// ```no_run
    /// # fn f(agent: &a2a_client::Agent) -> Result<(), a2a_client::ClientError> {
    /// use a2a_client::proto::{params::RenewLeaseParams, request::LeaseRenew};
    /// let params = RenewLeaseParams { token: None, lease_id: "l-1".into(), ttl_seconds: 60 };
    /// let renewed = agent.call_async::<LeaseRenew>(params)?.wait(std::time::Duration::from_secs(5))?;
    /// println!("{}", renewed.lease.expires_at);
    /// # Ok(()) }
    /// ```
    pub fn call_async<M: Method>(
        &self,
        mut params: M::Params,
    ) -> Result<Pending<M::Result>, ClientError>
    where
        M::Params: Authed,
    {
        params.set_token(self.inner.token.clone());
        self.submit(
            M::call(params),
            Convert::Fn(|outcome| {
                M::result(outcome).map_err(|other| ClientError::unexpected(M::NAME, &other))
            }),
            None,
        )
    }

    /// [`Agent::call_async`] waited for at most
    /// [`crate::ClientOptions::call_timeout`]: the blocking form, from the
    /// same body.
    pub fn call<M: Method>(&self, params: M::Params) -> Result<M::Result, ClientError>
    where
        M::Params: Authed,
    {
        self.call_async::<M>(params)?.wait(self.call_timeout())
    }

    /// `a2a.agents.list`, submitted: the cards it may address, optionally
    /// only those with a skill of that id or tag.
    pub fn list_agents_async(
        &self,
        skill: Option<&str>,
    ) -> Result<Pending<Vec<AgentCard>>, ClientError> {
        let call = Call::ListAgents(ListAgentsParams {
            token: self.token_opt(),
            skill: skill.map(str::to_owned),
        });
        self.submit(
            call,
            convert!("a2a.agents.list", Outcome::Agents(r) => r.agents),
            None,
        )
    }

    blocking!(
        /// `a2a.agents.list`: the cards it may address, optionally only
        /// those with a skill of that id or tag.
        list_agents => list_agents_async(skill: Option<&str>) -> Vec<AgentCard>
    );

    /// `a2a.message.send`, submitted: creates a task (no `taskId`;
    /// addressed by `to`) or adds the message to one. For `to: "*"` use
    /// [`Agent::broadcast_async`]. A blocking send
    /// (`configuration.blocking`) is answered when the task settles; the
    /// connection stays free meanwhile.
    pub fn send_async(
        &self,
        message: Message,
        configuration: Option<SendConfiguration>,
    ) -> Result<Pending<Task>, ClientError> {
        self.submit(
            self.send_call(message, configuration),
            convert!("a2a.message.send", Outcome::Task(r) => r.task),
            None,
        )
    }

    blocking!(
        /// `a2a.message.send`: creates a task (no `taskId`; addressed by
        /// `to`) or adds the message to one. For `to: "*"` use
        /// [`Agent::broadcast`].
        send => send_async(message: Message, configuration: Option<SendConfiguration>) -> Task
    );

    /// `a2a.message.send` with `to: "*"`, submitted: one task per
    /// addressable peer.
    pub fn broadcast_async(
        &self,
        mut message: Message,
        configuration: Option<SendConfiguration>,
    ) -> Result<Pending<Vec<Task>>, ClientError> {
        message.to = Some("*".into());
        self.submit(
            self.send_call(message, configuration),
            convert!("a2a.message.send", Outcome::Tasks(r) => r.tasks),
            None,
        )
    }

    blocking!(
        /// `a2a.message.send` with `to: "*"`: one task per addressable peer.
        broadcast => broadcast_async(message: Message, configuration: Option<SendConfiguration>) -> Vec<Task>
    );

    /// `a2a.message.stream`, submitted: a send that also emits the task's
    /// current status to this agent.
    pub fn stream_async(&self, message: Message) -> Result<Pending<Task>, ClientError> {
        let call = Call::Stream(SendParams {
            token: self.token_opt(),
            message,
            configuration: None,
        });
        self.submit(
            call,
            convert!("a2a.message.stream", Outcome::Task(r) => r.task),
            None,
        )
    }

    blocking!(
        /// `a2a.message.stream`: a send that also emits the task's current
        /// status to this agent.
        stream => stream_async(message: Message) -> Task
    );

    /// `a2a.tasks.get`, submitted, with the last `history_length` messages
    /// if given.
    pub fn get_task_async(
        &self,
        id: &str,
        history_length: Option<u64>,
    ) -> Result<Pending<Task>, ClientError> {
        let call = Call::Get(GetParams {
            token: self.token_opt(),
            id: id.to_owned(),
            history_length,
        });
        self.submit(
            call,
            convert!("a2a.tasks.get", Outcome::Task(r) => r.task),
            None,
        )
    }

    blocking!(
        /// `a2a.tasks.get`, with the last `history_length` messages if given.
        get_task => get_task_async(id: &str, history_length: Option<u64>) -> Task
    );

    /// `a2a.tasks.status` (the worker's), submitted: moves the task,
    /// optionally with a message.
    pub fn set_status_async(
        &self,
        id: &str,
        state: State,
        message: Option<Message>,
    ) -> Result<Pending<Task>, ClientError> {
        let call = Call::Status(StatusParams {
            token: self.token_opt(),
            id: id.to_owned(),
            state,
            message,
        });
        self.submit(
            call,
            convert!("a2a.tasks.status", Outcome::Task(r) => r.task),
            None,
        )
    }

    blocking!(
        /// `a2a.tasks.status` (the worker's): moves the task, optionally
        /// with a message.
        set_status => set_status_async(id: &str, state: State, message: Option<Message>) -> Task
    );

    /// `a2a.tasks.cancel` (either party's), submitted.
    pub fn cancel_async(
        &self,
        id: &str,
        message: Option<Message>,
    ) -> Result<Pending<Task>, ClientError> {
        let call = Call::Cancel(CancelParams {
            token: self.token_opt(),
            id: id.to_owned(),
            message,
        });
        self.submit(
            call,
            convert!("a2a.tasks.cancel", Outcome::Task(r) => r.task),
            None,
        )
    }

    blocking!(
        /// `a2a.tasks.cancel` (either party's).
        cancel => cancel_async(id: &str, message: Option<Message>) -> Task
    );

    /// `a2a.tasks.resubscribe`, submitted: re-emits the task's status to
    /// this agent, after replaying its events above `after_version` if
    /// given. The events arrive before the answer.
    pub fn resubscribe_async(
        &self,
        id: &str,
        after_version: Option<u64>,
    ) -> Result<Pending<Task>, ClientError> {
        let call = Call::Resubscribe(ResubscribeParams {
            token: self.token_opt(),
            id: id.to_owned(),
            after_version,
        });
        self.submit(
            call,
            convert!("a2a.tasks.resubscribe", Outcome::Task(r) => r.task),
            None,
        )
    }

    blocking!(
        /// `a2a.tasks.resubscribe`: re-emits the task's status to this
        /// agent, after replaying its events above `after_version` if given.
        resubscribe => resubscribe_async(id: &str, after_version: Option<u64>) -> Task
    );

    /// `a2a.tasks.pushNotificationConfig.set`, submitted: this agent gets
    /// an `a2a.push` when the task ends.
    pub fn set_push_config_async(
        &self,
        task_id: &str,
        config: PushConfig,
    ) -> Result<Pending<Option<PushConfig>>, ClientError> {
        let call = Call::PushSet(PushSetParams {
            token: self.token_opt(),
            task_id: task_id.to_owned(),
            config,
        });
        self.submit(
            call,
            convert!("a2a.tasks.pushNotificationConfig.set", Outcome::Config(r) => r.config),
            None,
        )
    }

    blocking!(
        /// `a2a.tasks.pushNotificationConfig.set`: this agent gets an
        /// `a2a.push` when the task ends.
        set_push_config => set_push_config_async(task_id: &str, config: PushConfig) -> Option<PushConfig>
    );

    /// `a2a.tasks.pushNotificationConfig.get`, submitted: `None` when none
    /// is set.
    pub fn push_config_async(
        &self,
        task_id: &str,
    ) -> Result<Pending<Option<PushConfig>>, ClientError> {
        let call = Call::PushGet(PushGetParams {
            token: self.token_opt(),
            task_id: task_id.to_owned(),
        });
        self.submit(
            call,
            convert!("a2a.tasks.pushNotificationConfig.get", Outcome::Config(r) => r.config),
            None,
        )
    }

    blocking!(
        /// `a2a.tasks.pushNotificationConfig.get`: `None` when none is set.
        push_config => push_config_async(task_id: &str) -> Option<PushConfig>
    );

    /// `a2a.tasks.list`, submitted: one page of this agent's tasks, newest
    /// first.
    pub fn list_tasks_async(
        &self,
        query: TaskQuery,
    ) -> Result<Pending<TaskListResult>, ClientError> {
        self.call_async::<request::ListTasks>(ListTasksParams {
            token: None,
            role: query.role,
            state: query.state,
            limit: query.limit,
            cursor: query.cursor,
        })
    }

    blocking!(
        /// `a2a.tasks.list`: one page of this agent's tasks, newest first.
        list_tasks => list_tasks_async(query: TaskQuery) -> TaskListResult
    );

    /// `a2a.tasks.artifact` (the worker's), submitted: adds an artifact, or
    /// with `append` extends the one with the same `artifactId`.
    pub fn add_artifact_async(
        &self,
        id: &str,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<Pending<Task>, ClientError> {
        let call = Call::Artifact(ArtifactParams {
            token: self.token_opt(),
            id: id.to_owned(),
            artifact,
            append,
            last_chunk,
        });
        self.submit(
            call,
            convert!("a2a.tasks.artifact", Outcome::Task(r) => r.task),
            None,
        )
    }

    blocking!(
        /// `a2a.tasks.artifact` (the worker's): adds an artifact, or with
        /// `append` extends the one with the same `artifactId`.
        add_artifact => add_artifact_async(id: &str, artifact: Artifact, append: bool, last_chunk: bool) -> Task
    );

    /// `a2a.agents.deregister`, submitted: the token dies at once; the
    /// broker fails the tasks it serves and cancels those it requested.
    /// When the answer arrives (on the reader thread, before the
    /// `Pending` completes) the agent is marked deregistered: later calls
    /// fail at submission with [`ClientError::Deregistered`], events already
    /// queued stay readable, then `wait` reports `Deregistered` and the
    /// stream ends.
    pub fn deregister_async(&self) -> Result<Pending<()>, ClientError> {
        let call = Call::Deregister(TokenParams {
            token: self.token_opt(),
        });
        // Weak: a pending deregistration must not keep the agent alive.
        let agent: Weak<AgentInner> = Arc::downgrade(&self.inner);
        let hook: Hook = Box::new(move |answer| {
            if !matches!(answer, Ok(Outcome::Ok(r)) if r.ok) {
                return;
            }
            if let Some(inner) = agent.upgrade() {
                inner.deregistered.store(true, Ordering::Release);
                inner
                    .client
                    .inner_demux()
                    .detach(&inner.id, &inner.context_id, &inner.queue);
                inner.queue.close();
            }
        });
        self.submit(
            call,
            Convert::Fn(|outcome| match outcome {
                Outcome::Ok(r) if r.ok => Ok(()),
                Outcome::Ok(_) => Err(ClientError::Protocol(
                    "deregister answered ok: false".into(),
                )),
                other => Err(ClientError::unexpected("a2a.agents.deregister", &other)),
            }),
            Some(hook),
        )
    }

    blocking!(
        /// `a2a.agents.deregister`: the token dies at once; the broker fails
        /// the tasks it serves and cancels those it requested. Events
        /// already queued stay readable; then `wait` reports
        /// [`ClientError::Deregistered`].
        deregister => deregister_async() -> ()
    );

    /// `a2a.leases.acquire` (ext), submitted: a lease on `paths` in this
    /// agent's context for `ttl_seconds`; a conflict is
    /// `A2A_LEASE_CONFLICT` (`data.holder`, `data.leaseId`, `data.paths`).
    /// With `wait_seconds` a conflict waits (a parked call) until it
    /// clears or the wait ends.
    pub fn acquire_lease_async(
        &self,
        paths: &[&str],
        ttl_seconds: u64,
        exclusive: bool,
        reason: Option<&str>,
        wait_seconds: Option<u64>,
    ) -> Result<Pending<Lease>, ClientError> {
        let call = Call::LeaseAcquire(AcquireLeaseParams {
            token: self.token_opt(),
            paths: paths.iter().map(|p| (*p).to_owned()).collect(),
            ttl_seconds: i64::try_from(ttl_seconds).unwrap_or(i64::MAX),
            exclusive,
            reason: reason.map(str::to_owned),
            wait_seconds: wait_seconds.map(|w| i64::try_from(w).unwrap_or(i64::MAX)),
        });
        self.submit(
            call,
            convert!("a2a.leases.acquire", Outcome::Lease(r) => r.lease),
            None,
        )
    }

    /// `a2a.leases.acquire` (ext): a lease on `paths` in this agent's
    /// context for `ttl_seconds`, or `A2A_LEASE_CONFLICT`. With
    /// `wait_seconds` a conflict waits until it clears or the wait ends.
    ///
    /// Blocking: [`Agent::acquire_lease_async`] waited for at most
    /// [`crate::ClientOptions::call_timeout`] beyond `wait_seconds`.
    pub fn acquire_lease(
        &self,
        paths: &[&str],
        ttl_seconds: u64,
        exclusive: bool,
        reason: Option<&str>,
        wait_seconds: Option<u64>,
    ) -> Result<Lease, ClientError> {
        let waits = Duration::from_secs(wait_seconds.unwrap_or(0));
        self.acquire_lease_async(paths, ttl_seconds, exclusive, reason, wait_seconds)?
            .wait(self.call_timeout().saturating_add(waits))
    }

    /// `a2a.leases.renew` (ext), submitted: the holder's live lease now
    /// ends `ttl_seconds` from now.
    pub fn renew_lease_async(
        &self,
        lease_id: &str,
        ttl_seconds: u64,
    ) -> Result<Pending<Lease>, ClientError> {
        let call = Call::LeaseRenew(RenewLeaseParams {
            token: self.token_opt(),
            lease_id: lease_id.to_owned(),
            ttl_seconds: i64::try_from(ttl_seconds).unwrap_or(i64::MAX),
        });
        self.submit(
            call,
            convert!("a2a.leases.renew", Outcome::Lease(r) => r.lease),
            None,
        )
    }

    blocking!(
        /// `a2a.leases.renew` (ext): the holder's live lease now ends
        /// `ttl_seconds` from now.
        renew_lease => renew_lease_async(lease_id: &str, ttl_seconds: u64) -> Lease
    );

    /// `a2a.leases.release` (ext), submitted: the holder ends its lease
    /// (idempotent for the holder).
    pub fn release_lease_async(&self, lease_id: &str) -> Result<Pending<()>, ClientError> {
        let call = Call::LeaseRelease(ReleaseLeaseParams {
            token: self.token_opt(),
            lease_id: lease_id.to_owned(),
        });
        self.submit(
            call,
            convert!("a2a.leases.release", Outcome::Ok(_) => ()),
            None,
        )
    }

    blocking!(
        /// `a2a.leases.release` (ext): the holder ends its lease
        /// (idempotent for the holder).
        release_lease => release_lease_async(lease_id: &str) -> ()
    );

    /// `a2a.leases.list` (ext), submitted: the live leases of this agent's
    /// context, only those overlapping `path` when given.
    pub fn list_leases_async(
        &self,
        path: Option<&str>,
    ) -> Result<Pending<Vec<Lease>>, ClientError> {
        let call = Call::LeaseList(ListLeasesParams {
            token: self.token_opt(),
            path: path.map(str::to_owned),
        });
        self.submit(
            call,
            convert!("a2a.leases.list", Outcome::Leases(r) => r.leases),
            None,
        )
    }

    blocking!(
        /// `a2a.leases.list` (ext): the live leases of this agent's
        /// context, only those overlapping `path` when given.
        list_leases => list_leases_async(path: Option<&str>) -> Vec<Lease>
    );

    /// Installs `handler` as the receiver of this agent's events (or, with
    /// `None`, removes it so they queue again for [`Agent::wait`],
    /// [`Agent::try_events`] and [`Agent::events`]).
    ///
    /// - It runs on the connection's reader thread, one event at a time, in
    ///   arrival order, and is handed this agent, so it can answer with
    ///   `_async` calls (and `on_complete`) without holding a clone; a
    ///   blocking call of its own client fails there with
    ///   [`ClientError::WouldDeadlock`].
    /// - Events queued before it was installed are handed to it first, on
    ///   the calling thread, before this returns.
    /// - While it is installed, events go only to it.
    /// - When this returns (from any thread but the handler's own) no call
    ///   of the replaced handler is running or will run; from inside the
    ///   handler the swap takes effect when the running call returns.
    /// - The handler is dropped when replaced, when the agent's last handle
    ///   is dropped, or when no event can come any more (deregistration,
    ///   closed connection).
    ///
    /// A pull agent's events are fetched from the broker by a chain of
    /// `a2a.events.wait` calls (the "pump", one in flight at a time, no
    /// thread of its own) while a handler is installed or an
    /// [`Agent::events`] stream lives; what it fetches is queued here and
    /// acknowledged by its next call.
    pub fn set_event_handler(&self, handler: Option<EventHandler>) {
        let install = handler.is_some();
        // Bound to this agent by a weak handle: the queue (and the reader
        // side that runs it) holds no agent; it keeps the agent alive
        // while the handler runs, so the upgrade below succeeds.
        let handler = handler.map(|mut h| {
            let agent = Arc::downgrade(&self.inner);
            Box::new(move |ev: Event| {
                if let Some(inner) = agent.upgrade() {
                    h(&Agent { inner }, ev);
                }
            }) as QueueHandler
        });
        self.inner.queue.set_handler(handler);
        if install {
            self.kick_pump();
        }
    }

    /// Appends to `out` up to `max` of the events queued for this agent,
    /// without blocking; returns how many. Always 0 while an event handler
    /// is installed. A pull agent's queue is filled only while its pump
    /// runs (see [`Agent::set_event_handler`]).
    pub fn try_events(&self, out: &mut Vec<Event>, max: usize) -> usize {
        self.inner.queue.try_take(out, max)
    }

    /// This agent's events as a [`futures_core::Stream`] (see [`Events`]).
    /// For a pull agent, a live stream keeps the pump running.
    pub fn events(&self) -> Events {
        Events::new(self.clone())
    }

    /// Starts a pull agent's pump if it is wanted (a handler, or a live
    /// stream) and not running. Never blocks: if a direct `wait` holds the
    /// agent's turn, that wait starts the pump when it ends.
    pub(crate) fn kick_pump(&self) {
        let inner = &self.inner;
        if inner.delivery != Delivery::Pull || !self.pump_wanted() {
            return;
        }
        let Some(_turn) = inner.pull_turn.try_lock() else {
            return;
        };
        if inner.pump_in_flight.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.pump_once().is_err() {
            inner.pump_in_flight.store(false, Ordering::Release);
        }
    }

    fn pump_wanted(&self) -> bool {
        !self.is_deregistered()
            && (self.inner.queue.has_handler()
                || self.inner.pump_streams.load(Ordering::Acquire) > 0)
    }

    /// Submits one `a2a.events.wait` of the pump; its completion (on the
    /// reader thread) queues the events, which may run the handler, and
    /// submits the next while the pump is wanted.
    fn pump_once(&self) -> Result<(), ClientError> {
        let call = Call::Wait(WaitParams {
            token: self.token_opt(),
            timeout_seconds: Some(PUMP_WAIT.as_secs_f64()),
            after_seq: *self.inner.pull_ack.lock(),
        });
        // Weak: a pump in flight must not keep the agent alive.
        let agent = Arc::downgrade(&self.inner);
        self.submit(
            call,
            convert!("a2a.events.wait", Outcome::Events(r) => r),
            None,
        )?
        .on_complete(move |result| {
            let Some(inner) = agent.upgrade() else { return };
            let me = Agent::from_inner(inner);
            let inner = &me.inner;
            let failed = match result {
                Ok(r) => {
                    if let Some(max) = r.events.iter().filter_map(Event::seq).max() {
                        let mut ack = inner.pull_ack.lock();
                        *ack = Some(ack.map_or(max, |a| a.max(max)));
                    }
                    let owner = inner.owner();
                    for ev in r.events {
                        inner.queue.deliver(ev, &owner);
                    }
                    false
                }
                Err(_) => true,
            };
            if !failed && me.pump_wanted() && me.pump_once().is_ok() {
                return;
            }
            inner.pump_in_flight.store(false, Ordering::Release);
            // Wanted again meanwhile (a handler installed while this call
            // was in flight): start over, unless the connection is gone.
            if !failed {
                me.kick_pump();
            }
        });
        Ok(())
    }

    /// Is an event queued for [`Agent::wait`] right now (or the queue
    /// closed, so `wait` would return at once)? Never blocks.
    pub fn has_events(&self) -> bool {
        self.inner.queue.ready()
    }

    /// This agent's events: what is queued, at once; else blocks until
    /// something arrives or `timeout` passes (then `Ok` and empty).
    ///
    /// A push agent reads the queue the connection's reader fills (empty
    /// while an event handler is installed). A pull agent calls
    /// `a2a.events.wait` and acknowledges, on its next wait, the events
    /// this one returned (`afterSeq`), so an event is returned once unless
    /// a response is lost; two waits of one pull agent run one after the
    /// other, and the second gives up (empty) when its own timeout passes.
    /// While a pull agent's pump runs (a handler or a stream), its `wait`
    /// reads the queue the pump fills instead.
    ///
    /// Fails with [`ClientError::Closed`] once the connection is gone and
    /// the queue is empty, [`ClientError::Deregistered`] after
    /// [`Agent::deregister`], and [`ClientError::WouldDeadlock`] if it would
    /// block on the connection's reader thread.
    pub fn wait(&self, timeout: Duration) -> Result<Vec<Event>, ClientError> {
        let conn_id = self.inner.client.conn_id();
        match self.inner.delivery {
            Delivery::Push => {
                if on_reader_thread(conn_id) && !timeout.is_zero() && !self.has_events() {
                    return Err(ClientError::WouldDeadlock);
                }
                self.inner
                    .queue
                    .wait(Instant::now().checked_add(timeout))
                    .map_err(|()| self.gone())
            }
            Delivery::Pull => {
                if on_reader_thread(conn_id) {
                    return Err(ClientError::WouldDeadlock);
                }
                let r = self.wait_pull(timeout);
                // A handler or stream may have wanted the pump meanwhile.
                self.kick_pump();
                r
            }
        }
    }

    fn wait_pull(&self, timeout: Duration) -> Result<Vec<Event>, ClientError> {
        let deadline = Instant::now().checked_add(timeout);
        let Some(turn) = self.inner.pull_turn.try_lock_for(timeout) else {
            return Ok(Vec::new());
        };
        if self.inner.pump_in_flight.load(Ordering::Acquire) || self.pump_wanted() {
            // The pump fetches this agent's events: read its queue (and
            // start the pump, if it could not start while this held the
            // turn).
            drop(turn);
            self.kick_pump();
            return self.inner.queue.wait(deadline).map_err(|()| self.gone());
        }
        // Events the pump fetched before it stopped come first.
        let mut queued = Vec::new();
        if self.try_events(&mut queued, usize::MAX) > 0 {
            return Ok(queued);
        }
        let most = Duration::from_secs(A2A_MAX_STREAM_WAIT_SECONDS);
        loop {
            // The broker clamps a wait to A2A_MAX_STREAM_WAIT_SECONDS, so a
            // longer timeout is served by several waits.
            let left = deadline
                .map_or(most, |d| d.saturating_duration_since(Instant::now()))
                .min(most);
            if self.is_deregistered() {
                return Err(self.gone());
            }
            let call = Call::Wait(WaitParams {
                token: self.token_opt(),
                timeout_seconds: Some(left.as_secs_f64()),
                after_seq: *self.inner.pull_ack.lock(),
            });
            let grace = self.inner.client.options().io_timeout;
            let r = self
                .submit(
                    call,
                    convert!("a2a.events.wait", Outcome::Events(r) => r),
                    None,
                )?
                .wait(left + grace)?;
            if let Some(max) = r.events.iter().filter_map(Event::seq).max() {
                let mut ack = self.inner.pull_ack.lock();
                *ack = Some(ack.map_or(max, |a| a.max(max)));
            }
            if !r.events.is_empty() || deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(r.events);
            }
        }
    }

    fn gone(&self) -> ClientError {
        if self.is_deregistered() {
            return ClientError::Deregistered(self.inner.id.clone());
        }
        ClientError::Closed(
            self.inner
                .client
                .close_reason()
                .unwrap_or(CloseReason::ByBroker),
        )
    }
}

/// An agent's event handler: called with the agent (so it can answer with
/// `_async` calls without holding a clone that would keep the agent alive)
/// and one event, on the connection's reader thread. It must not block for
/// long: the reader thread delivers every answer and event of the
/// connection. Blocking calls of its own client fail there with
/// [`crate::ClientError::WouldDeadlock`].
pub type EventHandler = Box<dyn FnMut(&Agent, Event) + Send + 'static>;

/// An agent's events as a [`futures_core::Stream`], from
/// [`crate::Agent::events`]. Yields each queued event once (shared with
/// `wait` and `try_events`: each event goes to one reader), nothing while
/// an event handler is installed, and ends when no event can come any more
/// (connection closed, agent deregistered). For a pull agent, a live
/// stream keeps the agent's pump fetching its events.
///
/// Threads: `Send + Sync + Unpin`; the reader thread wakes the polling
/// task. Lifetime: holds its agent (and so the connection) open.
#[derive(Debug)]
pub struct Events {
    agent: Agent,
}

impl Events {
    pub(crate) fn new(agent: Agent) -> Events {
        agent.pump_streams().fetch_add(1, Ordering::AcqRel);
        agent.kick_pump();
        Events { agent }
    }
}

impl Clone for Events {
    fn clone(&self) -> Events {
        Events::new(self.agent.clone())
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        self.agent.pump_streams().fetch_sub(1, Ordering::AcqRel);
    }
}

impl Stream for Events {
    type Item = Event;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.agent.queue().poll_next(cx)
    }
}
