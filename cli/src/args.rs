//! The command line as clap reads it: every subcommand, its flags and
//! their help (the doc comments are the `--help` texts).

use a2a_broker::Durability;
use a2a_proto::limits::{DEFAULT_BATCH_MAX, DEFAULT_MAX_CONNECTIONS};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// The A2A broker: durable agent-to-agent tasks in SQLite, spoken as
/// JSON-RPC 2.0 (the a2a.* protocol) over NDJSON on stdin/stdout and,
/// optionally, a local socket (NDJSON or binary frames).
#[derive(Parser)]
#[command(name = "a2a-broker", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Serve the a2a.* protocol on stdin/stdout until stdin closes (exit 0),
    /// or SIGTERM/SIGINT. Prints {"ready":true,...} on stderr once serving.
    Serve(ServeArgs),
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
    /// Answer each task sent to an agent with a command's output: CMD
    /// reads the task's text on stdin; exit 0 completes the task with its
    /// stdout, else the task fails with its stderr. Up to --concurrency
    /// tasks are answered at once.
    /// Example: a2a-broker reply --socket main --as coder --exec 'tr a-z A-Z'
    Reply {
        #[command(flatten)]
        at: AgentAt,
        /// The command run for each task, with A2A_TASK_ID, A2A_CONTEXT_ID
        /// and A2A_FROM (the requester) in its environment: run directly
        /// when it is plain words (`tr a-z A-Z`), else by `sh -c` (quotes,
        /// `$`, pipes, redirections, globs and the like need the shell).
        #[arg(long, value_name = "CMD")]
        exec: String,
        /// Seconds to wait for a broker to listen at the socket (so that
        /// both can be started together).
        #[arg(long, value_name = "SECS", default_value_t = 30)]
        wait: u64,
        /// How many tasks are answered at once (each runs its own command);
        /// 1 answers them one at a time, in the order they came.
        #[arg(long, value_name = "N", default_value_t = crate::answer::DEFAULT_CONCURRENCY,
              value_parser = clap::value_parser!(u16).range(1..=1024))]
        concurrency: u16,
    },
    /// Serve the A2A tool (discover | send | get | wait | complete | cancel | lease | release)
    /// to an MCP host on stdin/stdout, as one agent registered on a running
    /// broker's local socket; deregisters when stdin closes. The model is
    /// told the name it is registered under (NAME-2 when another live agent
    /// holds NAME).
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
        /// Seconds to wait for a broker to listen at the socket, so that an
        /// MCP host may start this server before the broker (stderr says
        /// what it waits for); with 0, no broker is an error at once. Once
        /// serving, a lost connection (the broker restarted) is made again
        /// by the next call, under the same name, and the model is told.
        #[arg(long, value_name = "SECONDS", default_value_t = 0)]
        wait: u64,
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
pub enum LeasesCmd {
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

// `serve`'s flags (no doc comment, as for AgentAt).
#[derive(Args)]
pub struct ServeArgs {
    /// SQLite database file (created and migrated to schema 12 if needed).
    #[arg(long)]
    pub db: PathBuf,
    /// full: a committed call survives power loss (synchronous=FULL).
    /// normal: survives a broker crash, may lose the last commits on power loss.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Full)]
    pub durability: DurabilityArg,
    /// Most calls committed in one SQLite transaction.
    #[arg(long, default_value_t = DEFAULT_BATCH_MAX as u64, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub batch_max: u64,
    /// Also listen on a local socket: a path, or a name placed in
    /// $XDG_RUNTIME_DIR/a2a-broker/ (else /tmp/a2a-broker-UID/), in a 0700
    /// directory. Clients must present the secret from A2A_BROKER_SECRET
    /// or, if unset, from the owner-only file the broker writes beside it.
    #[arg(long, value_name = "NAME")]
    pub socket: Option<String>,
    /// Do not serve stdin/stdout (a socket-only broker; stops on SIGTERM/SIGINT).
    #[arg(long, requires = "socket")]
    pub no_stdio: bool,
    /// Socket connections held at once; one more is answered with an
    /// error line and closed.
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS as u64, value_parser = clap::value_parser!(u64).range(1..=1_000_000), requires = "socket")]
    pub max_connections: u64,
    /// Log events on stderr, one line each: -v connections, registrations,
    /// refusals and shutdown; -vv also debug. RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

// The agent `watch` and `reply` run as, on a running broker's socket (no
// doc comment: clap would take it for the commands' about).
#[derive(Args)]
pub struct AgentAt {
    /// The broker's --socket NAME (a path, or the name it was given).
    #[arg(long, value_name = "NAME")]
    pub socket: String,
    /// The agent's name.
    #[arg(long = "as", value_name = "NAME")]
    pub as_agent: String,
    /// The context to register it in.
    #[arg(long, default_value = "cli")]
    pub context: String,
}

#[derive(Subcommand)]
pub enum TasksCmd {
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
pub struct ListArgs {
    /// SQLite database file of a broker.
    #[arg(long)]
    pub db: PathBuf,
    /// Only tasks of this requester context.
    #[arg(long)]
    pub context: Option<String>,
    /// Only tasks in this state (submitted, working, input-required,
    /// auth-required, completed, canceled, failed, rejected).
    #[arg(long)]
    pub state: Option<String>,
    /// Only tasks where this agent is the requester or the worker.
    #[arg(long)]
    pub agent: Option<String>,
    /// Most tasks on one page.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: u32,
    /// Only tasks older than this cursor (from the previous page's
    /// `next page: --before SEQ`, or a task's `seq` in `--json`).
    #[arg(long, value_name = "SEQ")]
    pub before: Option<i64>,
    /// One JSON object per task and line (id, seq, contextId, requester,
    /// worker, workerContextId, state, version, createdAt, updatedAt).
    #[arg(long)]
    pub json: bool,
}

/// `--durability`: the library's [`Durability`] as clap reads it (each
/// variant's doc comment is its line in `serve --help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// `synchronous=FULL`: a committed call survives power loss.
    Full,
    /// `synchronous=NORMAL` (WAL): survives a crash of the broker, may lose
    /// the last commits on power loss; never corrupts.
    Normal,
}

impl From<DurabilityArg> for Durability {
    fn from(d: DurabilityArg) -> Durability {
        match d {
            DurabilityArg::Full => Durability::Full,
            DurabilityArg::Normal => Durability::Normal,
        }
    }
}
