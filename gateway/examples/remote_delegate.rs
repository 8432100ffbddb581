//! A local delegate calling a remote A2A agent through the broker, as
//! `gateway/sdk-tests/run.sh` uses it against the Python SDK's server:
//! plain `a2a-client` calls to the peer the gateway registered for the
//! remote (`a2a-gateway remote add`), checking the events it gets back.
//!
//! `cargo run -p a2a-gateway --example remote_delegate -- --socket PATH --peer NAME`
//!
//! With `--restarts GATEWAY --url URL --remote-log FILE --state FILE` it
//! runs `GATEWAY remote add` itself instead (so `--peer` is what that
//! process announces), leaves one remote task working and one asking for
//! input, stops the bridge three times (SIGTERM, SIGKILL, SIGTERM) and
//! starts it again on the same state file, then checks that both tasks
//! resumed, that the follow-up and the cancel still reach the remote, and
//! that the remote (its `EXEC`/`CANCELED` lines in FILE) ran each message
//! exactly once (docs/protocol.md §5, the gateway's restart rule in
//! ARCHITECTURE.md).
//!
//! The remote is `gateway/sdk-tests/python/remote_agent.py` (it behaves by
//! the first word of the text). Prints one line per check and exits
//! non-zero if any failed.

use a2a_client::proto::types::StreamEvent;
use a2a_client::{
    agent_card, message_to, read_secret, task_message, Agent, Client, Delivery, Event, Part, State,
};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Bounds every wait for the remote (it only stops a hang).
const TIMEOUT: Duration = Duration::from_secs(60);

type Checked = Result<(), String>;

/// One check of the delegate against the remote peer.
type Check = fn(&Agent, &str) -> Checked;

fn text(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
}

/// The events of `task` until one of the `until` states (artifact texts
/// as `artifact:<text>`, states as their wire names with `:<message>`).
fn events_until(a: &Agent, task: &str, until: &[State]) -> Result<Vec<String>, String> {
    let deadline = Instant::now() + TIMEOUT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "no state in {until:?} within {TIMEOUT:?}; saw {seen:?}"
            ));
        }
        for ev in a.wait(left).map_err(|e| e.to_string())? {
            let Event::TaskEvent(p) = ev else { continue };
            match p.event {
                StreamEvent::Status(su) if su.task_id == task => {
                    let msg = su
                        .status
                        .message
                        .as_ref()
                        .map(|m| text(&m.parts))
                        .unwrap_or_default();
                    seen.push(format!("{}:{msg}", su.status.state.as_str()));
                    if until.contains(&su.status.state) {
                        return Ok(seen);
                    }
                }
                StreamEvent::Artifact(au) if au.task_id == task => {
                    seen.push(format!("artifact:{}", text(&au.artifact.parts)));
                }
                _ => {}
            }
        }
    }
}

fn expect(cond: bool, what: &str, seen: &[String]) -> Checked {
    if cond {
        Ok(())
    } else {
        Err(format!("{what}; events: {seen:?}"))
    }
}

fn listed(me: &Agent, peer: &str) -> Checked {
    let cards = me.list_agents(Some("echo")).map_err(|e| e.to_string())?;
    let card = cards
        .iter()
        .find(|c| c.name == peer)
        .ok_or(format!("{peer} not listed with skill echo"))?;
    expect(
        card.description.contains("a2a-sdk"),
        "the card mirrors the remote's description",
        std::slice::from_ref(&card.description),
    )
}

fn completes(me: &Agent, peer: &str) -> Checked {
    let task = me
        .send(message_to(peer, "complete hello from rust"), None)
        .map_err(|e| e.to_string())?;
    let seen = events_until(
        me,
        &task.id,
        &[State::Completed, State::Failed, State::Canceled],
    )?;
    expect(
        seen.contains(&"artifact:echo: complete hello from rust".to_owned()),
        "artifact event",
        &seen,
    )?;
    expect(
        seen.last().map(String::as_str) == Some("completed:done: complete hello from rust"),
        "completed with the agent's message",
        &seen,
    )?;
    let t = me.get_task(&task.id, None).map_err(|e| e.to_string())?;
    expect(
        t.artifacts.len() == 1 && text(&t.artifacts[0].parts) == "echo: complete hello from rust",
        "the task holds the artifact",
        &seen,
    )
}

