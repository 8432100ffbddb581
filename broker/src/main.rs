//! The `a2a-broker` command line.

use a2a_broker::Durability;
// The demo, `call` and `watch` are client programs, not part of the
// broker's library.
mod answer;
mod call;
mod demo;
mod mcp;

use a2a_broker::{inspect, server};
use a2a_proto::limits::{DEFAULT_BATCH_MAX, DEFAULT_MAX_CONNECTIONS};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// The writer thread allocates every notification and the connection
/// threads free them: glibc's malloc serializes that hand-off on an arena
/// lock (half the writer's time per event in a profile); mimalloc frees
/// cross-thread without it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The A2A broker: durable agent-to-agent tasks in SQLite, spoken as
/// JSON-RPC 2.0 (the a2a.* protocol) over NDJSON on stdin/stdout and,
/// optionally, a local socket (NDJSON or binary frames).
#[derive(Parser)]
#[command(name = "a2a-broker", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the a2a.* protocol on stdin/stdout until stdin closes (exit 0),
    /// or SIGTERM/SIGINT. Prints {"ready":true,...} on stderr once serving.
    Serve {
        /// SQLite database file (created and migrated to schema 12 if needed).
        #[arg(long)]
        db: PathBuf,
        /// full: a committed call survives power loss (synchronous=FULL).
        /// normal: survives a broker crash, may lose the last commits on power loss.
        #[arg(long, value_enum, default_value_t = Durability::Full)]
        durability: Durability,
        /// Most calls committed in one SQLite transaction.
        #[arg(long, default_value_t = DEFAULT_BATCH_MAX as u64, value_parser = clap::value_parser!(u64).range(1..=65536))]
        batch_max: u64,
        /// Also listen on a local socket: a path, or a name placed in
        /// $XDG_RUNTIME_DIR/a2a-broker/ (else /tmp/a2a-broker-UID/), in a 0700
        /// directory. Clients must present the secret from A2A_BROKER_SECRET
        /// or, if unset, from the owner-only file the broker writes beside it.
        #[arg(long, value_name = "NAME")]
        socket: Option<String>,
        /// Do not serve stdin/stdout (a socket-only broker; stops on SIGTERM/SIGINT).
        #[arg(long, requires = "socket")]
        no_stdio: bool,
        /// Socket connections held at once; one more is answered with an
        /// error line and closed.
        #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS as u64, value_parser = clap::value_parser!(u64).range(1..=1_000_000), requires = "socket")]
        max_connections: u64,
        /// Log events on stderr, one line each: -v connections, registrations,
        /// refusals and shutdown; -vv also debug. RUST_LOG overrides.
        #[arg(short, long, action = clap::ArgAction::Count)]
        verbose: u8,
    },
    /// Run a short delegation through a broker (this binary, on a local
    /// socket) with the a2a-client library, print what happens and the
    /// audit view of the durable log.
    Demo {
        /// Keep the temporary database, so the printed audit commands can
        /// be rerun.
        #[arg(long)]
        keep: bool,
        /// Use (and keep) this database file instead of a temporary one.
        #[arg(long, value_name = "PATH")]
        db: Option<PathBuf>,
    },
    /// Make one a2a.* call on a running broker's local socket and print its
    /// result as JSON (the handshake and the secret are done for you).
    /// Example: a2a-broker call --socket main --as me a2a.agents.list
    Call {
        /// The broker's --socket NAME (a path, or the name it was given).
        #[arg(long, value_name = "NAME")]
        socket: String,
        /// Register an agent with this name first and pass its token in the
        /// params (unless they carry one).
        #[arg(long = "as", value_name = "NAME")]
        as_agent: Option<String>,
        /// The context to register that agent in.
        #[arg(long, default_value = "cli")]
        context: String,
        /// The method, e.g. a2a.agents.list.
        method: String,
        /// Its params as a JSON object (default {}).
        params: Option<String>,
    },
    /// Register an agent on a running broker's local socket and print each
    /// event it receives as a JSON line, until the broker goes away.
    Watch {
        #[command(flatten)]
        at: AgentAt,
        /// Receive the events through a shared-memory event ring of about
        /// this many bytes (docs/protocol.md, "The shared-memory event ring")
        /// instead of the socket.
        #[arg(long, value_name = "BYTES")]
        event_ring: Option<usize>,
    },
    /// Answer each task sent to an agent with a shell command's output:
    /// `sh -c CMD` reads the task's text on stdin; exit 0 completes the
    /// task with its stdout, else the task fails with its stderr.
    /// Example: a2a-broker reply --socket main --as coder --exec 'tr a-z A-Z'
    Reply {
        #[command(flatten)]
        at: AgentAt,
        /// The command run for each task, by `sh -c`, with A2A_TASK_ID,
        /// A2A_CONTEXT_ID and A2A_FROM (the requester) in its environment.
        #[arg(long, value_name = "CMD")]
        exec: String,
        /// Seconds to wait for a broker to listen at the socket (so that
        /// both can be started together).
        #[arg(long, value_name = "SECS", default_value_t = 30)]
        wait: u64,
    },
    /// Serve the A2A tool (discover | send | get | wait | complete | cancel)
    /// to an MCP host on stdin/stdout, as one agent registered on a running
    /// broker's local socket; deregisters when stdin closes.
    Mcp {
        /// The broker's --socket NAME (a path, or the name it was given).
        #[arg(long, value_name = "NAME")]
        socket: String,
        /// The agent's name.
        #[arg(long = "as", value_name = "AGENT")]
        as_agent: String,
        /// subagent (default) or parent: kinds never address each other.
        #[arg(long, default_value = "subagent", value_parser = ["subagent", "parent"])]
        kind: String,
        /// The context to register in (default mcp-AGENT: a restarted server
        /// is the same party and sees its tasks again).
        #[arg(long, value_name = "ID")]
        context_id: Option<String>,
        /// What peers read about this agent in discover.
        #[arg(long, value_name = "TEXT")]
        description: Option<String>,
    },
    /// Check a database: its header, schema, every page and every index,
    /// read-only (also beside a running broker). Prints one line and exits
    /// 0 if it is sound, else prints what is damaged and exits 1. A start
    /// reads every page itself only after a run that did not end cleanly
    /// (docs/protocol.md §10).
    Check {
        /// SQLite database file of a broker.
        #[arg(long)]
        db: PathBuf,
    },
    /// Read-only audit of the durable task history.
    Tasks {
        #[command(subcommand)]
        cmd: TasksCmd,
    },
    /// Read-only audit of the lease records.
    Leases {
        #[command(subcommand)]
        cmd: LeasesCmd,
    },
}

