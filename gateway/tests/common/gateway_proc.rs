//! Starting `a2a-gateway serve` as a child process and reading its ready
//! line (`{"ready":true,"listen":"ADDR"}` on stderr): what the tests
//! (`common::GatewayProc`) and the benchmarks (`examples/bench`) both do,
//! written once. The rest of its stderr is drained (or echoed, prefixed
//! `gateway: `) so the child never blocks on a full pipe.

use serde_json::Value;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a gateway may take to print its ready line.
pub const READY_WITHIN: Duration = Duration::from_secs(20);

/// Spawns `bin serve ARGS --socket SOCKET` with the broker's secret (and
/// `env`) in its environment; returns the child and the address it
/// listens on, once it is ready. `echo`: copy its log lines to stderr.
pub fn spawn_serve<A: AsRef<OsStr>>(
    bin: &Path,
    socket: &Path,
    secret: &str,
    args: impl IntoIterator<Item = A>,
    env: &[(&str, &str)],
    echo: bool,
) -> (Child, String) {
    let mut child = Command::new(bin)
        .envs(env.iter().copied())
        .arg("serve")
        .args(args)
        .arg("--socket")
        .arg(socket)
        .env(a2a_client::SECRET_ENV, secret)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gateway binary starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if v["ready"] == true {
                    let _ = tx.send(v["listen"].as_str().unwrap_or("").to_owned());
                }
            }
            if echo {
                eprintln!("gateway: {line}");
            }
        }
    });
    let addr = rx
        .recv_timeout(READY_WITHIN)
        .expect("the gateway's ready line");
    (child, addr)
}
