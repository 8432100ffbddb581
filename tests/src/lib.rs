//! Harness for the `a2a-broker` integration tests.
//!
//! Every test spawns the real `a2a-broker serve --db PATH` binary and speaks the
//! `a2a.*` protocol (docs: `PROTOCOL.md`) to it over NDJSON, on one of two
//! [`Transport`]s: the child's stdio, or its local socket (`--socket`, the
//! handshake carrying the secret). Protocol tests take a `Transport` and are
//! run on both by [`on_both_transports!`]; stdio-only tests (stdin EOF,
//! signals, migrations) use [`Broker::open`] / [`Broker::start`].
//!
//! - [`Broker`] owns the child process and the test's [`Conn`] (whose methods
//!   it exposes). A writer thread owns the connection's sending side (so a
//!   write never blocks a test), a reader thread parses each incoming line
//!   into a [`serde_json::Value`], and another collects stderr lines. Every
//!   read goes through a channel with a timeout, so no test can hang.
//! - Responses are matched by `id`; notifications and responses that arrive
//!   while a test waits for something else are stashed, never lost.
//! - [`Broker::connect`] opens further socket connections to the same broker.
//! - The child is killed when the [`Broker`] is dropped.
//!
//! The binary is found through `A2A_BROKER_BIN`, else beside the test
//! executable's directory (`target/<profile>/a2a-broker`): build it first with
//! `cargo build -p a2a-broker`.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::ops::{Deref, DerefMut};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
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

/// The transport a test speaks the protocol over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// NDJSON on the child's stdin/stdout (the canonical transport).
    Stdio,
    /// NDJSON on the local socket (`--socket <dir>/run/sock`); the handshake
    /// carries the secret the broker minted into its secret file. The child's
    /// stdin stays open (its EOF still stops the broker) and its stdout unused.
    Socket,
}

/// Runs protocol tests over both transports. For each `fn name(t: Transport)`
/// listed, makes a module `name` holding the tests `stdio` and `socket`
/// (so `cargo test ::socket` runs one transport). A test fn that is written
/// but not listed is dead code, which the lints refuse.
#[macro_export]
macro_rules! on_both_transports {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[test]
            fn stdio() {
                super::$name($crate::Transport::Stdio)
            }
            #[test]
            fn socket() {
                super::$name($crate::Transport::Socket)
            }
        }
    )+};
}

/// Starts a thread that writes each chunk it gets to `w`, and calls
/// `on_close(w)` once every chunk is written and the sender is gone.
fn spawn_writer<W: Write + Send + 'static>(
    w: W,
    on_close: impl FnOnce(W) + Send + 'static,
) -> Sender<Vec<u8>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    thread::spawn(move || {
        let mut w = w;
        while let Ok(chunk) = rx.recv() {
            if w.write_all(&chunk).is_err() || w.flush().is_err() {
                return;
            }
        }
        on_close(w);
    });
    tx
}

/// Starts a thread that parses each line of `r` into a [`Value`] (an
/// unparseable line becomes `{"__unparseable": ..}`); the channel closes at
/// end of file.
fn spawn_reader<R: Read + Send + 'static>(r: R) -> Receiver<Value> {
    let (tx, rx) = mpsc::channel::<Value>();
    thread::spawn(move || {
        let mut reader = BufReader::with_capacity(1 << 20, r);
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
            if tx.send(value).is_err() {
                break;
            }
        }
    });
    rx
}

/// One NDJSON connection to the broker: its stdio, or one local-socket
/// connection. A writer thread owns the sending side (so a write never blocks
/// a test) and a reader thread parses each incoming line. Responses are
/// matched by `id`; notifications and responses that arrive while a test
/// waits for something else are stashed, never lost.
pub struct Conn {
    /// Which transport this connection is.
    pub transport: Transport,
    /// Chunks of bytes to send; `None` once closed.
    tx: Option<Sender<Vec<u8>>>,
    /// Parsed incoming lines.
    rx: Receiver<Value>,
    /// Socket: a handle kept to shut the connection down on drop.
    stream: Option<UnixStream>,
    /// Socket: the secret the handshake carries.
    secret: Option<String>,
    /// The broker's stderr so far, for failure messages.
    stderr_log: Arc<Mutex<Vec<String>>>,
    /// The broker closed its side (end of stdout / of the socket).
    eof: bool,
    next_id: u64,
    /// Responses with a non-null id that nobody has claimed yet, by id.
    responses: HashMap<String, Value>,
    /// Values that are neither notifications nor id-keyed responses (batch
    /// arrays, errors with a null id, unparseable lines), in order.
    others: VecDeque<Value>,
    /// Notifications not yet claimed, in arrival order.
    notifications: VecDeque<Value>,
}