#[derive(Subcommand)]
enum LeasesCmd {
    /// List leases, newest first: who held which paths (and in which
    /// context), from when, until when, and how each ended (held,
    /// released, expired, deregistered, disconnected, restart).
    List {
        /// SQLite database file of a broker.
        #[arg(long)]
        db: PathBuf,
        /// Only leases held in this context.
        #[arg(long)]
        context: Option<String>,
        /// Only leases of this holder (its agent id).
        #[arg(long)]
        holder: Option<String>,
        /// Most leases shown.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
        limit: u32,
        /// One JSON object per lease and line (id, contextId, holder, paths,
        /// exclusive, reason, acquiredAt, expiresAt, endedAt, end).
        #[arg(long)]
        json: bool,
    },
}

// The agent `watch` and `reply` run as, on a running broker's socket (no
// doc comment: clap would take it for the commands' about).
#[derive(Args)]
struct AgentAt {
    /// The broker's --socket NAME (a path, or the name it was given).
    #[arg(long, value_name = "NAME")]
    socket: String,
    /// The agent's name.
    #[arg(long = "as", value_name = "NAME")]
    as_agent: String,
    /// The context to register it in.
    #[arg(long, default_value = "cli")]
    context: String,
}

#[derive(Subcommand)]
enum TasksCmd {
    /// List tasks, newest first: who asked whom, state, version. When more
    /// tasks match than `--limit`, stderr ends with `next page: --before SEQ`.
    List(ListArgs),
    /// Show one task: its parties, history, artifacts and every transition.
    Show {
        /// SQLite database file of a broker.
        #[arg(long)]
        db: PathBuf,
        /// The task id, or a unique prefix or tail of it (at least 4
        /// characters; ids made within a minute share long prefixes).
        id: String,
    },
}

// `tasks list`'s arguments (no doc comment, as for AgentAt).
#[derive(Args)]
struct ListArgs {
    /// SQLite database file of a broker.
    #[arg(long)]
    db: PathBuf,
    /// Only tasks of this requester context.
    #[arg(long)]
    context: Option<String>,
    /// Only tasks in this state (submitted, working, input-required,
    /// auth-required, completed, canceled, failed, rejected).
    #[arg(long)]
    state: Option<String>,
    /// Only tasks where this agent is the requester or the worker.
    #[arg(long)]
    agent: Option<String>,
    /// Most tasks on one page.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
    /// Only tasks older than this cursor (from the previous page's
    /// `next page: --before SEQ`, or a task's `seq` in `--json`).
    #[arg(long, value_name = "SEQ")]
    before: Option<i64>,
    /// One JSON object per task and line (id, seq, contextId, requester,
    /// worker, workerContextId, state, version, createdAt, updatedAt).
    #[arg(long)]
    json: bool,
}

