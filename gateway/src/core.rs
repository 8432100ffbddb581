//! The gateway's core: the broker connection, the exposed agents, one
//! requester agent per (identity, A2A context), and the v1.0 operations
//! translated to `a2a.*` calls. No HTTP here.
//!
//! Identities and contexts: every A2A `contextId` of every caller identity
//! is a broker agent of its own, registered by the gateway in the broker
//! context `gw1/<identity>/<contextId>` (see `mapping`). The broker bounds
//! tasks and sends per registration and scopes every task to its parties,
//! so conversations stay apart exactly as A2A contexts are, and a caller
//! never reaches another identity's tasks.
//!
//! Events: each requester's event handler runs on the client's reader
//! thread and publishes the broker's task events, in commit order, to the
//! context's [`Hub`] (a broadcast channel) and to the push deliverer.
//! Calls of the requester itself (a follow-up message, a cancel) route no
//! event back to it (the broker routes to the counterpart), so their
//! results are published the same way, from their completion callback on
//! the same reader thread, which keeps every hub in version order.
//! Subscribers skip what is not newer than what they have sent.

use crate::mapping::{self, GatewayError, Op, TaskView};
use crate::push::Pusher;
use crate::v1;
use a2a_client::{Agent, Client, ClientError, Delivery, ListRole, Pending, TaskQuery};
use a2a_proto::params::SendConfiguration;
use a2a_proto::types::{
    AgentCard, AgentKind, Notification, StatusUpdate, StreamEvent, Task, TaskStatus,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{broadcast, OnceCell};

/// Events a subscriber may fall behind by before it is cut off (it then
/// ends its stream; the client can subscribe again).
const HUB_CAPACITY: usize = 256;

/// One task event, as the broker committed it.
#[derive(Debug, Clone)]
pub struct HubEvent {
    pub task_id: String,
    /// The task's version after this event.
    pub version: u64,
    pub event: Arc<StreamEvent>,
}

/// A context's broadcast of task events.
pub type Hub = broadcast::Sender<HubEvent>;

/// A context's hub, made by its first subscriber: most contexts never
/// have one (a broadcast buffer costs a few pages per context, which a
/// profile of one-call contexts showed as page zeroing).
pub type LazyHub = Arc<std::sync::OnceLock<Hub>>;

/// A caller identity's A2A context: its requester agent and its hub.
pub struct Ctx {
    pub identity: String,
    pub v1_context: String,
    pub agent: Agent,
    pub hub: LazyHub,
}

impl Ctx {
    /// A receiver of the context's task events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.hub
            .get_or_init(|| broadcast::channel(HUB_CAPACITY).0)
            .subscribe()
    }
}

/// A local agent served over A2A.
#[derive(Debug, Clone)]
pub struct Exposed {
    /// Its peer id on the broker (the URL path segment too).
    pub name: String,
    /// Its card as the broker lists it.
    pub card: AgentCard,
}

/// The gateway's limits and switches (see `security`).
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// Most A2A contexts held at once (each is a broker registration).
    pub max_contexts: usize,
    /// Most tasks tracked (each maps a task id to its context).
    pub max_tasks: usize,
    /// The kind of agent the gateway registers (it addresses only agents
    /// of the same kind).
    pub kind: AgentKind,
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self {
            max_contexts: 100_000,
            max_tasks: 1_000_000,
            kind: AgentKind::Subagent,
        }
    }
}

/// The gateway's state, shared by every HTTP request.
pub struct Core {
    client: Client,
    config: CoreConfig,
    exposed: Vec<Exposed>,
    /// Broker context -> its requester, made once.
    contexts: Mutex<HashMap<String, Arc<OnceCell<Arc<Ctx>>>>>,
    /// Task id -> the context that created it, and the exposed agent
    /// that serves it.
    tasks: Mutex<HashMap<String, (Arc<Ctx>, String)>>,
    pub pusher: Pusher,
}

/// A subscription to one task: the snapshot first, then its newer events.
pub struct Subscription {
    pub ctx: Arc<Ctx>,
    pub snapshot: Task,
    pub rx: broadcast::Receiver<HubEvent>,
}

