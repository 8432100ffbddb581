//! The `a2a-fanout` command line: runs the fan-out (one row per transport
//! and durability asked for), prints the summary table or `--json`, and
//! exits non-zero when a check fails; `chart` runs the sweeps behind
//! BENCHMARKS.md's charts; `worker` is this binary re-executed by
//! `--processes`.

use a2a_fanout::chart::{markdown, sweep, Sweep};
use a2a_fanout::engine::Workload;
use a2a_fanout::report::table;
use a2a_fanout::run::{worker, External, WorkerArgs};
use a2a_fanout::soak::SoakConfig;
use a2a_fanout::{run, Config, Durability, Transport};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Fan-out load generator for a2a-broker.
///
/// Starts a broker on a temporary database (or uses a running one with
/// --socket), then runs N delegates that register, discover each other
/// (a2a.agents.list), lease the files they edit (a2a.leases.acquire,
/// neighbours overlapping; --workload claims: broadcast a file claim
/// instead), send each other tasks, ask for input (input-required) and answer, attach an artifact
/// and complete. Prints tasks/s, events/s and the p50/p99/max latency from
/// a send to the counterpart's event, per transport and durability mode,
/// and checks that every task reached a terminal state and every event
/// arrived exactly once and in order per recipient (seq strictly +1).
/// Exits 1 if a check fails, 2 if the run could not be made.
///
/// The contract's bounds shape the claims workload: a claim is a broadcast while
/// the N - 1 peers fit A2A_MAX_TASKS_PER_CONTEXT (128), else it goes to 16
/// neighbours (the summary's claim mode says which); a delegate whose
/// registration spent its 200 sends (A2A_MAX_SENDS_PER_RUN) registers
/// again for its further requests.
///
/// With --soak the run is long (600 s unless --seconds says otherwise) and
/// watches the broker it started: every --sample-every seconds its
/// resident memory, the database and -wal sizes and the bytes it wrote,
/// printed as they come, then charted (--soak-out).
///
/// Example: a2a-fanout --delegates 32 --seconds 10 --transport all --durability full,normal
#[derive(Parser)]
#[command(name = "a2a-fanout", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the chart sweeps (events/s per transport at N = 32; p99
    /// latency at N = 8, 32, 128, 512, socket-binary; both durabilities)
    /// and write SVGs, results.json and a Markdown table.
    Chart {
        /// Directory for the SVGs and results.json.
        #[arg(long, default_value = "benches/charts")]
        out_dir: PathBuf,
        /// Seconds of each sweep point.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Delegate counts of the latency sweep.
        #[arg(long, value_delimiter = ',', default_value = "8,32,128,512")]
        sizes: Vec<usize>,
        /// Live progress on stderr.
        #[arg(long)]
        progress: bool,
    },
    /// (internal) One worker process of --processes.
    #[command(hide = true)]
    Worker {
        #[arg(long)]
        socket: PathBuf,
        #[arg(long, value_enum)]
        transport: Transport,
        #[arg(long)]
        delegates: usize,
        #[arg(long)]
        first: usize,
        #[arg(long)]
        count: usize,
        #[arg(long)]
        tasks: Option<u64>,
        #[arg(long)]
        seconds: Option<f64>,
        #[arg(long)]
        window: usize,
        #[arg(long)]
        connections: usize,
        #[arg(long)]
        timeout: u64,
        #[arg(long, value_enum)]
        workload: Workload,
    },
}

