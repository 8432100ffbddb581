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
//! Durability: every task the gateway creates is recorded in the
//! gateway's state file ([`Store`]) with its identity, agent and A2A
//! context before the call is answered, so a restarted gateway finds the
//! task's context again and registers its requester anew: the same peer
//! id in the same broker context is the same party, and sees its tasks.
//! Contexts are registered lazily (on the first call that needs one) and
//! at start for every task still open (so its events, and its webhooks,
//! are heard again).
//!
//! Fairness: each identity has a broker connection of its own, so the
//! broker's per-connection bounds (parked waits above all) are per
//! identity; contexts and open tasks are bounded per identity
//! ([`crate::limits`]); a context with no open task and no subscriber is
//! deregistered when idle ([`Core::sweep_idle`]); a context whose
//! registration spent its sends registers again under the hood.
//!
//! Contexts ready ahead: a message that names no context starts a new
//! conversation, whose context the gateway names. A broker registration
//! for it would be a round trip (and a commit) on the call's path before
//! the send itself; instead each identity that starts conversations keeps
//! up to `CoreConfig::ready_contexts` registered ahead under fresh ids
//! (never past its bound), takes one, and registers the next after the
//! call is answered ([`Core::refill_ready`]). They are ordinary contexts
//! (freed when idle, given up at the bound like any other with nothing
//! open) that no client knows the id of yet.
//!
//! Events: each requester's event handler runs on its connection's reader
//! task ([`crate::conn`]) and publishes the broker's task events, in commit order, to the
//! context's [`Hub`] (a broadcast channel) and to the push deliverer.
//! Calls of the requester itself (a follow-up message, a cancel) route no
//! event back to it (the broker routes to the counterpart), so their
//! results are published the same way, from their answer's hook on the
//! same reader task, which keeps every hub in version order.
//! Subscribers skip what is not newer than what they have sent.

use crate::conn::{BrokerAddr, BrokerConn, EventHandler, Peer, TaskHook};
use crate::limits;
use crate::mapping::{self, GatewayError, Op, TaskView};
use crate::push::Pusher;
use crate::store::{ListFilter, Store, TaskRow};
use crate::v1;
use a2a_client::ClientError;
use a2a_proto::error::A2aErrorCode;
use a2a_proto::params::SendConfiguration;
use a2a_proto::types::{
    AgentCard, AgentKind, Notification, State, StatusUpdate, StreamEvent, Task, TaskStatus,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, OnceCell};

/// Events a subscriber may fall behind by before it is cut off (it then
/// ends its stream; the client can subscribe again).
const HUB_CAPACITY: usize = 256;

/// Attempts at registering a context's requester under its own peer id
/// (the previous registration may still be leaving the broker).
const REGISTER_ATTEMPTS: u32 = 20;

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
    pub agent: Peer,
    pub hub: LazyHub,
    /// When it was last used (ms since the core started).
    last_used: AtomicU64,
}

impl Ctx {
    /// A receiver of the context's task events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.hub
            .get_or_init(|| broadcast::channel(HUB_CAPACITY).0)
            .subscribe()
    }

    fn subscribers(&self) -> usize {
        self.hub.get().map_or(0, broadcast::Sender::receiver_count)
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

/// The gateway's limits and switches (see `security`, `limits`).
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// Most A2A contexts registered at once (each is a broker registration).
    pub max_contexts: usize,
    /// Most contexts one identity holds registered at once.
    pub max_contexts_per_identity: usize,
    /// Contexts registered ahead per identity for new conversations.
    pub ready_contexts: usize,
    /// Most non-terminal tasks one identity has at once.
    pub max_open_tasks_per_identity: usize,
    /// A context unused this long, with no open task, is freed.
    pub context_idle: Duration,
    /// How long a blocking `SendMessage` waits for its task to settle
    /// (`None`: without bound).
    pub reply_timeout: Option<Duration>,
    /// The kind of agent the gateway registers (it addresses only agents
    /// of the same kind).
    pub kind: AgentKind,
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self {
            max_contexts: limits::MAX_CONTEXTS,
            max_contexts_per_identity: limits::MAX_CONTEXTS_PER_IDENTITY,
            ready_contexts: limits::READY_CONTEXTS_PER_IDENTITY,
            max_open_tasks_per_identity: limits::MAX_OPEN_TASKS_PER_IDENTITY,
            context_idle: limits::CONTEXT_IDLE,
            reply_timeout: Some(limits::DEFAULT_REPLY_TIMEOUT),
            kind: AgentKind::Subagent,
        }
    }
}

type Cell = Arc<OnceCell<Arc<Ctx>>>;