fn id_key(id: &Value) -> String {
    id.to_string()
}

impl Conn {
    fn new(
        transport: Transport,
        tx: Option<Sender<Vec<u8>>>,
        rx: Receiver<Value>,
        stream: Option<UnixStream>,
        secret: Option<String>,
        stderr_log: Arc<Mutex<Vec<String>>>,
    ) -> Conn {
        Conn {
            transport,
            tx,
            rx,
            stream,
            secret,
            stderr_log,
            eof: false,
            next_id: FIRST_CALL_ID,
            responses: HashMap::new(),
            others: VecDeque::new(),
            notifications: VecDeque::new(),
        }
    }

    /// A placeholder for a socket broker not connected to yet.
    fn detached(transport: Transport, stderr_log: Arc<Mutex<Vec<String>>>) -> Conn {
        let (_, rx) = mpsc::channel();
        Conn::new(transport, None, rx, None, None, stderr_log)
    }

    fn stderr_lines(&self) -> Vec<String> {
        self.stderr_log
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default()
    }

    // ---------------------------------------------------------------- writing

    /// Writes raw bytes to the connection (never blocks the test).
    pub fn write_bytes(&mut self, bytes: Vec<u8>) {
        self.tx
            .as_ref()
            .expect("connection not open for writing")
            .send(bytes)
            .expect("connection writer thread gone");
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

    /// Ends the sending side once everything queued is written: EOF on
    /// stdin, or a write shutdown of the socket. The reading side stays.
    pub fn close(&mut self) {
        self.tx = None;
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

    /// Receives one incoming value, waiting at most `timeout`. False on
    /// timeout or when the broker closed its side.
    fn pump(&mut self, timeout: Duration) -> bool {
        match self.rx.recv_timeout(timeout) {
            Ok(v) => {
                self.classify(v);
                true
            }
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => {
                self.eof = true;
                false
            }
        }
    }

    /// Moves everything already received into the stashes without waiting.
    pub fn pump_ready(&mut self) {
        while let Ok(v) = self.rx.try_recv() {
            self.classify(v);
        }
    }

    fn pump_until<T>(
        &mut self,
        timeout: Duration,
        mut found: impl FnMut(&mut Conn) -> Option<T>,
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
                // Closed or deadline passed: one last look.
                return found(self);
            }
        }
    }

    /// Waits (at most `timeout`) until the broker closes its side of the
    /// connection, stashing whatever arrives before. True if it did.
    pub fn wait_closed(&mut self, timeout: Duration) -> bool {
        self.pump_until(timeout, |c| c.eof.then_some(())).is_some()
    }

    /// Stashes whatever arrives until the broker's side closes (e.g. after
    /// the process died) or `timeout` passes.
    pub fn drain(&mut self, timeout: Duration) {
        self.wait_closed(timeout);
    }

    /// Waits for the response with this id.
    pub fn try_response(&mut self, id: &Value, timeout: Duration) -> Option<Value> {
        let key = id_key(id);
        self.pump_until(timeout, |c| c.responses.remove(&key))
    }

    /// Waits for the response to a request written by [`Conn::request`].
    pub fn response(&mut self, id: u64) -> Value {
        match self.try_response(&json!(id), TIMEOUT) {
            Some(v) => v,
            None => panic!(
                "no response to id {id} within {TIMEOUT:?} ({:?}, closed: {}); stderr: {:?}",
                self.transport,
                self.eof,
                self.stderr_lines()
            ),
        }
    }

    /// Whether the response with this id has already arrived (no waiting).
    pub fn has_response(&mut self, id: u64) -> bool {
        self.pump_ready();
        self.responses.contains_key(&id_key(&json!(id)))
    }

    /// The next value that is not a notification and not an id-keyed
    /// response (a batch reply, an error with `id: null`).
    pub fn next_other(&mut self, timeout: Duration) -> Option<Value> {
        self.pump_until(timeout, |c| c.others.pop_front())
    }

