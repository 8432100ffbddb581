//! One NDJSON connection to a broker, over any byte stream: a child's
//! stdio, a local-socket connection, or anything else that reads and writes.
//!
//! A writer thread owns the sending side (so a write never blocks the test,
//! even when the broker is not reading), and a reader thread parses each
//! incoming line into a [`Value`]; every read goes through a channel with a
//! deadline, so no test can hang. Responses are matched by `id`;
//! notifications and responses that arrive while the caller waits for
//! something else are stashed, never lost. Every line received is checked
//! to be JSON-RPC 2.0 with exactly one of `result`/`error`.

use crate::lines::for_each_line;
use crate::TIMEOUT;
use a2a_client::wire::{Codec, Line, Ndjson};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Ids handed out by [`Conn::request`] start here, far from the small ids
/// that tests write by hand.
const FIRST_CALL_ID: u64 = 1_000_001;

/// Starts a thread that writes each chunk it gets to `w`, and calls
/// `on_close(w)` once every chunk is written and the sender is gone.
fn spawn_writer<W: Write + Send + 'static>(
    w: W,
    on_close: impl FnOnce(W) + Send + 'static,
) -> Sender<Vec<u8>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
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

/// What the wire core read a line as (docs/protocol.md §1: a response,
/// a notification, or neither: a batch's array, an unreadable line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Answer,
    Event,
    Other,
}

/// Starts a thread that cuts `r` into lines with the client's wire core
/// (see [`crate::lines`]), tells each line's kind with the core's reading
/// of it, and parses it into a [`Value`] (an unparseable line becomes
/// `{"__unparseable": .., "__error": ..}`, and so does what ends the
/// stream early); the channel closes at end of file.
fn spawn_reader<R: Read + Send + 'static>(r: R) -> Receiver<(Kind, Value)> {
    let (tx, rx) = mpsc::channel::<(Kind, Value)>();
    std::thread::spawn(move || {
        let end = for_each_line(r, |text| {
            let kind = match Ndjson::decode(text) {
                Ok(Line::Answer { id_raw, .. }) if id_raw != b"null" => Kind::Answer,
                Ok(Line::Event { .. }) => Kind::Event,
                _ => Kind::Other,
            };
            let value = serde_json::from_slice::<Value>(text).unwrap_or_else(|e| {
                json!({"__unparseable": String::from_utf8_lossy(text), "__error": e.to_string()})
            });
            let kind = if value.get("__unparseable").is_some() {
                Kind::Other
            } else {
                kind
            };
            tx.send((kind, value)).is_ok()
        });
        if let Err(e) = end {
            let _ = tx.send((
                Kind::Other,
                json!({"__unparseable": "", "__error": e.to_string()}),
            ));
        }
    });
    rx
}

fn id_key(id: &Value) -> String {
    id.to_string()
}

/// One NDJSON connection (see the module doc).
pub struct Conn {
    /// Chunks of bytes to send; `None` once closed.
    tx: Option<Sender<Vec<u8>>>,
    /// Parsed incoming lines.
    rx: Receiver<(Kind, Value)>,
    /// Socket: a handle kept to shut the connection down on drop.
    stream: Option<UnixStream>,
    /// The secret [`Conn::handshake`] carries (socket connections).
    secret: Option<String>,
    /// The broker's stderr so far, for failure messages.
    diagnostics: Arc<Mutex<Vec<String>>>,
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

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("open", &self.tx.is_some())
            .field("eof", &self.eof)
            .field("notifications", &self.notifications.len())
            .finish_non_exhaustive()
    }
}

