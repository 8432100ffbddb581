//! The TCK's system-under-test agent (`tck`, which behaves by each
//! message's id prefix) and a `sink` (which never acts on its tasks, so
//! they stay open), registered on a running broker and served until the
//! process is stopped: the local agents `gateway/sdk-tests/run.sh` puts
//! behind an `a2a-gateway serve` that it restarts (`serve-tck` would take
//! its broker and agents down with it).
//!
//! `cargo run -p a2a-gateway --example tck_agent -- --socket NAME_OR_PATH`
//!
//! Prints `READY` once both are registered.

/// The binary's TCK harness (a broker child, the SUT agent), shared.
#[allow(dead_code)]
#[path = "../src/tck/harness.rs"]
mod tck;

use a2a_client::{agent_card, Delivery};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let socket = match (args.next().as_deref(), args.next()) {
        (Some("--socket"), Some(s)) => s,
        _ => {
            eprintln!("usage: tck_agent --socket NAME_OR_PATH");
            return ExitCode::FAILURE;
        }
    };
    let client = match a2a_client::locate(&socket).connect(None, Default::default()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tck_agent: {e}");
            return ExitCode::FAILURE;
        }
    };
    let registered = tck::register_sut(&client).and_then(|sut| {
        client
            .register("sink-ctx", agent_card("sink"), Delivery::Push)
            .map(|sink| (sut, sink))
    });
    let _agents = match registered {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tck_agent: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("READY");
    // Served on the client's threads until the process is stopped.
    loop {
        std::thread::park();
    }
}
