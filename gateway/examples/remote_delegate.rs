//! A local delegate calling a remote A2A agent through the broker, as
//! `gateway/sdk-tests/run.sh` uses it against the Python SDK's server:
//! plain `a2a-client` calls to the peer the gateway registered for the
//! remote (`a2a-gateway remote add`), checking the events it gets back.
//!
//! `cargo run -p a2a-gateway --example remote_delegate -- --socket PATH --peer NAME`
//!
//! The remote is `gateway/sdk-tests/python/remote_agent.py` (it behaves by
//! the first word of the text). Prints one line per check and exits
//! non-zero if any failed.

use a2a_client::proto::types::StreamEvent;
use a2a_client::{
    agent_card, message_to, read_secret, task_message, Agent, Client, Delivery, Event, Part, State,
};
use std::path::PathBuf;
use std::process::ExitCode;
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

fn main() -> ExitCode {
    let mut socket = None;
    let mut peer = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--socket" => socket = args.next().map(PathBuf::from),
            "--peer" => peer = args.next(),
            other => {
                eprintln!("unknown argument {other}");
                return ExitCode::FAILURE;
            }
        }
    }
    let (Some(socket), Some(peer)) = (socket, peer) else {
        eprintln!("usage: remote_delegate --socket PATH --peer NAME");
        return ExitCode::FAILURE;
    };
    let setup = || -> Result<Agent, String> {
        let secret = read_secret(&socket).map_err(|e| e.to_string())?;
        let client = Client::connect(&socket, &secret).map_err(|e| e.to_string())?;
        client
            .register(
                "rust-delegate-session",
                agent_card("rust-delegate"),
                Delivery::Push,
            )
            .map_err(|e| e.to_string())
    };
    let me = match setup() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("remote_delegate: {e}");
            return ExitCode::FAILURE;
        }
    };
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
        match check(&me, &peer) {
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
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