/// Broker context -> its requester cell, with a count per identity (the
/// per-identity bound is checked on every new context: no scan).
#[derive(Default)]
struct Contexts {
    cells: HashMap<String, Cell>,
    per_identity: HashMap<String, usize>,
    /// Per identity at its bound: its least recently used contexts as one
    /// scan found them (oldest last), each with its `last_used` then, for
    /// the next contexts that need room (see `Core::take_lru`).
    spare: HashMap<String, Vec<(u64, String)>>,
    /// Scans made for `spare` so far.
    scans: u64,
    /// Per identity: contexts registered ahead that no call has named yet
    /// (keys of `cells`; see the module's "Contexts ready ahead").
    ready: HashMap<String, Vec<String>>,
    /// Identities with a refill of `ready` under way.
    refilling: std::collections::HashSet<String>,
}

/// Candidates one scan of an identity's contexts lists for `take_lru`
/// (and the most it tries for one new context).
const LRU_BATCH: usize = 64;

impl Contexts {
    fn get(&self, key: &str) -> Option<&Cell> {
        self.cells.get(key)
    }

    /// The next candidate to give its place to a new context of
    /// `identity`: the least recently used of the last scan that has not
    /// been used since (`rescan`: scan again when none is left). One scan
    /// of the identity's contexts serves up to [`LRU_BATCH`] new ones: at
    /// the bound (10,000 contexts) a scan, a clone of every key and a sort
    /// per new context cost ~350 µs of the gateway's CPU per call (measured
    /// with `send_bench` http-new).
    fn next_lru(&mut self, identity: &str, rescan: bool) -> Option<String> {
        loop {
            let listed = self.spare.get_mut(identity).and_then(Vec::pop);
            let Some((used, key)) = listed else {
                if !rescan || !self.scan_lru(identity) {
                    self.spare.remove(identity);
                    return None;
                }
                return self.next_lru(identity, false);
            };
            // Used since the scan: no longer among the least recent (the
            // others only grow newer, so the rest of the list stays ahead
            // of every context not on it).
            let unused = self
                .get(&key)
                .and_then(|c| c.get())
                .is_some_and(|c| c.last_used.load(Ordering::Relaxed) == used);
            if unused {
                return Some(key);
            }
        }
    }

    /// Lists `identity`'s [`LRU_BATCH`] least recently used contexts with
    /// no subscriber (one pass, a bounded heap: no sort of them all);
    /// false if there is none.
    fn scan_lru(&mut self, identity: &str) -> bool {
        self.scans += 1;
        let mut oldest: std::collections::BinaryHeap<(u64, &str)> =
            std::collections::BinaryHeap::with_capacity(LRU_BATCH + 1);
        for (k, c) in &self.cells {
            if mapping::context_identity(k) != Some(identity) {
                continue;
            }
            let Some(ctx) = c.get().filter(|c| c.subscribers() == 0) else {
                continue;
            };
            let used = ctx.last_used.load(Ordering::Relaxed);
            if oldest.len() == LRU_BATCH && oldest.peek().is_some_and(|&(u, _)| used >= u) {
                continue;
            }
            oldest.push((used, k.as_str()));
            if oldest.len() > LRU_BATCH {
                oldest.pop();
            }
        }
        // Newest first: `pop` takes the oldest.
        let mut listed: Vec<(u64, String)> = oldest
            .into_sorted_vec()
            .into_iter()
            .map(|(u, k)| (u, k.to_owned()))
            .collect();
        listed.reverse();
        let found = !listed.is_empty();
        self.spare.insert(identity.to_owned(), listed);
        found
    }

    fn identity_count(&self, identity: &str) -> usize {
        self.per_identity.get(identity).copied().unwrap_or(0)
    }

    /// Inserts (or replaces) the cell of `key`.
    fn insert(&mut self, key: String, cell: Cell) {
        if self.cells.insert(key.clone(), cell).is_none() {
            if let Some(id) = mapping::context_identity(&key) {
                *self.per_identity.entry(id.to_owned()).or_default() += 1;
            }
        }
    }

    /// Takes out the context of `key` if only this map holds it:
    /// registered, no call in flight on it (a call holds its `Arc`), no
    /// subscriber. The caller deregisters it.
    fn take_free(&mut self, key: &str) -> Option<Arc<Ctx>> {
        let ctx = self
            .get(key)
            .and_then(|c| c.get())
            .filter(|c| Arc::strong_count(c) == 1 && c.subscribers() == 0)
            .cloned()?;
        self.remove(key);
        Some(ctx)
    }

    fn remove(&mut self, key: &str) {
        if self.cells.remove(key).is_some() {
            if let Some(id) = mapping::context_identity(key) {
                if let Some(n) = self.per_identity.get_mut(id) {
                    *n -= 1;
                    if *n == 0 {
                        self.per_identity.remove(id);
                    }
                }
                self.unready(id, key);
            }
        }
    }

    /// `key` is no longer one of `identity`'s ready contexts.
    fn unready(&mut self, identity: &str, key: &str) {
        if let Some(list) = self.ready.get_mut(identity) {
            list.retain(|k| k != key);
            if list.is_empty() {
                self.ready.remove(identity);
            }
        }
    }

