//! The broker's local socket in this process, minimal clients of both
//! codecs, and the raw Unix-socket server they are compared with.
//!
//! - [`SocketBroker`]: `server::start` + `transport::socket::listen` on
//!   `<tmp>/run/sock` (the broker creates `run/` 0700 and mints the secret
//!   file beside the socket).
//! - [`Codec`], [`FrameReader`] (from [`crate::frames`]): the two codecs
//!   and whole frames out of a socket, for every reader here (clients and
//!   the raw server alike).
//! - [`Conn`]: one connection: synchronous calls (setup), one-outstanding
//!   round trips, and pipelined streams ([`stream`]).
//! - [`spawn_raw`]: the baseline: a thread answering each request frame
//!   with `fanout` frames of a given size, buffered and flushed when its
//!   input drains.
//! - [`thread_cpu`]: CPU time per thread name of this process, so a run
//!   says which thread (socket tasks, the writer, the client) was busy.

pub use crate::frames::{Codec, FrameReader, Kind};
use crate::stdio::Credit;
use crate::workload::RESPONSE_PREFIX;
use a2a_broker::bench::EventInjector;
use a2a_broker::server::{start, ServeConfig};
use a2a_broker::transport::socket::{listen, SocketServer};
use a2a_broker::{Broker, Durability};
use a2a_proto::binary::{decode_payload, ClientFrame};
use a2a_proto::types::Notification;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufWriter, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest wait for any byte from the broker or the raw server: a stream
/// that lost a frame fails with a message instead of hanging.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The broker in this process, serving its local socket.
pub struct SocketBroker {
    pub broker: Arc<Broker>,
    server: Option<SocketServer>,
    /// The socket file.
    pub path: PathBuf,
    /// What the handshake must present.
    pub secret: String,
    dir: tempfile::TempDir,
}

impl SocketBroker {
    /// Starts a broker on a fresh database and listens on `<tmp>/run/sock`.
    pub fn start(durability: Durability) -> SocketBroker {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = start(&ServeConfig {
            durability,
            ..ServeConfig::new(dir.path().join("bench.db"))
        })
        .expect("start the broker");
        let sock = dir.path().join("run").join("sock");
        let server = listen(
            broker.clone(),
            sock.to_str().expect("utf-8 temp path"),
            a2a_proto::limits::DEFAULT_MAX_CONNECTIONS,
        )
        .expect("listen on the socket");
        let secret = match &server.secret_file {
            Some(f) => std::fs::read_to_string(f).expect("read the minted secret"),
            // A2A_BROKER_SECRET was set in the environment.
            None => std::env::var(a2a_proto::secret::SECRET_ENV).expect("secret"),
        };
        SocketBroker {
            broker,
            path: server.path.clone(),
            server: Some(server),
            secret: secret.trim().to_owned(),
            dir,
        }
    }

    /// `(frames, write calls)` over this broker's socket connections so
    /// far: their ratio is the write coalescing.
    pub fn write_stats(&self) -> (u64, u64) {
        self.server
            .as_ref()
            .map_or((0, 0), SocketServer::write_stats)
    }

    /// `(events staged, futex wake-ups issued, publishes)` over this
    /// broker's event rings so far.
    pub fn ring_wake_stats(&self) -> (u64, u64, u64) {
        self.server
            .as_ref()
            .map_or((0, 0, 0), SocketServer::ring_wake_stats)
    }

    /// A typed client with a requester and a worker registered, and one
    /// task between them to read: the setup of the round-trip benchmarks.
    /// Returns the client (which keeps both agents alive), the requester
    /// and the task's id.
    pub fn task_to_read(&self) -> (a2a_client::Client, a2a_client::Agent, String) {
        use a2a_client::{agent_card, message_to, Delivery};
        let client = a2a_client::Client::connect(&self.path, &self.secret).expect("typed client");
        let req = client
            .register("bench", agent_card("req"), Delivery::Push)
            .expect("register req");
        client
            .register("bench", agent_card("wrk"), Delivery::Push)
            .expect("register wrk");
        let task = req
            .send(message_to("wrk", crate::workload::TASK_TEXT), None)
            .expect("create a task")
            .id;
        (client, req, task)
    }

