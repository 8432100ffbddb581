//! `a2a-broker call` and `a2a-broker watch` against a running broker's
//! local socket: one call from a shell (the handshake and the secret done
//! for the user; `--as` registers an agent and passes its token), and an
//! agent's events printed as JSON lines.

use a2a_testkit::{Spawn, TIMEOUT};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_a2a-broker");

#[test]
fn call_makes_one_call_and_watch_prints_events() {
    let dir = tempfile::tempdir().unwrap();
    let p = Spawn::new(dir.path().join("db"))
        .bin(BIN)
        .socket(dir.path().join("run").join("main.sock"))
        .no_stdio()
        .start(TIMEOUT)
        .expect("broker ready");
    let socket = p.socket().unwrap();
    let socket = socket.to_str().unwrap();

    // One call, its result as JSON on stdout.
    let out = Command::new(BIN)
        .args(["call", "--socket", socket, "--as", "me", "a2a.agents.list"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["agents"], serde_json::json!([]));

    // A watcher prints the events its agent receives.
    let mut watcher = Command::new(BIN)
        .args(["watch", "--socket", socket, "--as", "watcher"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(watcher.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("watching watcher"), "{line}");
    let msg = r#"{"message":{"role":"user","messageId":"m1","to":"watcher","parts":[{"kind":"text","text":"hello from a shell"}]}}"#;
    let out = Command::new(BIN)
        .args([
            "call",
            "--socket",
            socket,
            "--as",
            "sender",
            "a2a.message.send",
            msg,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sent["task"]["agentName"], "watcher");
    let mut events = BufReader::new(watcher.stdout.take().unwrap());
    let deadline = Instant::now() + TIMEOUT;
    let mut got = String::new();
    while !got.contains("hello from a shell") {
        assert!(Instant::now() < deadline, "no event printed");
        got.clear();
        events.read_line(&mut got).unwrap();
    }
    let ev: Value = serde_json::from_str(&got).unwrap();
    assert_eq!(ev["method"], "a2a.task.event", "{ev}");
    let _ = watcher.kill();
    let _ = watcher.wait();

    // Errors say what went wrong, with a non-zero exit.
    let out = Command::new(BIN)
        .args(["call", "--socket", socket, "a2a.agents.list"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("missing token"), "{err}");
    let out = Command::new(BIN)
        .args(["call", "--socket", socket, "a2a.agents.list", "not json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("params are not JSON"));
}