/// What `SendMessage` answers.
pub enum SendOutcome {
    Task(Task),
    /// A direct message response (see `mapping::is_message_response`).
    Message(Task),
}

impl Core {
    /// A core on a connected client, serving `exposed`.
    pub fn new(client: Client, exposed: Vec<Exposed>, config: CoreConfig, pusher: Pusher) -> Core {
        Core {
            client,
            config,
            exposed,
            contexts: Mutex::new(HashMap::new()),
            tasks: Mutex::new(HashMap::new()),
            pusher,
        }
    }

    /// The exposed agents.
    pub fn exposed(&self) -> &[Exposed] {
        &self.exposed
    }

    /// The exposed agent named `name`.
    pub fn agent(&self, name: &str) -> Option<&Exposed> {
        self.exposed.iter().find(|e| e.name == name)
    }

    /// The broker client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The requester of (identity, A2A context), registered on first use.
    pub async fn context(
        &self,
        identity: &str,
        v1_context: &str,
    ) -> Result<Arc<Ctx>, GatewayError> {
        mapping::check_v1_context(v1_context)?;
        let broker_ctx = mapping::broker_context(identity, v1_context);
        let cell = {
            let mut map = self.contexts.lock();
            if !map.contains_key(&broker_ctx) && map.len() >= self.config.max_contexts {
                return Err(GatewayError::Internal("too many contexts".into()));
            }
            map.entry(broker_ctx.clone()).or_default().clone()
        };
        let ctx = cell
            .get_or_try_init(|| self.register(identity, v1_context, &broker_ctx))
            .await?;
        Ok(ctx.clone())
    }

    /// The context of an existing one, without registering.
    fn existing_context(&self, identity: &str, v1_context: &str) -> Option<Arc<Ctx>> {
        let broker_ctx = mapping::broker_context(identity, v1_context);
        self.contexts.lock().get(&broker_ctx)?.get().cloned()
    }

    async fn register(
        &self,
        identity: &str,
        v1_context: &str,
        broker_ctx: &str,
    ) -> Result<Arc<Ctx>, GatewayError> {
        let mut card = a2a_client::agent_card(&mapping::requester_name(broker_ctx));
        card.description = "A2A gateway requester".into();
        card.kind = Some(self.config.kind);
        let agent = self
            .client
            .register_async(broker_ctx, card, Delivery::Push)
            .map_err(|e| GatewayError::from_client(&e, Op::Other, ""))?
            .await
            .map_err(|e| GatewayError::from_client(&e, Op::Other, ""))?;
        let ctx = Arc::new(Ctx {
            identity: identity.to_owned(),
            v1_context: v1_context.to_owned(),
            agent,
            hub: LazyHub::default(),
        });
        let hub = ctx.hub.clone();
        let pusher = self.pusher.clone();
        ctx.agent
            .set_event_handler(Some(Box::new(move |_agent, event| {
                if let Notification::TaskEvent(p) = event {
                    publish(&hub, &pusher, p.task_version, p.event);
                }
            })));
        Ok(ctx)
    }

    /// The context of a task the caller may see, or `TaskNotFound`.
    pub fn task_context(
        &self,
        identity: &str,
        agent: &str,
        task_id: &str,
    ) -> Result<Arc<Ctx>, GatewayError> {
        match self.tasks.lock().get(task_id) {
            Some((ctx, a)) if ctx.identity == identity && a == agent => Ok(ctx.clone()),
            _ => Err(GatewayError::TaskNotFound(task_id.to_owned())),
        }
    }

