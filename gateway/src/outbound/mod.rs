//! Outbound: remote A2A v1.0 agents as peers in the local broker.
//!
//! A remote agent is added by URL. The gateway fetches its card
//! (`/.well-known/agent-card.json`), registers an agent in the broker under
//! the card's name with a card mirroring it, and from then on bridges: a
//! local delegate's `a2a.message.send` to that name becomes a v1.0
//! `SendStreamingMessage` (or `SendMessage`) to the remote, and the remote
//! task's status updates, messages and artifacts come back as the broker
//! task's, so the delegate sees the same events as from any local peer.
//! Calls go only to the origin the card was fetched from (and those the
//! operator allows): a card cannot aim the gateway at another port or
//! host. A cancel by the delegate becomes `CancelTask` on the remote. The
//! card is cached with its validators and refreshed at the pace its
//! `max-age` asks (clamped), and at once when a call to the remote fails in
//! a way that suggests it moved.
//!
//! Modules:
//! - `bridge`: the per-remote loop and the per-task actors.
//! - [`card`]: reading, mirroring and caching the remote card.
//! - [`rpc`]: the HTTP JSON-RPC client (unary calls, SSE streams, bounds).
//! - [`sse`]: the event-stream decoder.
//! - [`translate`]: broker <-> v1.0 shapes for this direction, pure.

mod bridge;
pub mod card;
mod rest;
pub mod rpc;
pub mod sse;
pub mod translate;

use crate::store::Store;
use bridge::Stop;
pub use bridge::{SettleOptions, NOTICE_KEY, NOTICE_REACHABLE, NOTICE_UNREACHABLE};
pub use rpc::{RemoteError, RpcOptions};

use crate::conn::BrokerConn;
use a2a_client::ClientError;
use bridge::Shared;
use parking_lot::{Mutex, RwLock};
use rpc::{CardFetch, RemoteRpc};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The broker context the gateway registers remote agents under, unless
/// told otherwise: one context for all of them, so that a gateway that
/// restarts gets its peers (and their tasks) back.
pub const DEFAULT_CONTEXT: &str = "a2a-gateway-remotes";

/// How long the broker may take to register a remote's agent (it answers
/// in milliseconds; this only bounds a broker that stopped answering).
const REGISTER_TIMEOUT: Duration = Duration::from_secs(30);

/// A remote agent to add.
#[derive(Debug, Clone)]
pub struct RemoteSpec {
    /// Its base URL (its card is at `<url>/.well-known/agent-card.json`),
    /// or the URL of its card.
    pub url: String,
    /// A bearer token the remote requires, if any. It is sent only to the
    /// origin of `url` and to `bearer_origins`: an interface on an origin
    /// allowed for calls only (`allow_origins`) gets the calls, never the
    /// credential.
    pub bearer: Option<String>,
    /// Further origins (`scheme://host[:port]`) the token may go to
    /// (calls may go there too).
    pub bearer_origins: Vec<String>,
    /// Further origins calls may go to, without the token: calls go only
    /// to the origin of `url` (its card's) and these, whatever a card
    /// names, so a card cannot aim the gateway at another port or host.
    pub allow_origins: Vec<String>,
}

impl RemoteSpec {
    /// A remote at `url` that needs no credentials.
    pub fn new(url: impl Into<String>) -> RemoteSpec {
        RemoteSpec {
            url: url.into(),
            bearer: None,
            bearer_origins: Vec::new(),
            allow_origins: Vec::new(),
        }
    }
}

/// How remote agents are bridged.
#[derive(Debug, Clone)]
pub struct OutboundOptions {
    /// The broker `contextId` the mirror agents register under.
    pub context_id: String,
    pub rpc: RpcOptions,
    pub settle: SettleOptions,
    /// Where remote task ids and forwarded messages are recorded (`None`:
    /// in memory, so a restart cannot resume).
    pub store: Option<Store>,
}

impl Default for OutboundOptions {
    fn default() -> Self {
        OutboundOptions {
            context_id: DEFAULT_CONTEXT.into(),
            rpc: RpcOptions::default(),
            settle: SettleOptions::default(),
            store: None,
        }
    }
}

/// Why a remote agent could not be added.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    /// Its card could not be fetched or read.
    #[error("remote agent {url}: {source}")]
    Remote {
        url: String,
        #[source]
        source: RemoteError,
    },
    /// The broker refused the registration (or is gone).
    #[error("registering remote agent {name} in the broker: {source}")]
    Broker {
        name: String,
        #[source]
        source: ClientError,
    },
}