    /// [`Conn::call`] with a longer bound, for calls carrying tens of MB.
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
        self.pump_until(timeout, |c| c.notifications.pop_front())
    }

    /// Removes and returns the notifications for `recipient` received so far
    /// (including those already waiting to be read), in arrival order.
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
        self.pump_until(timeout, |c| {
            let pos = c
                .notifications
                .iter()
                .position(|n| n["params"]["recipient"] == recipient && pred(n))?;
            c.notifications.remove(pos)
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

    /// All id-keyed responses received and not yet claimed (removes them).
    pub fn take_responses(&mut self) -> HashMap<String, Value> {
        std::mem::take(&mut self.responses)
    }

    /// Puts a claimed response back into the stash (so a later
    /// [`Conn::take_responses`] sees every response received).
    pub fn responses_insert_back(&mut self, resp: Value) {
        let key = id_key(&resp["id"]);
        self.responses.insert(key, resp);
    }

    // ---------------------------------------------------------------- protocol

    /// `app.handshake` params with the socket's secret added (on the socket
    /// only; stdio takes none).
    pub fn with_secret(&self, mut params: Value) -> Value {
        if let Some(s) = &self.secret {
            params["secret"] = json!(s);
        }
        params
    }

    /// `app.handshake` with protocol 10 (and the secret on the socket);
    /// returns the result.
    pub fn handshake(&mut self) -> Value {
        let params = self
            .with_secret(json!({"protocolVersion": PROTOCOL_VERSION, "client": "a2a-integration"}));
        self.ok("app.handshake", params)
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
        probe: impl FnOnce(&mut Conn),
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

impl Drop for Conn {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(s) = &self.stream {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// A running broker child process and the test's connection to it. The
/// connection's methods ([`Conn`]) are callable on the `Broker` directly.
/// The child is killed when the `Broker` is dropped.
pub struct Broker {
    child: Child,
    /// The child's pid.
    pub pid: u32,
    /// The transport of the test's connection.
    pub transport: Transport,
    /// The test's connection (stdio, or the first socket connection).
    conn: Conn,
    /// Socket transport: the child's stdin, held open until
    /// [`Broker::close_stdin`] (its EOF stops the broker).
    stdin: Option<ChildStdin>,
    /// Raw stderr lines, as they come.
    err_rx: Receiver<String>,
    /// Every stderr line so far, shared with the connections' diagnostics.
    stderr_log: Arc<Mutex<Vec<String>>>,
    /// Every stderr line seen so far (refreshed by the methods that read it).
    pub stderr: Vec<String>,
    /// The ready line the broker wrote on stderr.
    pub ready: Value,
    /// Socket transport: the socket path and the secret.
    socket: Option<(PathBuf, String)>,
}

impl Deref for Broker {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        &self.conn
    }
}

impl DerefMut for Broker {
    fn deref_mut(&mut self) -> &mut Conn {
        &mut self.conn
    }
}

/// Where the socket transport's broker listens: `<db dir>/run/sock`. The
/// broker creates `run/` (0700) itself.
pub fn socket_path_for(db: &Path) -> PathBuf {
    db.parent()
        .expect("db path has a directory")
        .join("run")
        .join("sock")
}

impl Broker {
    /// Spawns the broker (stdio transport) without waiting for it to be ready.
    pub fn spawn(db: &Path, extra_args: &[&str]) -> Broker {
        Broker::spawn_on(Transport::Stdio, db, extra_args)
    }

    /// Spawns the broker for a transport without waiting for it to be ready
    /// (on the socket, nothing is connected yet).
    pub fn spawn_on(transport: Transport, db: &Path, extra_args: &[&str]) -> Broker {
        let mut cmd = Command::new(broker_bin());
        cmd.arg("serve").arg("--db").arg(db).args(extra_args);
        cmd.env_remove("A2A_BROKER_SECRET");
        cmd.stdin(Stdio::piped()).stderr(Stdio::piped());
        match transport {
            Transport::Stdio => cmd.stdout(Stdio::piped()),
            Transport::Socket => cmd
                .arg("--socket")
                .arg(socket_path_for(db))
                .stdout(Stdio::null()),
        };
        let mut child = cmd.spawn().expect("spawn a2a-broker");
        let pid = child.id();

        let stderr_log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("stderr");
        let (err_tx, err_rx) = mpsc::channel::<String>();
        let log = stderr_log.clone();
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
                if let Ok(mut l) = log.lock() {
                    l.push(text.clone());
                }
                if err_tx.send(text).is_err() {
                    break;
                }
            }
        });

        let stdin: ChildStdin = child.stdin.take().expect("stdin");
        let (conn, stdin) = match transport {
            Transport::Stdio => {
                // Dropping stdin once the sender is gone is the EOF.
                let tx = spawn_writer(stdin, drop);
                let rx = spawn_reader(child.stdout.take().expect("stdout"));
                let conn = Conn::new(transport, Some(tx), rx, None, None, stderr_log.clone());
                (conn, None)
            }
            Transport::Socket => (Conn::detached(transport, stderr_log.clone()), Some(stdin)),
        };

        Broker {
            child,
            pid,
            transport,
            conn,
            stdin,
            err_rx,
            stderr_log,
            stderr: Vec::new(),
            ready: Value::Null,
            socket: None,
        }
    }

    /// Spawns the broker (stdio transport) and waits for its ready line.
    pub fn start(db: &Path, extra_args: &[&str]) -> Broker {
        Broker::start_on(Transport::Stdio, db, extra_args)
    }

    /// Spawns the broker and waits for its `{"ready": true, ...}` stderr line;
    /// on the socket, then reads the secret file and connects (no handshake).
    pub fn start_on(transport: Transport, db: &Path, extra_args: &[&str]) -> Broker {
        let mut b = Broker::spawn_on(transport, db, extra_args);
        b.wait_ready();
        if transport == Transport::Socket {
            let path = socket_path_for(db);
            assert_eq!(
                b.ready["socket"].as_str(),
                Some(path.to_str().expect("utf-8 path")),
                "ready line: {}",
                b.ready
            );
            let file = b.ready["secretFile"]
                .as_str()
                .unwrap_or_else(|| panic!("ready line without secretFile: {}", b.ready));
            let secret = std::fs::read_to_string(file).expect("read the secret file");
            assert!(!secret.trim().is_empty(), "empty secret file {file}");
            b.socket = Some((path, secret.trim().to_string()));
            b.conn = b.connect();
        }
        b
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.err_rx.recv_timeout(left.max(Duration::from_millis(1))) {
                Ok(line) => {
                    self.stderr.push(line.clone());
                    if let Ok(v) = serde_json::from_str::<Value>(&line) {
                        if v.get("ready") == Some(&Value::Bool(true)) {
                            self.ready = v;
                            return;
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "broker wrote no ready line within {TIMEOUT:?}; stderr: {:?}",
                        self.stderr
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.wait_exit(TIMEOUT);
                    panic!(
                        "broker exited before ready ({status:?}); stderr: {:?}",
                        self.stderr
                    )
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "broker wrote no ready line within {TIMEOUT:?}; stderr: {:?}",
                    self.stderr
                );
            }
        }
    }

    /// [`Broker::start`] with no extra flags, then `app.handshake` (stdio).
    pub fn open(db: &Path) -> Broker {
        Broker::open_on(Transport::Stdio, db)
    }

    /// [`Broker::start_on`] with no extra flags, then `app.handshake`.
    pub fn open_on(transport: Transport, db: &Path) -> Broker {
        let mut b = Broker::start_on(transport, db, &[]);
        b.handshake();
        b
    }

    /// Opens another connection to the broker's socket (no handshake yet).
    /// Its handshake carries the broker's secret; use
    /// [`Broker::connect_with_secret`] for another one.
    pub fn connect(&self) -> Conn {
        let secret = self.socket.as_ref().map(|(_, s)| s.clone());
        self.connect_with_secret(secret)
    }

    /// [`Broker::connect`] whose [`Conn::handshake`] carries `secret`
    /// (`None`: no secret field at all).
    pub fn connect_with_secret(&self, secret: Option<String>) -> Conn {
        let (path, _) = self
            .socket
            .as_ref()
            .expect("connect: the broker has no socket (Transport::Socket)");
        let stream = UnixStream::connect(path)
            .unwrap_or_else(|e| panic!("connect to {}: {e}", path.display()));
        let rx = spawn_reader(stream.try_clone().expect("clone socket"));
        let tx = spawn_writer(stream.try_clone().expect("clone socket"), |s| {
            let _ = s.shutdown(Shutdown::Write);
        });
        Conn::new(
            Transport::Socket,
            Some(tx),
            rx,
            Some(stream),
            secret,
            self.stderr_log.clone(),
        )
    }

    /// Runs a broker (stdio) that is expected to refuse to start: returns its
    /// exit status and every stderr line. Fails if it becomes ready instead.
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

    /// Closes the child's stdin (EOF for the broker), whatever the
    /// transport: on the socket, the connection stays open.
    pub fn close_stdin(&mut self) {
        match self.transport {
            Transport::Stdio => self.conn.close(),
            Transport::Socket => self.stdin = None,
        }
    }

    /// Closes stdin and waits for the exit status.
    pub fn close_stdin_and_wait(&mut self, timeout: Duration) -> ExitStatus {
        self.close_stdin();
        let status = self.wait_exit(timeout);
        self.drain_stderr(Duration::from_secs(5));
        status
    }

    /// Ends the test's connection, then the broker (for restarts): on stdio
    /// that is stdin EOF; on the socket, the connection is closed first (and
    /// the broker seen closing its side, so it is done with the session),
    /// then stdin. Returns the exit status.
    pub fn close_and_wait(&mut self, timeout: Duration) -> ExitStatus {
        if self.transport == Transport::Socket {
            self.conn.close();
            assert!(
                self.conn.wait_closed(timeout),
                "the broker did not close a socket connection the client closed; stderr: {:?}",
                self.stderr_now()
            );
        }
        self.close_stdin_and_wait(timeout)
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
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stdin = None;
        self.conn.close();
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