    /// A directory for the raw servers' sockets, removed with the broker.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }

    /// A new connection of `codec`, handshaken.
    pub fn connect(&self, codec: Codec) -> Conn {
        let mut c = Conn::open(&self.path, codec);
        c.call(
            "app.handshake",
            json!({"protocolVersion": a2a_proto::PROTOCOL_VERSION, "secret": self.secret}),
        );
        c
    }

    /// Stops serving, then stops the writer after its last commit.
    pub fn shutdown(mut self) {
        self.server.take();
        self.broker.shutdown();
    }
}

/// One client connection with a blocking socket.
pub struct Conn {
    pub codec: Codec,
    w: UnixStream,
    r: FrameReader<UnixStream>,
    next_id: u64,
}

impl Conn {
    /// Connects (and, for binary, sends the preamble); no handshake.
    pub fn open(path: &Path, codec: Codec) -> Conn {
        let w = UnixStream::connect(path)
            .unwrap_or_else(|e| panic!("connect to {}: {e}", path.display()));
        w.set_read_timeout(Some(READ_TIMEOUT))
            .expect("read timeout");
        if codec == Codec::Binary {
            (&w).write_all(codec.preamble())
                .expect("write the preamble");
        }
        let r = FrameReader::new(w.try_clone().expect("clone the socket"), codec);
        Conn {
            codec,
            w,
            r,
            next_id: 100,
        }
    }

    /// One request, answered before returning: its `result` (panics on an
    /// error). Notifications met on the way are dropped.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.call_counting(method, params).0
    }

    /// [`Conn::call`], also returning the notifications met before the
    /// response: (result, their count, their bytes on the wire, the last one
    /// as `{"method", "params"}`).
    pub fn call_counting(
        &mut self,
        method: &str,
        params: Value,
    ) -> (Value, usize, usize, Option<Value>) {
        self.next_id += 1;
        let id = self.next_id;
        let req = self.codec.encode(Some(id), method, &params);
        (&self.w).write_all(&req).expect("write request");
        let (mut events, mut bytes, mut last) = (0, 0, None);
        loop {
            let codec = self.codec;
            let frame = self.r.expect_frame();
            match codec.kind(frame) {
                Kind::Notification => {
                    events += 1;
                    bytes += frame.len() + codec.overhead();
                    let v = codec.to_json(frame);
                    last = Some(json!({"method": v["method"], "params": v["params"]}));
                }
                Kind::Fatal => panic!("{method}: fatal frame {}", codec.to_json(frame)),
                Kind::Response => {
                    let v = codec.to_json(frame);
                    if v["id"] != json!(id) {
                        continue;
                    }
                    match v.get("result") {
                        Some(r) => return (r.clone(), events, bytes, last),
                        None => panic!("{method} failed: {v}"),
                    }
                }
            }
        }
    }

    /// Sends `req` and reads frames up to the next response: its wire size.
    pub fn response_len(&mut self, req: &[u8]) -> usize {
        (&self.w).write_all(req).expect("write request");
        loop {
            let codec = self.codec;
            let frame = self.r.expect_frame();
            if codec.kind(frame) == Kind::Response {
                assert!(
                    codec.is_ok_response(frame),
                    "request failed: {}",
                    codec.to_json(frame)
                );
                return frame.len() + codec.overhead();
            }
        }
    }

    /// `n` round trips of `req`, one outstanding: write it, read up to its
    /// response. Panics on a failed response.
    pub fn round_trips(&mut self, req: &[u8], n: u64) -> Duration {
        let codec = self.codec;
        let start = Instant::now();
        for _ in 0..n {
            (&self.w).write_all(req).expect("write request");
            loop {
                let frame = self.r.expect_frame();
                if codec.kind(frame) == Kind::Response {
                    assert!(codec.is_ok_response(frame), "request failed");
                    break;
                }
            }
        }
        start.elapsed()
    }

    /// The socket to write requests to, for a [`stream`] whose requests
    /// go out on this connection.
    pub fn writer(&self) -> &UnixStream {
        &self.w
    }

    /// The frames of this connection, for a [`stream`] read here.
    pub fn reader(&mut self) -> &mut FrameReader<UnixStream> {
        &mut self.r
    }
}