fn asks_then_completes(me: &Agent, peer: &str) -> Checked {
    let task = me
        .send(message_to(peer, "input please"), None)
        .map_err(|e| e.to_string())?;
    let seen = events_until(
        me,
        &task.id,
        &[State::InputRequired, State::Completed, State::Failed],
    )?;
    expect(
        seen.last().map(String::as_str) == Some("input-required:which one?"),
        "input-required with the question",
        &seen,
    )?;
    me.send(task_message(&task.id, "the blue one"), None)
        .map_err(|e| e.to_string())?;
    let seen = events_until(me, &task.id, &[State::Completed, State::Failed])?;
    expect(
        seen.last().map(String::as_str) == Some("completed:got: the blue one"),
        "the follow-up completes the same remote task",
        &seen,
    )
}

fn direct_message(me: &Agent, peer: &str) -> Checked {
    let task = me
        .send(message_to(peer, "message hi"), None)
        .map_err(|e| e.to_string())?;
    let seen = events_until(me, &task.id, &[State::Completed, State::Failed])?;
    expect(
        seen.last().map(String::as_str) == Some("completed:reply: message hi"),
        "a direct message completes the task",
        &seen,
    )
}

fn cancels(me: &Agent, peer: &str) -> Checked {
    let task = me
        .send(message_to(peer, "slow job"), None)
        .map_err(|e| e.to_string())?;
    let seen = events_until(me, &task.id, &[State::Working, State::Failed])?;
    expect(
        seen.last().map(String::as_str) == Some("working:working"),
        "the remote works",
        &seen,
    )?;
    let t = me.cancel(&task.id, None).map_err(|e| e.to_string())?;
    expect(t.status.state == State::Canceled, "canceled", &seen)?;
    // The remote side prints `CANCELED <id>`; run.sh checks its log.
    println!("canceled broker task {}", task.id);
    Ok(())
}

fn fails(me: &Agent, peer: &str) -> Checked {
    let task = me
        .send(message_to(peer, "fail loudly"), None)
        .map_err(|e| e.to_string())?;
    let seen = events_until(me, &task.id, &[State::Failed, State::Completed])?;
    expect(
        seen.last().map(String::as_str) == Some("failed:failed: fail loudly"),
        "the remote's failure with its message",
        &seen,
    )
}

/// `remote add` as a process of its own, for `--restarts`.
struct Bridge {
    gateway: PathBuf,
    socket: PathBuf,
    state: PathBuf,
    url: String,
}

impl Bridge {
    /// Starts `remote add` and returns it with the peer name it announced
    /// (its first stdout line, `remote <url> -> peer <name>`). Its stdout
    /// is drained by a thread so that later lines never block it.
    fn start(&self) -> Result<(Child, String), String> {
        let mut child = Command::new(&self.gateway)
            .args(["remote", "add", "--socket"])
            .arg(&self.socket)
            .arg("--state")
            .arg(&self.state)
            .arg(&self.url)
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", self.gateway.display()))?;
        let out = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let line = rx
            .recv_timeout(TIMEOUT)
            .map_err(|_| "remote add announced no peer".to_owned())?;
        let peer = line
            .split_once(" -> peer ")
            .map(|(_, p)| p.trim().to_owned())
            .ok_or(format!("unexpected first line {line:?}"))?;
        Ok((child, peer))
    }
}

/// Sends `signal` to `child` and waits (10 s at most) for it to exit.
fn stop(child: &mut Child, signal: &str) -> Checked {
    let pid = child.id().to_string();
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .map_err(|e| e.to_string())?;
    expect(ok.success(), "kill ran", &[])?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("remote add did not exit on SIG{signal}"))
}

/// How many lines of the remote's log are exactly `line`.
fn count_lines(log: &Path, line: &str) -> Result<usize, String> {
    let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
    Ok(text.lines().filter(|l| *l == line).count())
}

fn state_of(me: &Agent, task: &str) -> Result<State, String> {
    Ok(me
        .get_task(task, None)
        .map_err(|e| e.to_string())?
        .status
        .state)
}

