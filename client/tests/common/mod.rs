//! Harness shared by the client's integration tests: spawns the real
//! `a2a-broker serve --socket PATH --no-stdio` in a fresh temporary
//! directory, waits (with a deadline) for its ready line, reads its secret,
//! and kills it on drop. Also: event collection with deadlines.
//!
//! The binary is `A2A_BROKER_BIN`, else `<dir of the test exe>/../a2a-broker`
//! (built by `cargo build -p a2a-broker`; `cargo test --workspace` builds it).

// Each test file uses a different subset of these helpers.
#![allow(dead_code)]

use a2a_client::proto::binary::ServerFrame;
use a2a_client::proto::types::StreamEvent;
use a2a_client::wire::{Binary, Codec, Framer, Inbound, Ndjson, WireError};
use a2a_client::{Agent, Client, Event, Notification, State};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// Bounds any single expected happening; generous, since it only stops a
/// hang and never measures speed.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// Path of the broker binary under test.
pub fn broker_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("A2A_BROKER_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let bin = exe
        .parent()
        .expect("test exe has a directory")
        .join("..")
        .join("a2a-broker");
    assert!(
        bin.exists(),
        "broker binary not found at {} (run `cargo build -p a2a-broker`, or set A2A_BROKER_BIN)",
        bin.display()
    );
    bin
}

/// A broker child process on a socket, killed on drop.
pub struct Broker {
    pub child: Child,
    /// Holds the database and the socket, when the broker made it; removed
    /// on drop.
    pub dir: Option<tempfile::TempDir>,
    pub socket: PathBuf,
    pub secret: String,
    /// The parsed ready line.
    pub ready: serde_json::Value,
    /// Stderr lines after the ready line (a `Mutex` so that threads can
    /// share the `Broker`).
    pub stderr: std::sync::Mutex<Receiver<String>>,
}

/// How a spawn ended before (or instead of) the ready line.
#[derive(Debug)]
pub struct Failed {
    pub status: Option<ExitStatus>,
    pub stderr: Vec<String>,
}

impl Broker {
    /// A broker at `<tmp>/run/sock` with its minted secret. The broker
    /// creates `run/` itself (0700); the temporary directory's own mode
    /// depends on the umask, which the broker would rightly refuse.
    pub fn start() -> Broker {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("run").join("sock");
        let mut b = Self::spawn_at(&socket, &dir.path().join("db"), &[])
            .unwrap_or_else(|f| panic!("broker did not start: {f:?}"));
        b.dir = Some(dir);
        b
    }

    /// A broker at `socket` on database `db`, with extra environment; the
    /// secret is `A2A_BROKER_SECRET` from `env`, else the minted file.
    pub fn spawn_at(socket: &Path, db: &Path, env: &[(&str, &str)]) -> Result<Broker, Failed> {
        let (child, ready, stderr) = spawn(db, socket, env)?;
        let secret = match env.iter().find(|(k, _)| *k == a2a_client::SECRET_ENV) {
            Some((_, s)) => (*s).to_owned(),
            None => {
                let file = ready["secretFile"]
                    .as_str()
                    .expect("ready line names the secret file");
                std::fs::read_to_string(file).expect("read secret file")
            }
        };
        Ok(Broker {
            child,
            dir: None,
            socket: socket.to_owned(),
            secret,
            ready,
            stderr: std::sync::Mutex::new(stderr),
        })
    }

    pub fn connect(&self) -> Client {
        Client::connect(&self.socket, &self.secret).expect("connect")
    }

    /// Is the child still running?
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// SIGKILLs the broker and reaps it.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill broker");
        self.child.wait().expect("reap broker");
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns `serve` and waits for the ready line (or the child's exit).
pub fn spawn(
    db: &Path,
    socket: &Path,
    env: &[(&str, &str)],
) -> Result<(Child, serde_json::Value, Receiver<String>), Failed> {
    let mut cmd = Command::new(broker_bin());
    cmd.arg("serve")
        .arg("--db")
        .arg(db)
        .arg("--socket")
        .arg(socket)
        .arg("--no-stdio")
        .env_remove(a2a_client::SECRET_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn broker");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    // A thread owns the pipe so that every read has a deadline here; it
    // ends when the child's stderr closes.
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + TIMEOUT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                    if v["ready"] == true {
                        return Ok((child, v, rx));
                    }
                }
                seen.push(line);
            }
            // Stderr closed: the child exited (or is exiting).
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = wait_exit(&mut child, TIMEOUT);
                return Err(Failed {
                    status,
                    stderr: seen,
                });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no ready line within {TIMEOUT:?}; stderr: {seen:?}");
            }
        }
    }
}

/// Waits for a child's exit with a deadline (killing it if it passes).
pub fn wait_exit(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        // Polling an exit status: a short pause between checks, bounded by
        // the deadline above.
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Collects `agent`'s events until `enough` says the collection is
/// complete; panics at the deadline with what it saw.
pub fn collect_until(agent: &Agent, enough: impl Fn(&[Event]) -> bool) -> Vec<Event> {
    let deadline = Instant::now() + TIMEOUT;
    let mut got = Vec::new();
    while !enough(&got) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "agent {} timed out waiting; got {got:#?}",
            agent.id()
        );
        got.extend(agent.wait(left).expect("wait"));
    }
    got
}

