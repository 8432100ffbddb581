//! Starting the gateway: connect to the broker, look up the exposed
//! agents' cards, check the security rules, bind, serve until shut down.

use crate::conn::BrokerAddr;
use crate::core::{Core, CoreConfig, Exposed};
use crate::http::edge::{self, EdgeConfig};
use crate::http::{self, card::Cards, App, HttpConfig};
use crate::limits;
use crate::push::Pusher;
use crate::security::{self, AuditLog, RateLimiter, StartError, Tokens, WebhookPolicy};
use crate::store::{StateFile, Store, StoreError};
use a2a_client::{Client, ClientError, ClientOptions, Delivery};
use a2a_proto::types::AgentKind;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Everything `serve` is told.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The broker's local socket.
    pub socket: PathBuf,
    /// The broker's secret.
    pub secret: String,
    pub listen: SocketAddr,
    /// The origin clients use (default: `http://<listen>`).
    pub public_url: Option<String>,
    /// Peer ids of the local agents to serve.
    pub expose: Vec<String>,
    pub tokens: Tokens,
    /// Calls per second per identity (0: no limit) and burst.
    pub rate: f64,
    pub burst: u32,
    pub max_body_bytes: usize,
    pub webhooks: WebhookPolicy,
    pub max_stream: Duration,
    pub kind: AgentKind,
    pub max_contexts: usize,
    /// The gateway's state file (`None`: in memory, forgotten at exit).
    pub state: Option<PathBuf>,
    /// How long a blocking `SendMessage` waits (`None`: without bound).
    pub reply_timeout: Option<Duration>,
    /// Idle time after which a context with no open task is freed.
    pub context_idle: Duration,
    /// Contexts one identity may hold registered at once.
    pub max_contexts_per_identity: usize,
    /// Contexts registered ahead per identity for new conversations
    /// (`limits::READY_CONTEXTS_PER_IDENTITY`; 0: none).
    pub ready_contexts: usize,
    /// Non-terminal tasks one identity may have at once.
    pub max_open_tasks_per_identity: usize,
    /// Time a connection has to send a request head (and the longest a
    /// keep-alive connection may wait idle).
    pub header_timeout: Duration,
    /// Time a request has to send its whole body.
    pub body_timeout: Duration,
    /// TCP connections held at once.
    pub max_connections: usize,
    /// Offer the SSE methods (declared in the cards).
    pub streaming: bool,
    /// Offer `GetExtendedAgentCard` (declared in the cards).
    pub extended_card: bool,
    /// The cards carry A2A v0.3's fields beside v1.0's (`compat::v03`): a
    /// v0.3 client needs them, v1.0's closed card schema has no room for
    /// them (`--no-v03-card` for a strictly v1.0 card).
    pub v03_card: bool,
    /// Extension URIs declared as required: message requests must list
    /// them in `A2A-Extensions`.
    pub required_extensions: Vec<String>,
    /// The audit file (JSON lines), if any.
    pub audit: Option<PathBuf>,
}