/// Until a line of the remote's log starts with `prefix` (the remote
/// prints after acting).
fn until_logged(log: &Path, prefix: &str) -> Checked {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
        if text.lines().any(|l| l.starts_with(prefix)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the remote never logged {prefix:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `--restarts` run: each remote task runs once across three restarts
/// of the bridge, and what follows still reaches it.
fn restarts(me: &Agent, bridge: &Bridge, log: &Path) -> Checked {
    let (mut child, peer) = bridge.start()?;
    let slow = me
        .send(message_to(&peer, "slow across restarts"), None)
        .map_err(|e| e.to_string())?;
    events_until(me, &slow.id, &[State::Working, State::Failed])?;
    let asks = me
        .send(message_to(&peer, "input across restarts"), None)
        .map_err(|e| e.to_string())?;
    events_until(me, &asks.id, &[State::InputRequired, State::Failed])?;
    for signal in ["TERM", "KILL", "TERM"] {
        stop(&mut child, signal)?;
        let (again, announced) = bridge.start()?;
        child = again;
        expect(announced == peer, "the same peer again", &[announced])?;
        // Resumed, not failed: give the new bridge time to act wrongly.
        std::thread::sleep(Duration::from_millis(300));
        let states = [state_of(me, &slow.id)?, state_of(me, &asks.id)?];
        expect(
            states == [State::Working, State::InputRequired],
            &format!("both tasks resumed after SIG{signal}"),
            &[format!("{states:?}")],
        )?;
    }
    me.send(task_message(&asks.id, "after restarts"), None)
        .map_err(|e| e.to_string())?;
    let seen = events_until(me, &asks.id, &[State::Completed, State::Failed])?;
    expect(
        seen.last().map(String::as_str) == Some("completed:got: after restarts"),
        "the follow-up completes the same remote task",
        &seen,
    )?;
    let t = me.cancel(&slow.id, None).map_err(|e| e.to_string())?;
    expect(t.status.state == State::Canceled, "canceled", &[])?;
    until_logged(log, "EXEC after restarts")?;
    let ran = [
        count_lines(log, "EXEC slow across restarts")?,
        count_lines(log, "EXEC input across restarts")?,
        count_lines(log, "EXEC after restarts")?,
    ];
    expect(
        ran == [1, 1, 1],
        "each message ran exactly once on the remote",
        &[format!("{ran:?}")],
    )?;
    // The cancel reached the remote: it prints `CANCELED <its task id>`.
    until_logged(log, "CANCELED ")?;
    stop(&mut child, "TERM")
}

fn main() -> ExitCode {
    let mut socket = None;
    let mut peer = None;
    let (mut gateway, mut url, mut log, mut state) = (None, None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--socket" => socket = args.next().map(PathBuf::from),
            "--peer" => peer = args.next(),
            "--restarts" => gateway = args.next().map(PathBuf::from),
            "--url" => url = args.next(),
            "--remote-log" => log = args.next().map(PathBuf::from),
            "--state" => state = args.next().map(PathBuf::from),
            other => {
                eprintln!("unknown argument {other}");
                return ExitCode::FAILURE;
            }
        }
    }
    const USAGE: &str = "usage: remote_delegate --socket PATH (--peer NAME | --restarts GATEWAY \
                         --url URL --remote-log FILE --state FILE)";
    let Some(socket) = socket else {
        eprintln!("{USAGE}");
        return ExitCode::FAILURE;
    };
    let setup = |name: &str| -> Result<Agent, String> {
        let secret = read_secret(&socket).map_err(|e| e.to_string())?;
        let client = Client::connect(&socket, &secret).map_err(|e| e.to_string())?;
        client
            .register(&format!("{name}-session"), agent_card(name), Delivery::Push)
            .map_err(|e| e.to_string())
    };
    let outcome = match (peer, gateway, url, log, state) {
        (Some(peer), None, None, None, None) => setup("rust-delegate").map(|me| checks(&me, &peer)),
        (None, Some(gateway), Some(url), Some(log), Some(state)) => {
            setup("rust-restarts").map(|me| {
                let bridge = Bridge {
                    gateway,
                    socket: socket.clone(),
                    state,
                    url,
                };
                let what = "each remote task runs once across three restarts of remote add";
                match restarts(&me, &bridge, &log) {
                    Ok(()) => {
                        println!("ok   {what}");
                        true
                    }
                    Err(e) => {
                        println!("FAIL {what}: {e}");
                        false
                    }
                }
            })
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::FAILURE;
        }
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("remote_delegate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The `--peer` run: every path of the remote, one check each.
fn checks(me: &Agent, peer: &str) -> bool {
    let checks: [(&str, Check); 6] = [
        ("the remote is listed as a peer", listed),
        (
            "a task completes with the remote's artifact and message",
            completes,
        ),
        (
            "input-required, then a follow-up completes it",
            asks_then_completes,
        ),
        ("a direct message answer completes the task", direct_message),
        ("a remote failure fails the task", fails),
        ("a cancel reaches the remote", cancels),
    ];
    let (mut passed, mut failed) = (0, 0);
    for (name, check) in checks {
        match check(me, peer) {
            Ok(()) => {
                passed += 1;
                println!("ok   delegate -> {peer}: {name}");
            }
            Err(e) => {
                failed += 1;
                println!("FAIL delegate -> {peer}: {name}: {e}");
            }
        }
    }
    println!("delegate: {passed} passed, {failed} failed");
    failed == 0
}
