//! `SendMessage` through the gateway against the same call on the broker's
//! socket, paired in one run (BENCHMARKS.md, "A2A gateway").
//!
//! One broker child (release build), one worker agent that completes each
//! task at once (the TCK SUT's `tck-complete-task` behaviour), and the
//! gateway as a child process (`a2a-gateway serve`, so it can be profiled
//! alone). Three ways to make the same blocking send that comes back with
//! the completed task:
//! - `socket`: `a2a-client` on the broker's socket (`a2a.message.send`,
//!   `blocking: true`), the baseline;
//! - `http-ctx`: gateway `SendMessage` in a reused A2A context (the
//!   context's broker registration amortised);
//! - `http-new`: gateway `SendMessage` without a `contextId` (each call a
//!   new context: a registration plus the send);
//! - `http-raw`: the floor of an HTTP hop in front of the broker, the raw
//!   baseline of the other two: this example run again as a child process
//!   (`--raw-proxy`), an axum server on a 2-thread runtime (the gateway's
//!   on this machine) with `TCP_NODELAY`, that parses each request's
//!   JSON, makes the blocking send on the gateway's own broker connection
//!   (`a2a_gateway::BrokerConn`, driven on the runtime) and answers the task as
//!   JSON, and does nothing else (no identity, context, state file, v1.0
//!   translation or audit).
//! - `http-inproc` (with `--inproc`): the floor of an HTTP front inside
//!   the broker's own process. The broker of every mode is then this
//!   example run again as a child (`--inproc-broker DB SOCKET`: the broker
//!   library, its socket, where the worker, the baseline, the gateway and
//!   the raw proxy connect) with the raw proxy's HTTP server on its
//!   runtime, calling the broker's dispatch directly
//!   (`a2a_broker::bench::InProcessConn`): no socket hop, no process hop.
//!
//! Phase 1 interleaves single calls of the modes (one in flight) for the
//! latency percentiles; phase 2 runs `--concurrency` callers per mode,
//! modes alternating in slices, for requests per second. With `--perf
//! MODE`, `perf record` samples the mode's HTTP front (the gateway, or the
//! raw proxy) during the first phase-2 slice of that mode (into `/tmp/a2a-gateway.perf.data`). With
//! `--modes socket,http-ctx` only those modes run (the first is the base
//! of the ratios). After phase 2, each mode's CPU per call of the gateway,
//! the broker and this process (callers and worker), from their
//! `/proc/PID/stat` (utime + stime) around that mode's slices.
//!
//! ```text
//! cargo build --release -p a2a-cli -p a2a-gateway --examples
//! target/release/examples/send_bench --rounds 2000 --concurrency 16
//! ```

mod bench;
/// The binary's TCK harness (a broker child, the SUT agent), shared.
#[allow(dead_code)]
#[path = "../src/tck/harness.rs"]
mod tck;

use a2a_client::{message_to, Agent, Client, Delivery, State};
use bench::{blocking, cpu_of, exe_dir, pct, post, print_rates, serve_front, SENDS_PER_REQUESTER};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Socket,
    HttpCtx,
    HttpNew,
    HttpRaw,
    HttpInproc,
}

const MODES: [Mode; 5] = [
    Mode::Socket,
    Mode::HttpCtx,
    Mode::HttpNew,
    Mode::HttpRaw,
    Mode::HttpInproc,
];

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Socket => "socket",
            Mode::HttpCtx => "http-ctx",
            Mode::HttpNew => "http-new",
            Mode::HttpRaw => "http-raw",
            Mode::HttpInproc => "http-inproc",
        }
    }
}

struct Args {
    rounds: usize,
    concurrency: usize,
    slice: Duration,
    slices: usize,
    /// The mode whose first phase-2 slice `perf record` samples.
    perf: Option<Mode>,
    /// The modes run, the first the base of the ratios.
    modes: Vec<Mode>,
    /// The broker is this example's in-process one (`http-inproc`).
    inproc: bool,
}

impl Mode {
    fn parse(s: &str) -> Option<Mode> {
        MODES.into_iter().find(|m| m.name() == s)
    }
}