/// The event log of `serve`, on stderr: `warn` by default (so a quiet
/// broker's first stderr line is its ready line), `-v` info, `-vv` debug;
/// `RUST_LOG` (an env-filter directive) overrides both.
fn init_logs(verbose: u8) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::new(directives),
        _ => EnvFilter::new(level),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .compact()
        .init();
}

/// A socket broker whose stdin is `/dev/null` (started with `&` from a
/// script, `nohup`, a service manager) would meet the end of its input at
/// once and stop: it serves the socket only instead, as with `--no-stdio`,
/// and says so after its ready line. A pipe or a file on stdin keeps its
/// meaning (its end stops the broker).
fn socket_only_by_stdin(socket: Option<&str>) -> bool {
    socket.is_some() && stdin_is_dev_null()
}

const SOCKET_ONLY_NOTE: &str = "a2a-broker: stdin is /dev/null: serving the socket only \
     (as with --no-stdio); stop with SIGTERM or Ctrl-C";

fn stdin_is_dev_null() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned() else {
        return false;
    };
    let (Ok(stdin), Ok(null)) = (
        std::fs::File::from(fd).metadata(),
        std::fs::metadata("/dev/null"),
    ) else {
        return false;
    };
    stdin.file_type().is_char_device() && stdin.rdev() == null.rdev()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Only `serve` logs; the client commands keep stderr for their own lines.
    if let Cmd::Serve { verbose, .. } = &cli.cmd {
        init_logs(*verbose);
    }
    let result = match cli.cmd {
        Cmd::Serve {
            db,
            durability,
            batch_max,
            socket,
            no_stdio,
            max_connections,
            verbose: _,
        } => {
            let by_stdin = !no_stdio && socket_only_by_stdin(socket.as_deref());
            server::serve(server::ServeConfig {
                db,
                durability,
                batch_max: batch_max as usize,
                no_stdio: no_stdio || by_stdin,
                socket,
                max_connections: max_connections as usize,
                serving_note: by_stdin.then(|| SOCKET_ONLY_NOTE.to_string()),
            })
            .map_err(|e| e.to_string())
        }
        Cmd::Demo { keep, db } => demo::run(demo::Options { db, keep }),
        Cmd::Call {
            socket,
            as_agent,
            context,
            method,
            params,
        } => call::call(
            &call::Options {
                socket,
                as_agent,
                context,
                event_ring: None,
            },
            &method,
            params.as_deref(),
        ),
        Cmd::Watch { at, event_ring } => call::watch(&call::Options {
            socket: at.socket,
            as_agent: Some(at.as_agent),
            context: at.context,
            event_ring,
        }),
        Cmd::Reply { at, exec, wait } => answer::run(&answer::Options {
            socket: at.socket,
            as_agent: at.as_agent,
            context: at.context,
            exec,
            wait: std::time::Duration::from_secs(wait),
        }),
        Cmd::Mcp {
            socket,
            as_agent,
            kind,
            context_id,
            description,
        } => mcp::run(mcp::Options {
            socket,
            as_agent,
            parent: kind == "parent",
            context_id,
            description,
        }),
        Cmd::Check { db } => a2a_broker::check_database(&db)
            .map(|line| println!("{line}"))
            .map_err(|e| e.to_string()),
        Cmd::Tasks { cmd } => match cmd {
            TasksCmd::List(list) => {
                let q = inspect::ListQuery {
                    context: list.context,
                    state: list.state,
                    agent: list.agent,
                    limit: list.limit,
                    before: list.before,
                    json: list.json,
                };
                inspect::list_with(&list.db, &q).map_err(|e| e.to_string())
            }
            TasksCmd::Show { db, id } => inspect::show(&db, &id).map_err(|e| e.to_string()),
        },
        Cmd::Leases {
            cmd:
                LeasesCmd::List {
                    db,
                    context,
                    holder,
                    limit,
                    json,
                },
        } => inspect::leases(
            &db,
            &inspect::LeaseQuery {
                context,
                holder,
                limit,
                json,
            },
        )
        .map_err(|e| e.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(line) => {
            eprintln!("a2a-broker: {line}");
            ExitCode::FAILURE
        }
    }
}