#[derive(Args)]
struct RunArgs {
    /// Delegates (agents), at least 2.
    #[arg(long, short = 'n', default_value_t = 32)]
    delegates: usize,
    /// Job tasks in the whole run, split evenly over the delegates
    /// (default 2000 when --seconds is not given).
    #[arg(long, conflicts_with = "seconds")]
    tasks: Option<u64>,
    /// Instead of --tasks: start new tasks for this many seconds, then let
    /// those in flight finish.
    #[arg(long)]
    seconds: Option<f64>,
    /// Transports, comma-separated, or `all`: stdio (NDJSON on the broker's
    /// pipes), socket-ndjson, socket-binary (the Rust client), ring
    /// (socket-binary asking for the shared-memory event ring; the table
    /// says "(declined)" when the broker does not grant it).
    #[arg(long, value_delimiter = ',', default_value = "socket-binary")]
    transport: Vec<String>,
    /// Broker durability modes, comma-separated: full (fsync per commit
    /// group), normal.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "full")]
    durability: Vec<Durability>,
    /// Run the delegates in this many worker processes (this binary
    /// re-executed) instead of threads of this one; without a value, 4.
    #[arg(long, num_args = 0..=1, default_missing_value = "4")]
    processes: Option<usize>,
    /// Job tasks each delegate keeps in flight.
    #[arg(long, default_value_t = 2)]
    window: usize,
    /// Broker connections the agents share (per process with
    /// --processes); default min(N, 8). Each costs two client threads.
    #[arg(long)]
    connections: Option<usize>,
    /// The a2a-broker binary to start (default: A2A_BROKER_BIN, else the
    /// a2a-broker beside this executable, else the workspace's, built if
    /// missing).
    #[arg(long)]
    broker_bin: Option<PathBuf>,
    /// Use the running broker at this socket instead of starting one: its
    /// `serve --socket` NAME, or a path.
    #[arg(long, value_name = "NAME")]
    socket: Option<String>,
    /// The secret of the broker at --socket (default: A2A_BROKER_SECRET,
    /// else the file beside the socket).
    #[arg(long, requires = "socket")]
    secret_file: Option<PathBuf>,
    /// Print the reports as JSON (an array) instead of the table.
    #[arg(long)]
    json: bool,
    /// No progress display.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// How delegates take their files before editing: leases (exclusive
    /// leases on their own directory and a file shared with a neighbour,
    /// held 20 ms; conflicts wait for the release) or claims (a broadcast
    /// claim every peer acknowledges, the workload before leases).
    #[arg(long, value_enum, default_value = "leases")]
    workload: Workload,
    /// Seconds a run may take (beyond --seconds) before it is failed.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Soak: a long run (--seconds, default 600) sampling the broker's RSS,
    /// its database and -wal sizes and bytes written (/proc/PID/io); the
    /// report adds the largest log, bytes written per job and the RSS
    /// slope after --warmup.
    #[arg(long, conflicts_with = "tasks")]
    soak: bool,
    /// Soak: seconds between samples.
    #[arg(long, default_value_t = 5.0, requires = "soak")]
    sample_every: f64,
    /// Soak: seconds left out of the RSS slope and the per-job figures.
    #[arg(long, default_value_t = 60.0, requires = "soak")]
    warmup: f64,
    /// Soak: seconds of sampling after the load stopped.
    #[arg(long, default_value_t = 10.0, requires = "soak")]
    idle: f64,
    /// Soak: directory for soak.svg and soak.json (one run: give one
    /// transport and one durability).
    #[arg(long, requires = "soak")]
    soak_out: Option<PathBuf>,
}

fn transports(names: &[String]) -> Result<Vec<Transport>, String> {
    let mut out = Vec::new();
    for n in names {
        if n == "all" {
            out.extend(Transport::ALL);
            continue;
        }
        let t = Transport::ALL
            .into_iter()
            .find(|t| t.name() == n)
            .ok_or_else(|| {
                format!("unknown transport `{n}` (stdio, socket-ndjson, socket-binary, ring, all)")
            })?;
        out.push(t);
    }
    Ok(out)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Some(Cmd::Chart {
            out_dir,
            seconds,
            sizes,
            progress,
        }) => {
            let s = Sweep {
                seconds,
                sizes,
                transports: Transport::ALL.to_vec(),
                progress,
            };
            match sweep(&s, &out_dir) {
                Ok(reports) => {
                    println!("{}", markdown(&reports));
                    if reports.iter().all(|r| r.checks.passed) {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(1)
                    }
                }
                Err(e) => {
                    eprintln!("a2a-fanout: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Some(Cmd::Worker {
            socket,
            transport,
            delegates,
            first,
            count,
            tasks,
            seconds,
            window,
            connections,
            timeout,
            workload,
        }) => {
            let mut cfg = Config::new(transport, Durability::Full, delegates);
            cfg.workload = workload;
            cfg.tasks = tasks;
            cfg.seconds = seconds;
            cfg.window = window;
            cfg.connections = connections;
            cfg.timeout = Duration::from_secs(timeout);
            let w = WorkerArgs {
                socket,
                transport,
                first,
                count,
            };
            match worker(&cfg, &w) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("a2a-fanout worker: {e}");
                    ExitCode::from(2)
                }
            }
        }
        None => run_main(cli.run),
    }
}