impl Conn {
    /// A connection that writes to `w` and reads lines from `r`;
    /// `on_close(w)` runs once [`Conn::close`] was called (or the `Conn`
    /// dropped) and everything queued is written.
    pub fn over<W, R>(w: W, on_close: impl FnOnce(W) + Send + 'static, r: R) -> Conn
    where
        W: Write + Send + 'static,
        R: Read + Send + 'static,
    {
        Conn::from_parts(Some(spawn_writer(w, on_close)), spawn_reader(r), None)
    }

    /// A connection over a child's stdin/stdout; closing it closes stdin
    /// (end of file: a stdio broker then stops).
    pub fn stdio(stdin: std::process::ChildStdin, stdout: std::process::ChildStdout) -> Conn {
        Conn::over(stdin, drop, stdout)
    }

    /// Connects to a broker's local socket (no handshake yet). Its
    /// [`Conn::handshake`] carries `secret` (`None`: no secret field).
    pub fn socket(path: &Path, secret: Option<String>) -> std::io::Result<Conn> {
        let stream = UnixStream::connect(path)?;
        let rx = spawn_reader(stream.try_clone()?);
        let tx = spawn_writer(stream.try_clone()?, |s| {
            let _ = s.shutdown(Shutdown::Write);
        });
        let mut c = Conn::from_parts(Some(tx), rx, Some(stream));
        c.secret = secret;
        Ok(c)
    }

    /// A placeholder that sends nothing and receives nothing (closed).
    pub fn detached() -> Conn {
        let (_, rx) = mpsc::channel();
        Conn::from_parts(None, rx, None)
    }

    fn from_parts(
        tx: Option<Sender<Vec<u8>>>,
        rx: Receiver<(Kind, Value)>,
        stream: Option<UnixStream>,
    ) -> Conn {
        Conn {
            tx,
            rx,
            stream,
            secret: None,
            diagnostics: Arc::default(),
            eof: false,
            next_id: FIRST_CALL_ID,
            responses: HashMap::new(),
            others: VecDeque::new(),
            notifications: VecDeque::new(),
        }
    }

    /// Shows these lines (the broker's stderr) in this connection's failure
    /// messages.
    pub fn with_diagnostics(mut self, lines: Arc<Mutex<Vec<String>>>) -> Conn {
        self.diagnostics = lines;
        self
    }

    /// The secret [`Conn::handshake`] carries.
    pub fn secret(&self) -> Option<&str> {
        self.secret.as_deref()
    }

    fn stderr_lines(&self) -> Vec<String> {
        self.diagnostics
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default()
    }

    // ---------------------------------------------------------------- writing

    /// Writes raw bytes (never blocks the test).
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

    /// A fresh request id.
    pub fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Writes a request without waiting; returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id();
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

    fn classify(&mut self, (kind, v): (Kind, Value)) {
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
        match kind {
            Kind::Event => self.notifications.push_back(v),
            Kind::Answer => {
                let key = id_key(&v["id"]);
                assert!(
                    !self.responses.contains_key(&key),
                    "two responses with id {key}: {v}"
                );
                self.responses.insert(key, v);
            }
            Kind::Other => self.others.push_back(v),
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

    /// Waits for the response to a request written by [`Conn::request`];
    /// fails after [`TIMEOUT`].
    pub fn response(&mut self, id: u64) -> Value {
        match self.try_response(&json!(id), TIMEOUT) {
            Some(v) => v,
            None => panic!(
                "no response to id {id} within {TIMEOUT:?} ({:?}, closed: {}); stderr: {:?}",
                self.others,
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

    /// The next value that is not a notification nor an id-keyed
    /// response (a batch reply, an error with `id: null`).
    pub fn next_other(&mut self, timeout: Duration) -> Option<Value> {
        self.pump_until(timeout, |c| c.others.pop_front())
    }

    /// Sends a request and waits for its whole response object, at most
    /// `timeout`.
    pub fn call_within(&mut self, method: &str, params: Value, timeout: Duration) -> Value {
        let id = self.request(method, params);
        match self.try_response(&json!(id), timeout) {
            Some(v) => v,
            None => panic!(
                "no response to {method} (id {id}) within {timeout:?}; stderr: {:?}",
                self.stderr_lines()
            ),
        }
    }

    /// [`Conn::call`] with [`crate::SLOW_TIMEOUT`], for calls carrying tens of MB.
    pub fn call_slow(&mut self, method: &str, params: Value) -> Value {
        self.call_within(method, params, crate::SLOW_TIMEOUT)
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
            let id = self.next_id();
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
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(s) = &self.stream {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}
