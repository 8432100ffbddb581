//! `a2a-gateway remote add`: bridges remote A2A agents into a running
//! broker from the command line, until stopped (SIGINT, SIGTERM, or the
//! broker going away). A module of the binary, beside `main.rs`: the
//! library (`a2a_gateway::add_remote`) bridges, this reads flags and prints.

use a2a_client::{read_secret, ClientOptions};
use a2a_gateway::{
    add_remote, BrokerAddr, BrokerConn, OutboundOptions, RemoteSpec, StateFile, DEFAULT_CONTEXT,
};
use std::path::PathBuf;

/// The arguments of `remote add`.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteAddArgs {
    /// The broker's local socket (its --socket path); its secret comes from
    /// A2A_BROKER_SECRET, else the file beside the socket.
    #[arg(long)]
    pub socket: PathBuf,
    /// The broker context the remote agents register under.
    #[arg(long, default_value = DEFAULT_CONTEXT)]
    pub context: String,
    /// The name of an environment variable holding a bearer token sent to
    /// every remote (a token on the command line would show in `ps`).
    #[arg(long)]
    pub bearer_env: Option<String>,
    /// A further origin (`scheme://host[:port]`) the bearer token may be
    /// sent to, besides each remote's own (repeatable): for a remote whose
    /// card names its interface on another origin.
    #[arg(long = "bearer-origin", value_name = "ORIGIN")]
    pub bearer_origins: Vec<String>,
    /// A further origin (`scheme://host[:port]`) calls may go to, without
    /// the bearer token (repeatable). Calls go only to the origin a
    /// remote's card was fetched from unless allowed here: a card naming
    /// its interface on another port or host is refused.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    /// The state file recording remote task ids and forwarded messages, so
    /// a restart resumes (never re-sends). Default: the socket's path with
    /// `.remotes.db` appended.
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Base URLs of the remote agents (their cards are at
    /// `<url>/.well-known/agent-card.json`).
    #[arg(required = true)]
    pub urls: Vec<String>,
}