/// What starts the events of a [`stream`]: `send(k)` starts `k` more
/// (each answered by `fanout` notifications), `flush` hands over what is
/// buffered.
pub trait Source: Send {
    fn send(&mut self, k: usize);
    fn flush(&mut self);
}

/// Requests (or, for a raw stream, frames) written to a socket, buffered.
pub struct Requests<'a> {
    out: BufWriter<&'a UnixStream>,
    req: &'a [u8],
}

impl<'a> Requests<'a> {
    pub fn new(w: &'a UnixStream, req: &'a [u8]) -> Self {
        Requests {
            out: BufWriter::with_capacity(64 * 1024, w),
            req,
        }
    }
}

impl Source for Requests<'_> {
    fn send(&mut self, k: usize) {
        for _ in 0..k {
            self.out.write_all(self.req).expect("write request");
        }
    }

    fn flush(&mut self) {
        self.out.flush().expect("flush requests");
    }
}

/// Events delivered straight to a connection, as the writer thread's
/// routing does after a commit, without the writer: what is left is the
/// transport (the connection's writer task encoding and writing).
pub struct Inject {
    pub outbox: Arc<EventInjector>,
    pub event: Arc<Notification>,
}

impl Source for Inject {
    fn send(&mut self, k: usize) {
        for _ in 0..k {
            self.outbox.push((*self.event).clone());
        }
    }

    fn flush(&mut self) {}
}

/// A pipelined stream: `source` starts `n` units, each answered by
/// `fanout` notifications read from `r`, at most `depth` unanswered; the
/// sender runs on its own thread and flushes when it runs out of credit or
/// of units. The reader counts notifications and hands credit back
/// whenever its buffer drains. Returns the time from the first send to the
/// last notification.
pub fn stream(
    mut source: impl Source,
    r: &mut FrameReader<UnixStream>,
    n: u64,
    fanout: u64,
    depth: u64,
) -> Duration {
    let (n, fanout, depth) = (n as usize, fanout.max(1) as usize, depth.max(1) as usize);
    let total = n * fanout;
    let credit = Credit::new();
    let start = Instant::now();
    std::thread::scope(|s| {
        let credit = &credit;
        std::thread::Builder::new()
            .name("bench-send".into())
            .spawn_scoped(s, move || {
                let (mut sent, mut done) = (0, 0);
                while sent < n {
                    if sent - done >= depth {
                        source.flush();
                        done = credit.wait_below(sent, depth);
                        continue;
                    }
                    let k = (depth - (sent - done)).min(n - sent);
                    source.send(k);
                    sent += k;
                    done = credit.done();
                }
                source.flush();
            })
            .expect("spawn the sender");
        let codec = r.codec();
        let (mut got, mut published) = (0, 0);
        while got < total {
            let frame = match r.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => panic!("connection closed after {got} of {total} notifications"),
                Err(e) => panic!("after {got} of {total} notifications: {e}"),
            };
            match codec.kind(frame) {
                Kind::Notification => got += 1,
                k => panic!(
                    "unexpected {k:?} frame in a stream: {}",
                    codec.to_json(frame)
                ),
            }
            let done = got / fanout;
            if done > published && (done - published >= 64 || r.buffered() == 0) {
                credit.publish(done);
                published = done;
            }
        }
        credit.publish(n);
    });
    start.elapsed()
}

