//! Harness for the `a2a-broker` integration tests.
//!
//! Every test spawns the real `a2a-broker serve --db PATH` binary and speaks the
//! `a2a.*` protocol (docs: `PROTOCOL.md`) to it over its stdio NDJSON transport.
//!
//! - [`Broker`] owns the child process. A writer thread owns its stdin (so a
//!   write never blocks a test), a reader thread parses each stdout line into a
//!   [`serde_json::Value`], and another collects stderr lines. Every read from
//!   the child goes through a channel with a timeout, so no test can hang.
//! - Responses are matched by `id`; notifications and responses that arrive
//!   while a test waits for something else are stashed, never lost.
//! - The child is killed when the [`Broker`] is dropped.
//!
//! The binary is found through `A2A_BROKER_BIN`, else beside the test
//! executable's directory (`target/<profile>/a2a-broker`): build it first with
//! `cargo build -p a2a-broker`.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

pub use serde_json::{json, Value};

/// How long any single expected answer may take before the test fails. Generous
/// on purpose: it only bounds a hang, it never measures speed.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The bound for answers to calls that carry tens of megabytes (a debug
/// build on a loaded 2-core machine parses them slowly). Again only a hang
/// guard.
pub const SLOW_TIMEOUT: Duration = Duration::from_secs(120);

/// The protocol version this suite speaks.
pub const PROTOCOL_VERSION: u64 = 10;

/// The `code` of every A2A error.
pub const A2A_ERROR: i64 = 1400;

/// Ids handed out by [`Broker::call`] start here, far from the small ids that
/// framing tests write by hand.
const FIRST_CALL_ID: u64 = 1_000_001;

static UNIQUE: AtomicU64 = AtomicU64::new(1);

/// A fresh string, unique within this test process (message ids, names).
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        UNIQUE.fetch_add(1, Ordering::Relaxed)
    )
}

/// Path of the broker binary under test.
pub fn broker_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("A2A_BROKER_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().expect("test exe has a directory");
    let candidate = dir.join("..").join("a2a-broker");
    assert!(
        candidate.exists(),
        "broker binary not found at {} (run `cargo build -p a2a-broker` first, or set A2A_BROKER_BIN)",
        candidate.display()
    );
    candidate
}

/// A temporary directory holding a database path (the file itself is created
/// by the broker). Removed on drop.
pub struct TestDb {
    /// Kept alive so the directory outlives the test.
    pub dir: tempfile::TempDir,
    /// `<dir>/broker.db`.
    pub path: PathBuf,
}

impl TestDb {
    pub fn new() -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("broker.db");
        TestDb { dir, path }
    }
}

impl Default for TestDb {
    fn default() -> Self {
        Self::new()
    }
}

/// One agent registered by a test.
#[derive(Clone, Debug)]
pub struct Agent {
    /// The peer id (`agentId`).
    pub id: String,
    /// The capability token.
    pub token: String,
    /// The context it registered under.
    pub ctx: String,
}

/// A running broker child process and the test's end of its stdio.
pub struct Broker {
    child: Child,
    /// The child's pid.
    pub pid: u32,
    /// Chunks of bytes to write to the child's stdin; `None` once closed.
    stdin_tx: Option<Sender<Vec<u8>>>,
    /// Parsed stdout lines.
    out_rx: Receiver<Value>,
    /// Raw stderr lines.
    err_rx: Receiver<String>,
    /// Every stderr line seen so far.
    pub stderr: Vec<String>,
    next_id: u64,
    /// Responses with a non-null id that nobody has claimed yet, by id.
    responses: HashMap<String, Value>,
    /// Stdout values that are neither notifications nor id-keyed responses
    /// (batch arrays, errors with a null id, unparseable lines), in order.
    others: VecDeque<Value>,
    /// Notifications not yet claimed, in arrival order.
    notifications: VecDeque<Value>,
    /// The ready line the broker wrote on stderr.
    pub ready: Value,
}

fn id_key(id: &Value) -> String {
    id.to_string()
}