/// The running broker `--socket` names, found as every front end finds it
/// (a2a-client's locator), with one handshake now so that "no broker
/// there" and "wrong secret" are said before the run starts.
fn external(socket: &str, secret_file: Option<&std::path::Path>) -> Result<External, String> {
    use a2a_client::SecretFrom;
    let broker = a2a_client::locate(socket);
    let (secret, from) = match secret_file {
        Some(f) => match std::fs::read_to_string(f) {
            Ok(s) => (s.trim().to_owned(), SecretFrom::File(f.to_path_buf())),
            Err(e) => return Err(format!("cannot read {}: {e}", f.display())),
        },
        None => broker.secret().map_err(|e| e.to_string())?,
    };
    broker
        .connect(Some((&secret, from)), Default::default())
        .map_err(|e| e.to_string())?;
    Ok(External {
        socket: broker.socket,
        secret,
    })
}

fn run_main(a: RunArgs) -> ExitCode {
    let ts = match transports(&a.transport) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("a2a-fanout: {e}");
            return ExitCode::from(2);
        }
    };
    let external = match &a.socket {
        Some(s) => match external(s, a.secret_file.as_deref()) {
            Ok(e) => Some(e),
            Err(e) => {
                eprintln!("a2a-fanout: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let secs = |s: f64, what: &str| {
        Duration::try_from_secs_f64(s).map_err(|_| format!("--{what} takes seconds, not {s}"))
    };
    let soak = match a.soak.then(|| -> Result<SoakConfig, String> {
        Ok(SoakConfig {
            every: secs(a.sample_every, "sample-every")?.max(Duration::from_millis(100)),
            warmup: secs(a.warmup, "warmup")?,
            idle: secs(a.idle, "idle")?,
            print: !a.quiet,
            out_dir: a.soak_out.clone(),
        })
    }) {
        Some(Err(e)) => {
            eprintln!("a2a-fanout: {e}");
            return ExitCode::from(2);
        }
        Some(Ok(s)) => Some(s),
        None => None,
    };
    let seconds = match (a.seconds, &soak) {
        (None, Some(_)) => Some(600.0),
        (s, _) => s,
    };
    let mut reports = Vec::new();
    // A running broker has one durability: one pass over the transports.
    let passes = if external.is_some() {
        1
    } else {
        a.durability.len()
    };
    for &d in a.durability.iter().take(passes) {
        for &t in &ts {
            let mut c = Config::new(t, d, a.delegates);
            c.tasks = match seconds {
                Some(_) => None,
                None => Some(a.tasks.unwrap_or(2000)),
            };
            c.seconds = seconds;
            c.soak = soak.clone();
            c.window = a.window;
            c.connections = a.connections.unwrap_or(a.delegates.clamp(1, 8));
            c.processes = a.processes;
            c.broker_bin = a.broker_bin.clone();
            c.external = external.clone();
            c.progress = !a.quiet;
            c.timeout = Duration::from_secs(a.timeout);
            c.workload = a.workload;
            match run(&c) {
                Ok(r) => reports.push(r),
                Err(e) => {
                    eprintln!("a2a-fanout: {} {}: {e}", t.name(), d.name());
                    return ExitCode::from(2);
                }
            }
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reports).unwrap_or_default()
        );
    } else {
        print!("{}", table(&reports));
    }
    if reports.iter().all(|r| r.checks.passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