/// What the raw server sends back.
#[derive(Debug, Clone, Copy)]
pub struct RawReply {
    pub codec: Codec,
    /// A response (round trips) or notifications (streams).
    pub kind: Kind,
    /// Bytes of each frame on the wire (framing included).
    pub wire_len: usize,
    /// Frames per request.
    pub fanout: usize,
}

impl RawReply {
    /// One reply frame. NDJSON: `{"jsonrpc":"2.0","id":ID,"result":{"pad":"xx…"}}`
    /// or `{"jsonrpc":"2.0","method":"a2a.task.event","params":{"pad":"xx…"}}`;
    /// binary: the `ServerFrame` variant byte (and for a response the id and
    /// the `Ok` tag), then zeros.
    fn frame(&self, id: u64, out: &mut Vec<u8>) {
        let start = out.len();
        match self.codec {
            Codec::Ndjson => {
                match self.kind {
                    Kind::Response => {
                        out.extend_from_slice(RESPONSE_PREFIX);
                        out.extend_from_slice(id.to_string().as_bytes());
                        out.extend_from_slice(b",\"result\":{\"pad\":\"");
                    }
                    _ => out.extend_from_slice(
                        b"{\"jsonrpc\":\"2.0\",\"method\":\"a2a.task.event\",\"params\":{\"pad\":\"",
                    ),
                }
                let tail = b"\"}}\n";
                let pad = self.wire_len.saturating_sub(out.len() - start + tail.len());
                out.resize(out.len() + pad, b'x');
                out.extend_from_slice(tail);
            }
            Codec::Binary => {
                let payload = self.wire_len.saturating_sub(4).max(3);
                out.extend_from_slice(&(payload as u32).to_le_bytes());
                out.resize(out.len() + payload, 0);
                match self.kind {
                    Kind::Response => {
                        assert!(id < 251, "raw binary responses carry one-byte ids");
                        out[start + 5] = id as u8;
                    }
                    _ => out[start + 4] = 1,
                }
            }
        }
    }
}

/// The raw baseline: a thread on its own Unix socket under `dir` that, for
/// each request frame, decodes it the way any server must (NDJSON: a
/// `serde_json::Value`; binary: a `ClientFrame`) and answers with
/// `reply.fanout` frames of `reply.wire_len` bytes. Output is buffered
/// and flushed when the input has drained. Serves one connection, and
/// ends when it closes. Returns the socket path.
pub fn spawn_raw(dir: &Path, name: &str, reply: RawReply) -> PathBuf {
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).expect("bind the raw socket");
    std::thread::Builder::new()
        .name("raw-server".into())
        .spawn(move || {
            let (conn, _) = listener.accept().expect("accept");
            conn.set_read_timeout(Some(Duration::from_secs(600)))
                .expect("read timeout");
            if reply.codec == Codec::Binary {
                let mut pre = [0u8; 6];
                if (&conn).read_exact(&mut pre).is_err() {
                    return;
                }
            }
            let mut r = FrameReader::new(conn.try_clone().expect("clone"), reply.codec);
            let mut w = BufWriter::with_capacity(64 * 1024, &conn);
            let mut frames = Vec::new();
            loop {
                if r.buffered() == 0 && w.flush().is_err() {
                    return;
                }
                let id = match r.next_frame() {
                    Ok(Some(f)) => match reply.codec {
                        Codec::Ndjson => serde_json::from_slice::<Value>(f)
                            .ok()
                            .and_then(|v| v.get("id").and_then(Value::as_u64)),
                        Codec::Binary => match decode_payload::<ClientFrame>(f) {
                            Ok(ClientFrame::Request { id, .. }) => Some(id),
                            _ => None,
                        },
                    },
                    _ => return,
                };
                frames.clear();
                for _ in 0..reply.fanout {
                    reply.frame(id.unwrap_or(0), &mut frames);
                }
                if w.write_all(&frames).is_err() {
                    return;
                }
            }
        })
        .expect("spawn the raw server");
    path
}