/// Why `remote add` stopped.
#[derive(Debug, thiserror::Error)]
pub enum RemoteAddError {
    /// The broker's secret could not be read.
    #[error("no broker secret for {socket}: {source}")]
    Secret {
        socket: String,
        #[source]
        source: std::io::Error,
    },
    /// The broker could not be reached.
    #[error("cannot connect to the broker at {socket}: {source}")]
    Connect {
        socket: String,
        #[source]
        source: a2a_client::ClientError,
    },
    /// `--bearer-env` names a variable that is not set.
    #[error("--bearer-env {0}: the variable is not set")]
    BearerEnv(String),
    /// A remote could not be added.
    #[error(transparent)]
    Add(#[from] a2a_gateway::OutboundError),
    /// The broker connection closed under the bridges.
    #[error("the broker connection closed")]
    BrokerGone,
    /// The state file could not be opened.
    #[error(transparent)]
    State(a2a_gateway::StoreError),
    /// A `--bearer-origin` or `--allow-origin` that is not an http(s)
    /// origin.
    #[error(transparent)]
    BadOrigin(#[from] BadOrigin),
}

/// Runs `remote add` until `stop` completes (then `Ok`) or the broker
/// goes away; prints one line per remote added
/// (`remote <url> -> peer <name>`) on stdout.
pub async fn run(
    args: RemoteAddArgs,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), RemoteAddError> {
    let socket = args.socket.display().to_string();
    let secret = read_secret(&args.socket).map_err(|source| RemoteAddError::Secret {
        socket: socket.clone(),
        source,
    })?;
    let client = BrokerConn::connect(&broker_addr(&args.socket, &secret))
        .await
        .map_err(|source| RemoteAddError::Connect { socket, source })?;
    let bearer = match &args.bearer_env {
        Some(var) => match std::env::var(var) {
            Ok(v) if !v.is_empty() => Some(v),
            _ => return Err(RemoteAddError::BearerEnv(var.clone())),
        },
        None => None,
    };
    let state = args.state.clone().unwrap_or_else(|| {
        let mut p = args.socket.clone().into_os_string();
        p.push(".remotes.db");
        PathBuf::from(p)
    });
    let store = StateFile::open(&state).map_err(RemoteAddError::State)?;
    let opts = OutboundOptions {
        context_id: args.context.clone(),
        store: Some(store),
        ..OutboundOptions::default()
    };
    let bearer_origins = origins_of("--bearer-origin", &args.bearer_origins)?;
    let allow_origins = origins_of("--allow-origin", &args.allow_origins)?;
    let mut remotes = Vec::new();
    for url in &args.urls {
        let spec = RemoteSpec {
            url: url.clone(),
            bearer: bearer.clone(),
            bearer_origins: bearer_origins.clone(),
            allow_origins: allow_origins.clone(),
        };
        let r = add_remote(&client, spec, &opts).await?;
        println!("remote {} -> peer {}", r.url, r.peer_id);
        remotes.push(r);
    }
    let (suspend_tx, suspend_rx) = tokio::sync::watch::channel(false);
    let mut joins = Vec::new();
    for mut r in remotes {
        let mut suspend = suspend_rx.clone();
        joins.push(tokio::spawn(async move {
            let ended = tokio::select! {
                _ = suspend.changed() => false,
                () = r.wait_ended() => true,
            };
            if !ended {
                // SIGTERM: suspend (what is being sent gets its remote
                // task recorded; nothing is canceled or deregistered) so
                // that a restart resumes the tasks.
                r.suspend().await;
            }
        }));
    }
    tokio::select! {
        _ = futures_util::future::join_all(joins.iter_mut()) => Err(RemoteAddError::BrokerGone),
        () = stop => {
            let _ = suspend_tx.send(true);
            futures_util::future::join_all(joins).await;
            Ok(())
        }
    }
}

/// A flag's value that is not an http(s) origin.
#[derive(Debug, thiserror::Error)]
#[error("{flag} {value}: not an http(s) origin")]
pub struct BadOrigin {
    pub flag: &'static str,
    pub value: String,
}

/// The origins of a flag's values (`--bearer-origin`, `--allow-origin`).
pub fn origins_of(flag: &'static str, values: &[String]) -> Result<Vec<String>, BadOrigin> {
    values
        .iter()
        .map(|o| {
            a2a_gateway::origin_of(o).ok_or_else(|| BadOrigin {
                flag,
                value: o.clone(),
            })
        })
        .collect()
}

/// `serve --remote URL`: remote agents bridged by the serving process
/// itself, on its broker connection's socket and its state file, so one
/// gateway per host both exposes its local agents and bridges the other
/// host's. Each remote is added in the background and, while its card
/// cannot be fetched (the other host's gateway not up yet: two hosts may
/// start in any order), tried again every [`ADD_RETRY`].
pub struct ServedRemotes {
    suspend: tokio::sync::watch::Sender<bool>,
    joins: Vec<tokio::task::JoinHandle<()>>,
}

/// How often `serve --remote` tries again to add a remote it could not
/// reach.
pub const ADD_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

impl ServedRemotes {
    /// Starts bridging `urls` (on the current tokio runtime). Errors only
    /// for what no retry can fix: the broker connection, the bearer
    /// variable. `allow_origins`: further origins calls may go to (see
    /// [`RemoteSpec::allow_origins`]).
    pub async fn start(
        socket: &std::path::Path,
        secret: &str,
        urls: Vec<String>,
        bearer_env: Option<&str>,
        allow_origins: Vec<String>,
        store: StateFile,
    ) -> Result<ServedRemotes, Box<RemoteAddError>> {
        let client = BrokerConn::connect(&broker_addr(socket, secret))
            .await
            .map_err(|source| {
                Box::new(RemoteAddError::Connect {
                    socket: socket.display().to_string(),
                    source,
                })
            })?;
        let bearer = match bearer_env {
            Some(var) => match std::env::var(var) {
                Ok(v) if !v.is_empty() => Some(v),
                _ => return Err(Box::new(RemoteAddError::BearerEnv(var.to_owned()))),
            },
            None => None,
        };
        let opts = OutboundOptions {
            store: Some(store),
            ..OutboundOptions::default()
        };
        let (suspend, suspend_rx) = tokio::sync::watch::channel(false);
        let joins = urls
            .into_iter()
            .map(|url| {
                let (client, opts, bearer) = (client.clone(), opts.clone(), bearer.clone());
                let allow_origins = allow_origins.clone();
                let mut stop = suspend_rx.clone();
                tokio::spawn(async move {
                    let spec = RemoteSpec {
                        url: url.clone(),
                        bearer,
                        bearer_origins: Vec::new(),
                        allow_origins,
                    };
                    let mut logged = false;
                    let mut r = loop {
                        let added = tokio::select! {
                            _ = stop.changed() => return,
                            r = add_remote(&client, spec.clone(), &opts) => r,
                        };
                        match added {
                            Ok(r) => break r,
                            // What a retry cannot fix: the broker's
                            // refusal, a card aiming elsewhere, a bad URL.
                            Err(
                                e @ (a2a_gateway::OutboundError::Broker { .. }
                                | a2a_gateway::OutboundError::Remote {
                                    source:
                                        a2a_gateway::RemoteError::ForeignOrigin { .. }
                                        | a2a_gateway::RemoteError::BadUrl(_),
                                    ..
                                }),
                            ) => {
                                tracing::error!(remote = %url, error = %e, "cannot bridge the remote");
                                return;
                            }
                            Err(e) => {
                                if !logged {
                                    tracing::warn!(remote = %url, error = %e, "remote not reachable yet; trying again every {} s", ADD_RETRY.as_secs());
                                    logged = true;
                                }
                                tokio::select! {
                                    _ = stop.changed() => return,
                                    () = tokio::time::sleep(ADD_RETRY) => {}
                                }
                            }
                        }
                    };
                    tracing::info!(remote = %url, peer = %r.peer_id, "remote bridged");
                    let ended = tokio::select! {
                        _ = stop.changed() => false,
                        () = r.wait_ended() => true,
                    };
                    if ended {
                        tracing::error!(remote = %url, "the broker connection closed; the remote is no longer bridged");
                    } else {
                        r.suspend().await;
                    }
                })
            })
            .collect();
        Ok(ServedRemotes { suspend, joins })
    }

    /// Stops bridging to be started again (SIGTERM): sends under way get
    /// their remote task recorded, nothing is canceled or deregistered.
    pub async fn suspend(self) {
        let _ = self.suspend.send(true);
        futures_util::future::join_all(self.joins).await;
    }
}

/// The broker at `socket`, greeted as `a2a-gateway`.
fn broker_addr(socket: &std::path::Path, secret: &str) -> BrokerAddr {
    BrokerAddr {
        socket: socket.to_path_buf(),
        secret: secret.to_owned(),
        options: ClientOptions {
            client_name: "a2a-gateway".into(),
            ..ClientOptions::default()
        },
    }
}