/// Collects exactly `n` events (fails if more are already there).
pub fn collect_n(agent: &Agent, n: usize) -> Vec<Event> {
    let got = collect_until(agent, |evs| evs.len() >= n);
    assert_eq!(got.len(), n, "more events than expected: {got:#?}");
    got
}

/// Asserts that no event is queued for `agent` right now (a short wait).
pub fn assert_quiet(agent: &Agent) {
    let evs = agent.wait(Duration::from_millis(50)).expect("wait");
    assert!(
        evs.is_empty(),
        "unexpected events for {}: {evs:#?}",
        agent.id()
    );
}

/// The status update inside a task event: (task id, state, final).
pub fn status_of(ev: &Event) -> Option<(&str, State, bool)> {
    match ev {
        Notification::TaskEvent(p) => match &p.event {
            StreamEvent::Status(s) => Some((s.task_id.as_str(), s.status.state, s.is_final)),
            StreamEvent::Artifact(_) => None,
        },
        _ => None,
    }
}

/// The recipient of an event.
pub fn recipient(ev: &Event) -> &str {
    ev.recipient().0
}

/// A raw socket connection for tests that must misbehave or look at the
/// bytes: binary frames or NDJSON lines, every read bounded by `TIMEOUT`.
pub struct Raw {
    pub stream: std::os::unix::net::UnixStream,
    /// The wire core's framers: a connection uses one of them.
    frames: Framer<Binary>,
    lines: Framer<Ndjson>,
}

impl Raw {
    pub fn connect(socket: &Path) -> Raw {
        let stream = std::os::unix::net::UnixStream::connect(socket).expect("connect raw");
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(TIMEOUT)).unwrap();
        Raw {
            stream,
            frames: Framer::new(),
            lines: Framer::new(),
        }
    }

    /// Writes the binary preamble.
    pub fn preamble(&mut self) {
        use std::io::Write;
        self.stream
            .write_all(&a2a_client::proto::binary::preamble())
            .unwrap();
    }

    /// Writes one binary frame.
    pub fn send(&mut self, frame: &a2a_client::proto::binary::ClientFrame) -> std::io::Result<()> {
        use std::io::Write;
        let mut bytes = Vec::new();
        a2a_client::proto::binary::encode_frame(frame, &mut bytes).unwrap();
        self.stream.write_all(&bytes)
    }

    /// Writes one NDJSON line.
    pub fn send_line(&mut self, v: &serde_json::Value) {
        use std::io::Write;
        self.stream.write_all(format!("{v}\n").as_bytes()).unwrap();
    }

    /// Reads more bytes into `room`; how many (0 at end of stream).
    /// Panics on timeout.
    fn fill(stream: &mut std::os::unix::net::UnixStream, room: &mut [u8]) -> usize {
        use std::io::Read;
        match stream.read(room) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => 0,
            Err(e) => panic!("raw read: {e}"),
        }
    }

    /// The next binary frame, or `None` at end of stream.
    pub fn recv(&mut self) -> Option<ServerFrame> {
        loop {
            match self.frames.next_frame().expect("frame") {
                Some(frame) => {
                    return Some(match Binary::decode(frame) {
                        Ok(Inbound::Answer { id, result }) => ServerFrame::Response { id, result },
                        Ok(Inbound::Event(n)) => ServerFrame::Notification(n),
                        Err(WireError::Fatal(e)) => ServerFrame::Fatal(e),
                        Err(e) => panic!("decode frame: {e}"),
                    })
                }
                None => {
                    let n = Self::fill(&mut self.stream, self.frames.read_buf(64 * 1024));
                    if n == 0 {
                        assert_eq!(self.frames.buffered(), 0, "torn frame at end of stream");
                        return None;
                    }
                    self.frames.filled(n);
                }
            }
        }
    }

    /// The next NDJSON line, or `None` at end of stream.
    pub fn recv_line(&mut self) -> Option<serde_json::Value> {
        loop {
            if let Some(line) = self.lines.next_frame().expect("line") {
                return Some(serde_json::from_slice(line).expect("json line"));
            }
            let n = Self::fill(&mut self.stream, self.lines.read_buf(64 * 1024));
            if n == 0 {
                assert_eq!(self.lines.buffered(), 0, "torn line at end of stream");
                return None;
            }
            self.lines.filled(n);
        }
    }
}

/// The binary handshake request.
pub fn handshake_frame(id: u64, secret: Option<&str>) -> a2a_client::proto::binary::ClientFrame {
    use a2a_client::proto::call::Call;
    use a2a_client::proto::params::HandshakeParams;
    a2a_client::proto::binary::ClientFrame::Request {
        id,
        call: Call::Handshake(HandshakeParams {
            protocol_version: 10,
            client: None,
            client_version: None,
            locale: None,
            secret: secret.map(str::to_owned),
            event_ring: None,
        }),
    }
}
