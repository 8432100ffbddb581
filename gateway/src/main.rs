//! Scratch entry point (replaced by gw-in's on merge; only the `remote`
//! wiring below is carried over).

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "a2a-gateway", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Remote A2A agents as peers of a running broker.
    #[command(subcommand)]
    Remote(RemoteCmd),
}

#[derive(Subcommand)]
enum RemoteCmd {
    /// Fetch the cards of remote A2A v1.0 agents, register each in the
    /// broker under its card's name, and bridge their tasks until stopped.
    Add(a2a_gateway::outbound::cli::RemoteAddArgs),
}

fn main() -> ExitCode {
    match Cli::parse().cmd {
        Cmd::Remote(RemoteCmd::Add(args)) => a2a_gateway::outbound::cli::run(args),
    }
}
