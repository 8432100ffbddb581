//! `a2a-broker demo`: starts this very binary as a broker on a temporary
//! database, drives a small delegation through its stdio pipe exactly as a
//! sidecar would, and narrates what happens; then prints the audit view of
//! the durable log. Needs nothing but the binary.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(20);

/// A minimal NDJSON client over the broker's pipes.
struct Pipe {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    next_id: u64,
    /// Notifications seen while waiting for responses.
    events: Vec<Value>,
    /// Responses that arrived while waiting for another.
    early: Vec<Value>,
}

impl Pipe {
    fn start(db: &std::path::Path) -> Result<Pipe, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
        let mut child = Command::new(exe)
            .arg("serve")
            .arg("--db")
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the broker: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        let mut ready = String::new();
        BufReader::new(stderr)
            .read_line(&mut ready)
            .map_err(|e| format!("broker did not start: {e}"))?;
        let ready: Value =
            serde_json::from_str(&ready).map_err(|_| format!("broker did not start: {ready}"))?;
        println!("  broker ready: {ready}");
        Ok(Pipe {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 0,
            events: Vec::new(),
            early: Vec::new(),
        })
    }

    fn send(&mut self, method: &str, params: Value) -> Result<u64, String> {
        self.next_id += 1;
        let line =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        writeln!(stdin, "{line}").map_err(|e| format!("write to broker: {e}"))?;
        stdin.flush().map_err(|e| format!("write to broker: {e}"))?;
        Ok(self.next_id)
    }

    fn wait_for(&mut self, id: u64) -> Result<Value, String> {
        if let Some(i) = self.early.iter().position(|v| v["id"] == id) {
            return unwrap_result(self.early.remove(i));
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .lines
                .recv_timeout(left)
                .map_err(|_| format!("no answer to request {id}"))?;
            if v.get("id").is_none() {
                self.events.push(v);
            } else if v["id"] == id {
                return unwrap_result(v);
            } else {
                self.early.push(v);
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.send(method, params)?;
        self.wait_for(id)
    }

    /// Prints and forgets the notifications received so far.
    fn show_events(&mut self) {
        for e in self.events.drain(..) {
            let p = &e["params"];
            let ev = &p["event"];
            let what = match ev["kind"].as_str() {
                Some("status-update") => {
                    let text = ev["status"]["message"]["parts"][0]["text"]
                        .as_str()
                        .unwrap_or("");
                    format!(
                        "status {}{}{}",
                        ev["status"]["state"].as_str().unwrap_or("?"),
                        if ev["final"] == true { " (final)" } else { "" },
                        if text.is_empty() {
                            String::new()
                        } else {
                            format!(" {text:?}")
                        }
                    )
                }
                Some("artifact-update") => format!("artifact {}", ev["artifact"]["artifactId"]),
                _ => format!("{} {}", e["method"], p["status"]["state"]),
            };
            println!(
                "      event -> {:<9} seq {:<2} task v{}: {what}",
                p["recipient"].as_str().unwrap_or("?"),
                p["seq"],
                p["taskVersion"]
            );
        }
    }

    fn finish(mut self) -> Result<i32, String> {
        drop(self.stdin.take());
        let status = self.child.wait().map_err(|e| e.to_string())?;
        Ok(status.code().unwrap_or(-1))
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn unwrap_result(v: Value) -> Result<Value, String> {
    match v.get("result") {
        Some(r) => Ok(r.clone()),
        None => Err(format!("broker error: {}", v["error"])),
    }
}

fn text(t: &str, id: &str) -> Value {
    json!({"role": "user", "parts": [{"kind": "text", "text": t}], "messageId": id})
}

/// Runs the demo.
pub fn run() -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("a2a-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let db = dir.join("demo.db");
    let result = drive(&db);
    if let Ok(task) = &result {
        println!("\n== the durable audit view (a2a-broker tasks list / show --db …) ==");
        crate::inspect::list(&db, None, 10)?;
        println!();
        crate::inspect::show(&db, task)?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|_| ())
}

/// Drives the delegation; returns the id of the task to audit.
fn drive(db: &std::path::Path) -> Result<String, String> {
    println!("== a2a-broker demo: a planner delegates to two subagents ==");
    println!("  database: {}", db.display());
    let mut b = Pipe::start(db)?;
    b.call(
        "app.handshake",
        json!({"protocolVersion": 10, "client": "a2a-broker-demo"}),
    )?;

    let mut token = std::collections::HashMap::new();
    for (name, skill) in [
        ("planner", "plan"),
        ("reviewer", "review"),
        ("tester", "test"),
    ] {
        let card = json!({"name": name, "description": format!("the {name}"),
                          "skills": [{"id": skill, "name": skill, "description": "", "tags": [skill]}]});
        let r = b.call(
            "a2a.agents.register",
            json!({"contextId": "session-1", "card": card}),
        )?;
        token.insert(name, r["token"].as_str().unwrap_or_default().to_owned());
        println!("  registered {:<9} peer id {}", name, r["agentId"]);
    }
    let tok = |n: &str| token[n].clone();

    let peers = b.call("a2a.agents.list", json!({"token": tok("planner")}))?;
    let names: Vec<&str> = peers["agents"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    println!("\n1. planner lists its peers: {names:?}");

    let mut ann = text("I own src/lib.rs until further notice", "own-1");
    ann["to"] = json!("*");
    let r = b.call(
        "a2a.message.send",
        json!({"token": tok("planner"), "message": ann}),
    )?;
    println!(
        "2. planner broadcasts \"I own src/lib.rs\" (to: \"*\"): {} tasks, one per peer",
        r["tasks"].as_array().map_or(0, Vec::len)
    );
    b.show_events();

    let mut ask = text("Review src/lib.rs", "review-1");
    ask["to"] = json!("reviewer");
    let r = b.call(
        "a2a.message.send",
        json!({"token": tok("planner"), "message": ask}),
    )?;
    let review = r["task"]["id"].as_str().unwrap_or_default().to_owned();
    println!(
        "3. planner asks reviewer for a review: task {review} ({})",
        r["task"]["status"]["state"]
    );
    b.show_events();
    let again = b.call(
        "a2a.message.send",
        json!({"token": tok("planner"), "message": ask}),
    )?;
    println!(
        "   the same send retried (same messageId): same task {} returned, nothing new written or routed",
        again["task"]["id"]
    );

    b.call(
        "a2a.tasks.status",
        json!({"token": tok("reviewer"), "id": review, "state": "working"}),
    )?;
    b.call(
        "a2a.tasks.artifact",
        json!({"token": tok("reviewer"), "id": review,
               "artifact": {"artifactId": "review.md", "name": "review",
                            "parts": [{"kind": "text", "text": "LGTM, two nits"}]}}),
    )?;
    let done = b.call(
        "a2a.tasks.status",
        json!({"token": tok("reviewer"), "id": review, "state": "completed",
               "message": text("Review done", "rev-done")}),
    )?;
    println!(
        "4. reviewer works, adds an artifact, completes (task version {}):",
        done["task"]["version"]
    );
    b.show_events();

    let mut run_tests = text("Run the test suite", "test-1");
    run_tests["to"] = json!("tester");
    let blocking = b.send(
        "a2a.message.send",
        json!({"token": tok("planner"), "message": run_tests, "configuration": {"blocking": true}}),
    )?;
    println!("5. planner sends a *blocking* request to tester; the pipe stays free meanwhile");
    let deadline = Instant::now() + TIMEOUT;
    let test_task = loop {
        if let Some(e) = b
            .events
            .iter()
            .find(|e| e["params"]["recipient"] == "tester")
        {
            break e["params"]["event"]["taskId"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
        }
        if Instant::now() > deadline {
            return Err("tester never heard of its task".into());
        }
        let v = b
            .lines
            .recv_timeout(TIMEOUT)
            .map_err(|_| "broker went quiet".to_string())?;
        if v.get("id").is_some() {
            b.early.push(v);
        } else {
            b.events.push(v);
        }
    };
    b.show_events();
    b.call(
        "a2a.tasks.status",
        json!({"token": tok("tester"), "id": test_task, "state": "input-required",
               "message": text("Which suite: unit or e2e?", "t-q")}),
    )?;
    let r = b.wait_for(blocking)?;
    println!(
        "   tester asks a question; the blocking send returns: state {}",
        r["task"]["status"]["state"]
    );
    b.show_events();
    let mut answer = text("unit", "answer-1");
    answer["taskId"] = json!(test_task);
    let r = b.call(
        "a2a.message.send",
        json!({"token": tok("planner"), "message": answer}),
    )?;
    println!(
        "6. planner answers \"unit\": the task resumes ({})",
        r["task"]["status"]["state"]
    );
    b.call(
        "a2a.tasks.status",
        json!({"token": tok("tester"), "id": test_task, "state": "completed",
               "message": text("212 passed", "t-done")}),
    )?;
    b.show_events();

    let list = b.call(
        "a2a.tasks.list",
        json!({"token": tok("planner"), "role": "requester"}),
    )?;
    println!("7. planner's tasks, newest first:");
    for t in list["tasks"].as_array().into_iter().flatten() {
        println!(
            "      {} -> {:<9} {}",
            t["id"].as_str().unwrap_or("?"),
            t["agentName"].as_str().unwrap_or("?"),
            t["status"]["state"].as_str().unwrap_or("?")
        );
    }
    b.call("a2a.agents.deregister", json!({"token": tok("tester")}))?;
    println!("8. tester deregisters: its open broadcast task fails, the planner is told:");
    b.show_events();
    let code = b.finish()?;
    println!("9. stdin closed: the broker exited with status {code}");
    if code != 0 {
        return Err(format!("broker exited with {code}"));
    }
    Ok(review)
}