/// A bridged remote agent. Dropping it stops the bridge and its task
/// actors at once, as a crash would: the registration lasts until the
/// broker connection closes, and its tasks stay open (a gateway that comes
/// back under the same name and context fails them, see `bridge`).
/// [`Remote::stop`] leaves cleanly instead.
#[derive(Debug)]
pub struct Remote {
    /// The peer id the broker gave it (the remote card's name, or
    /// `name-2`... if that name was taken).
    pub peer_id: String,
    /// The URL it was added by.
    pub url: String,
    stop: Arc<Notify>,
    how: Arc<Mutex<Stop>>,
    task: Option<JoinHandle<()>>,
    /// Dropped with this handle: ends the bridge and its task actors.
    _alive: tokio::sync::watch::Sender<()>,
}

impl Remote {
    /// Stops bridging and deregisters the peer (its open tasks fail, as
    /// for any agent that leaves, and their remote tasks are canceled).
    pub async fn stop(mut self) {
        *self.how.lock() = Stop::Leave;
        self.stop.notify_one();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }

    /// Stops bridging to be started again: sends under way get their
    /// remote task recorded (within a grace period), nothing is canceled
    /// and the peer is not deregistered (its tasks stay open; the broker
    /// connection closing is a disconnect, not a leave). A bridge added
    /// again with the same state file resumes the tasks.
    pub async fn suspend(mut self) {
        *self.how.lock() = Stop::Suspend;
        self.stop.notify_one();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }

    /// Waits until the bridge ends by itself (the broker connection
    /// closed).
    pub async fn join(mut self) {
        self.wait_ended().await;
    }

    /// Waits until the bridge ends (the handle stays usable).
    pub async fn wait_ended(&mut self) {
        if let Some(t) = &mut self.task {
            let _ = t.await;
            self.task = None;
        }
    }
}

/// Adds the remote agent of `spec` as a peer of the broker `client` is
/// connected to, and starts bridging it (on the current tokio runtime).
pub async fn add_remote(
    client: &BrokerConn,
    spec: RemoteSpec,
    opts: &OutboundOptions,
) -> Result<Remote, OutboundError> {
    let remote = rpc::origin_of(&spec.url).ok_or_else(|| OutboundError::Remote {
        url: spec.url.clone(),
        source: RemoteError::BadUrl(spec.url.clone()),
    })?;
    let origins = rpc::Origins {
        remote,
        calls: spec.allow_origins.clone(),
        bearer: spec.bearer_origins.clone(),
    };
    let rpc = RemoteRpc::new(spec.bearer.clone(), origins, opts.rpc.clone()).map_err(|source| {
        OutboundError::Remote {
            url: spec.url.clone(),
            source,
        }
    })?;
    let cached = match rpc.fetch_card(&spec.url, None).await {
        Ok(CardFetch::Fresh(c)) => c,
        Ok(CardFetch::NotModified(_)) => {
            return Err(OutboundError::Remote {
                url: spec.url.clone(),
                source: RemoteError::Status(304),
            })
        }
        Err(source) => {
            return Err(OutboundError::Remote {
                url: spec.url.clone(),
                source,
            })
        }
    };
    let card = cached.card.mirror();
    let name = card.name.clone();
    let registered = client.register_visible(&opts.context_id, card);
    let registered = tokio::time::timeout(REGISTER_TIMEOUT, registered)
        .await
        .unwrap_or(Err(ClientError::Timeout(REGISTER_TIMEOUT)));
    let (agent, events) = registered.map_err(|source| OutboundError::Broker {
        name: name.clone(),
        source,
    })?;
    let peer_id = agent.id().to_owned();
    tracing::info!(remote = %spec.url, peer = %peer_id, endpoint = %cached.card.endpoint, streaming = cached.card.streaming, "remote agent added");
    let (alive, gone) = tokio::sync::watch::channel(());
    let shared = Arc::new(Shared {
        agent,
        rpc,
        base_url: spec.url.clone(),
        card: RwLock::new(cached),
        failure_refresh: Mutex::new(None),
        last_answer: Mutex::new(None),
        contexts: Mutex::new(HashMap::new()),
        settle: opts.settle.clone(),
        gone,
        key: format!("{}/{peer_id}", opts.context_id),
        store: match &opts.store {
            Some(s) => s.clone(),
            None => Store::in_memory().map_err(|e| OutboundError::Remote {
                url: spec.url.clone(),
                source: RemoteError::BadResponse(e.to_string()),
            })?,
        },
        sending: std::sync::atomic::AtomicUsize::new(0),
    });
    let stop = Arc::new(Notify::new());
    let how = Arc::new(Mutex::new(Stop::Leave));
    let task = tokio::spawn(bridge::run(
        shared,
        events,
        Arc::clone(&stop),
        Arc::clone(&how),
    ));
    Ok(Remote {
        peer_id,
        url: spec.url,
        stop,
        how,
        task: Some(task),
        _alive: alive,
    })
}