    /// `SendMessage` / `SendStreamingMessage`: a new task for `agent`, or a
    /// follow-up on one. With `subscribe`, the subscription is taken before
    /// the send, so no event of the task can be missed.
    pub async fn send(
        &self,
        identity: &str,
        agent: &str,
        req: &v1::SendMessageRequest,
        blocking: bool,
        subscribe: bool,
    ) -> Result<(Arc<Ctx>, Task, Option<broadcast::Receiver<HubEvent>>), GatewayError> {
        let m = &req.message;
        let conf = req.configuration.clone().unwrap_or_default();
        let follow_up = m.task_id.as_deref().filter(|t| !t.is_empty());
        let ctx = match follow_up {
            Some(task_id) => {
                let ctx = self.task_context(identity, agent, task_id)?;
                if let Some(c) = m.context_id.as_deref().filter(|c| !c.is_empty()) {
                    if c != ctx.v1_context {
                        return Err(GatewayError::InvalidParams(format!(
                            "task {task_id} is not in context {c}"
                        )));
                    }
                }
                ctx
            }
            None => {
                if self.tasks.lock().len() >= self.config.max_tasks {
                    return Err(GatewayError::Internal("too many tasks".into()));
                }
                let v1_ctx = match m.context_id.as_deref().filter(|c| !c.is_empty()) {
                    Some(c) => c.to_owned(),
                    None => uuid::Uuid::new_v4().to_string(),
                };
                self.context(identity, &v1_ctx).await?
            }
        };
        let push = match &conf.task_push_notification_config {
            Some(p) => Some(self.pusher.check(p)?),
            None => None,
        };
        let to = if follow_up.is_some() {
            None
        } else {
            Some(agent)
        };
        let msg = mapping::message_in(m, a2a_client::new_id(), to)?;
        let configuration = SendConfiguration {
            blocking: Some(blocking),
            history_length: None,
            push_notification_config: None,
        };
        let rx = subscribe.then(|| ctx.subscribe());
        let pending = ctx
            .agent
            .send_async(msg, Some(configuration))
            .map_err(|e| GatewayError::from_client(&e, Op::Send, follow_up.unwrap_or("")))?;
        let task = self
            .published(&ctx, pending, follow_up.is_some())
            .await
            .map_err(|e| GatewayError::from_client(&e, Op::Send, follow_up.unwrap_or("")))?;
        if follow_up.is_none() {
            self.tasks
                .lock()
                .insert(task.id.clone(), (ctx.clone(), agent.to_owned()));
        }
        if let Some(p) = push {
            self.pusher.store(identity, &task.id, p)?;
        }
        Ok((ctx, task, rx))
    }