impl Broker {
    /// Spawns the broker without waiting for it to be ready.
    pub fn spawn(db: &Path, extra_args: &[&str]) -> Broker {
        let mut cmd = Command::new(broker_bin());
        cmd.arg("serve").arg("--db").arg(db).args(extra_args);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn a2a-broker");
        let pid = child.id();

        let stdin: ChildStdin = child.stdin.take().expect("stdin");
        let (stdin_tx, stdin_rx) = mpsc::channel::<Vec<u8>>();
        thread::spawn(move || {
            let mut stdin = stdin;
            while let Ok(chunk) = stdin_rx.recv() {
                if stdin.write_all(&chunk).is_err() || stdin.flush().is_err() {
                    break;
                }
            }
            // Dropping stdin here is the EOF.
        });

        let stdout = child.stdout.take().expect("stdout");
        let (out_tx, out_rx) = mpsc::channel::<Value>();
        thread::spawn(move || {
            let mut reader = BufReader::with_capacity(1 << 20, stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                let value = serde_json::from_slice::<Value>(text).unwrap_or_else(|e| {
                    json!({"__unparseable": String::from_utf8_lossy(text), "__error": e.to_string()})
                });
                if out_tx.send(value).is_err() {
                    break;
                }
            }
        });

        let stderr = child.stderr.take().expect("stderr");
        let (err_tx, err_rx) = mpsc::channel::<String>();
        thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let text = String::from_utf8_lossy(&buf)
                    .trim_end_matches(['\n', '\r'])
                    .to_string();
                if err_tx.send(text).is_err() {
                    break;
                }
            }
            // Read whatever is left (a last line without newline is handled above).
            let _ = reader.read_to_end(&mut buf);
        });

        Broker {
            child,
            pid,
            stdin_tx: Some(stdin_tx),
            out_rx,
            err_rx,
            stderr: Vec::new(),
            next_id: FIRST_CALL_ID,
            responses: HashMap::new(),
            others: VecDeque::new(),
            notifications: VecDeque::new(),
            ready: Value::Null,
        }
    }

    /// Spawns the broker and waits for its `{"ready": true, ...}` stderr line.
    pub fn start(db: &Path, extra_args: &[&str]) -> Broker {
        let mut b = Broker::spawn(db, extra_args);
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match b.err_rx.recv_timeout(left.max(Duration::from_millis(1))) {
                Ok(line) => {
                    b.stderr.push(line.clone());
                    if let Ok(v) = serde_json::from_str::<Value>(&line) {
                        if v.get("ready") == Some(&Value::Bool(true)) {
                            b.ready = v;
                            return b;
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "broker wrote no ready line within {TIMEOUT:?}; stderr: {:?}",
                        b.stderr
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = b.wait_exit(TIMEOUT);
                    panic!(
                        "broker exited before ready ({status:?}); stderr: {:?}",
                        b.stderr
                    )
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "broker wrote no ready line within {TIMEOUT:?}; stderr: {:?}",
                    b.stderr
                );
            }
        }
    }

    /// [`Broker::start`] with no extra flags, then `app.handshake`.
    pub fn open(db: &Path) -> Broker {
        let mut b = Broker::start(db, &[]);
        b.handshake();
        b
    }

    /// Runs a broker that is expected to refuse to start: returns its exit
    /// status and every stderr line. Fails if it becomes ready instead.
    pub fn expect_start_failure(db: &Path, extra_args: &[&str]) -> (ExitStatus, Vec<String>) {
        let mut b = Broker::spawn(db, extra_args);
        let status = b.wait_exit(TIMEOUT);
        b.drain_stderr(TIMEOUT);
        for line in &b.stderr {
            if let Ok(v) = serde_json::from_str::<Value>(line) {
                assert_ne!(
                    v.get("ready"),
                    Some(&Value::Bool(true)),
                    "broker became ready: {:?}",
                    b.stderr
                );
            }
        }
        (status, b.stderr.clone())
    }

    // ---------------------------------------------------------------- writing

    /// Writes raw bytes to the broker's stdin (never blocks the test).
    pub fn write_bytes(&mut self, bytes: Vec<u8>) {
        self.stdin_tx
            .as_ref()
            .expect("stdin already closed")
            .send(bytes)
            .expect("stdin writer thread gone");
    }

    /// Writes one line (a newline is appended).
    pub fn send_raw(&mut self, line: &str) {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.write_bytes(bytes);
    }

    /// Writes a request without waiting; returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&line.to_string());
        id
    }

    /// Writes a notification (a request without id).
    pub fn notify(&mut self, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_raw(&line.to_string());
    }

    /// Closes stdin (EOF for the broker).
    pub fn close_stdin(&mut self) {
        self.stdin_tx = None;
    }

    // ---------------------------------------------------------------- reading

    fn classify(&mut self, v: Value) {
        let is_notification = v.is_object() && v.get("method").is_some() && v.get("id").is_none();
        // Every line the broker writes is JSON-RPC 2.0; a response holds
        // exactly one of `result` / `error`.
        let items: Vec<&Value> = match &v {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        for item in items {
            if item.get("__unparseable").is_some() {
                continue;
            }
            assert_eq!(
                item["jsonrpc"], "2.0",
                "broker wrote a line without jsonrpc 2.0: {item}"
            );
            if item.get("method").is_none() {
                assert!(
                    item.get("result").is_some() != item.get("error").is_some(),
                    "a response must hold exactly one of result/error: {item}"
                );
            }
        }
        if is_notification {
            self.notifications.push_back(v);
            return;
        }
        match v.get("id") {
            Some(id) if !id.is_null() && v.is_object() => {
                let key = id_key(id);
                assert!(
                    !self.responses.contains_key(&key),
                    "two responses with id {key}: {v}"
                );
                self.responses.insert(key, v);
            }
            _ => self.others.push_back(v),
        }
    }

    /// Receives one stdout value, waiting at most `timeout`. False on timeout
    /// or when stdout is closed.
    fn pump(&mut self, timeout: Duration) -> bool {
        match self.out_rx.recv_timeout(timeout) {
            Ok(v) => {
                self.classify(v);
                true
            }
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => false,
        }
    }

    /// Moves everything already on stdout into the stashes without waiting.
    pub fn pump_ready(&mut self) {
        while let Ok(v) = self.out_rx.try_recv() {
            self.classify(v);
        }
    }

    fn pump_until<T>(
        &mut self,
        timeout: Duration,
        mut found: impl FnMut(&mut Broker) -> Option<T>,
    ) -> Option<T> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(t) = found(self) {
                return Some(t);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            if !self.pump(left) {
                // Stdout closed or deadline passed: one last look.
                return found(self);
            }
        }
    }

    /// Waits for the response with this id.
    pub fn try_response(&mut self, id: &Value, timeout: Duration) -> Option<Value> {
        let key = id_key(id);
        self.pump_until(timeout, |b| b.responses.remove(&key))
    }

    /// Waits for the response to a request written by [`Broker::request`].
    pub fn response(&mut self, id: u64) -> Value {
        match self.try_response(&json!(id), TIMEOUT) {
            Some(v) => v,
            None => panic!(
                "no response to id {id} within {TIMEOUT:?}; stderr: {:?}",
                self.stderr_now()
            ),
        }
    }

    /// Whether the response with this id has already arrived (no waiting).
    pub fn has_response(&mut self, id: u64) -> bool {
        self.pump_ready();
        self.responses.contains_key(&id_key(&json!(id)))
    }

    /// The next stdout value that is not a notification and not an id-keyed
    /// response (a batch reply, an error with `id: null`).
    pub fn next_other(&mut self, timeout: Duration) -> Option<Value> {
        self.pump_until(timeout, |b| b.others.pop_front())
    }

    /// [`Broker::call`] with a longer bound, for calls carrying tens of MB.
    pub fn call_slow(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        match self.try_response(&json!(id), SLOW_TIMEOUT) {
            Some(v) => v,
            None => panic!("no response to {method} (id {id}) within {SLOW_TIMEOUT:?}"),
        }
    }

    /// Sends a request and waits for its whole response object.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.response(id)
    }

    /// Sends a request that must succeed; returns its `result`.
    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        let resp = self.call(method, params.clone());
        match resp.get("result") {
            Some(r) if resp.get("error").is_none() => r.clone(),
            _ => panic!("{method} {params} failed: {resp}"),
        }
    }

    /// Sends a request that must fail; returns its `error` object.
    pub fn err(&mut self, method: &str, params: Value) -> Value {
        let resp = self.call(method, params.clone());
        match resp.get("error") {
            Some(e) => e.clone(),
            None => panic!("{method} {params} succeeded but should have failed: {resp}"),
        }
    }

    /// Writes all requests at once, then collects their responses in order.
    pub fn pipeline(&mut self, reqs: Vec<(&str, Value)>) -> Vec<Value> {
        let mut buf = Vec::new();
        let mut ids = Vec::with_capacity(reqs.len());
        for (method, params) in reqs {
            let id = self.next_id;
            self.next_id += 1;
            let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            serde_json::to_writer(&mut buf, &line).expect("serialize");
            buf.push(b'\n');
            ids.push(id);
        }
        self.write_bytes(buf);
        ids.into_iter().map(|id| self.response(id)).collect()
    }

    /// The next notification (any recipient), waiting at most `timeout`.
    pub fn next_notification(&mut self, timeout: Duration) -> Option<Value> {
        self.pump_until(timeout, |b| b.notifications.pop_front())
    }

    /// Removes and returns the notifications for `recipient` received so far
    /// (including those already waiting on stdout), in arrival order.
    pub fn notifications_for(&mut self, recipient: &str) -> Vec<Value> {
        self.pump_ready();
        let mut mine = Vec::new();
        let mut rest = VecDeque::new();
        for n in self.notifications.drain(..) {
            if n["params"]["recipient"] == recipient {
                mine.push(n);
            } else {
                rest.push_back(n);
            }
        }
        self.notifications = rest;
        mine
    }

    /// Waits for the first notification for `recipient` matching `pred`;
    /// removes and returns it. Others stay stashed.
    pub fn wait_notification(
        &mut self,
        recipient: &str,
        timeout: Duration,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> Option<Value> {
        self.pump_until(timeout, |b| {
            let pos = b
                .notifications
                .iter()
                .position(|n| n["params"]["recipient"] == recipient && pred(n))?;
            b.notifications.remove(pos)
        })
    }

    /// The next notification for `recipient` (in arrival order); fails after
    /// [`TIMEOUT`].
    pub fn expect_event(&mut self, recipient: &str) -> Value {
        match self.wait_notification(recipient, TIMEOUT, |_| true) {
            Some(n) => n,
            None => panic!(
                "no notification for {recipient} within {TIMEOUT:?}; stashed: {:?}",
                self.notifications
            ),
        }
    }

    /// Notifications still stashed (for diagnostics and "nothing else" checks).
    pub fn stashed_notifications(&mut self) -> Vec<Value> {
        self.pump_ready();
        self.notifications.iter().cloned().collect()
    }

    // ---------------------------------------------------------------- process

    fn drain_stderr(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.err_rx.recv_timeout(left.max(Duration::from_millis(1))) {
                Ok(line) => self.stderr.push(line),
                Err(_) => return,
            }
            if Instant::now() >= deadline {
                return;
            }
        }
    }

    /// Stderr lines so far (non-blocking).
    pub fn stderr_now(&mut self) -> Vec<String> {
        while let Ok(line) = self.err_rx.try_recv() {
            self.stderr.push(line);
        }
        self.stderr.clone()
    }

    /// Polls the child until it exits; fails after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!(
                    "broker did not exit within {timeout:?}; stderr: {:?}",
                    self.stderr_now()
                );
            }
            // Polling interval of the exit check, not a synchronisation.
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Closes stdin and waits for the exit status.
    pub fn close_stdin_and_wait(&mut self, timeout: Duration) -> ExitStatus {
        self.close_stdin();
        let status = self.wait_exit(timeout);
        self.drain_stderr(Duration::from_secs(5));
        status
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends a signal (e.g. `libc::SIGTERM`) to the child.
    pub fn signal(&mut self, sig: i32) {
        let pid = libc::pid_t::try_from(self.pid).expect("pid fits pid_t");
        // SAFETY: kill(2) takes plain integers and touches no memory of ours;
        // the pid is our own child, not yet reaped (we hold its `Child`).
        #[allow(unsafe_code)]
        let rc = unsafe { libc::kill(pid, sig) };
        assert_eq!(rc, 0, "kill({pid}, {sig}) failed");
    }

    /// Drains whatever remains on stdout after the process died (EOF ends it).
    pub fn drain_stdout(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.out_rx.recv_timeout(left.max(Duration::from_millis(1))) {
                Ok(v) => self.classify(v),
                Err(_) => return,
            }
            if Instant::now() >= deadline {
                return;
            }
        }
    }

    /// All id-keyed responses received and not yet claimed (removes them).
    pub fn take_responses(&mut self) -> HashMap<String, Value> {
        std::mem::take(&mut self.responses)
    }

    // ---------------------------------------------------------------- protocol

    /// `app.handshake` with protocol 10; returns the result.
    pub fn handshake(&mut self) -> Value {
        self.ok(
            "app.handshake",
            json!({"protocolVersion": PROTOCOL_VERSION, "client": "a2a-integration"}),
        )
    }

    /// Registers an agent; returns `(agentId, token)`.
    pub fn register(
        &mut self,
        ctx: &str,
        name: &str,
        kind: &str,
        delivery: &str,
    ) -> (String, String) {
        let r = self.ok(
            "a2a.agents.register",
            json!({"contextId": ctx, "card": {"name": name, "kind": kind}, "delivery": delivery}),
        );
        let id = r["agentId"].as_str().expect("agentId").to_string();
        let token = r["token"].as_str().expect("token").to_string();
        (id, token)
    }

    /// Registers a push `subagent`; returns it as an [`Agent`].
    pub fn agent(&mut self, ctx: &str, name: &str) -> Agent {
        self.agent_with(ctx, name, "subagent", "push")
    }

    /// Registers an agent of a kind and delivery.
    pub fn agent_with(&mut self, ctx: &str, name: &str, kind: &str, delivery: &str) -> Agent {
        let (id, token) = self.register(ctx, name, kind, delivery);
        Agent {
            id,
            token,
            ctx: ctx.to_string(),
        }
    }

    /// Creates a task from `from` to `to` with one text part; returns the task.
    pub fn create_task(&mut self, from: &Agent, to: &Agent, text: &str) -> Value {
        let r = self.ok(
            "a2a.message.send",
            json!({"token": from.token, "message": text_msg_to(text, &to.id)}),
        );
        r["task"].clone()
    }

    /// Worker moves a task to `state`; returns the task.
    pub fn set_state(&mut self, worker: &Agent, task_id: &str, state: &str) -> Value {
        self.ok(
            "a2a.tasks.status",
            json!({"token": worker.token, "id": task_id, "state": state}),
        )["task"]
            .clone()
    }

    /// `a2a.tasks.get` by a party; returns the task.
    pub fn get_task(&mut self, who: &Agent, task_id: &str) -> Value {
        self.ok("a2a.tasks.get", json!({"token": who.token, "id": task_id}))["task"].clone()
    }

    /// Makes sure no notification for `recipient` is pending beyond the probe:
    /// runs `probe` (which must route exactly one event to `recipient`) and
    /// checks that the next notification `recipient` gets has `seq` exactly
    /// `last_seq + 1` and is the probe's. Returns it.
    pub fn barrier(
        &mut self,
        recipient: &str,
        last_seq: u64,
        probe: impl FnOnce(&mut Broker),
    ) -> Value {
        probe(self);
        let n = self.expect_event(recipient);
        assert_eq!(
            n["params"]["seq"].as_u64(),
            Some(last_seq + 1),
            "an unexpected notification reached {recipient} (expected seq {}): {n}",
            last_seq + 1
        );
        n
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stdin_tx = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// -------------------------------------------------------------------- builders

/// A user message with one text part and a fresh messageId.
pub fn text_msg(text: &str) -> Value {
    json!({"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": unique("m")})
}

/// [`text_msg`] addressed to `to`.
pub fn text_msg_to(text: &str, to: &str) -> Value {
    let mut m = text_msg(text);
    m["to"] = json!(to);
    m
}

/// [`text_msg`] on an existing task.
pub fn text_msg_on(text: &str, task_id: &str) -> Value {
    let mut m = text_msg(text);
    m["taskId"] = json!(task_id);
    m
}

/// A message with the given parts and a fresh messageId.
pub fn parts_msg(parts: Value, to: &str) -> Value {
    json!({"role": "user", "parts": parts, "messageId": unique("m"), "to": to})
}

// -------------------------------------------------------------------- asserts

/// Asserts a response is a JSON-RPC error with `code`; returns the error.
pub fn assert_rpc_error(resp: &Value, code: i64) -> Value {
    let err = resp
        .get("error")
        .unwrap_or_else(|| panic!("expected error {code}, got {resp}"));
    assert_eq!(
        err["code"].as_i64(),
        Some(code),
        "wrong error code in {resp}"
    );
    assert!(err["message"].is_string(), "error without message: {resp}");
    err.clone()
}

/// Asserts a response (or an error object) is an A2A error with this
/// `data.errorCode`; returns the error object.
pub fn assert_a2a_error(resp_or_err: &Value, error_code: &str) -> Value {
    let err = resp_or_err.get("error").unwrap_or(resp_or_err);
    assert_eq!(
        err["code"].as_i64(),
        Some(A2A_ERROR),
        "expected A2A error {error_code}, got {resp_or_err}"
    );
    assert_eq!(
        err["data"]["errorCode"], error_code,
        "wrong A2A error in {resp_or_err}"
    );
    assert!(
        err["message"].as_str().is_some_and(|m| !m.is_empty()),
        "A2A error without message: {resp_or_err}"
    );
    err.clone()
}

/// Asserts a bound error: `A2A_*` code, `data.limit`, `data.max`, and
/// `data.actual` when `actual` is given.
pub fn assert_bound_error(
    resp_or_err: &Value,
    error_code: &str,
    limit: &str,
    max: u64,
    actual: Option<u64>,
) {
    let err = assert_a2a_error(resp_or_err, error_code);
    assert_eq!(err["data"]["limit"], limit, "wrong data.limit in {err}");
    assert_eq!(
        err["data"]["max"].as_u64(),
        Some(max),
        "wrong data.max in {err}"
    );
    if let Some(actual) = actual {
        assert_eq!(
            err["data"]["actual"].as_u64(),
            Some(actual),
            "wrong data.actual in {err}"
        );
    }
}

/// The `result` of a response, failing on an error.
pub fn result(resp: &Value) -> Value {
    match resp.get("result") {
        Some(r) if resp.get("error").is_none() => r.clone(),
        _ => panic!("expected a result, got {resp}"),
    }
}

/// Checks the RFC 3339 UTC-with-milliseconds shape: `YYYY-MM-DDTHH:MM:SS.mmmZ`
/// (a `+00:00` offset is accepted as UTC too).
pub fn assert_timestamp(ts: &Value) {
    let s = ts
        .as_str()
        .unwrap_or_else(|| panic!("timestamp is not a string: {ts}"));
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        r.into_iter()
            .all(|i| b.get(i).is_some_and(u8::is_ascii_digit))
    };
    let ok = b.len() >= 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && (&s[23..] == "Z" || &s[23..] == "+00:00");
    assert!(ok, "timestamp {s:?} is not RFC 3339 UTC with milliseconds");
}

