//! The `a2a-gateway` command line: `serve` (expose local agents of a
//! running broker over A2A v1.0 HTTP), `serve-tck` (a broker on a
//! temporary database with the TCK's system-under-test agent, served) and
//! `remote add` (remote A2A agents as peers of a running broker).

mod remote_cli;
mod tck;

use a2a_gateway::{ServeOptions, Tokens, WebhookPolicy};
use a2a_proto::types::AgentKind;
use clap::{Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The A2A v1.0 gateway of an a2a-broker.
#[derive(Parser)]
#[command(name = "a2a-gateway", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum Kind {
    Subagent,
    Parent,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve local agents of a running broker over A2A v1.0 (JSON-RPC + SSE).
    Serve {
        /// The broker's socket: a NAME (as given to `a2a-broker serve
        /// --socket NAME`) or a path. The secret is read from
        /// A2A_BROKER_SECRET, else from the file beside the socket.
        #[arg(long)]
        socket: String,
        /// Address to listen on. Anything but loopback needs --token.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// The origin clients reach the gateway at (default http://LISTEN);
        /// used for the interface URLs in the agent cards.
        #[arg(long)]
        public_url: Option<String>,
        /// A local agent (peer id) to expose; repeatable. The first is also
        /// served at /.well-known/agent-card.json.
        #[arg(long = "expose", required = true)]
        expose: Vec<String>,
        /// A bearer token: NAME=SECRET (NAME is the caller's identity);
        /// repeatable. With any token, every call must present one.
        #[arg(long = "token", value_name = "NAME=SECRET")]
        tokens: Vec<String>,
        /// A file of NAME=SECRET lines (keeps secrets off the command line).
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// Calls per second per identity (0: unlimited).
        #[arg(long, default_value_t = 50.0)]
        rate: f64,
        /// Calls an identity may make at once before the rate applies.
        #[arg(long, default_value_t = 100)]
        burst: u32,
        /// Largest request body, in bytes.
        #[arg(long, default_value_t = 8 << 20)]
        max_body_bytes: usize,
        /// A host push webhooks may target (repeatable; `*`: any host with a
        /// public address). Without one, push notifications are off.
        #[arg(long = "webhook-host", value_name = "HOST")]
        webhook_hosts: Vec<String>,
        /// Allow webhooks to loopback addresses (local tests only).
        #[arg(long)]
        allow_loopback_webhooks: bool,
        /// Longest life of one SSE stream, in seconds.
        #[arg(long, default_value_t = 600)]
        max_stream_secs: u64,
        /// The kind of the exposed agents (the gateway registers as one).
        #[arg(long, value_enum, default_value_t = Kind::Subagent)]
        kind: Kind,
        /// The gateway's state file (SQLite: tasks, push configs), so a
        /// restart changes nothing clients see. Default: the socket's path
        /// with `.gateway.db` appended. One file per gateway.
        #[arg(long)]
        state: Option<PathBuf>,
        /// How long a blocking SendMessage waits for its task to finish
        /// or need input, in seconds (0: without bound).
        #[arg(long, default_value_t = 300)]
        reply_timeout: u64,
        /// A remote A2A agent to bridge into the broker as well, as
        /// `remote add` does, on the same state file (repeatable): one
        /// process per host both serves and bridges. A remote not up yet
        /// is tried again every second.
        #[arg(long = "remote", value_name = "URL")]
        remotes: Vec<String>,
        /// With --remote: the environment variable holding the bearer
        /// token the remotes require.
        #[arg(long)]
        remote_bearer_env: Option<String>,
        /// With --remote: a further origin (`scheme://host[:port]`) calls
        /// may go to (repeatable); calls go only to the origin a remote's
        /// card was fetched from unless allowed here.
        #[arg(long = "remote-allow-origin", value_name = "ORIGIN")]
        remote_allow_origins: Vec<String>,
        /// Append one JSON line per call answered and per request refused
        /// to FILE (no message bodies, no secrets).
        #[arg(long, value_name = "FILE")]
        audit: Option<PathBuf>,
        /// Cards strictly v1.0, without A2A v0.3's fields (`url`,
        /// `protocolVersion`, ...) that v0.3 clients read.
        #[arg(long)]
        no_v03_card: bool,
    },
    /// Start a broker on a temporary database with the TCK's SUT agent and
    /// serve it (streaming and push notifications declared; loopback
    /// webhooks allowed; no rate limit).
    ServeTck {
        /// Address to listen on (loopback only).
        #[arg(long, default_value = "127.0.0.1:9999")]
        listen: SocketAddr,
        /// The a2a-broker binary (default: beside this one, else on PATH).
        #[arg(long)]
        broker: Option<PathBuf>,
        /// Do not declare (nor offer) streaming.
        #[arg(long)]
        no_streaming: bool,
        /// Do not declare (nor offer) push notifications.
        #[arg(long)]
        no_push: bool,
        /// Do not declare (nor offer) the extended agent card.
        #[arg(long)]
        no_extended_card: bool,
        /// A strictly v1.0 card, without A2A v0.3's fields (`url`,
        /// `protocolVersion`, ...), as the v1.0 TCK's schema check wants.
        #[arg(long)]
        no_v03_card: bool,
        /// Declare the TCK's required extension (urn:a2a:tck:required-extension):
        /// message requests without it in A2A-Extensions get -32008. Every
        /// other TCK test sends none, so run this profile filtered (-k CAP).
        #[arg(long)]
        require_tck_extension: bool,
    },
    /// Remote A2A agents as peers of a running broker.
    #[command(subcommand)]
    Remote(RemoteCmd),
}

