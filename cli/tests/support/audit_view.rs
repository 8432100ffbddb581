//! What the audit views' tests (`audit`: `a2a-broker tasks`, `lease_audit`:
//! `a2a-broker leases list`) share: a broker serving a database over its
//! stdio, already past the handshake, and the reading of a view's output.

#![allow(dead_code)] // each test binary uses its own part of it

use a2a_testkit::raw::RawConn;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// The broker binary, as a command to add arguments to.
pub fn broker() -> Command {
    Command::new(env!("CARGO_BIN_EXE_a2a-broker"))
}

/// `a2a-broker serve --db DB` on its stdio, handshake done: the process
/// (closing the connection's stdin stops it) and the connection.
pub fn serve_stdio(db: &Path) -> (Child, RawConn) {
    let mut child = broker()
        .args(["serve", "--db"])
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the broker");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let mut c = RawConn::over(stdin, stdout);
    c.ok("app.handshake", json!({"protocolVersion": 10}));
    (child, c)
}

/// A view's stdout, after checking that it succeeded.
pub fn ok_stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

/// A `--json` view's lines, each a JSON object.
pub fn json_lines(out: &Output) -> Vec<Value> {
    ok_stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is a JSON object"))
        .collect()
}