impl ServeOptions {
    /// Defaults for everything but the socket, secret and agents.
    pub fn new(socket: PathBuf, secret: String, expose: Vec<String>) -> ServeOptions {
        ServeOptions {
            socket,
            secret,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            public_url: None,
            expose,
            tokens: Tokens::default(),
            rate: 50.0,
            burst: 100,
            max_body_bytes: 8 << 20,
            webhooks: WebhookPolicy::default(),
            max_stream: Duration::from_secs(600),
            kind: AgentKind::Subagent,
            max_contexts: limits::MAX_CONTEXTS,
            state: None,
            reply_timeout: Some(limits::DEFAULT_REPLY_TIMEOUT),
            context_idle: limits::CONTEXT_IDLE,
            max_contexts_per_identity: limits::MAX_CONTEXTS_PER_IDENTITY,
            ready_contexts: limits::READY_CONTEXTS_PER_IDENTITY,
            max_open_tasks_per_identity: limits::MAX_OPEN_TASKS_PER_IDENTITY,
            header_timeout: limits::HEADER_TIMEOUT,
            body_timeout: limits::BODY_TIMEOUT,
            max_connections: limits::MAX_CONNECTIONS,
            streaming: true,
            extended_card: true,
            v03_card: true,
            required_extensions: Vec::new(),
            audit: None,
        }
    }
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Refused(#[from] StartError),
    #[error("broker: {0}")]
    Broker(#[from] ClientError),
    #[error("no local agent `{0}` is registered on the broker (or it is of another kind)")]
    NoSuchAgent(String),
    #[error("listen on {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
    #[error(transparent)]
    State(#[from] StoreError),
    #[error("{0}")]
    Other(String),
}

/// A running gateway.
pub struct Running {
    /// The address it listens on.
    pub addr: SocketAddr,
    pub(crate) core: Arc<Core>,
    shutdown: Option<watch::Sender<bool>>,
    join: JoinHandle<()>,
    sweeper: JoinHandle<()>,
}

/// How long a stopping gateway lets calls in flight finish.
const STOP_GRACE: Duration = Duration::from_secs(10);

impl Running {
    /// Stops accepting, lets the calls in flight finish (within a grace
    /// period; open streams are ended), commits the state file and ends.
    /// The contexts' registrations are not withdrawn (that would cancel
    /// their open tasks): the connections close, which the broker reads as
    /// a disconnect, and a gateway started again on the same state file
    /// takes its tasks up where they are.
    pub async fn stop(mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(true);
        }
        let _ = tokio::time::timeout(STOP_GRACE + Duration::from_secs(1), &mut self.join).await;
        self.join.abort();
        self.sweeper.abort();
        let store = self.core.store().clone();
        let _ = tokio::task::spawn_blocking(move || store.flush()).await;
    }

    /// Waits until the server ends (it ends on `stop`, or an error).
    pub async fn wait(self) {
        let _ = self.join.await;
    }

    /// The state file this gateway writes: `remote add`'s bridges started
    /// beside it (`serve --remote`) record their remote task ids there too.
    pub fn state_file(&self) -> StateFile {
        StateFile(self.core.store().clone())
    }

    /// The broker contexts the gateway holds now (one per identity and A2A
    /// context): what an operator's metrics, and the tests of the context
    /// bounds, read.
    pub fn contexts(&self) -> Contexts<'_> {
        Contexts(&self.core)
    }
}

/// A view of the broker contexts a running gateway holds.
pub struct Contexts<'a>(&'a Core);

impl Contexts<'_> {
    /// Contexts registered now (all identities).
    pub fn registered(&self) -> usize {
        self.0.registered_contexts()
    }

    /// The A2A ids of the contexts registered ahead for `identity` now
    /// (the anonymous caller is [`crate::ANONYMOUS`]).
    pub fn ready(&self, identity: &str) -> Vec<String> {
        self.0.ready_contexts(identity)
    }

    /// Is (identity, A2A context) registered now?
    pub fn holds(&self, identity: &str, v1_context: &str) -> bool {
        self.0.holds_context(identity, v1_context)
    }

    /// Scans made so far for an identity's least recently used context
    /// (one serves many new contexts at the bound: the work is counted).
    pub fn lru_scans(&self) -> u64 {
        self.0.lru_scans()
    }
}

/// Looks up the cards of `names` in the broker's registry.
fn discover(
    client: &Client,
    names: &[String],
    kind: AgentKind,
) -> Result<Vec<Exposed>, ServeError> {
    let mut card = a2a_client::agent_card("a2a-gateway-directory");
    card.kind = Some(kind);
    let dir = client.register("gw1-directory", card, Delivery::Pull)?;
    let listed = dir.list_agents(None);
    let _ = dir.deregister();
    let listed = listed?;
    names
        .iter()
        .map(|n| {
            listed
                .iter()
                .find(|c| &c.name == n)
                .map(|c| Exposed {
                    name: n.clone(),
                    card: c.clone(),
                })
                .ok_or_else(|| ServeError::NoSuchAgent(n.clone()))
        })
        .collect()
}

