//! `a2a-broker reply --as NAME --exec CMD`: the agent that answers each
//! task with a command's output (docs/gateway.md's quick start uses it),
//! against the real broker over its socket.

use super::BIN;
use a2a_client::{agent_card, message_to, Client, Delivery, State, Task};
use a2a_testkit::{BrokerProcess, Spawn, TIMEOUT};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `a2a-broker reply --socket SOCKET --as NAME --exec EXEC`, for the caller
/// to add its own flags and environment to.
fn reply_command(socket: &Path, name: &str, exec: &str) -> Command {
    let mut c = Command::new(BIN);
    c.args(["reply", "--socket", socket.to_str().unwrap(), "--as", name])
        .args(["--exec", exec]);
    c
}

fn broker(dir: &Path) -> BrokerProcess {
    Spawn::new(dir.join("db"))
        .bin(BIN)
        .socket(dir.join("run").join("main.sock"))
        .no_stdio()
        .start(TIMEOUT)
        .expect("broker ready")
}

/// `a2a-broker reply` on `socket`, killed on drop.
struct Reply(Child);

impl Reply {
    fn start(socket: &Path, name: &str, exec: &str, extra: &[&str]) -> Reply {
        let child = reply_command(socket, name, exec)
            .args(extra)
            .env_remove("A2A_BROKER_SECRET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Reply(child)
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A planner on `socket` that waits until `name` is live.
fn planner(socket: &Path, secret: &str, name: &str) -> a2a_client::Agent {
    let client = Client::connect(socket, secret).unwrap();
    let planner = client
        .register("test", agent_card("planner"), Delivery::Push)
        .unwrap();
    let deadline = Instant::now() + TIMEOUT;
    while !planner
        .list_agents(None)
        .unwrap()
        .iter()
        .any(|c| c.name == name)
    {
        assert!(Instant::now() < deadline, "{name} never registered");
        std::thread::sleep(Duration::from_millis(20));
    }
    planner
}

/// Sends `text` to `to` and waits until the task is settled.
fn ask(planner: &a2a_client::Agent, to: &str, text: &str) -> Task {
    let task = planner.send(message_to(to, text), None).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let t = planner.get_task(&task.id, None).unwrap();
        if t.status.state.is_terminal() {
            return t;
        }
        assert!(Instant::now() < deadline, "task still {:?}", t.status.state);
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn status_text(t: &Task) -> String {
    let m = t.status.message.as_ref().expect("a status message");
    match &m.parts[0] {
        a2a_client::Part::Text { text, .. } => text.clone(),
        p => panic!("not text: {p:?}"),
    }
}

#[test]
fn reply_completes_each_task_with_the_commands_output_and_fails_it_on_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    let (socket, secret) = (b.socket().unwrap(), b.secret().unwrap());
    let script = "t=$(cat); case $t in fail*) echo \"no: $A2A_FROM\" >&2; exit 4;; esac; \
                  echo \"$t\" | tr a-z A-Z";
    let _coder = Reply::start(&socket, "coder", script, &[]);
    let planner = planner(&socket, &secret, "coder");

    let done = ask(&planner, "coder", "hello, coder");
    assert_eq!(done.status.state, State::Completed);
    assert_eq!(status_text(&done), "HELLO, CODER");
    // Its history: the question, then the answer (one working step between).
    assert_eq!(done.history.len(), 2);
    assert_eq!(done.version, 3);

    let failed = ask(&planner, "coder", "fail now");
    assert_eq!(failed.status.state, State::Failed);
    assert_eq!(
        status_text(&failed),
        format!("`{script}` exited with status 4: no: planner")
    );
    // And it goes on answering.
    assert_eq!(status_text(&ask(&planner, "coder", "again")), "AGAIN");
}

#[test]
fn reply_waits_for_a_broker_started_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run").join("main.sock");
    let _coder = Reply::start(&socket, "coder", "echo ok", &["--wait", "20"]);
    std::thread::sleep(Duration::from_millis(300));
    let b = broker(dir.path());
    let planner = planner(&socket, &b.secret().unwrap(), "coder");
    assert_eq!(status_text(&ask(&planner, "coder", "x")), "ok");
}

#[test]
fn reply_without_a_broker_says_so_once_its_wait_is_over() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("main.sock");
    let out = reply_command(&socket, "coder", "cat")
        .args(["--wait", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!(
            "a2a-broker: no broker is listening at {}: start one with `a2a-broker serve --socket {}`",
            socket.display(),
            socket.display()
        )
    );
}

#[test]
fn reply_refuses_a_name_another_connection_holds() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    let (socket, secret) = (b.socket().unwrap(), b.secret().unwrap());
    let holder = Client::connect(&socket, &secret).unwrap();
    let _coder = holder
        .register("elsewhere", agent_card("coder"), Delivery::Push)
        .unwrap();
    let out = reply_command(&socket, "coder", "cat")
        .env_remove("A2A_BROKER_SECRET")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("a2a-broker: agent `coder` is live on another connection"),
        "{err}"
    );
}

/// Tasks are answered at once, up to `--concurrency` (its default is more
/// than four): each command waits until all four have started, which one
/// at a time never happens (the first would give up and fail its task).
#[test]
fn reply_answers_tasks_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    std::fs::create_dir(&started).unwrap();
    let b = broker(dir.path());
    let (socket, secret) = (b.socket().unwrap(), b.secret().unwrap());
    let script = format!(
        "touch '{d}'/\"$A2A_TASK_ID\"; i=0; \
         while [ \"$(ls '{d}' | wc -l)\" -lt 4 ]; do \
           i=$((i+1)); [ $i -gt 400 ] && {{ echo alone >&2; exit 9; }}; sleep 0.05; \
         done; cat",
        d = started.display()
    );
    let _coder = Reply::start(&socket, "coder", &script, &[]);
    let planner = planner(&socket, &secret, "coder");
    let sent: Vec<Task> = (0..4)
        .map(|i| {
            planner
                .send(message_to("coder", &format!("task {i}")), None)
                .unwrap()
        })
        .collect();
    for (i, task) in sent.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(60);
        let done = loop {
            let t = planner.get_task(&task.id, None).unwrap();
            if t.status.state.is_terminal() {
                break t;
            }
            assert!(
                Instant::now() < deadline,
                "task {i} still {:?}",
                t.status.state
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(
            done.status.state,
            State::Completed,
            "{}",
            status_text(&done)
        );
        assert_eq!(status_text(&done), format!("task {i}"));
    }
}
