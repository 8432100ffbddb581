//! `a2a-broker call` and `a2a-broker watch` against a running broker's
//! local socket: one call from a shell (the handshake and the secret done
//! for the user; `--as` registers an agent and passes its token), and an
//! agent's events printed as JSON lines.

use a2a_testkit::{BrokerProcess, Spawn, SECRET_ENV, TIMEOUT};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
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
    let v = call_ok(socket, "me", &["a2a.agents.list"]);
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
    let sent = call_ok(socket, "sender", &["a2a.message.send", msg]);
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

/// `a2a-broker call --socket SOCKET --as AS ARGS` (the environment as it
/// is), which must succeed: its result, the JSON it prints.
fn call_ok(socket: &str, as_: &str, args: &[&str]) -> Value {
    let out = Command::new(BIN)
        .args(["call", "--socket", socket, "--as", as_])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs `a2a-broker ARGS` with `XDG_RUNTIME_DIR` set to `xdg` and no secret
/// in the environment unless `secret` is given: (success, stdout, stderr).
fn run_cli(xdg: &Path, secret: Option<&str>, args: &[&str]) -> (bool, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("XDG_RUNTIME_DIR", xdg)
        .env_remove(SECRET_ENV);
    if let Some(s) = secret {
        cmd.env(SECRET_ENV, s);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `a2a-broker call --socket main --as AS a2a.tasks.status PARAMS`, with no
/// secret in the environment.
fn status_as(xdg: &Path, as_: &str, params: &str) -> (bool, String, String) {
    let args = [
        "call",
        "--socket",
        "main",
        "--as",
        as_,
        "a2a.tasks.status",
        params,
    ];
    run_cli(xdg, None, &args)
}

/// A socket-only broker at `--socket NAME` under `xdg`.
fn broker_named(dir: &Path, xdg: &Path, name: &str) -> BrokerProcess {
    Spawn::new(dir.join("db"))
        .bin(BIN)
        .socket(name)
        .env("XDG_RUNTIME_DIR", xdg)
        .no_stdio()
        .start(TIMEOUT)
        .expect("broker ready")
}

#[test]
fn call_finds_the_broker_by_name_or_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let xdg = dir.path().join("xdg");
    let p = broker_named(dir.path(), &xdg, "main");
    let path = xdg.join("a2a-broker").join("main.sock");
    assert_eq!(p.socket().unwrap(), path);
    for socket in ["main", path.to_str().unwrap()] {
        let (ok, out, err) = run_cli(
            &xdg,
            None,
            &["call", "--socket", socket, "--as", "me", "a2a.agents.list"],
        );
        assert!(ok, "--socket {socket}: {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["agents"], serde_json::json!([]), "--socket {socket}");
    }
}

#[test]
fn no_broker_is_told_apart_from_a_wrong_or_unreadable_secret() {
    let dir = tempfile::tempdir().unwrap();
    let xdg = dir.path().join("xdg");

    // Nothing there at all (not even the directory): the broker's absence,
    // with the command that starts one; the secret is not blamed.
    let (ok, _, err) = run_cli(
        &xdg,
        None,
        &["call", "--socket", "nothing", "a2a.agents.list"],
    );
    assert!(!ok);
    let want = format!(
        "a2a-broker: no broker is listening at {} (from nothing): start one with `a2a-broker serve --socket nothing`\n",
        xdg.join("a2a-broker").join("nothing.sock").display()
    );
    assert_eq!(err, want);
    // `watch` says the same.
    let (ok, _, err) = run_cli(&xdg, None, &["watch", "--socket", "nothing", "--as", "w"]);
    assert!(!ok);
    assert_eq!(err, want);

    // A socket file a dead broker left (nobody listens on it), by path;
    // also when a secret is set in the environment.
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let stale = stale.to_str().unwrap();
    for secret in [None, Some("s3cret")] {
        let (ok, _, err) = run_cli(
            &xdg,
            secret,
            &["call", "--socket", stale, "a2a.agents.list"],
        );
        assert!(!ok);
        assert_eq!(
            err,
            format!("a2a-broker: no broker is listening at {stale}: start one with `a2a-broker serve --socket {stale}`\n")
        );
    }

    // A live broker and a wrong secret: the secret is blamed, and where it
    // came from is named.
    let _p = broker_named(dir.path(), &xdg, "main");
    let (ok, _, err) = run_cli(
        &xdg,
        Some("wrong"),
        &["call", "--socket", "main", "a2a.agents.list"],
    );
    assert!(!ok);
    assert!(
        err.contains("refused the secret in A2A_BROKER_SECRET: it is not that broker's secret")
            && !err.contains("no broker"),
        "{err}"
    );

    // A live broker whose secret file cannot be read (it was started with
    // the secret in its environment, so it wrote none).
    let other = Spawn::new(dir.path().join("db2"))
        .bin(BIN)
        .socket("other")
        .env("XDG_RUNTIME_DIR", &xdg)
        .env(SECRET_ENV, "given-secret")
        .no_stdio()
        .start(TIMEOUT)
        .expect("broker ready");
    let (ok, _, err) = run_cli(
        &xdg,
        None,
        &["call", "--socket", "other", "a2a.agents.list"],
    );
    assert!(!ok);
    let file = xdg.join("a2a-broker").join("other.secret");
    assert!(
        err.contains(&format!("cannot read the secret in {}", file.display()))
            && err.contains("set A2A_BROKER_SECRET")
            && !err.contains("no broker"),
        "{err}"
    );
    let (ok, _, err) = run_cli(
        &xdg,
        Some("given-secret"),
        &["call", "--socket", "other", "--as", "me", "a2a.agents.list"],
    );
    assert!(ok, "{err}");
    drop(other);
}

#[test]
fn call_as_a_name_held_elsewhere_says_why_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let xdg = dir.path().join("xdg");
    let _p = broker_named(dir.path(), &xdg, "main");
    let mut watcher = Command::new(BIN)
        .args(["watch", "--socket", "main", "--as", "coder"])
        .env("XDG_RUNTIME_DIR", &xdg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(watcher.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("watching coder"), "{line}");

    let (ok, out, err) = status_as(&xdg, "coder", r#"{"id":"t","state":"working"}"#);
    let _ = watcher.kill();
    let _ = watcher.wait();
    assert!(!ok, "{out}");
    assert!(
        err.contains("agent `coder` is live on another connection")
            && err.contains("token works only on the connection that registered it")
            && err.contains("--as"),
        "{err}"
    );
    // Not a silent `coder-2` acting as a stranger.
    assert!(!err.contains("coder-2"), "{err}");
}

#[test]
fn call_errors_point_into_the_users_own_json_and_name_as() {
    let dir = tempfile::tempdir().unwrap();
    let xdg = dir.path().join("xdg");
    let _p = broker_named(dir.path(), &xdg, "main");

    // A wrong field name: the missing field is reported at the end of what
    // the user typed (column 32), not of the JSON with the token put in.
    let typed = r#"{"task": "t1", "state": "working"}"#;
    let (ok, _, err) = status_as(&xdg, "me", typed);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "missing field `id` at line 1 column {}",
            typed.len()
        )),
        "{err}"
    );
    // A value of the wrong type: its own column in the user's text.
    let typed = r#"{"id": 7, "state": "working"}"#;
    let (ok, _, err) = status_as(&xdg, "me", typed);
    assert!(!ok);
    assert!(
        err.contains("expected a string at line 1 column 8"),
        "{err}"
    );

    // No token and no --as: the error names --as.
    let (ok, _, err) = run_cli(&xdg, None, &["call", "--socket", "main", "a2a.agents.list"]);
    assert!(!ok);
    assert!(
        err.contains("missing token") && err.contains("pass --as NAME to register an agent"),
        "{err}"
    );
}

#[test]
fn serve_socket_with_stdin_on_dev_null_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let xdg = dir.path().join("xdg");
    // As `a2a-broker serve --socket main &` from a script starts it.
    let mut child = Command::new(BIN)
        .args(["serve", "--db"])
        .arg(dir.path().join("db"))
        .args(["--socket", "main"])
        .env("XDG_RUNTIME_DIR", &xdg)
        .env_remove(SECRET_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    // The ready line first (a quiet broker's first line), then the note.
    let mut ready = String::new();
    err.read_line(&mut ready).unwrap();
    assert!(ready.contains("\"ready\":true"), "{ready}");
    let mut note = String::new();
    err.read_line(&mut note).unwrap();
    assert!(
        note.contains("stdin is /dev/null: serving the socket only (as with --no-stdio)"),
        "{note}"
    );
    // Still there after its stdin was read to the end, and answering.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "the broker exited");
    let (ok, _, e) = run_cli(
        &xdg,
        None,
        &["call", "--socket", "main", "--as", "me", "a2a.agents.list"],
    );
    assert!(ok, "{e}");
    // SIGTERM stops it cleanly.
    sigterm(child.id());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

fn sigterm(pid: u32) {
    let ok = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}