    /// Awaits a requester call's task; with `publish`, also hands it to the
    /// hub and the pusher on the reader thread as it completes (the broker
    /// sends the requester no event of its own change).
    async fn published(
        &self,
        ctx: &Arc<Ctx>,
        pending: Pending<Task>,
        publish_it: bool,
    ) -> Result<Task, ClientError> {
        if !publish_it {
            return pending.await;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let hub = ctx.hub.clone();
        let pusher = self.pusher.clone();
        pending.on_complete(move |r| {
            if let Ok(t) = &r {
                let ev = StreamEvent::Status(StatusUpdate {
                    task_id: t.id.clone(),
                    context_id: t.context_id.clone(),
                    status: t.status.clone(),
                    is_final: t.status.state.is_terminal(),
                });
                publish(&hub, &pusher, t.version, ev);
            }
            let _ = tx.send(r);
        });
        rx.await
            .unwrap_or_else(|_| Err(ClientError::Protocol("call dropped".into())))
    }

    /// `GetTask`.
    pub async fn get(&self, identity: &str, agent: &str, id: &str) -> Result<Task, GatewayError> {
        let ctx = self.task_context(identity, agent, id)?;
        ctx.agent
            .get_task_async(id, None)
            .map_err(|e| GatewayError::from_client(&e, Op::Get, id))?
            .await
            .map_err(|e| GatewayError::from_client(&e, Op::Get, id))
    }

    /// `CancelTask`.
    pub async fn cancel(
        &self,
        identity: &str,
        agent: &str,
        id: &str,
    ) -> Result<Task, GatewayError> {
        let ctx = self.task_context(identity, agent, id)?;
        let pending = ctx
            .agent
            .cancel_async(id, None)
            .map_err(|e| GatewayError::from_client(&e, Op::Cancel, id))?;
        self.published(&ctx, pending, true)
            .await
            .map_err(|e| GatewayError::from_client(&e, Op::Cancel, id))
    }

    /// `SubscribeToTask`: the current task, then its newer events.
    /// A terminal task is an error (there is nothing to stream).
    pub async fn subscribe(
        &self,
        identity: &str,
        agent: &str,
        id: &str,
    ) -> Result<Subscription, GatewayError> {
        let ctx = self.task_context(identity, agent, id)?;
        let rx = ctx.subscribe();
        let snapshot = self.get(identity, agent, id).await?;
        if snapshot.status.state.is_terminal() {
            return Err(GatewayError::Unsupported(format!(
                "task {id} is in a terminal state"
            )));
        }
        Ok(Subscription { ctx, snapshot, rx })
    }

    /// `ListTasks`: the caller's tasks with `agent`, in one context or all
    /// of the caller's.
    pub async fn list(
        &self,
        identity: &str,
        agent: &str,
        req: &v1::ListTasksRequest,
    ) -> Result<v1::ListTasksResponse, GatewayError> {
        let ctxs: Vec<Arc<Ctx>> = match req.context_id.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => self.existing_context(identity, c).into_iter().collect(),
            None => self
                .contexts
                .lock()
                .values()
                .filter_map(|cell| cell.get().cloned())
                .filter(|c| c.identity == identity)
                .collect(),
        };
        let mut all = Vec::new();
        for ctx in ctxs {
            let mut cursor = None;
            loop {
                let page = ctx
                    .agent
                    .list_tasks_async(TaskQuery {
                        role: ListRole::Requester,
                        state: None,
                        limit: Some(100),
                        cursor: cursor.take(),
                    })
                    .map_err(|e| GatewayError::from_client(&e, Op::Other, ""))?
                    .await
                    .map_err(|e| GatewayError::from_client(&e, Op::Other, ""))?;
                all.extend(page.tasks.into_iter().filter(|t| t.agent_name == agent));
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
        }
        mapping::list_page(all, req)
    }
}

/// Hands one task event to a context's subscribers and to the pusher.
/// Runs on the client's reader thread: never blocks.
fn publish(hub: &LazyHub, pusher: &Pusher, version: u64, event: StreamEvent) {
    let task_id = match &event {
        StreamEvent::Status(s) => s.task_id.clone(),
        StreamEvent::Artifact(a) => a.task_id.clone(),
    };
    let event = Arc::new(event);
    pusher.notify(&task_id, version, &event);
    // No subscriber is not an error.
    let Some(hub) = hub.get() else {
        return;
    };
    let _ = hub.send(HubEvent {
        task_id,
        version,
        event,
    });
}

/// The state an event leaves its task in, if it is a status event.
pub fn event_state(e: &StreamEvent) -> Option<a2a_proto::types::State> {
    match e {
        StreamEvent::Status(s) => Some(s.status.state),
        StreamEvent::Artifact(_) => None,
    }
}

/// The SendMessage answer for a task: a message response if the worker
/// marked its final status message so, else the task.
pub fn send_outcome(t: Task) -> SendOutcome {
    let is_msg = t.status.state.is_terminal()
        && t.status
            .message
            .as_deref()
            .is_some_and(mapping::is_message_response);
    if is_msg {
        SendOutcome::Message(t)
    } else {
        SendOutcome::Task(t)
    }
}

/// The v1.0 message of a message-response task.
pub fn response_message(t: &Task) -> Option<v1::Message> {
    let ctx = mapping::v1_context(&t.context_id);
    t.status
        .message
        .as_deref()
        .map(|m| mapping::message_out(m, &ctx))
}

/// A task's status as a status event (the first event of a stream that
/// already has the task).
pub fn status_event(t: &Task) -> StreamEvent {
    StreamEvent::Status(StatusUpdate {
        task_id: t.id.clone(),
        context_id: t.context_id.clone(),
        status: TaskStatus {
            state: t.status.state,
            message: t.status.message.clone(),
            timestamp: t.status.timestamp.clone(),
        },
        is_final: t.status.state.is_terminal(),
    })
}

/// Renders a task for a client.
pub fn render(t: &Task, view: TaskView) -> v1::Task {
    mapping::task_out(t, view)
}