/// CPU time (user + system) per thread name in this process so far, from
/// `/proc/self/task/*/stat` (USER_HZ = 100: 10 ms ticks).
pub fn thread_cpu() -> BTreeMap<String, Duration> {
    let mut out: BTreeMap<String, Duration> = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_owned();
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        if let (Some(u), Some(s)) = (ticks(11), ticks(12)) {
            *out.entry(name).or_default() += Duration::from_millis((u + s) * 10);
        }
    }
    out
}

/// `after - before` per thread name (threads that ended are missing from
/// `after` and count as nothing).
pub fn cpu_delta(
    before: &BTreeMap<String, Duration>,
    after: &BTreeMap<String, Duration>,
) -> BTreeMap<String, Duration> {
    after
        .iter()
        .map(|(k, v)| {
            let b = before.get(k).copied().unwrap_or_default();
            (k.clone(), v.saturating_sub(b))
        })
        .filter(|(_, d)| !d.is_zero())
        .collect()
}

/// CPU time (user + system) of this whole process so far, threads that
/// ended included.
pub fn process_cpu() -> Duration {
    crate::stdio::cpu_of("/proc/self/stat")
}

/// Status updates with a message in the replay task's log.
pub const PROGRESS: usize = 200;
/// Requests unanswered in the one-event-per-request streams.
pub const DEPTH: u64 = 256;
/// Resubscribes unanswered in the replay stream (~1 600 events).
pub const REPLAY_DEPTH: u64 = 8;

/// How a stream of events to one receiving agent is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flow {
    /// Pipelined `a2a.tasks.resubscribe` notifications on the receiver's
    /// own connection: one status event each, one call through the writer
    /// thread per event, nothing written to SQLite.
    Resub1,
    /// The same with `afterVersion: 0` on a task with a long log: one call
    /// replays [`PROGRESS`] + 2 logged events and the current status.
    Replay,
    /// A worker on another connection pipelines `working -> working`
    /// status updates (one logged, committed change per event).
    Status,
    /// The resubscribe's event pushed straight into the receiver's outbox
    /// by a bench thread ([`Inject`]): the transport alone.
    Inject,
    /// Raw baseline of `Resub1`, `Status` and `Inject`: one event-sized
    /// frame per request.
    Raw1,
    /// Raw baseline of `Replay`: as many frames of the average size per request.
    RawReplay,
    /// Raw baseline of `Inject`: a bench thread writing event-sized frames
    /// into one end of a socket pair (buffered), no requests.
    RawStream,
}

impl Flow {
    pub const ALL: [Flow; 7] = [
        Flow::Resub1,
        Flow::Replay,
        Flow::Status,
        Flow::Inject,
        Flow::Raw1,
        Flow::RawReplay,
        Flow::RawStream,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Flow::Resub1 => "resub1",
            Flow::Replay => "replay",
            Flow::Status => "status",
            Flow::Inject => "inject",
            Flow::Raw1 => "raw1",
            Flow::RawReplay => "raw-replay",
            Flow::RawStream => "raw-stream",
        }
    }

    pub fn is_broker(self) -> bool {
        matches!(
            self,
            Flow::Resub1 | Flow::Replay | Flow::Status | Flow::Inject
        )
    }

    /// Its raw baseline.
    pub fn raw(self) -> Flow {
        match self {
            Flow::Replay | Flow::RawReplay => Flow::RawReplay,
            Flow::Inject | Flow::RawStream => Flow::RawStream,
            _ => Flow::Raw1,
        }
    }
}

fn message(id: &str, text: &str, to: Option<&str>) -> Value {
    let role = if to.is_some() { "user" } else { "agent" };
    let mut m = json!({"role": role, "parts": [{"kind": "text", "text": text}], "messageId": id});
    if let Some(to) = to {
        m["to"] = to.into();
    }
    m
}