fn args() -> Args {
    let mut a = Args {
        rounds: 2000,
        concurrency: 16,
        slice: Duration::from_secs(2),
        slices: 3,
        perf: None,
        modes: MODES[..4].to_vec(),
        inproc: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut num = || it.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        match k.as_str() {
            "--rounds" => a.rounds = num() as usize,
            "--concurrency" => a.concurrency = num().max(1) as usize,
            "--slice-ms" => a.slice = Duration::from_millis(num()),
            "--slices" => a.slices = num().max(1) as usize,
            "--inproc" => a.inproc = true,
            "--perf" => {
                a.perf = match it.next().as_deref().and_then(Mode::parse) {
                    Some(m) => Some(m),
                    None => {
                        eprintln!(
                            "--perf takes socket, http-ctx, http-new, http-raw or http-inproc"
                        );
                        None
                    }
                }
            }
            "--modes" => {
                let list = it.next().unwrap_or_default();
                let modes: Vec<Mode> = list.split(',').filter_map(Mode::parse).collect();
                if modes.is_empty() || modes.len() != list.split(',').count() {
                    eprintln!(
                        "--modes takes a list of socket, http-ctx, http-new, http-raw, http-inproc (with --inproc): {list:?}"
                    );
                    std::process::exit(2);
                }
                a.modes = modes;
            }
            other => eprintln!("ignored argument {other}"),
        }
    }
    a
}

/// A message to the TCK SUT worker that it completes at once (its
/// gateway `messageId`, as a forwarded one carries it, picks the
/// behaviour: `tck::plan`).
fn complete_task_message(worker: &str, text: &str) -> a2a_client::Message {
    let mut m = message_to(worker, text);
    m.metadata = Some(
        match json!({"a2a-gateway": {"messageId": "tck-complete-task-bench"}}) {
            Value::Object(o) => o.into(),
            _ => unreachable!(),
        },
    );
    m
}

/// The socket baseline's requester, re-registered before the broker's
/// per-registration send bound (registration not timed).
struct SocketSide {
    client: Client,
    agent: Agent,
    sent: u32,
    worker: String,
    n: u64,
}

impl SocketSide {
    fn rotate(&mut self) {
        self.n += 1;
        let mut card = a2a_client::agent_card(&format!("bench-req-{}", self.n));
        card.kind = None;
        self.agent = self
            .client
            .register(&format!("bench-{}", self.n), card, Delivery::Push)
            .expect("register requester");
        self.sent = 0;
    }

    async fn send(&mut self) -> Duration {
        if self.sent >= SENDS_PER_REQUESTER {
            self.rotate();
        }
        self.sent += 1;
        let m = complete_task_message(&self.worker, "bench");
        let t = Instant::now();
        let task = self
            .agent
            .send_async(m, blocking())
            .expect("submit")
            .await
            .expect("send");
        let d = t.elapsed();
        assert_eq!(task.status.state, State::Completed);
        d
    }
}

/// The gateway side: HTTP SendMessage, in a reused context (rotated before
/// the send bound) or a new one per call.
struct HttpSide {
    http: reqwest::Client,
    url: String,
    /// The raw proxy's URL (`http-raw`).
    raw_url: String,
    inproc_url: String,
    ctx_sent: u32,
    ctx: String,
}

static CTX_N: AtomicU64 = AtomicU64::new(0);

impl HttpSide {
    async fn send(&mut self, mode: Mode) -> Duration {
        let mut msg = json!({"messageId": "tck-complete-task-bench", "role": "ROLE_USER", "parts": [{"text": "bench"}]});
        if mode == Mode::HttpCtx {
            if self.ctx_sent >= SENDS_PER_REQUESTER || self.ctx.is_empty() {
                self.ctx = format!("bench-ctx-{}", CTX_N.fetch_add(1, Ordering::Relaxed));
                self.ctx_sent = 0;
            }
            self.ctx_sent += 1;
            msg["contextId"] = json!(self.ctx);
        }
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": msg}});
        let url = match mode {
            Mode::HttpRaw => &self.raw_url,
            Mode::HttpInproc => &self.inproc_url,
            _ => &self.url,
        };
        let t = Instant::now();
        let r = post(&self.http, url, &body).await;
        let d = t.elapsed();
        assert_eq!(
            r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{r}"
        );
        d
    }
}