    /// Should one more context be registered ahead for `identity`? Not
    /// past its bound (one place is kept for a context a client names)
    /// nor the gateway's.
    fn wants_ready(&self, identity: &str, config: &CoreConfig) -> bool {
        self.ready.get(identity).map_or(0, Vec::len) < config.ready_contexts
            && self.cells.len() + 1 < config.max_contexts
            && self.identity_count(identity) + 1 < config.max_contexts_per_identity
    }
}

/// The gateway's state, shared by every HTTP request.
pub struct Core {
    broker: BrokerAddr,
    config: CoreConfig,
    exposed: Vec<Exposed>,
    /// Identity -> its broker connection, made once.
    clients: Mutex<HashMap<String, Arc<OnceCell<BrokerConn>>>>,
    /// Broker context -> its requester, registered once (until freed).
    contexts: Mutex<Contexts>,
    /// Identity -> blocking sends waiting now.
    blocking: Mutex<HashMap<String, usize>>,
    store: Store,
    started: Instant,
    pub pusher: Pusher,
    /// New-task sends under way (a lone one commits its task's row in
    /// place: see `store`).
    sends: AtomicUsize,
}

/// One new-task send counted in [`Core::sends`] while it lives.
struct SendCount<'a>(&'a AtomicUsize);

impl<'a> SendCount<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::AcqRel);
        SendCount(n)
    }

    /// No other new-task send is under way.
    fn alone(&self) -> bool {
        self.0.load(Ordering::Acquire) == 1
    }
}

impl Drop for SendCount<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A subscription to one task: the snapshot first, then its newer events.
pub struct Subscription {
    /// Held, not read: a context a stream holds is not swept as idle
    /// (the sweep frees only contexts nobody else holds).
    _ctx: Arc<Ctx>,
    pub snapshot: Task,
    pub rx: broadcast::Receiver<HubEvent>,
}

/// What `SendMessage` answers.
pub enum SendOutcome {
    Task(Task),
    /// A direct message response (see `mapping::is_message_response`).
    Message(Task),
}

/// Takes one of an identity's blocking-send slots; gives it back on drop.
struct BlockingSlot<'a> {
    core: &'a Core,
    identity: String,
}

impl Drop for BlockingSlot<'_> {
    fn drop(&mut self) {
        let mut map = self.core.blocking.lock();
        if let Some(n) = map.get_mut(&self.identity) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.identity);
            }
        }
    }
}

/// Is this state one a blocking send returns at (terminal, or waiting for
/// the client)?
fn settled(state: State) -> bool {
    state.is_terminal() || state.is_interrupted()
}

