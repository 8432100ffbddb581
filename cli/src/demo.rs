//! `a2a-broker demo` (a module of the binary, not of the library): a small
//! program written against `a2a-client`, the way a sidecar uses the broker.
//! It starts this very binary as a broker (`serve --socket`, stdin kept open
//! so the broker lives exactly as long as the demo), reads its ready line,
//! connects one client per agent over the local socket, narrates a short
//! delegation, then prints the audit view of the durable log and the
//! commands that show it again (the database is kept with `--keep` or
//! `--db PATH`).

use crate::audit;
use a2a_client::proto::types::StreamEvent;
use a2a_client::{
    agent_card, message_to, read_secret, skill, task_message, text_artifact, Agent, Client,
    Delivery, Event, ListRole, Message, Notification, Part, SendConfiguration, State, Task,
    TaskQuery,
};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest wait for the broker to start, or for any expected event.
const TIMEOUT: Duration = Duration::from_secs(20);

/// How long the agents' queues must stay quiet before a step's events are
/// considered all shown.
const QUIET: Duration = Duration::from_millis(150);

/// Where the demo keeps its database, and whether it removes it after.
pub struct Options {
    /// `--db PATH`: use (and keep) this database.
    pub db: Option<PathBuf>,
    /// `--keep`: keep the temporary database.
    pub keep: bool,
}

/// The broker child: killed if the demo fails half-way.
struct BrokerProcess {
    child: Child,
    /// Closing it is how the broker is told to stop (exit 0).
    stdin: Option<ChildStdin>,
    socket: PathBuf,
}

impl BrokerProcess {
    fn start(db: &Path, socket: &Path) -> Result<BrokerProcess, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
        let mut child = Command::new(exe)
            .arg("serve")
            .arg("--db")
            .arg(db)
            .arg("--socket")
            .arg(socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the broker: {e}"))?;
        let stdin = child.stdin.take();
        let stderr = child.stderr.take().ok_or("no stderr pipe")?;
        // A thread owns the pipe: the ready line is awaited with a deadline,
        // and later lines are drained so the broker never blocks on them.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stderr);
            let mut first = String::new();
            let _ = lines.read_line(&mut first);
            let _ = tx.send(first);
            let _ = std::io::copy(&mut lines, &mut std::io::sink());
        });
        let mut b = BrokerProcess {
            child,
            stdin,
            socket: socket.to_owned(),
        };
        let ready = rx
            .recv_timeout(TIMEOUT)
            .map_err(|_| "the broker did not start in time".to_string())?;
        match serde_json::from_str::<serde_json::Value>(&ready) {
            Ok(v) if v["ready"] == true => {
                println!("  broker ready: {}", ready.trim());
                Ok(b)
            }
            _ => {
                let _ = b.child.kill();
                Err(format!("the broker did not start: {}", ready.trim()))
            }
        }
    }

    fn connect(&self, name: &str) -> Result<Client, String> {
        let secret = read_secret(&self.socket).map_err(|e| format!("read the secret: {e}"))?;
        let options = a2a_client::ClientOptions {
            client_name: format!("a2a-broker-demo/{name}"),
            ..Default::default()
        };
        Client::connect_with(&self.socket, &secret, options).map_err(|e| e.to_string())
    }

    /// Closes the broker's stdin and waits for its exit status.
    fn finish(mut self) -> Result<i32, String> {
        drop(self.stdin.take());
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(st) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Ok(st.code().unwrap_or(-1));
            }
            if Instant::now() >= deadline {
                return Err("the broker did not exit after its stdin closed".into());
            }
            // Polling an exit status, bounded by the deadline above.
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Runs the demo.
pub fn run(opts: Options) -> Result<(), String> {
    let dir = tempfile_dir()?;
    let keep = opts.keep || opts.db.is_some();
    let db = opts.db.clone().unwrap_or_else(|| dir.join("demo.db"));
    let socket = dir.join("run").join("sock");
    let result = drive(&db, &socket);
    if let Ok(task) = &result {
        println!("\n== the durable audit view ==");
        audit::list(&db, None, 10).map_err(|e| e.to_string())?;
        println!();
        audit::show(&db, task).map_err(|e| e.to_string())?;
        println!();
        if keep {
            println!("Run these again at any time:");
            println!("  a2a-broker tasks list --db {}", db.display());
            println!("  a2a-broker tasks show --db {} {task}", db.display());
        } else {
            println!(
                "(the temporary database is removed now; run `a2a-broker demo --keep` or \
                 `--db PATH` to keep it and rerun `a2a-broker tasks list/show --db PATH`)"
            );
        }
    }
    if keep && opts.db.is_none() {
        // Only the socket directory goes; the database stays.
        let _ = std::fs::remove_dir_all(dir.join("run"));
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result.map(|_| ())
}

/// A fresh private directory for the socket (and the default database).
fn tempfile_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("a2a-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    Ok(dir)
}

fn text(m: &Message) -> &str {
    match m.parts.first() {
        Some(Part::Text { text, .. }) => text,
        _ => "",
    }
}

fn describe(ev: &Event) -> String {
    match ev {
        Notification::TaskEvent(p) => {
            let what = match &p.event {
                StreamEvent::Status(s) => {
                    let msg = s.status.message.as_deref().map(text).unwrap_or("");
                    format!(
                        "status {}{}{}",
                        s.status.state.as_str(),
                        if s.is_final { " (final)" } else { "" },
                        if msg.is_empty() {
                            String::new()
                        } else {
                            format!(" {msg:?}")
                        }
                    )
                }
                StreamEvent::Artifact(a) => format!("artifact {:?}", a.artifact.artifact_id),
            };
            format!(
                "event -> {:<9} seq {:<2} task v{}: {what}",
                p.recipient, p.seq, p.task_version
            )
        }
        Notification::Push(p) => format!(
            "push  -> {:<9} seq {:<2} task {} {}",
            p.recipient,
            p.seq,
            p.task_id,
            p.status.state.as_str()
        ),
        Notification::Lagged(p) => format!("lagged -> {}: {} dropped", p.recipient, p.dropped),
        Notification::LeaseReleased(p) => format!(
            "lease  -> {:<9} seq {:<2} {} {}",
            p.recipient,
            p.seq,
            p.lease.id,
            p.reason.as_str()
        ),
    }
}

/// Prints the events the agents received, until their queues stay quiet.
fn show_events(agents: &[&Agent]) -> Result<(), String> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let mut any = false;
        for a in agents {
            let mut got = Vec::new();
            a.try_events(&mut got, usize::MAX);
            for ev in &got {
                println!("      {}", describe(ev));
            }
            any |= !got.is_empty();
        }
        if !any {
            // Quiet now: one more look after a pause, then done.
            std::thread::sleep(QUIET);
            if !agents.iter().any(|a| a.has_events()) || Instant::now() >= deadline {
                return Ok(());
            }
        }
    }
}