fn token(v: Value) -> String {
    v["token"].as_str().expect("token").to_owned()
}

/// One codec's event streams: a receiving agent on its own connection, a
/// worker on another, their two tasks, the requests of each [`Flow`], the
/// event sizes, and raw servers answering with frames of those sizes.
pub struct EventStreams {
    pub codec: Codec,
    rx: Conn,
    worker: Conn,
    resub1: Vec<u8>,
    replay: Vec<u8>,
    status: Vec<u8>,
    /// Events per replay.
    pub fanout: u64,
    /// Average wire size of a replayed event.
    pub replay_event_len: usize,
    /// Wire size of the event of a resubscribe.
    pub event_len: usize,
    /// Wire size of the event of a status update.
    pub status_event_len: usize,
    raw1: Conn,
    raw_replay: Conn,
    /// The receiver's outbox and its resubscribe event, for [`Flow::Inject`].
    inject: (Arc<EventInjector>, Arc<Notification>),
    /// A socket pair and one event-sized frame, for [`Flow::RawStream`].
    raw_pair: (UnixStream, FrameReader<UnixStream>),
    raw_frame: Vec<u8>,
    /// For [`Flow::Status`]: the requester's and the worker's tokens, the
    /// worker's name, and the status updates the current task has taken.
    /// A task takes at most `A2A_MAX_TASK_LOG` (10 000) changes, after which
    /// its updates are refused (and, as notifications, unanswered): the
    /// flow moves to a fresh task before that, made by a requester on the
    /// receiving connection (a fresh one every 150 tasks: a registration
    /// makes at most 200 sends).
    status_party: (String, String, String),
    status_tasks: u64,
    status_task: String,
    status_used: u64,
}

/// Status updates one task takes in [`Flow::Status`] before a fresh one.
const STATUS_PER_TASK: u64 = 9_000;

