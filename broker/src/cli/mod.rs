//! The binary's own module tree: the command line (clap), the client
//! programs and every printed line; the library (`a2a_broker`) has none
//! of them, nor `a2a-client`.
//!
//! - [`args`]: the subcommands and flags as clap reads them.
//! - [`serve`]: `serve`'s event log and its socket-only start.
//! - [`audit`]: `tasks list|show` and `leases list`, printed.
//! - [`demo`]: `a2a-broker demo`, a delegation narrated through `a2a-client`.
//! - [`call`]: `call` and `watch`, one call or an agent's events from a shell.
//! - [`answer`]: `reply`, an agent answering with a shell command.
//! - [`mcp`]: `mcp`, the A2A tool served to an MCP host.

pub mod answer;
pub mod args;
pub mod audit;
pub mod call;
pub mod demo;
pub mod mcp;
pub mod serve;

use a2a_broker::inspect;
use args::{Cmd, LeasesCmd, TasksCmd};

/// Runs one subcommand: `Err` is the one line to print after `a2a-broker: `.
pub fn run(cmd: Cmd) -> Result<(), String> {
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