fn spawn_gateway(
    bin: &std::path::Path,
    socket: &std::path::Path,
    secret: &str,
    agent: &str,
) -> (Child, String) {
    let args = ["--listen", "127.0.0.1:0", "--rate", "0", "--expose", agent];
    bench::gateway_proc::spawn_serve(bin, socket, secret, args, &[], false)
}

/// Phase 1's table: each mode's percentiles, and its p50 against the socket's.
fn report_latency(rounds: usize, modes: &[Mode], lat: &[Vec<Duration>; 5]) {
    println!("phase 1: {} paired rounds, one call in flight", rounds);
    println!("mode       p50_us   p99_us   mean_us  calls/s(1 in flight)");
    let base_p50;
    {
        let mut s = lat[modes[0] as usize].clone();
        s.sort();
        base_p50 = pct(&s, 0.5);
    }
    for &m in modes {
        let mut s = lat[m as usize].clone();
        s.sort();
        let mean = s.iter().map(Duration::as_secs_f64).sum::<f64>() / s.len() as f64;
        println!(
            "{:<9} {:>8.0} {:>8.0} {:>9.0} {:>10.0}   p50 x{:.2} of {}",
            m.name(),
            pct(&s, 0.5),
            pct(&s, 0.99),
            mean * 1e6,
            1.0 / mean,
            pct(&s, 0.5) / base_p50,
            modes[0].name()
        );
    }
}

/// The CPU of the HTTP front (the gateway, or the raw proxy), the broker
/// and this process, read together.
fn cpu_now(front: u32, broker: u32) -> [Duration; 3] {
    [cpu_of(front), cpu_of(broker), cpu_of(std::process::id())]
}

/// `perf record -g` of the mode's HTTP front (`--perf MODE`: the gateway,
/// or the raw proxy), into /tmp/a2a-gateway.perf.data.
fn start_perf(pid: u32) -> Option<Child> {
    Command::new("perf")
        .args([
            "record",
            "-F",
            "2000",
            "-g",
            "-o",
            "/tmp/a2a-gateway.perf.data",
            "-p",
        ])
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}

/// What a phase-2 caller needs to reach the broker and the gateway.
struct Target {
    url: String,
    raw_url: String,
    inproc_url: String,
    http: reqwest::Client,
    socket: PathBuf,
    secret: String,
    worker: String,
}

