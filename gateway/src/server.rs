//! Starting the gateway: connect to the broker, look up the exposed
//! agents' cards, check the security rules, bind, serve until shut down.

use crate::core::{Core, CoreConfig, Exposed};
use crate::http::{self, card::Cards, App, HttpConfig};
use crate::push::Pusher;
use crate::security::{self, RateLimiter, StartError, Tokens, WebhookPolicy};
use a2a_client::{Client, ClientError, ClientOptions, Delivery};
use a2a_proto::types::AgentKind;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
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
    /// Offer the SSE methods (declared in the cards).
    pub streaming: bool,
    /// Offer `GetExtendedAgentCard` (declared in the cards).
    pub extended_card: bool,
    /// Extension URIs declared as required: message requests must list
    /// them in `A2A-Extensions`.
    pub required_extensions: Vec<String>,
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
            max_contexts: 100_000,
            streaming: true,
            extended_card: true,
            required_extensions: Vec::new(),
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
    #[error("{0}")]
    Other(String),
}

/// A running gateway.
pub struct Running {
    /// The address it listens on.
    pub addr: SocketAddr,
    pub core: Arc<Core>,
    shutdown: Option<oneshot::Sender<()>>,
    join: JoinHandle<()>,
}

impl Running {
    /// Stops accepting, ends the server, waits for it.
    pub async fn stop(mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.join).await;
        self.join.abort();
    }

    /// Waits until the server ends (it ends on `stop`, or an error).
    pub async fn wait(self) {
        let _ = self.join.await;
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
    let (client, exposed) = tokio::task::spawn_blocking(move || -> Result<_, ServeError> {
        let options = ClientOptions {
            client_name: "a2a-gateway".into(),
            ..ClientOptions::default()
        };
        let client = Client::connect_with(&socket, &secret, options)?;
        let exposed = discover(&client, &names, kind)?;
        Ok((client, exposed))
    })
    .await
    .map_err(|e| ServeError::Other(e.to_string()))??;
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
    let pusher = Pusher::new(opts.webhooks.clone());
    let caps = crate::v1::AgentCapabilities {
        streaming: opts.streaming,
        push_notifications: pusher.enabled(),
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
    };
    let cards = Cards::new(&exposed, &public_url, &caps, !opts.tokens.is_empty());
    let core = Arc::new(Core::new(
        client,
        exposed,
        CoreConfig {
            max_contexts: opts.max_contexts,
            kind: opts.kind,
            ..CoreConfig::default()
        },
        pusher,
    ));
    let app = Arc::new(App {
        core: core.clone(),
        config: HttpConfig {
            public_url,
            tokens: opts.tokens.clone(),
            limiter: RateLimiter::new(opts.rate, opts.burst),
            max_body_bytes: opts.max_body_bytes,
            max_stream: opts.max_stream,
            streaming: opts.streaming,
            extended_card: opts.extended_card,
            required_extensions: opts.required_extensions.clone(),
        },
        cards,
    });
    let (tx, rx) = oneshot::channel::<()>();
    let router = http::router(app);
    let join = tokio::spawn(async move {
        let serve = axum::serve(listener, router).with_graceful_shutdown(async {
            let _ = rx.await;
        });
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "server ended");
        }
    });
    Ok(Running {
        addr,
        core,
        shutdown: Some(tx),
        join,
    })
}
