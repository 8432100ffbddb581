//! `a2a-gateway remote add`: bridges remote A2A agents into a running
//! broker from the command line, until stopped (SIGINT, SIGTERM, or the
//! broker going away). Kept here so that `main.rs` only wires it.

use super::{add_remote, OutboundOptions, RemoteSpec, DEFAULT_CONTEXT};
use a2a_client::{read_secret, Client, ClientOptions};
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
    Add(#[from] super::OutboundError),
    /// The broker connection closed under the bridges.
    #[error("the broker connection closed")]
    BrokerGone,
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
    let options = ClientOptions {
        client_name: "a2a-gateway".into(),
        ..ClientOptions::default()
    };
    let client = Client::connect_with(&args.socket, &secret, options)
        .map_err(|source| RemoteAddError::Connect { socket, source })?;
    let bearer = match &args.bearer_env {
        Some(var) => match std::env::var(var) {
            Ok(v) if !v.is_empty() => Some(v),
            _ => return Err(RemoteAddError::BearerEnv(var.clone())),
        },
        None => None,
    };
    let opts = OutboundOptions {
        context_id: args.context.clone(),
        ..OutboundOptions::default()
    };
    let mut remotes = Vec::new();
    for url in &args.urls {
        let spec = RemoteSpec {
            url: url.clone(),
            bearer: bearer.clone(),
        };
        let r = add_remote(&client, spec, &opts).await?;
        println!("remote {} -> peer {}", r.url, r.peer_id);
        remotes.push(r);
    }
    let all_ended = futures_util::future::join_all(remotes.into_iter().map(|r| r.join()));
    tokio::select! {
        _ = all_ended => Err(RemoteAddError::BrokerGone),
        () = stop => Ok(()),
    }
}