/// `params.seq` of a notification.
pub fn seq(n: &Value) -> u64 {
    n["params"]["seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("notification without seq: {n}"))
}

/// Opens a database file read-only-ish for inspection.
pub fn open_db(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).expect("open db with rusqlite")
}

/// `PRAGMA user_version` of a database file.
pub fn user_version(path: &Path) -> i64 {
    open_db(path)
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("user_version")
}

/// Names of the tables in a database file.
pub fn table_names(path: &Path) -> Vec<String> {
    let c = open_db(path);
    let mut st = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .expect("prepare");
    let rows = st.query_map([], |r| r.get::<_, String>(0)).expect("query");
    rows.map(|r| r.expect("row")).collect()
}

/// The a2a tables that schema 12 adds.
pub const A2A_TABLES: [&str; 6] = [
    "a2a_agents",
    "a2a_tasks",
    "a2a_messages",
    "a2a_artifacts",
    "a2a_push_configs",
    "a2a_task_log",
];

/// Registers a requester (`req` in `ctx-req`) and a worker (`wrk` in
/// `ctx-wrk`), both push subagents.
pub fn pair(b: &mut Broker) -> (Agent, Agent) {
    let req = b.agent("ctx-req", "req");
    let wrk = b.agent("ctx-wrk", "wrk");
    (req, wrk)
}

/// The ids of the tasks `who` sees through `a2a.tasks.list` (first page).
pub fn listed_task_ids(b: &mut Broker, who: &Agent) -> Vec<String> {
    let r = b.ok("a2a.tasks.list", json!({"token": who.token, "limit": 1000}));
    r["tasks"]
        .as_array()
        .expect("tasks array")
        .iter()
        .map(|t| t["id"].as_str().expect("id").to_string())
        .collect()
}

impl Broker {
    /// Puts a claimed response back into the stash (so a later
    /// [`Broker::take_responses`] sees every response received).
    pub fn responses_insert_back(&mut self, resp: Value) {
        let key = id_key(&resp["id"]);
        self.responses.insert(key, resp);
    }
}