fn err(e: a2a_client::ClientError) -> String {
    format!("broker call failed: {e}")
}

/// Drives the delegation; returns the id of the task to audit.
fn drive(db: &Path, socket: &Path) -> Result<String, String> {
    println!("== a2a-broker demo: a planner delegates to two subagents, over the socket ==");
    println!("  database: {}", db.display());
    let broker = BrokerProcess::start(db, socket)?;

    // One connection per agent, as three sidecars would have.
    let agents = register_agents(&broker)?;
    let [planner, reviewer, tester] = [&agents[0], &agents[1], &agents[2]];
    let all = [planner, reviewer, tester];

    let peers = planner.list_agents(None).map_err(err)?;
    let names: Vec<&str> = peers.iter().map(|c| c.name.as_str()).collect();
    println!("\n1. planner lists its peers: {names:?}");

    let tasks = planner
        .broadcast(
            message_to("*", "I own src/lib.rs until further notice"),
            None,
        )
        .map_err(err)?;
    println!(
        "2. planner broadcasts \"I own src/lib.rs\" (to: \"*\"): {} tasks, one per peer",
        tasks.len()
    );
    show_events(&all)?;

    let review = review_round(planner, reviewer, &all)?;

    test_round(planner, tester, &all)?;

    let list = planner
        .list_tasks(TaskQuery {
            role: ListRole::Requester,
            ..TaskQuery::default()
        })
        .map_err(err)?;
    println!("7. planner's tasks, newest first:");
    for t in &list.tasks {
        println!(
            "      {} -> {:<9} {}",
            t.id,
            t.agent_name,
            t.status.state.as_str()
        );
    }
    tester.deregister().map_err(err)?;
    println!("8. tester deregisters: its open broadcast task fails, the planner is told:");
    show_events(&[planner, reviewer])?;
    let review_id = review.id;
    drop(agents);
    let code = broker.finish()?;
    println!("9. clients closed, broker stdin closed: the broker exited with status {code}");
    if code != 0 {
        return Err(format!("broker exited with {code}"));
    }
    Ok(review_id)
}

