//! An NDJSON connection that keeps lines as text until asked: for tests
//! whose replies are large (a task holding 20 MiB of files), where parsing
//! every line into a `serde_json::Value` in a debug build costs seconds, and
//! for tests that measure a reply's size on the wire. [`Conn`](crate::Conn)
//! is the richer connection (notifications stashed per recipient); this one
//! drops notifications.
//!
//! A reader thread owns the read side, so reads take deadlines; it cuts
//! lines with the client's wire core ([`crate::lines`]), and responses are
//! told from notifications, and matched by id, with the core's reading of
//! a line's envelope (`a2a_client::wire::json`), which never walks a
//! result.

use crate::lines::for_each_line;
use crate::TIMEOUT;
use a2a_client::wire::json::{answer_quick, envelope};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc::{self, Receiver};

/// An NDJSON connection over any byte stream.
pub struct RawConn {
    w: Box<dyn Write + Send>,
    lines: Receiver<String>,
    /// Parsed responses read while waiting for another.
    stash: Vec<Value>,
    next_id: u64,
    /// The handshake's result, once a constructor made it.
    handshake: Value,
    /// A socket connection's stream, to close it (the reader thread holds
    /// a clone, so dropping the writer alone leaves it open).
    sock: Option<UnixStream>,
}

impl RawConn {
    /// Over a writer and a reader (a reader thread splits the lines).
    pub fn over(w: impl Write + Send + 'static, r: impl Read + Send + 'static) -> RawConn {
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            // Lines are the broker's JSON, UTF-8; a line that is not ends
            // the stream as a cut one would (the test then times out
            // naming the wait).
            let _ = for_each_line(r, |line| match std::str::from_utf8(line) {
                Ok(text) => tx.send(text.to_owned()).is_ok(),
                Err(_) => false,
            });
        });
        RawConn {
            w: Box::new(w),
            lines,
            stash: Vec::new(),
            next_id: 0,
            handshake: Value::Null,
            sock: None,
        }
    }

    /// A socket connection, after its handshake with `secret`.
    pub fn socket(path: &Path, secret: &str) -> std::io::Result<RawConn> {
        Self::socket_with(path, secret, Value::Null)
    }

    /// [`RawConn::socket`] asking for an event ring (`{"bytes": N}`; `null`: none).
    pub fn socket_with(path: &Path, secret: &str, event_ring: Value) -> std::io::Result<RawConn> {
        let s = UnixStream::connect(path)?;
        let r = s.try_clone()?;
        let closer = s.try_clone()?;
        let mut c = RawConn::over(s, r);
        c.sock = Some(closer);
        let mut params = json!({"protocolVersion": 10, "secret": secret});
        if !event_ring.is_null() {
            params["eventRing"] = event_ring;
        }
        c.handshake = c.ok("app.handshake", params);
        Ok(c)
    }

    /// Closes a socket connection (both directions) as a client that
    /// leaves does; a no-op on other streams.
    pub fn close(self) {
        if let Some(s) = &self.sock {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// The handshake's result (`null` if this connection made none).
    pub fn handshake_result(&self) -> &Value {
        &self.handshake
    }

    /// Writes one line (the `\n` is added).
    pub fn send_line(&mut self, line: &str) {
        self.w
            .write_all(line.as_bytes())
            .expect("write to the broker");
        self.w.write_all(b"\n").expect("write to the broker");
        self.w.flush().expect("flush to the broker");
    }

    /// Sends a request; returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&line.to_string());
        id
    }

    /// The next line the broker writes, as text.
    pub fn next_line(&mut self) -> String {
        self.lines
            .recv_timeout(TIMEOUT)
            .unwrap_or_else(|e| panic!("no line from the broker within {TIMEOUT:?}: {e}"))
    }

    /// The next response (notifications dropped), with its line's length.
    pub fn next_response_line(&mut self) -> (usize, Value) {
        loop {
            let line = self.next_line();
            if !is_notification(&line) {
                let v = serde_json::from_str(&line).expect("a JSON line");
                return (line.len(), v);
            }
        }
    }

    /// The next response, parsed.
    pub fn next_response(&mut self) -> Value {
        self.next_response_line().1
    }

    /// The response to request `id` (others are kept for later).
    pub fn response(&mut self, id: u64) -> Value {
        if let Some(i) = self.stash.iter().position(|r| r["id"] == id) {
            return self.stash.swap_remove(i);
        }
        loop {
            let r = self.next_response();
            if r["id"] == id {
                return r;
            }
            self.stash.push(r);
        }
    }

    /// The response to request `id` as its raw line, found by its envelope
    /// without parsing its result (every other line read meanwhile is
    /// dropped).
    pub fn raw_response(&mut self, id: u64) -> String {
        loop {
            let line = self.next_line();
            if answer_id(&line) == Some(id) {
                return line;
            }
        }
    }

    /// One call and its response.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.response(id)
    }

    /// One call that must succeed; its result.
    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method}: {r}");
        r["result"].clone()
    }

    /// One call, checked only for success, its reply never parsed.
    pub fn succeeds(&mut self, method: &str, params: Value) -> bool {
        let id = self.request(method, params);
        let line = self.raw_response(id);
        answer_quick(line.as_bytes()).is_some()
    }

    /// Registers an agent; its `(agentId, token)`.
    pub fn register(&mut self, ctx: &str, name: &str) -> (String, String) {
        let r = self.ok(
            "a2a.agents.register",
            json!({"contextId": ctx, "card": {"name": name}}),
        );
        (
            r["agentId"].as_str().expect("agentId").to_owned(),
            r["token"].as_str().expect("token").to_owned(),
        )
    }

    /// A task from the agent with token `token` to the agent `to`; its id.
    pub fn task(&mut self, token: &str, to: &str) -> String {
        let m = json!({"role": "user", "messageId": crate::proto::unique("m"), "to": to,
            "parts": [{"kind": "text", "text": "go"}]});
        let r = self.ok("a2a.message.send", json!({"token": token, "message": m}));
        r["task"]["id"].as_str().expect("task id").to_owned()
    }
}

/// The id of the response `line` is: read quickly where the line has the
/// broker's shape of a success (its result not walked), else from its
/// envelope (an error, a notification: no id).
fn answer_id(line: &str) -> Option<u64> {
    match answer_quick(line.as_bytes()) {
        Some((id, _)) => Some(id),
        None => envelope(line.as_bytes()).ok()?.id,
    }
}

/// A notification: a method and no id (docs/protocol.md §1), found by the
/// core's envelope reading. A success answer is told first, without
/// walking its result.
fn is_notification(line: &str) -> bool {
    if answer_quick(line.as_bytes()).is_some() {
        return false;
    }
    envelope(line.as_bytes()).is_ok_and(|e| e.method.is_some() && e.id_raw.is_none())
}
