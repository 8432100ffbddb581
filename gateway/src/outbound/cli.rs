//! `a2a-gateway remote add`: bridges remote A2A agents into a running
//! broker from the command line, until stopped (SIGINT, SIGTERM, or the
//! broker going away). Kept here so that `main.rs` only wires it.

use super::{add_remote, OutboundOptions, RemoteSpec, DEFAULT_CONTEXT};
use a2a_client::{read_secret, Client, ClientOptions};
use std::path::PathBuf;
use std::process::ExitCode;

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

/// Runs `remote add` to completion; prints one line per remote added
/// (`remote <url> -> peer <name>`) on stdout, errors on stderr.
pub fn run(args: RemoteAddArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("a2a-gateway: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(run_async(args))
}

async fn run_async(args: RemoteAddArgs) -> ExitCode {
    let secret = match read_secret(&args.socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "a2a-gateway: no broker secret for {}: {e}",
                args.socket.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let options = ClientOptions {
        client_name: "a2a-gateway".into(),
        ..ClientOptions::default()
    };
    let client = match Client::connect_with(&args.socket, &secret, options) {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "a2a-gateway: cannot connect to the broker at {}: {e}",
                args.socket.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let bearer = match &args.bearer_env {
        Some(var) => match std::env::var(var) {
            Ok(v) if !v.is_empty() => Some(v),
            _ => {
                eprintln!("a2a-gateway: --bearer-env {var}: the variable is not set");
                return ExitCode::FAILURE;
            }
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
        match add_remote(&client, spec, &opts).await {
            Ok(r) => {
                println!("remote {} -> peer {}", r.url, r.peer_id);
                remotes.push(r);
            }
            Err(e) => {
                eprintln!("a2a-gateway: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let all_ended = futures_util::future::join_all(remotes.into_iter().map(|r| r.join()));
    tokio::select! {
        _ = all_ended => {
            eprintln!("a2a-gateway: the broker connection closed");
            ExitCode::FAILURE
        }
        _ = shutdown_signal() => ExitCode::SUCCESS,
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