/// Connects and registers the planner, the reviewer and the tester.
fn register_agents(broker: &BrokerProcess) -> Result<Vec<Agent>, String> {
    let mut agents = Vec::new();
    for (name, sk) in [
        ("planner", "plan"),
        ("reviewer", "review"),
        ("tester", "test"),
    ] {
        let client = broker.connect(name)?;
        let mut card = agent_card(name);
        card.description = format!("the {name}");
        card.skills = vec![skill(sk, &[sk])];
        let agent = client
            .register("session-1", card, Delivery::Push)
            .map_err(err)?;
        println!("  registered {:<9} peer id {:?}", name, agent.id());
        agents.push(agent);
    }
    Ok(agents)
}

/// Steps 3 and 4: the planner asks for a review (and retries the send),
/// the reviewer works, adds an artifact and completes.
fn review_round(planner: &Agent, reviewer: &Agent, all: &[&Agent]) -> Result<Task, String> {
    let ask = message_to("reviewer", "Review src/lib.rs");
    let review = planner.send(ask.clone(), None).map_err(err)?;
    println!(
        "3. planner asks reviewer for a review: task {} ({})",
        review.id,
        review.status.state.as_str()
    );
    show_events(all)?;
    let again = planner.send(ask, None).map_err(err)?;
    println!(
        "   the same send retried (same messageId): same task {} returned, nothing new written or routed",
        again.id
    );

    reviewer
        .set_status(&review.id, State::Working, None)
        .map_err(err)?;
    let mut artifact = text_artifact("review.md", "LGTM, two nits");
    artifact.name = Some("review".into());
    reviewer
        .add_artifact(&review.id, artifact, false, true)
        .map_err(err)?;
    let done = reviewer
        .set_status(
            &review.id,
            State::Completed,
            Some(task_message(&review.id, "Review done")),
        )
        .map_err(err)?;
    println!(
        "4. reviewer works, adds an artifact, completes (task version {}):",
        done.version
    );
    show_events(all)?;
    Ok(review)
}

/// Steps 5 and 6: a blocking send to the tester, which asks a question;
/// the planner answers and the tester completes.
fn test_round(planner: &Agent, tester: &Agent, all: &[&Agent]) -> Result<(), String> {
    // A blocking send is submitted, not waited for: the planner's
    // connection stays free, and the answer completes a `Pending` later.
    let blocking = planner
        .send_async(
            message_to("tester", "Run the test suite"),
            Some(SendConfiguration {
                blocking: Some(true),
                history_length: None,
                push_notification_config: None,
            }),
        )
        .map_err(err)?;
    println!(
        "5. planner sends a *blocking* request to tester (send_async); its connection stays free"
    );
    let first = tester.wait(TIMEOUT).map_err(err)?;
    for ev in &first {
        println!("      {}", describe(ev));
    }
    let test_task = first
        .iter()
        .find_map(|e| match e {
            Notification::TaskEvent(p) => match &p.event {
                StreamEvent::Status(s) if s.status.state == State::Submitted => {
                    Some(s.task_id.clone())
                }
                _ => None,
            },
            _ => None,
        })
        .ok_or("tester never heard of its task")?;
    let peers_meanwhile = planner.list_agents(None).map_err(err)?.len();
    println!("   meanwhile the planner's connection answers other calls ({peers_meanwhile} peers listed)");
    tester
        .set_status(
            &test_task,
            State::InputRequired,
            Some(task_message(&test_task, "Which suite: unit or e2e?")),
        )
        .map_err(err)?;
    let settled = blocking.wait(TIMEOUT).map_err(err)?;
    println!(
        "   tester asks a question; the blocking send returns: state {}",
        settled.status.state.as_str()
    );
    show_events(all)?;
    let resumed = planner
        .send(task_message(&test_task, "unit"), None)
        .map_err(err)?;
    println!(
        "6. planner answers \"unit\": the task resumes ({})",
        resumed.status.state.as_str()
    );
    show_events(all)?;
    tester
        .set_status(
            &test_task,
            State::Completed,
            Some(task_message(&test_task, "212 passed")),
        )
        .map_err(err)?;
    show_events(all)?;
    Ok(())
}
