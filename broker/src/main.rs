//! The `a2a-broker` command line. Everything it parses, runs and prints
//! lives in this binary's own module tree (`cli/`); the library serves.

mod cli;

use clap::Parser;
use cli::args::{Cli, Cmd};
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
        cli::serve::init_logs(serve.verbose);
    }
    match cli::run(args.cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(line) => {
            eprintln!("a2a-broker: {line}");
            ExitCode::FAILURE
        }
    }
}