impl EventStreams {
    /// Registers `req-<codec>` and `wrk-<codec>` in context
    /// `events-<codec>`, creates two tasks, gives the first [`PROGRESS`]
    /// progress updates, measures one event of each flow (untimed), and
    /// starts the raw servers.
    pub fn setup(sb: &SocketBroker, codec: Codec) -> EventStreams {
        let l = codec.label();
        let mut rx = sb.connect(codec);
        let mut worker = sb.connect(codec);
        let ctx = format!("events-{l}");
        let (rname, wname) = (format!("req-{l}"), format!("wrk-{l}"));
        let rtok = token(rx.call(
            "a2a.agents.register",
            json!({"contextId": ctx, "card": {"name": rname}}),
        ));
        let wtok = token(worker.call(
            "a2a.agents.register",
            json!({"contextId": ctx, "card": {"name": wname}}),
        ));
        let mut tasks = Vec::new();
        for mid in ["m1", "m2"] {
            let created = rx.call(
                "a2a.message.send",
                json!({"token": rtok, "message": message(mid, crate::workload::TASK_TEXT, Some(&wname))}),
            );
            tasks.push(created["task"]["id"].as_str().expect("task id").to_owned());
        }
        let (t1, t2) = (&tasks[0], &tasks[1]);
        for t in [t1, t2] {
            worker.call(
                "a2a.tasks.status",
                json!({"token": wtok, "id": t, "state": "working"}),
            );
        }
        for i in 0..PROGRESS {
            let text = format!("progress {i:04}: parsed src/store/write.rs, checking the callers");
            worker.call(
                "a2a.tasks.status",
                json!({"token": wtok, "id": t1, "state": "working",
                       "message": message(&format!("p{i:04}"), &text, None)}),
            );
        }
        // Drain the setup's events: they were routed before the worker's
        // last response, so they precede this response.
        rx.call("a2a.tasks.get", json!({"token": rtok, "id": t1}));
        let resub = |after: Option<u64>| {
            let mut p = json!({"token": rtok, "id": t1});
            if let Some(a) = after {
                p["afterVersion"] = a.into();
            }
            p
        };
        // Events are routed before the response of the call that made them.
        let (_, n, bytes, _) = rx.call_counting("a2a.tasks.resubscribe", resub(Some(0)));
        let (fanout, replay_event_len) = (n as u64, bytes / n.max(1));
        let (_, n1, event_len, event) = rx.call_counting("a2a.tasks.resubscribe", resub(None));
        assert_eq!(n1, 1, "a resubscribe emits one event");
        let event: Notification =
            serde_json::from_value(event.expect("the event")).expect("a notification");
        let outbox = match EventInjector::for_agent(&sb.broker, &rname) {
            Some(injector) => Arc::new(injector),
            None => panic!("{rname} is not a registered push agent"),
        };
        let status_params = json!({"token": wtok, "id": t2, "state": "working"});
        worker.call("a2a.tasks.status", status_params.clone());
        let (_, n2, status_event_len, _) =
            rx.call_counting("a2a.tasks.get", json!({"token": rtok, "id": t2}));
        assert_eq!(n2, 1, "a status update emits one event to the requester");

        let raw = |name: &str, wire_len: usize, fanout: u64| {
            let path = spawn_raw(
                sb.scratch(),
                &format!("{name}-{l}"),
                RawReply {
                    codec,
                    kind: Kind::Notification,
                    wire_len,
                    fanout: fanout as usize,
                },
            );
            Conn::open(&path, codec)
        };
        EventStreams {
            codec,
            rx,
            worker,
            resub1: codec.encode(None, "a2a.tasks.resubscribe", &resub(None)),
            replay: codec.encode(None, "a2a.tasks.resubscribe", &resub(Some(0))),
            status: codec.encode(None, "a2a.tasks.status", &status_params),
            status_party: (rtok.clone(), wtok.clone(), wname.clone()),
            status_tasks: 0,
            status_task: t2.clone(),
            status_used: 2,
            fanout,
            replay_event_len,
            event_len,
            status_event_len,
            raw1: raw("raw-ev1", event_len, 1),
            raw_replay: raw("raw-replay", replay_event_len, fanout),
            inject: (outbox, Arc::new(event)),
            raw_pair: {
                let (a, b) = UnixStream::pair().expect("socket pair");
                b.set_read_timeout(Some(READ_TIMEOUT))
                    .expect("read timeout");
                (a, FrameReader::new(b, codec))
            },
            raw_frame: {
                let mut f = Vec::new();
                RawReply {
                    codec,
                    kind: Kind::Notification,
                    wire_len: event_len,
                    fanout: 1,
                }
                .frame(0, &mut f);
                f
            },
        }
    }

    /// Completes the status flow's task and gives it a fresh one (untimed).
    fn fresh_status_task(&mut self) {
        self.status_tasks += 1;
        if self.status_tasks % 150 == 0 {
            let l = self.codec.label();
            let k = self.status_tasks / 150;
            self.status_party.0 = token(self.rx.call(
                "a2a.agents.register",
                json!({"contextId": format!("events-{l}"), "card": {"name": format!("req-{l}-s{k}")}}),
            ));
        }
        let (rtok, wtok, wname) = self.status_party.clone();
        self.worker.call(
            "a2a.tasks.status",
            json!({"token": wtok, "id": self.status_task, "state": "completed"}),
        );
        let mid = format!("status-{}", self.status_task);
        let created = self.rx.call(
            "a2a.message.send",
            json!({"token": rtok, "message": message(&mid, crate::workload::TASK_TEXT, Some(&wname))}),
        );
        let id = created["task"]["id"].as_str().expect("task id").to_owned();
        let params = json!({"token": wtok, "id": id, "state": "working"});
        self.worker.call("a2a.tasks.status", params.clone());
        // Drains the events of the moves above (routed before this response).
        self.rx
            .call("a2a.tasks.get", json!({"token": rtok, "id": id}));
        self.status = self.codec.encode(None, "a2a.tasks.status", &params);
        self.status_task = id;
        self.status_used = 1;
    }

