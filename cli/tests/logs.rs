//! The broker's event log on stderr (`serve -v`): one line per connection,
//! registration, deregistration and shutdown, never a token, the socket's
//! secret or a message's text; and without `-v`, stderr is only the ready
//! line that clients parse.

use a2a_testkit::raw::RawConn;
use a2a_testkit::TIMEOUT;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_a2a-broker");

/// What one broker run left on stderr, and the secrets it must not show.
struct Run {
    stderr: String,
    token: String,
    secret: String,
    marker: String,
}

/// Runs a broker (with `extra` flags), registers an agent over its socket,
/// sends a message, deregisters, closes stdin; its whole stderr.
fn run(dir: &Path, extra: &[&str]) -> Run {
    let verbose = extra.contains(&"-v");
    let sock = dir.join("run").join("s.sock");
    let mut child = Command::new(BIN)
        .args(["serve", "--db"])
        .arg(dir.join("db"))
        .arg("--socket")
        .arg(&sock)
        .args(extra)
        .env_remove("RUST_LOG")
        .env_remove("A2A_BROKER_SECRET")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the broker");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut ready = String::new();
    err.read_line(&mut ready).unwrap();
    let v: Value = serde_json::from_str(&ready).expect("the first stderr line is the ready line");
    assert_eq!(v["ready"], true, "{ready}");
    let secret_file = v["secretFile"]
        .as_str()
        .expect("secretFile in the ready line");
    let secret = std::fs::read_to_string(secret_file)
        .unwrap()
        .trim()
        .to_owned();
    // The rest of stderr, line by line, until the broker exits.
    let (line_tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in err.lines() {
            let Ok(line) = line else { break };
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stderr = ready;

    let marker = format!("marker-{}-body", std::process::id());
    let token = {
        // `RawConn::socket` keeps its read half open in a thread after a
        // drop: this connection is shut down by hand, so the broker sees
        // it end.
        let stream = UnixStream::connect(&sock).expect("connect");
        let mut c = RawConn::over(stream.try_clone().unwrap(), stream.try_clone().unwrap());
        c.ok(
            "app.handshake",
            json!({"protocolVersion": 10, "secret": secret}),
        );
        let (_, token) = c.register("logctx", "tokenlike-name-7f3a9c");
        let (_, _) = c.register("logctx", "receiver");
        let m = json!({"role": "user", "messageId": "m-logs-1", "to": "receiver",
            "parts": [{"kind": "text", "text": marker}]});
        c.ok("a2a.message.send", json!({"token": token, "message": m}));
        c.ok("a2a.agents.deregister", json!({"token": token}));
        let _ = stream.shutdown(std::net::Shutdown::Both);
        token
    };
    if verbose {
        // The connection's end is logged by its task; closing stdin at
        // once could stop the broker before that task sees the end.
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(l) => {
                    let done = l.contains("socket connection closed");
                    stderr.push_str(&l);
                    stderr.push('\n');
                    if done {
                        break;
                    }
                }
                Err(_) => panic!("no log line for the connection's end:\n{stderr}"),
            }
        }
    }
    drop(child.stdin.take());
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "broker exit: {status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the broker did not exit after stdin closed");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The reader ends with stderr, which the exited broker has closed.
    while let Ok(l) = lines.recv_timeout(TIMEOUT) {
        stderr.push_str(&l);
        stderr.push('\n');
    }
    Run {
        stderr,
        token,
        secret,
        marker,
    }
}

/// The lines of `stderr` that contain every one of `words`.
fn lines_with<'a>(stderr: &'a str, words: &[&str]) -> Vec<&'a str> {
    stderr
        .lines()
        .filter(|l| words.iter().all(|w| l.contains(w)))
        .collect()
}

fn assert_no_secrets(r: &Run) {
    assert!(!r.token.is_empty() && !r.secret.is_empty());
    for (what, s) in [
        ("token", &r.token),
        ("secret", &r.secret),
        ("message text", &r.marker),
    ] {
        assert!(
            !r.stderr.contains(s.as_str()),
            "the {what} appears on stderr:\n{}",
            r.stderr
        );
    }
}

#[test]
fn verbose_logs_one_line_per_event_and_no_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), &["-v"]);
    let e = &r.stderr;
    assert_eq!(
        lines_with(e, &["socket connection accepted"]).len(),
        1,
        "{e}"
    );
    assert_eq!(lines_with(e, &["socket connection closed"]).len(), 1, "{e}");
    assert_eq!(
        lines_with(e, &["agent registered", "tokenlike-name-7f3a9c", "logctx"]).len(),
        1,
        "{e}"
    );
    assert_eq!(
        lines_with(e, &["agent deregistered", "tokenlike-name-7f3a9c"]).len(),
        1,
        "{e}"
    );
    assert_eq!(
        lines_with(e, &["shutdown begun", "stdin EOF"]).len(),
        1,
        "{e}"
    );
    assert_eq!(lines_with(e, &["shutdown finished"]).len(), 1, "{e}");
    // The receiver was never deregistered: its connection's end takes it.
    assert_eq!(
        lines_with(e, &["its agents' tokens are dead", "agents=1"]).len(),
        1,
        "{e}"
    );
    assert!(lines_with(e, &["INFO"]).len() >= 6, "levels are shown: {e}");
    assert_no_secrets(&r);
}

#[test]
fn quiet_broker_prints_only_the_ready_line() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), &[]);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", r.stderr);
    assert!(lines[0].starts_with("{\"ready\":true"), "{}", r.stderr);
    assert_no_secrets(&r);
}