#[derive(Subcommand)]
enum RemoteCmd {
    /// Fetch the cards of remote A2A v1.0 agents, register each in the
    /// broker under its card's name, and bridge their tasks until stopped.
    Add(remote_cli::RemoteAddArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("a2a-gateway: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli.cmd)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("a2a-gateway: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cmd: Cmd) -> Result<(), Box<dyn std::error::Error>> {
    match cmd {
        Cmd::Serve {
            socket,
            listen,
            public_url,
            expose,
            tokens,
            token_file,
            rate,
            burst,
            max_body_bytes,
            webhook_hosts,
            allow_loopback_webhooks,
            max_stream_secs,
            kind,
            state,
            reply_timeout,
            remotes,
            remote_bearer_env,
            remote_allow_origins,
            audit,
            no_v03_card,
        } => {
            let tokens = tokens_of(tokens, token_file)?;
            let remote_allow_origins =
                remote_cli::origins_of("--remote-allow-origin", &remote_allow_origins)?;
            // The one locator of every front end, so all agree: a NAME or a
            // path, "no broker is listening" told apart from a bad secret.
            let located = a2a_client::locate(&socket);
            located.check_listening()?;
            let (secret, _) = located.secret()?;
            let socket = located.socket;
            let state = state.unwrap_or_else(|| {
                let mut p = socket.clone().into_os_string();
                p.push(".gateway.db");
                PathBuf::from(p)
            });
            let mut opts = ServeOptions::new(socket, secret, expose);
            opts.state = Some(state);
            opts.reply_timeout = (reply_timeout > 0).then(|| Duration::from_secs(reply_timeout));
            opts.audit = audit;
            opts.v03_card = !no_v03_card;
            opts.listen = listen;
            opts.public_url = public_url;
            opts.tokens = tokens;
            opts.rate = rate;
            opts.burst = burst;
            opts.max_body_bytes = max_body_bytes;
            opts.webhooks = WebhookPolicy {
                allow_hosts: webhook_hosts,
                allow_loopback: allow_loopback_webhooks,
            };
            opts.max_stream = Duration::from_secs(max_stream_secs);
            opts.kind = match kind {
                Kind::Subagent => AgentKind::Subagent,
                Kind::Parent => AgentKind::Parent,
            };
            let bridge_to = (opts.socket.clone(), opts.secret.clone());
            let running = a2a_gateway::serve(opts).await?;
            let bridged = if remotes.is_empty() {
                None
            } else {
                Some(
                    remote_cli::ServedRemotes::start(
                        &bridge_to.0,
                        &bridge_to.1,
                        remotes,
                        remote_bearer_env.as_deref(),
                        remote_allow_origins,
                        running.state_file(),
                    )
                    .await?,
                )
            };
            let stop = wait_for_signal();
            ready_line(running.addr);
            stop.await;
            if let Some(b) = bridged {
                b.suspend().await;
            }
            running.stop().await;
            Ok(())
        }
        Cmd::ServeTck {
            listen,
            broker,
            no_streaming,
            no_push,
            no_extended_card,
            no_v03_card,
            require_tck_extension,
        } => {
            if !listen.ip().is_loopback() {
                return Err("serve-tck listens on loopback only".into());
            }
            let profile = tck::Profile {
                streaming: !no_streaming,
                push: !no_push,
                extended_card: !no_extended_card,
                v03_card: !no_v03_card,
                required_extension: require_tck_extension
                    .then_some("urn:a2a:tck:required-extension"),
            };
            let sut = tck::start(listen, broker.as_deref(), profile).await?;
            let stop = wait_for_signal();
            ready_line(sut.gateway.addr);
            eprintln!(
                "a2a-gateway: TCK SUT at http://{0} (agent card http://{0}/.well-known/agent-card.json)",
                sut.gateway.addr
            );
            stop.await;
            sut.gateway.stop().await;
            Ok(())
        }
        Cmd::Remote(RemoteCmd::Add(args)) => {
            remote_cli::run(args, wait_for_signal()).await?;
            Ok(())
        }
    }
}

/// The `--token` specs and the lines of `--token-file` (blank lines and
/// `#` comments skipped), parsed together.
fn tokens_of(
    mut specs: Vec<String>,
    file: Option<PathBuf>,
) -> Result<Tokens, Box<dyn std::error::Error>> {
    if let Some(f) = file {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        specs.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned),
        );
    }
    Ok(Tokens::parse(specs.iter().map(String::as_str))?)
}

/// The line a starter waits for: `{"ready":true,"listen":"ADDR"}`.
fn ready_line(addr: SocketAddr) {
    eprintln!(
        "{}",
        serde_json::json!({"ready": true, "listen": addr.to_string()})
    );
}

/// SIGINT or SIGTERM. The handlers are installed when this is called, not
/// when the future is first polled: a starter that signals as soon as it
/// has read the ready line (or `remote add`'s first line) must not meet the
/// default action, which ends the process without its clean stop.
fn wait_for_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let handlers = {
        use tokio::signal::unix::{signal, SignalKind};
        signal(SignalKind::interrupt())
            .ok()
            .zip(signal(SignalKind::terminate()).ok())
    };
    async move {
        #[cfg(unix)]
        if let Some((mut int, mut term)) = handlers {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}