    /// Events a run asked for `n` makes (a replay comes whole).
    pub fn events_made(&self, flow: Flow, n: u64) -> u64 {
        match flow {
            Flow::Replay | Flow::RawReplay => n.div_ceil(self.fanout) * self.fanout,
            _ => n,
        }
    }

    /// Streams [`EventStreams::events_made`]`(flow, n)` events to the
    /// receiver (or from the raw server); the time they took.
    pub fn run(&mut self, flow: Flow, n: u64) -> Duration {
        let calls = n.div_ceil(self.fanout);
        let (conn, req, n, fanout, depth) = match flow {
            Flow::Resub1 => (&mut self.rx, &self.resub1, n, 1, DEPTH),
            Flow::Replay => (&mut self.rx, &self.replay, calls, self.fanout, REPLAY_DEPTH),
            Flow::Status => {
                let mut left = n;
                let mut took = Duration::ZERO;
                while left > 0 {
                    if self.status_used >= STATUS_PER_TASK {
                        self.fresh_status_task();
                    }
                    let k = left.min(STATUS_PER_TASK - self.status_used);
                    let source = Requests::new(self.worker.writer(), &self.status);
                    took += stream(source, self.rx.reader(), k, 1, DEPTH);
                    self.status_used += k;
                    left -= k;
                }
                return took;
            }
            Flow::Inject => {
                let source = Inject {
                    outbox: self.inject.0.clone(),
                    event: self.inject.1.clone(),
                };
                return stream(source, self.rx.reader(), n, 1, DEPTH);
            }
            Flow::RawStream => {
                let source = Requests::new(&self.raw_pair.0, &self.raw_frame);
                return stream(source, &mut self.raw_pair.1, n, 1, DEPTH);
            }
            Flow::Raw1 => (&mut self.raw1, &self.resub1, n, 1, DEPTH),
            Flow::RawReplay => (
                &mut self.raw_replay,
                &self.replay,
                calls,
                self.fanout,
                REPLAY_DEPTH,
            ),
        };
        let w = conn.writer().try_clone().expect("clone the socket");
        stream(Requests::new(&w, req), conn.reader(), n, fanout, depth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_frames_have_the_asked_size_and_kind() {
        for codec in [Codec::Ndjson, Codec::Binary] {
            for kind in [Kind::Response, Kind::Notification] {
                let reply = RawReply {
                    codec,
                    kind,
                    wire_len: 300,
                    fanout: 1,
                };
                let mut f = Vec::new();
                reply.frame(7, &mut f);
                assert_eq!(f.len(), 300, "{codec:?} {kind:?}");
                let mut r = FrameReader::new(&f[..], codec);
                let content = r.next_frame().expect("read").expect("a frame");
                assert_eq!(content.len() + codec.overhead(), 300);
                assert_eq!(codec.kind(content), kind);
                if kind == Kind::Response {
                    assert!(codec.is_ok_response(content));
                }
            }
        }
    }

    #[test]
    fn frames_split_across_reads_are_reassembled() {
        /// Hands out its bytes three at a time.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(buf.len()).min(3);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        for codec in [Codec::Ndjson, Codec::Binary] {
            let mut bytes = codec.encode(Some(1), "a2a.tasks.get", &json!({"id": "t"}));
            bytes.extend(codec.encode(None, "a2a.tasks.get", &json!({"id": "u"})));
            let mut r = FrameReader::new(Trickle(&bytes), codec);
            let first = r.next_frame().expect("read").expect("frame").to_vec();
            let second = r.next_frame().expect("read").expect("frame").to_vec();
            assert!(r.next_frame().expect("read").is_none());
            assert_eq!(
                first.len() + second.len() + 2 * codec.overhead(),
                bytes.len()
            );
        }
    }
}