/// One phase-2 caller: blocking sends in `m`'s way until `end`, each
/// counted.
async fn call_until(m: Mode, t: Target, n: u64, end: Instant, count: Arc<AtomicU64>) {
    match m {
        Mode::Socket => {
            let client = Client::connect(&t.socket, &t.secret).expect("connect");
            let agent = client
                .register(
                    &format!("bench-{n}"),
                    a2a_client::agent_card(&format!("bench-req-{n}")),
                    Delivery::Push,
                )
                .expect("register");
            let mut s = SocketSide {
                client,
                agent,
                sent: 0,
                worker: t.worker,
                n: n * 1000,
            };
            while Instant::now() < end {
                s.send().await;
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        m => {
            let mut h = HttpSide {
                http: t.http,
                url: t.url,
                raw_url: t.raw_url,
                inproc_url: t.inproc_url,
                ctx_sent: 0,
                ctx: String::new(),
            };
            while Instant::now() < end {
                h.send(m).await;
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Phase 1: a warm-up, then `rounds` paired single calls of every mode,
/// the order rotated each round; each mode's latencies.
async fn phase1(a: &Args, sock: &mut SocketSide, hs: &mut HttpSide) -> [Vec<Duration>; 5] {
    // Warm-up.
    for _ in 0..50 {
        for &m in &a.modes {
            match m {
                Mode::Socket => drop(sock.send().await),
                m => drop(hs.send(m).await),
            }
        }
    }
    // Phase 1: paired single calls, order rotated each round.
    let mut lat: [Vec<Duration>; 5] = Default::default();
    let n = a.modes.len();
    for i in 0..a.rounds {
        for k in 0..n {
            let mode = a.modes[(i + k) % n];
            let d = match mode {
                Mode::Socket => sock.send().await,
                m => hs.send(m).await,
            };
            lat[mode as usize].push(d);
        }
    }
    lat
}

/// Phase 2's tables: calls per second per mode, and the CPU per call of
/// the gateway, the broker and this process.
fn report_phase2(a: &Args, total: &[(u64, Duration); 5], cpu: &[[Duration; 3]; 5]) {
    println!(
        "phase 2: {} callers per mode, {} slices of {:?} per mode, alternating",
        a.concurrency, a.slices, a.slice
    );
    let rows: Vec<_> = a
        .modes
        .iter()
        .map(|&m| (m.name(), total[m as usize].0, total[m as usize].1))
        .collect();
    print_rates(&rows, 9, "calls", a.modes[0].name());
    println!(
        "CPU per call in phase 2 (utime+stime, us): gateway (for http-raw the raw proxy; http-inproc's front is in the broker), broker, bench (callers+worker)"
    );
    for &m in &a.modes {
        let calls = total[m as usize].0.max(1) as f64;
        let per = |d: Duration| d.as_secs_f64() * 1e6 / calls;
        let [g, b, own] = cpu[m as usize];
        println!(
            "{:<9} gateway {:>6.0}  broker {:>6.0}  bench {:>6.0}  all {:>6.0}",
            m.name(),
            per(g),
            per(b),
            per(own),
            per(g + b + own)
        );
    }
}

/// The broker every mode talks to: an `a2a-broker` child, or with
/// `--inproc` this example's in-process one (which adds `http-inproc`).
enum BrokerUnderTest {
    Child(tck::BrokerChild),
    Inproc(inproc::InprocBroker),
}

impl BrokerUnderTest {
    fn start(a: &mut Args, dir: &std::path::Path) -> BrokerUnderTest {
        if a.modes.contains(&Mode::HttpInproc) && !a.inproc {
            eprintln!("http-inproc runs with --inproc only");
            std::process::exit(2);
        }
        if !a.inproc {
            return BrokerUnderTest::Child(
                tck::spawn_broker(&dir.join("a2a-broker")).expect("broker"),
            );
        }
        if !a.modes.contains(&Mode::HttpInproc) {
            a.modes.push(Mode::HttpInproc);
        }
        BrokerUnderTest::Inproc(inproc::spawn())
    }

    fn socket(&self) -> PathBuf {
        match self {
            BrokerUnderTest::Child(b) => b.socket.clone(),
            BrokerUnderTest::Inproc(b) => b.home.socket.clone(),
        }
    }

    fn secret(&self) -> String {
        match self {
            BrokerUnderTest::Child(b) => b.secret.clone(),
            BrokerUnderTest::Inproc(b) => b.home.secret.clone(),
        }
    }

    fn pid(&self) -> u32 {
        match self {
            BrokerUnderTest::Child(b) => b.pid(),
            BrokerUnderTest::Inproc(b) => b.child.id(),
        }
    }

    /// The in-process front's URL (empty for a child broker).
    fn inproc_url(&self) -> String {
        match self {
            BrokerUnderTest::Child(_) => String::new(),
            BrokerUnderTest::Inproc(b) => b.url.clone(),
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().nth(1).as_deref() == Some("--raw-proxy") {
        return raw_proxy::run().await;
    }
    if std::env::args().nth(1).as_deref() == Some("--inproc-broker") {
        return inproc::run().await;
    }
    let mut a = args();
    let dir = exe_dir();
    let mut broker = BrokerUnderTest::start(&mut a, &dir);
    let (socket, secret, broker_pid) = (broker.socket(), broker.secret(), broker.pid());
    let inproc_url = broker.inproc_url();
    let worker_client = Client::connect(&socket, &secret).expect("connect");
    let worker = tck::register_sut(&worker_client).expect("worker");
    if let BrokerUnderTest::Inproc(b) = &mut broker {
        b.set_worker(worker.id());
    }
    let (mut gw, addr) = spawn_gateway(&dir.join("a2a-gateway"), &socket, &secret, worker.id());
    let url = format!("http://{addr}/agents/{}", worker.id());
    println!("gateway pid {} at {url}", gw.id());
    let (mut raw, raw_url) = raw_proxy::spawn(&socket, &secret, worker.id());

    let client = Client::connect(&socket, &secret).expect("connect");
    let agent = client
        .register(
            "bench-0",
            a2a_client::agent_card("bench-req-0"),
            Delivery::Push,
        )
        .expect("register");
    let mut sock = SocketSide {
        client,
        agent,
        sent: 0,
        worker: worker.id().to_owned(),
        n: 0,
    };
    let http = reqwest::Client::builder().no_proxy().build().expect("http");
    let mut hs = HttpSide {
        http: http.clone(),
        url: url.clone(),
        raw_url: raw_url.clone(),
        inproc_url: inproc_url.clone(),
        ctx_sent: 0,
        ctx: String::new(),
    };

    let lat = phase1(&a, &mut sock, &mut hs).await;
    report_latency(a.rounds, &a.modes, &lat);

    // Phase 2: throughput with `concurrency` callers, modes alternating.
    let mut total = [(0u64, Duration::ZERO); 5];
    // Per mode: CPU of the gateway, the broker, this process.
    let mut cpu = [[Duration::ZERO; 3]; 5];
    let mut perf: Option<Child> = None;
    for slice in 0..a.slices {
        for &m in &a.modes {
            // The HTTP front: the gateway, or the raw proxy.
            // (`http-inproc`'s front is the broker: counted there, once.)
            let front = match m {
                Mode::HttpRaw => raw.id(),
                Mode::HttpInproc => 0,
                _ => gw.id(),
            };
            if a.perf == Some(m) && slice == 0 {
                perf = start_perf(if front == 0 { broker_pid } else { front });
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            let count = Arc::new(AtomicU64::new(0));
            let end = Instant::now() + a.slice;
            let cpu0 = cpu_now(front, broker_pid);
            let t0 = Instant::now();
            let mut joins = Vec::new();
            for c in 0..a.concurrency {
                let target = Target {
                    url: url.clone(),
                    raw_url: raw_url.clone(),
                    inproc_url: inproc_url.clone(),
                    http: http.clone(),
                    socket: socket.clone(),
                    secret: secret.clone(),
                    worker: worker.id().to_owned(),
                };
                let n = 1000 + slice as u64 * 1000 + c as u64;
                joins.push(tokio::spawn(call_until(m, target, n, end, count.clone())));
            }
            for j in joins {
                j.await.expect("caller");
            }
            let el = t0.elapsed();
            let cpu1 = cpu_now(front, broker_pid);
            for p in 0..3 {
                cpu[m as usize][p] += cpu1[p].saturating_sub(cpu0[p]);
            }
            total[m as usize].0 += count.load(Ordering::Relaxed);
            total[m as usize].1 += el;
            if a.perf == Some(m) {
                if let Some(mut p) = perf.take() {
                    // SIGINT makes perf write its data and exit.
                    let _ = Command::new("kill")
                        .args(["-INT", &p.id().to_string()])
                        .status();
                    let _ = p.wait();
                }
            }
        }
    }
    report_phase2(&a, &total, &cpu);
    for child in [&mut gw, &mut raw] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Runs this example again with `args` (`--raw-proxy`, `--inproc-broker`:
/// an HTTP front), the broker's secret in its environment: the child, and
/// the front's URL from the first line it prints.
fn spawn_front(args: &[&std::ffi::OsStr], secret: &str, stdin: Stdio) -> (Child, String) {
    let mut child = Command::new(std::env::current_exe().expect("exe"))
        .args(args)
        .env(a2a_client::SECRET_ENV, secret)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn an HTTP front");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut addr = String::new();
    out.read_line(&mut addr).expect("the front's address");
    (child, format!("http://{}/", addr.trim()))
}

/// A raw front's request: the JSON-RPC request, and the text its message
/// carries (the worker's behaviour).
fn front_request(body: &[u8]) -> (Value, String) {
    let req: Value = serde_json::from_slice(body).unwrap_or_default();
    let text = req["params"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (req, text)
}

/// A raw front's answer to `req`: the task (a completed one's state in the
/// v1.0 name the bench checks), or the error.
fn front_answer(req: &Value, task: Result<Value, String>) -> axum::Json<Value> {
    axum::Json(match task {
        Ok(mut t) => {
            if t["status"]["state"] == "completed" {
                t["status"]["state"] = json!("TASK_STATE_COMPLETED");
            }
            json!({"jsonrpc": "2.0", "id": req["id"], "result": {"task": t}})
        }
        Err(message) => {
            json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32603, "message": message}})
        }
    })
}

/// A raw front's listener on a free loopback port, its address printed as
/// the first line on stdout (what [`spawn_front`] reads).
async fn bind_front() -> tokio::net::TcpListener {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    println!("{}", listener.local_addr().expect("addr"));
    listener
}

/// A raw front's requester, registered again (by `renew`) before the
/// broker's per-registration send bound, as the gateway does.
struct Rotating<T> {
    current: tokio::sync::Mutex<(T, u32)>,
}

impl<T: Clone> Rotating<T> {
    fn new(first: T) -> Self {
        Rotating {
            current: tokio::sync::Mutex::new((first, 0)),
        }
    }

    /// The requester for the next send.
    async fn next<F: std::future::Future<Output = T>>(&self, renew: impl FnOnce() -> F) -> T {
        let mut r = self.current.lock().await;
        if r.1 >= SENDS_PER_REQUESTER {
            *r = (renew().await, 0);
        }
        r.1 += 1;
        r.0.clone()
    }
}

/// `http-raw`'s server: the least an HTTP front of the broker does.
mod raw_proxy {
    use super::{
        bind_front, blocking, complete_task_message, front_answer, front_request, serve_front,
        Rotating,
    };
    use a2a_client::ClientOptions;
    use a2a_gateway::{BrokerAddr, BrokerConn, Peer};
    use axum::extract::State as Shared;
    use serde_json::Value;
    use std::process::{Child, Stdio};
    use std::sync::Arc;

    /// Starts this example again as the proxy of the broker at `socket`
    /// for `worker`: the child and its URL.
    pub fn spawn(socket: &std::path::Path, secret: &str, worker: &str) -> (Child, String) {
        let args = ["--raw-proxy".as_ref(), socket.as_os_str(), worker.as_ref()];
        super::spawn_front(&args, secret, Stdio::null())
    }

    struct Proxy {
        conn: BrokerConn,
        worker: String,
        requester: Rotating<Arc<Peer>>,
    }

    /// A requester of its own context, its events dropped (the blocking
    /// send's answer carries the task).
    async fn register(conn: &BrokerConn) -> Arc<Peer> {
        let n = format!("raw-{}", uuid::Uuid::new_v4().simple());
        let peer = conn
            .register(&n, a2a_client::agent_card(&n), Arc::new(|_| {}))
            .await
            .expect("register");
        Arc::new(peer)
    }

    /// `--raw-proxy SOCKET WORKER`: serves until killed; its address is
    /// the first line on stdout.
    pub async fn run() {
        let mut it = std::env::args().skip(2);
        let (socket, worker) = (it.next().expect("socket"), it.next().expect("worker"));
        let secret = std::env::var(a2a_client::SECRET_ENV).expect("secret");
        let conn = BrokerConn::connect(&BrokerAddr {
            socket: socket.into(),
            secret,
            options: ClientOptions {
                client_name: "raw-proxy".into(),
                ..ClientOptions::default()
            },
        })
        .await
        .expect("connect");
        let first = register(&conn).await;
        let proxy = Arc::new(Proxy {
            conn,
            worker,
            requester: Rotating::new(first),
        });
        let app = axum::Router::new()
            .route("/", axum::routing::post(send))
            .with_state(proxy);
        serve_front(bind_front().await, app).await;
    }

    /// One JSON-RPC request in, one blocking send, the task out.
    async fn send(Shared(p): Shared<Arc<Proxy>>, body: axum::body::Bytes) -> axum::Json<Value> {
        let (req, text) = front_request(&body);
        let m = complete_task_message(&p.worker, &text);
        let agent = p.requester.next(|| register(&p.conn)).await;
        let task = match agent.send(m, blocking(), None).await {
            Ok(task) => Ok(serde_json::to_value(&task).unwrap_or_default()),
            Err(e) => Err(e.to_string()),
        };
        front_answer(&req, task)
    }
}

/// `http-inproc`'s server: an HTTP front inside the broker's own process,
/// calling its dispatch without a socket hop
/// (`a2a_broker::bench::InProcessConn`). With `--inproc`, the broker of
/// every mode is this example run again as `--inproc-broker DB SOCKET`: the
/// broker library, its socket (the worker, the socket baseline, the
/// gateway and the raw proxy connect there) and the HTTP front.
mod inproc {
    use super::{
        bind_front, blocking, complete_task_message, front_answer, front_request, serve_front,
        Rotating,
    };
    use crate::tck::BrokerHome;
    use a2a_broker::bench::InProcessConn;
    use a2a_proto::call::Call;
    use a2a_proto::params::{RegisterParams, SendParams};
    use axum::extract::State as Shared;
    use serde_json::Value;
    use std::path::PathBuf;
    use std::process::{Child, Stdio};
    use std::sync::Arc;

    pub struct InprocBroker {
        pub child: Child,
        pub home: BrokerHome,
        pub url: String,
    }

    impl Drop for InprocBroker {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    pub fn spawn() -> InprocBroker {
        let home = BrokerHome::new().expect("a home for the broker");
        let args = [
            "--inproc-broker".as_ref(),
            home.db.as_os_str(),
            home.socket.as_os_str(),
        ];
        let (child, url) = super::spawn_front(&args, &home.secret, Stdio::piped());
        InprocBroker { child, home, url }
    }

    struct Front {
        conn: Arc<InProcessConn>,
        worker: String,
        /// The requester's token.
        requester: Rotating<String>,
    }

    async fn register(conn: &InProcessConn) -> String {
        let n = format!("inproc-{}", uuid::Uuid::new_v4().simple());
        let r = conn
            .call(Call::Register(RegisterParams {
                context_id: n.clone(),
                card: a2a_client::agent_card(&n),
                delivery: None,
                hidden: false,
            }))
            .await
            .expect("register");
        r["token"].as_str().expect("token").to_owned()
    }

    impl InprocBroker {
        /// Tells the front which worker its sends go to (the worker
        /// registers on the broker's socket once the broker runs).
        pub fn set_worker(&mut self, worker: &str) {
            use std::io::Write;
            let mut stdin = self.child.stdin.take().expect("stdin");
            writeln!(stdin, "{worker}").expect("the worker's id to the front");
        }
    }

    /// `--inproc-broker DB SOCKET`: the broker, its HTTP front's address as
    /// the first line on stdout, the worker's id read as the first line of
    /// stdin; serves until killed.
    pub async fn run() {
        let mut it = std::env::args().skip(2);
        let (db, socket) = (it.next().expect("db"), it.next().expect("socket"));
        let mut cfg = a2a_broker::server::ServeConfig::new(PathBuf::from(db));
        cfg.durability = a2a_broker::Durability::Normal;
        let broker = a2a_broker::server::start(&cfg).expect("start");
        let _server =
            a2a_broker::transport::socket::listen(broker.clone(), &socket, 256).expect("listen");
        let conn = InProcessConn::open(broker.clone());
        let first = register(&conn).await;
        let listener = bind_front().await;
        let worker = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .expect("the worker's id");
            line.trim().to_owned()
        })
        .await
        .expect("stdin");
        let front = Arc::new(Front {
            conn,
            worker,
            requester: Rotating::new(first),
        });
        let app = axum::Router::new()
            .route("/", axum::routing::post(send))
            .with_state(front);
        serve_front(listener, app).await;
    }

    /// One JSON-RPC request in, one blocking send through the broker's
    /// dispatch, the task out.
    async fn send(Shared(f): Shared<Arc<Front>>, body: axum::body::Bytes) -> axum::Json<Value> {
        let (req, text) = front_request(&body);
        let m = complete_task_message(&f.worker, &text);
        let token = f.requester.next(|| register(&f.conn)).await;
        let answer = f
            .conn
            .call(Call::Send(SendParams {
                token: Some(token),
                message: m,
                configuration: blocking(),
            }))
            .await;
        front_answer(
            &req,
            answer.map(|mut r| r["task"].take()).map_err(|e| e.message),
        )
    }
}