impl Core {
    /// A core serving `exposed`, connecting to the broker at `broker`
    /// (one connection per identity), with `store` for its durable state.
    pub fn new(
        broker: BrokerAddr,
        exposed: Vec<Exposed>,
        config: CoreConfig,
        pusher: Pusher,
        store: Store,
    ) -> Core {
        Core {
            broker,
            config,
            exposed,
            clients: Mutex::new(HashMap::new()),
            contexts: Mutex::new(Contexts::default()),
            blocking: Mutex::new(HashMap::new()),
            store,
            started: Instant::now(),
            pusher,
            sends: AtomicUsize::new(0),
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

    /// The idle time after which a context is freed.
    pub fn context_idle(&self) -> Duration {
        self.config.context_idle
    }

    /// The state file.
    pub fn store(&self) -> &Store {
        &self.store
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The broker connection of `identity`, made on first use.
    async fn client(&self, identity: &str) -> Result<BrokerConn, GatewayError> {
        let cell = self
            .clients
            .lock()
            .entry(identity.to_owned())
            .or_default()
            .clone();
        let c = cell
            .get_or_try_init(|| async {
                BrokerConn::connect(&self.broker)
                    .await
                    .map_err(|e| GatewayError::from_client(&e, Op::Other, ""))
            })
            .await?;
        Ok(c.clone())
    }

    /// Contexts registered now (all identities).
    pub fn registered_contexts(&self) -> usize {
        self.contexts
            .lock()
            .cells
            .values()
            .filter(|c| c.initialized())
            .count()
    }

    /// Is (identity, A2A context) registered now?
    pub fn holds_context(&self, identity: &str, v1_context: &str) -> bool {
        let key = mapping::broker_context(identity, v1_context);
        self.contexts
            .lock()
            .get(&key)
            .is_some_and(|c| c.initialized())
    }

    /// Scans of an identity's contexts made so far to find the least
    /// recently used (one serves up to 64 new contexts at the bound).
    pub fn lru_scans(&self) -> u64 {
        self.contexts.lock().scans
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
            match map.get(&broker_ctx) {
                Some(c) => Some(c.clone()),
                None if map.cells.len() >= self.config.max_contexts => {
                    return Err(GatewayError::limit(
                        format!(
                            "too many contexts (at most {}, all identities together)",
                            self.config.max_contexts
                        ),
                        "too many contexts",
                        "MAX_CONTEXTS",
                        self.config.max_contexts,
                    ));
                }
                None if map.identity_count(identity) < self.config.max_contexts_per_identity => {
                    let cell = Cell::default();
                    map.insert(broker_ctx.clone(), cell.clone());
                    Some(cell)
                }
                None => None,
            }
        };
        // At the identity's bound: its least recently used context with
        // nothing open gives its place to this one.
        let cell = match cell {
            Some(c) => c,
            None => self.take_lru(identity, &broker_ctx).await.ok_or_else(|| {
                GatewayError::limit(
                    format!(
                        "too many contexts for identity {identity} (at most {}, each with an open task or a subscriber)",
                        self.config.max_contexts_per_identity
                    ),
                    "too many contexts",
                    "MAX_CONTEXTS_PER_IDENTITY",
                    self.config.max_contexts_per_identity,
                )
            })?,
        };
        let ctx = cell
            .get_or_try_init(|| self.register(identity, v1_context, &broker_ctx, None))
            .await;
        let ctx = match ctx {
            Ok(c) => c.clone(),
            Err(e) => {
                // A failed registration leaves no entry behind.
                let mut map = self.contexts.lock();
                if map
                    .get(&broker_ctx)
                    .is_some_and(|c| Arc::ptr_eq(c, &cell) && !c.initialized())
                {
                    map.remove(&broker_ctx);
                }
                return Err(e);
            }
        };
        ctx.last_used.store(self.now_ms(), Ordering::Relaxed);
        Ok(ctx)
    }

    /// Registers a context's requester under its stable peer id. The
    /// previous registration under that id may still be leaving (a
    /// restarted gateway's old connection, a context being freed), in
    /// which case the broker hands out a suffixed id: that one is
    /// deregistered (it has no task) and registration retried.
    async fn register(
        &self,
        identity: &str,
        v1_context: &str,
        broker_ctx: &str,
        hub: Option<LazyHub>,
    ) -> Result<Arc<Ctx>, GatewayError> {
        let client = self.client(identity).await?;
        let name = mapping::requester_name(broker_ctx);
        let hub = hub.unwrap_or_default();
        let handler: EventHandler = {
            let hub = hub.clone();
            let pusher = self.pusher.clone();
            let store = self.store.clone();
            Arc::new(move |event| {
                if let Notification::TaskEvent(p) = event {
                    publish(&hub, &pusher, &store, p.task_version, p.event);
                }
            })
        };
        let mut attempt = 0;
        let agent = loop {
            let mut card = a2a_client::agent_card(&name);
            card.description = "A2A gateway requester".into();
            card.kind = Some(self.config.kind);
            let agent = client
                .register(broker_ctx, card, Arc::clone(&handler))
                .await
                .map_err(|e| GatewayError::from_client(&e, Op::Other, ""))?;
            if agent.id() == name {
                break agent;
            }
            attempt += 1;
            let _ = agent.deregister().await;
            if attempt >= REGISTER_ATTEMPTS {
                return Err(GatewayError::Internal(format!(
                    "the requester of context {v1_context} is still registered elsewhere"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
        };
        let ctx = Arc::new(Ctx {
            identity: identity.to_owned(),
            v1_context: v1_context.to_owned(),
            agent,
            hub,
            last_used: AtomicU64::new(self.now_ms()),
        });
        Ok(ctx)
    }

    /// Frees a context's registration and registers it again (same peer
    /// id, same hub): its sends counter starts over. Only for a context
    /// with no open task (leaving cancels the tasks it requested).
    async fn reregister(&self, ctx: &Arc<Ctx>) -> Result<Arc<Ctx>, GatewayError> {
        let broker_ctx = mapping::broker_context(&ctx.identity, &ctx.v1_context);
        let cell: Cell = Arc::new(OnceCell::new());
        {
            let mut map = self.contexts.lock();
            let same = map
                .get(&broker_ctx)
                .and_then(|c| c.get())
                .is_some_and(|c| Arc::ptr_eq(c, ctx));
            if same {
                map.insert(broker_ctx.clone(), cell.clone());
            }
        }
        let _ = ctx.agent.deregister().await;
        let hub = ctx.hub.clone();
        let (identity, v1_context) = (ctx.identity.clone(), ctx.v1_context.clone());
        let fresh = cell
            .get_or_try_init(|| self.register(&identity, &v1_context, &broker_ctx, Some(hub)))
            .await?
            .clone();
        Ok(fresh)
    }

    /// Frees every context unused for the idle time that has no open task
    /// and no subscriber; returns how many were freed. A freed context
    /// registers again on its next use, as the same party.
    pub async fn sweep_idle(&self) -> usize {
        let idle_ms = u64::try_from(self.config.context_idle.as_millis()).unwrap_or(u64::MAX);
        let now = self.now_ms();
        let candidates: Vec<String> = self
            .contexts
            .lock()
            .cells
            .iter()
            .filter(|(_, c)| {
                c.get().is_some_and(|ctx| {
                    now.saturating_sub(ctx.last_used.load(Ordering::Relaxed)) >= idle_ms
                        && ctx.subscribers() == 0
                })
            })
            .map(|(k, _)| k.clone())
            .collect();
        self.free(candidates, usize::MAX).await
    }

    /// Makes room for `key` at `identity`'s bound: the least recently used
    /// context of `identity` with no open task, no call in flight and no
    /// subscriber is taken out and `key`'s new cell put in its place under
    /// one lock, so that a concurrent caller cannot claim the room in
    /// between (16 callers past the bound were refused when room was made
    /// first and claimed after). The cell of `key` (a concurrent caller's,
    /// if it came first), or `None` if no context can go.
    async fn take_lru(&self, identity: &str, key: &str) -> Option<Cell> {
        // A bounded cost per call: each candidate is a read of the state,
        // and at most one scan.
        let mut rescan = true;
        for _ in 0..LRU_BATCH {
            let old = {
                let mut map = self.contexts.lock();
                let had = map.spare.get(identity).is_some_and(|l| !l.is_empty());
                let next = map.next_lru(identity, rescan);
                rescan &= had;
                next
            };
            let Some(old) = old else {
                break;
            };
            if self
                .store
                .context_has_open_tasks(identity, &mapping::v1_context(&old))
            {
                continue;
            }
            let (cell, gone) = {
                let mut map = self.contexts.lock();
                if let Some(c) = map.get(key) {
                    return Some(c.clone());
                }
                let Some(gone) = map.take_free(&old) else {
                    continue;
                };
                let cell = Cell::default();
                map.insert(key.to_owned(), cell.clone());
                (cell, gone)
            };
            let _ = gone.agent.deregister().await;
            return Some(cell);
        }
        None
    }

    /// Frees up to `limit` of the contexts `keys` that have no open task
    /// and that no call holds (only the map refers to them: a call in
    /// flight keeps its context; candidates are named by key, not held).
    async fn free(&self, keys: Vec<String>, limit: usize) -> usize {
        let mut freed = 0;
        for key in keys {
            if freed >= limit {
                break;
            }
            let (Some(identity), v1) = (mapping::context_identity(&key), mapping::v1_context(&key))
            else {
                continue;
            };
            if self.store.context_has_open_tasks(identity, &v1) {
                continue;
            }
            let taken = self.contexts.lock().take_free(&key);
            if let Some(ctx) = taken {
                let _ = ctx.agent.deregister().await;
                freed += 1;
            }
        }
        freed
    }

    /// At start: registers the context of every task still open, so their
    /// events (and webhooks) are heard again, and refreshes each task's
    /// recorded state, delivering to its webhooks what changed while the
    /// gateway was away.
    pub async fn resume(&self) {
        let open = self.store.open_tasks();
        if !open.is_empty() {
            tracing::info!(tasks = open.len(), "resuming the open tasks");
        }
        for row in open {
            let ctx = match self.context(&row.identity, &row.context).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(task = %row.id, error = %e, "resuming a task's context failed");
                    continue;
                }
            };
            match ctx.agent.get_task(&row.id, Some(0)).await {
                Ok(t) => {
                    self.store
                        .update_task(&t.id, t.status.state, &t.status.timestamp, t.version);
                    let ev = status_event(&t);
                    publish(&ctx.hub, &self.pusher, &self.store, t.version, ev);
                }
                Err(e) => tracing::warn!(task = %row.id, error = %e, "resuming a task failed"),
            }
        }
    }

    /// The context of a task the caller may see, or `TaskNotFound`.
    pub async fn task_context(
        &self,
        identity: &str,
        agent: &str,
        task_id: &str,
    ) -> Result<Arc<Ctx>, GatewayError> {
        let row = self.task_row(identity, agent, task_id)?;
        self.context(identity, &row.context).await
    }

    /// The record of a task the caller may see, or `TaskNotFound`.
    pub fn task_row(
        &self,
        identity: &str,
        agent: &str,
        task_id: &str,
    ) -> Result<TaskRow, GatewayError> {
        match self.store.task(task_id) {
            Some(row) if row.identity == identity && row.agent == agent => Ok(row),
            _ => Err(GatewayError::TaskNotFound(task_id.to_owned())),
        }
    }

    fn blocking_slot(&self, identity: &str) -> Result<BlockingSlot<'_>, GatewayError> {
        let mut map = self.blocking.lock();
        let n = map.entry(identity.to_owned()).or_default();
        if *n >= limits::MAX_BLOCKING_PER_IDENTITY {
            return Err(GatewayError::limit(
                format!(
                    "too many blocking sends waiting for identity {identity} (at most {})",
                    limits::MAX_BLOCKING_PER_IDENTITY
                ),
                mapping::TOO_MANY_WAITS,
                "MAX_BLOCKING_PER_IDENTITY",
                limits::MAX_BLOCKING_PER_IDENTITY,
            ));
        }
        *n += 1;
        Ok(BlockingSlot {
            core: self,
            identity: identity.to_owned(),
        })
    }

    /// The context a message goes to: its task's for a follow-up, else
    /// the one it names, else a new conversation's (one registered ahead
    /// if there is one: the `bool`). A new task is refused at the
    /// identity's bound of open tasks.
    async fn send_context(
        &self,
        identity: &str,
        agent: &str,
        m: &v1::Message,
        follow_up: Option<&str>,
    ) -> Result<(Arc<Ctx>, bool), GatewayError> {
        if let Some(task_id) = follow_up {
            let row = self.task_row(identity, agent, task_id)?;
            if let Some(c) = m.context_id.as_deref().filter(|c| !c.is_empty()) {
                if c != row.context {
                    return Err(GatewayError::InvalidParams(format!(
                        "task {task_id} is not in context {c}"
                    )));
                }
            }
            return Ok((self.context(identity, &row.context).await?, false));
        }
        if self.store.open_task_count(identity) >= self.config.max_open_tasks_per_identity {
            return Err(GatewayError::limit(
                format!(
                    "too many open tasks for identity {identity} (at most {})",
                    self.config.max_open_tasks_per_identity
                ),
                "too many open tasks",
                "MAX_OPEN_TASKS_PER_IDENTITY",
                self.config.max_open_tasks_per_identity,
            ));
        }
        let (v1_ctx, new_conversation) = match m.context_id.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => (c.to_owned(), false),
            None => (
                self.take_ready(identity)
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
                true,
            ),
        };
        Ok((self.context(identity, &v1_ctx).await?, new_conversation))
    }

    /// `SendMessage` / `SendStreamingMessage`: a new task for `agent`, or a
    /// follow-up on one. With `subscribe`, the subscription is taken before
    /// the send, so no event of the task can be missed. A blocking send
    /// returns once the task is terminal or interrupted, or at the reply
    /// timeout with the task as it is.
    pub async fn send(
        self: &Arc<Self>,
        identity: &str,
        agent: &str,
        req: &v1::SendMessageRequest,
        blocking: bool,
        subscribe: bool,
    ) -> Result<(Arc<Ctx>, Task, Option<broadcast::Receiver<HubEvent>>), GatewayError> {
        let m = &req.message;
        let conf = req.configuration.clone().unwrap_or_default();
        let follow_up = m.task_id.as_deref().filter(|t| !t.is_empty());
        let (ctx, new_conversation) = self.send_context(identity, agent, m, follow_up).await?;
        let push = match &conf.task_push_notification_config {
            Some(p) => Some(self.pusher.check(p)?),
            None => None,
        };
        let _slot = if blocking {
            Some(self.blocking_slot(identity)?)
        } else {
            None
        };
        // The broker holds a blocking send for its default wait; a push
        // config must be stored before the task can change (so it hears
        // every update), and a reply timeout shorter than the broker's
        // wait is the gateway's to keep: in those cases the send does not
        // block in the broker and the gateway waits.
        let broker_blocks = blocking
            && push.is_none()
            && self
                .config
                .reply_timeout
                .is_none_or(|t| t >= limits::BROKER_BLOCKING_WAIT);
        let to = if follow_up.is_some() {
            None
        } else {
            Some(agent)
        };
        let msg = mapping::message_in(m, a2a_client::new_id(), to)?;
        let rx = subscribe.then(|| ctx.subscribe());
        // Events of the new task that come before its config is stored are
        // held, and delivered once it is.
        let _hold = push.as_ref().map(|_| self.pusher.hold());
        let counted = follow_up.is_none().then(|| SendCount::new(&self.sends));
        let started = Instant::now();
        let (ctx, task) = self
            .send_on(ctx, msg, broker_blocks, follow_up.is_some())
            .await
            .map_err(|e| GatewayError::from_client(&e, Op::Send, follow_up.unwrap_or("")))?;
        if follow_up.is_none() {
            let row = TaskRow {
                id: task.id.clone(),
                identity: identity.to_owned(),
                agent: agent.to_owned(),
                context: ctx.v1_context.clone(),
                state: task.status.state,
                version: task.version,
            };
            // Committed before the answer: in place if this send is the
            // only one under way, else in the store's group commit.
            let alone = counted.as_ref().is_some_and(SendCount::alone);
            self.store
                .insert_task(&row, &task.status.timestamp, alone)
                .await
                .map_err(|e| GatewayError::Internal(format!("gateway state: {e}")))?;
        } else {
            self.store.note_task(
                &task.id,
                task.status.state,
                &task.status.timestamp,
                task.version,
            );
        }
        if let Some(p) = push {
            self.pusher.store(identity, &task.id, p)?;
            self.pusher.replay(&task.id);
            // What happened before the config was stored is delivered now.
            publish(
                &ctx.hub,
                &self.pusher,
                &self.store,
                task.version,
                status_event(&task),
            );
        }
        let task = if blocking && !settled(task.status.state) {
            let left = self
                .config
                .reply_timeout
                .map(|t| t.saturating_sub(started.elapsed()));
            self.wait_settled(&ctx, task, left).await?
        } else {
            task
        };
        if new_conversation {
            // After the answer is ready, so that the registration is not
            // written ahead of this call's send on the connection.
            self.refill_ready(identity);
        }
        Ok((ctx, task, rx))
    }

    /// One of `identity`'s contexts registered ahead, if it has one.
    fn take_ready(&self, identity: &str) -> Option<String> {
        let mut map = self.contexts.lock();
        let key = map.ready.get_mut(identity)?.pop()?;
        map.unready(identity, &key);
        Some(mapping::v1_context(&key))
    }

    /// Registers contexts ahead for `identity` in the background until it
    /// has `ready_contexts` of them (see the module's "Contexts ready
    /// ahead"); one refill per identity at a time.
    fn refill_ready(self: &Arc<Self>, identity: &str) {
        {
            let mut map = self.contexts.lock();
            if !map.wants_ready(identity, &self.config)
                || !map.refilling.insert(identity.to_owned())
            {
                return;
            }
        }
        let core = Arc::clone(self);
        let identity = identity.to_owned();
        tokio::spawn(async move {
            loop {
                let v1 = uuid::Uuid::new_v4().to_string();
                if core.context(&identity, &v1).await.is_err() {
                    break;
                }
                let key = mapping::broker_context(&identity, &v1);
                let mut map = core.contexts.lock();
                // Taken at the bound meanwhile: it is not ready.
                if map.get(&key).is_some() {
                    map.ready.entry(identity.clone()).or_default().push(key);
                }
                if !map.wants_ready(&identity, &core.config) {
                    break;
                }
            }
            core.contexts.lock().refilling.remove(&identity);
        });
    }

    /// The A2A ids of the contexts registered ahead for `identity` now.
    pub fn ready_contexts(&self, identity: &str) -> Vec<String> {
        self.contexts
            .lock()
            .ready
            .get(identity)
            .map_or_else(Vec::new, |l| {
                l.iter().map(|k| mapping::v1_context(k)).collect()
            })
    }

    /// Sends `msg` on a context's requester; when its registration has
    /// spent its sends and it has no open task, registers it again and
    /// sends once more. Returns the context the send went through.
    async fn send_on(
        &self,
        ctx: Arc<Ctx>,
        msg: a2a_client::Message,
        blocking: bool,
        follow_up: bool,
    ) -> Result<(Arc<Ctx>, Task), ClientError> {
        let configuration = SendConfiguration {
            blocking: Some(blocking),
            history_length: None,
            push_notification_config: None,
        };
        let first = ctx
            .agent
            .send(
                msg.clone(),
                Some(configuration.clone()),
                self.publisher(&ctx, follow_up),
            )
            .await;
        match first {
            Err(e) if e.a2a_code() == Some(A2aErrorCode::SendCap) => {
                // The state store commits task updates in groups, a few
                // milliseconds after their events: what it answers must
                // include every update queued before this (the task that
                // just ended may not be written yet).
                let store = self.store.clone();
                let _ = tokio::task::spawn_blocking(move || store.flush()).await;
                if self
                    .store
                    .context_has_open_tasks(&ctx.identity, &ctx.v1_context)
                {
                    return Err(e);
                }
                let fresh = self
                    .reregister(&ctx)
                    .await
                    .map_err(|g| ClientError::Protocol(g.to_string()))?;
                let hook = self.publisher(&fresh, follow_up);
                let t = fresh.agent.send(msg, Some(configuration), hook).await?;
                Ok((fresh, t))
            }
            other => other.map(|t| (ctx, t)),
        }
    }

    /// Waits for a task to be terminal or interrupted, at most `left`
    /// (`None`: without bound), on the context's events; returns the task
    /// as it then is.
    async fn wait_settled(
        &self,
        ctx: &Arc<Ctx>,
        task: Task,
        left: Option<Duration>,
    ) -> Result<Task, GatewayError> {
        let id = task.id.as_str();
        // Subscribed before the snapshot: nothing after it is missed.
        let mut rx = ctx.subscribe();
        let snapshot = fetch(ctx, id).await?;
        if settled(snapshot.status.state) {
            return Ok(snapshot);
        }
        let deadline = left.map(|l| tokio::time::Instant::now() + l);
        loop {
            let next = match deadline {
                Some(d) => match tokio::time::timeout_at(d, rx.recv()).await {
                    Ok(r) => r,
                    Err(_) => break,
                },
                None => rx.recv().await,
            };
            match next {
                Ok(ev) if ev.task_id == task.id => {
                    if event_state(&ev.event).is_some_and(settled) {
                        break;
                    }
                }
                Ok(_) => {}
                // Behind: the snapshot says where the task is.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    if settled(fetch(ctx, id).await?.status.state) {
                        break;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
        fetch(ctx, id).await
    }

    /// With `publish_it`, the hook that hands a requester call's task to
    /// the hub and the pusher on the reader task as its answer arrives (the
    /// broker sends the requester no event of its own change), in order
    /// with the events read before and after it.
    fn publisher(&self, ctx: &Arc<Ctx>, publish_it: bool) -> Option<TaskHook> {
        if !publish_it {
            return None;
        }
        let hub = ctx.hub.clone();
        let pusher = self.pusher.clone();
        let store = self.store.clone();
        Some(Box::new(move |t: &Task| {
            publish(&hub, &pusher, &store, t.version, status_event(t));
        }))
    }

    /// `GetTask`.
    pub async fn get(&self, identity: &str, agent: &str, id: &str) -> Result<Task, GatewayError> {
        let ctx = self.task_context(identity, agent, id).await?;
        fetch(&ctx, id).await
    }

    /// `CancelTask` with a reason (`metadata.reason`, as another gateway's
    /// bridge sends its requester's): the text of the broker cancel's
    /// message, so the task's history holds it on both hosts.
    pub async fn cancel_with_reason(
        &self,
        identity: &str,
        agent: &str,
        id: &str,
        reason: Option<&str>,
    ) -> Result<Task, GatewayError> {
        let ctx = self.task_context(identity, agent, id).await?;
        let message = reason
            .filter(|r| !r.is_empty())
            .map(a2a_client::text_message);
        ctx.agent
            .cancel(id, message, self.publisher(&ctx, true))
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
        let ctx = self.task_context(identity, agent, id).await?;
        let rx = ctx.subscribe();
        let snapshot = self.get(identity, agent, id).await?;
        if snapshot.status.state.is_terminal() {
            return Err(GatewayError::Unsupported(format!(
                "task {id} is in a terminal state"
            )));
        }
        Ok(Subscription {
            _ctx: ctx,
            snapshot,
            rx,
        })
    }

    /// `ListTasks`: the caller's tasks with `agent`, in one context or all
    /// of the caller's. The page is chosen from the gateway's records
    /// (indexed by identity, agent, context and status time), then each
    /// task on it is read from the broker: the cost follows the page, not
    /// the number of the caller's contexts or tasks.
    pub async fn list(
        &self,
        identity: &str,
        agent: &str,
        req: &v1::ListTasksRequest,
    ) -> Result<v1::ListTasksResponse, GatewayError> {
        let q = mapping::list_query(req)?;
        let filter = ListFilter {
            identity,
            agent,
            context: req.context_id.as_deref().filter(|c| !c.is_empty()),
            state: q.state,
            after_ms: q.after_ms,
            limit: q.page_size,
            offset: q.offset,
        };
        let (rows, total) = self
            .store
            .list(&filter)
            .map_err(|e| GatewayError::Internal(format!("gateway state: {e}")))?;
        // Every task of the page is asked for at once (pipelined on the
        // identity's connection).
        let fetches = rows.iter().map(|row| async move {
            let ctx = self.context(identity, &row.context).await?;
            fetch(&ctx, &row.id).await
        });
        let fetched = futures_util::future::join_all(fetches).await;
        let mut tasks = Vec::with_capacity(fetched.len());
        for t in fetched {
            let t = match t {
                Ok(t) => t,
                // Recorded here but gone from the broker (its database
                // was replaced): not listed, as GetTask does not find it.
                Err(GatewayError::TaskNotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            self.store
                .note_task(&t.id, t.status.state, &t.status.timestamp, t.version);
            tasks.push(t);
        }
        Ok(mapping::list_response(&tasks, &q, total))
    }
}

/// A task as the context's requester reads it.
async fn fetch(ctx: &Ctx, id: &str) -> Result<Task, GatewayError> {
    ctx.agent
        .get_task(id, None)
        .await
        .map_err(|e| GatewayError::from_client(&e, Op::Get, id))
}

/// Hands one task event to a context's subscribers and to the pusher.
/// Runs on the connection's reader task: never blocks.
fn publish(hub: &LazyHub, pusher: &Pusher, store: &Store, version: u64, event: StreamEvent) {
    let task_id = match &event {
        StreamEvent::Status(s) => {
            store.note_task(&s.task_id, s.status.state, &s.status.timestamp, version);
            s.task_id.clone()
        }
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
