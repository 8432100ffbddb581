//! The `a2a-broker` command line: every subcommand (`serve`, `demo`,
//! `call`, `watch`, `reply`, `mcp`, `tasks`, `leases`, `check`), what it
//! parses, runs and prints. A package of its own, so that the server
//! library (`a2a_broker`) depends on none of clap, `a2a-client`,
//! `a2a-tool` or rmcp; the binary keeps the name `a2a-broker`.
//!
//! - [`args`]: the subcommands and flags as clap reads them.
//! - [`serve`]: `serve`'s event log and its socket-only start.
//! - [`audit`]: `tasks list|show` and `leases list`, printed.
//! - [`demo`]: `a2a-broker demo`, a delegation narrated through `a2a-client`.
//! - [`call`]: `call` and `watch`, one call or an agent's events from a shell.
//! - [`answer`]: `reply`, an agent answering with a shell command.
//! - [`mcp`]: `mcp`, the A2A tool served to an MCP host.

mod answer;
mod args;
mod audit;
mod call;
mod demo;
mod mcp;
mod serve;

use a2a_broker::inspect;
use args::{Cli, Cmd, LeasesCmd, TasksCmd};
use clap::Parser;
use std::process::ExitCode;

/// The writer thread allocates every notification and the connection
/// threads free them: glibc's malloc serializes that hand-off on an arena
/// lock (half the writer's time per event in a profile); mimalloc frees
/// cross-thread without it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Cli::parse();
    // Only `serve` logs; the client commands keep stderr for their own lines.
    if let Cmd::Serve(serve) = &args.cmd {
        serve::init_logs(serve.verbose);
    }
    match run(args.cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(line) => {
            eprintln!("a2a-broker: {line}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one subcommand: `Err` is the one line to print after `a2a-broker: `.
fn run(cmd: Cmd) -> Result<(), String> {
    match cmd {
        Cmd::Serve(a) => serve::run(a),
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
        Cmd::Reply {
            at,
            exec,
            wait,
            concurrency,
        } => answer::run(&answer::Options {
            socket: at.socket,
            as_agent: at.as_agent,
            context: at.context,
            exec,
            wait: std::time::Duration::from_secs(wait),
            concurrency: usize::from(concurrency),
        }),
        Cmd::Mcp {
            socket,
            as_agent,
            kind,
            context_id,
            description,
            wait,
        } => mcp::run(mcp::Options {
            socket,
            as_agent,
            parent: kind == "parent",
            context_id,
            description,
            wait: std::time::Duration::from_secs(wait),
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
                };
                audit::list_with(&list.db, &q, list.json).map_err(|e| e.to_string())
            }
            TasksCmd::Show { db, id } => audit::show(&db, &id).map_err(|e| e.to_string()),
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
        } => audit::leases(
            &db,
            &inspect::LeaseQuery {
                context,
                holder,
                limit,
            },
            json,
        )
        .map_err(|e| e.to_string()),
    }
}