/// Starts the gateway (inside a tokio runtime).
pub async fn start(opts: ServeOptions) -> Result<Running, ServeError> {
    security::check_bind(opts.listen, &opts.tokens)?;
    let (socket, secret, names, kind) = (
        opts.socket.clone(),
        opts.secret.clone(),
        opts.expose.clone(),
        opts.kind,
    );
    let broker = BrokerAddr {
        socket,
        secret,
        options: ClientOptions {
            client_name: "a2a-gateway".into(),
            ..ClientOptions::default()
        },
    };
    let first = broker.clone();
    let exposed = tokio::task::spawn_blocking(move || -> Result<_, ServeError> {
        // The cards are read once, at start, through the blocking client.
        let client = Client::connect_with(&first.socket, &first.secret, first.options)?;
        let exposed = discover(&client, &names, kind)?;
        client.close();
        Ok(exposed)
    })
    .await
    .map_err(|e| ServeError::Other(e.to_string()))??;
    let store = match &opts.state {
        Some(p) => Store::open(p)?,
        None => Store::in_memory()?,
    };
    let audit = match &opts.audit {
        Some(p) => AuditLog::open(p)
            .map_err(|e| ServeError::Other(format!("audit file {}: {e}", p.display())))?,
        None => AuditLog::default(),
    };
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|e| ServeError::Bind(opts.listen, e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| ServeError::Bind(opts.listen, e))?;
    let public_url = opts
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"));
    let pusher = Pusher::new(opts.webhooks.clone(), store.clone());
    let caps = capabilities(&opts, pusher.enabled());
    let bearer = !opts.tokens.is_empty();
    let cards = Cards::new(&exposed, &public_url, &caps, bearer, opts.v03_card);
    let core = Arc::new(Core::new(
        broker,
        exposed,
        CoreConfig {
            max_contexts: opts.max_contexts,
            kind: opts.kind,
            reply_timeout: opts.reply_timeout,
            context_idle: opts.context_idle,
            max_contexts_per_identity: opts.max_contexts_per_identity,
            ready_contexts: opts.ready_contexts,
            max_open_tasks_per_identity: opts.max_open_tasks_per_identity,
        },
        pusher,
        store,
    ));
    // The open tasks of an earlier run are taken up again (in the
    // background: calls about them register their contexts as needed).
    let resuming = core.clone();
    tokio::spawn(async move { resuming.resume().await });
    let sweeping = core.clone();
    let sweeper = tokio::spawn(async move {
        let every = limits::CONTEXT_SWEEP.min(sweeping_period(&sweeping));
        loop {
            tokio::time::sleep(every).await;
            let freed = sweeping.sweep_idle().await;
            if freed > 0 {
                tracing::debug!(freed, "idle contexts freed");
            }
        }
    });
    let (tx, rx) = watch::channel(false);
    let app = Arc::new(App {
        core: core.clone(),
        config: HttpConfig {
            tokens: opts.tokens.clone(),
            limiter: RateLimiter::new(opts.rate, opts.burst),
            max_body_bytes: opts.max_body_bytes,
            body_timeout: opts.body_timeout,
            body_budget: Arc::new(tokio::sync::Semaphore::new(limits::BODY_BUDGET_KIB)),
            max_stream: opts.max_stream,
            streaming: opts.streaming,
            extended_card: opts.extended_card,
            required_extensions: opts.required_extensions.clone(),
            audit,
            stopping: rx.clone(),
        },
        cards,
    });
    let router = http::router(Arc::clone(&app)).merge(crate::grpc::router(app));
    let edge = EdgeConfig {
        header_timeout: opts.header_timeout,
        max_connections: opts.max_connections.max(1),
        grace: STOP_GRACE,
    };
    let join = tokio::spawn(edge::serve(listener, router, edge, rx));
    Ok(Running {
        addr,
        core,
        shutdown: Some(tx),
        join,
        sweeper,
    })
}

/// The capabilities every exposed agent's card states.
fn capabilities(opts: &ServeOptions, push: bool) -> crate::v1::AgentCapabilities {
    crate::v1::AgentCapabilities {
        streaming: opts.streaming,
        push_notifications: push,
        extended_agent_card: opts.extended_card,
        extensions: opts
            .required_extensions
            .iter()
            .map(|uri| crate::v1::AgentExtension {
                uri: uri.clone(),
                description: None,
                required: true,
            })
            .collect(),
    }
}

/// How often to look for idle contexts: a short idle time (tests) is
/// looked at more often than the default sweep period.
fn sweeping_period(core: &Core) -> Duration {
    (core.context_idle() / 2).max(Duration::from_millis(100))
}
