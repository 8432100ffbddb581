//! Two hosts through their gateways against one broker, paired in one run
//! (BENCHMARKS.md, "Two hosts through the gateways").
//!
//! Host A: a broker child with a worker that completes each task at once
//! (the TCK SUT, `tck`), served by `a2a-gateway serve`. Host B: a second
//! broker child, with `a2a-gateway remote add` bridging A's `tck` into it.
//! The same blocking send that comes back with the completed task, made
//! two ways:
//! - `local`: a requester on A's broker sends to `tck` (one broker, the
//!   baseline);
//! - `federated`: a requester on B's broker sends to B's mirror of `tck`:
//!   B's broker, B's bridge, HTTP + SSE to A's gateway, A's broker, the
//!   worker, and every event back the same way.
//!
//! Phase 1 interleaves single round trips of the two (one in flight) for
//! the latency percentiles, beside `http-to-A` (the chain's HTTP half
//! alone); phase 2 runs `--concurrency` conversations per mode (each its
//! own requester and context), modes alternating in slices, for tasks per
//! second.
//!
//! `--stub` splits the chain into its two halves, measured in the same
//! rounds: a stub remote in this process (see [`stub`]) bridged into B by
//! a second `remote add`, so `fed-to-stub` less `stream-to-stub` is B's
//! half (B's broker and bridge), and `stream-to-A` (the stream B's bridge
//! reads) is A's half.
//!
//! ```text
//! cargo build --release -p a2a-cli -p a2a-gateway --examples --bins
//! target/release/examples/federation_bench --rounds 200 --concurrency 16 [--stub]
//! ```

mod bench;
/// The binary's TCK harness (a broker child, the SUT agent), shared.
#[allow(dead_code)]
#[path = "../src/tck/harness.rs"]
mod tck;

use a2a_client::{message_to, Agent, Client, Delivery, State};
use bench::{blocking, exe_dir, pct, post, print_rates, SENDS_PER_REQUESTER};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Local,
    Federated,
    /// Phase 1 only: `SendMessage` (blocking) straight to A's gateway in a
    /// reused context, the HTTP half of the chain alone.
    Http,
    /// Phase 1 with `--stub`: a requester on B sends to B's mirror of the
    /// stub (B's part of the chain alone).
    FedStub,
    /// Phase 1 with `--stub`: `SendStreamingMessage` straight to A's
    /// gateway, read to the stream's end (what B's bridge waits for).
    StreamA,
    /// Phase 1 with `--stub`: the same to the stub (what it costs).
    StreamStub,
}

const MODES: [Mode; 2] = [Mode::Local, Mode::Federated];
const PHASE1: [Mode; 3] = [Mode::Local, Mode::Federated, Mode::Http];
const PHASE1_STUB: [Mode; 6] = [
    Mode::Local,
    Mode::Federated,
    Mode::Http,
    Mode::FedStub,
    Mode::StreamA,
    Mode::StreamStub,
];

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Local => "local",
            Mode::Federated => "federated",
            Mode::Http => "http-to-A",
            Mode::FedStub => "fed-to-stub",
            Mode::StreamA => "stream-to-A",
            Mode::StreamStub => "stream-to-stub",
        }
    }
}

/// `SendMessage` to A's gateway over one kept-alive connection, in a
/// context renewed before the broker's send bound.
async fn http_send(http: &reqwest::Client, url: &str, n: &mut u64) -> Duration {
    let ctx = next_context("bench-http", n);
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": format!("m-{n}"), "role": "ROLE_USER", "parts": [{"text": "bench"}], "contextId": ctx}}});
    let t = Instant::now();
    let r = post(http, url, &body).await;
    let d = t.elapsed();
    assert_eq!(
        r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{r}"
    );
    d
}

/// The A2A context of the `n`th send (counted here) of a series: a new one
/// before the broker's send bound.
fn next_context(prefix: &str, n: &mut u64) -> String {
    *n += 1;
    format!("{prefix}-{}", *n / u64::from(SENDS_PER_REQUESTER))
}

/// `SendStreamingMessage` to a gateway (A's or the stub), timed to the
/// stream's end, in a context renewed as [`http_send`]'s.
async fn stream_send(http: &reqwest::Client, url: &str, n: &mut u64) -> Duration {
    let ctx = next_context("bench-stream", n);
    let body = stub::stream_request(*n, &ctx);
    let t = Instant::now();
    let text = stub::stream(http, url, &body).await;
    let d = t.elapsed();
    assert!(text.contains("TASK_STATE_COMPLETED"), "{text}");
    d
}

/// `--stub`: a remote that answers at once. It replays what A's gateway
/// answered to one `SendStreamingMessage` (its card, and its stream with
/// the task and context ids made new per call), so a chain through it is
/// B's part of the federated chain alone: B's broker, B's bridge and one
/// HTTP stream, without A's gateway, broker or worker.
mod stub {
    use super::bench::serve_front;
    use axum::response::IntoResponse;
    use serde_json::Value;
    use std::sync::Arc;

    /// What A's gateway answered, to replay.
    pub struct Recorded {
        card: Value,
        stream: String,
        task_id: String,
        context_id: String,
    }

    /// The message id of the recorded request (`stream_request(0, ..)`).
    const RECORDED_MESSAGE: &str = "s-0";

    /// The streaming request the stub mode times and records (JSON-RPC id
    /// 1, as every stream the stub replays starts).
    pub fn stream_request(n: u64, context: &str) -> Value {
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {
            "message": {"messageId": format!("s-{n}"), "role": "ROLE_USER", "parts": [{"text": "bench"}], "contextId": context}}})
    }

    /// POSTs a streaming request; the whole event stream, once it ended.
    pub async fn stream(http: &reqwest::Client, url: &str, body: &Value) -> String {
        http.post(url)
            .header("a2a-version", "1.0")
            .header("accept", "text/event-stream")
            .json(body)
            .send()
            .await
            .expect("post")
            .text()
            .await
            .expect("stream")
    }

    /// Each `data:` line's JSON.
    pub fn events(stream: &str) -> Vec<Value> {
        stream
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| serde_json::from_str(d.trim()).expect("event JSON"))
            .collect()
    }

    /// Records A's card and one completed stream from A's gateway at `url`.
    pub async fn record(http: &reqwest::Client, url: &str) -> Recorded {
        let card: Value = http
            .get(format!("{url}/.well-known/agent-card.json"))
            .send()
            .await
            .expect("card")
            .json()
            .await
            .expect("card JSON");
        let stream = stream(http, url, &stream_request(0, "bench-stub-record")).await;
        let first = events(&stream).into_iter().next().expect("an event");
        let task = &first["result"]["task"];
        let (Some(task_id), Some(context_id)) = (task["id"].as_str(), task["contextId"].as_str())
        else {
            panic!("the first event is not the task: {first}");
        };
        Recorded {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            card,
            stream,
        }
    }

    /// Serves `rec` as agent `stub`; its URL.
    pub async fn serve(rec: Recorded, a_url: &str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!(
            "http://{}/agents/stub",
            listener.local_addr().expect("addr")
        );
        let card = serde_json::to_string(&rec.card)
            .expect("card")
            .replace(a_url, &url);
        let mut card: Value = serde_json::from_str(&card).expect("card");
        card["name"] = "stub".into();
        let rec = Arc::new(rec);
        let app = axum::Router::new()
            .route(
                "/agents/stub/.well-known/agent-card.json",
                axum::routing::get(move || async move { axum::Json(card) }),
            )
            .route(
                "/agents/stub",
                axum::routing::post(move |body: axum::Json<Value>| answer(rec.clone(), body.0)),
            );
        tokio::spawn(serve_front(listener, app));
        url
    }

    /// The recorded stream with a new task id, in the caller's context (or
    /// a new one), echoing the request's id and message id.
    async fn answer(rec: Arc<Recorded>, req: Value) -> axum::response::Response {
        assert_eq!(
            req["method"], "SendStreamingMessage",
            "the stub streams only: {req}"
        );
        let task = uuid::Uuid::new_v4().to_string();
        let message = &req["params"]["message"];
        let context = message["contextId"]
            .as_str()
            .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        let body = rec
            .stream
            .replace(&rec.task_id, &task)
            .replace(&rec.context_id, &context)
            .replace(
                &format!(r#""messageId":"{RECORDED_MESSAGE}""#),
                &format!(r#""messageId":{}"#, message["messageId"]),
            )
            .replace(
                r#"data: {"id":1,"#,
                &format!(r#"data: {{"id":{},"#, req["id"]),
            );
        ([("content-type", "text/event-stream")], body).into_response()
    }
}

struct Args {
    rounds: usize,
    concurrency: usize,
    slice: Duration,
    slices: usize,
    stub: bool,
}

fn args() -> Args {
    let mut a = Args {
        rounds: 200,
        concurrency: 16,
        slice: Duration::from_secs(3),
        slices: 3,
        stub: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut num = || it.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        match k.as_str() {
            "--rounds" => a.rounds = num().max(1) as usize,
            "--concurrency" => a.concurrency = num().max(1) as usize,
            "--slice-ms" => a.slice = Duration::from_millis(num()),
            "--slices" => a.slices = num().max(1) as usize,
            "--stub" => a.stub = true,
            other => eprintln!("ignored argument {other}"),
        }
    }
    a
}

static REQ_N: AtomicU64 = AtomicU64::new(0);

/// A requester on one broker, registered again (untimed) before the
/// broker's per-registration send bound (docs/protocol.md §9,
/// `A2A_MAX_SENDS_PER_RUN`).
struct Requester {
    client: Client,
    agent: Agent,
    sent: u32,
    worker: String,
}

impl Requester {
    async fn new(client: Client, worker: &str) -> Requester {
        let agent = register(&client).await;
        Requester {
            client,
            agent,
            sent: 0,
            worker: worker.to_owned(),
        }
    }

    async fn send(&mut self) -> Duration {
        if self.sent >= SENDS_PER_REQUESTER {
            let _ = self.agent.deregister_async().expect("submit").await;
            self.agent = register(&self.client).await;
            self.sent = 0;
        }
        self.sent += 1;
        let t = Instant::now();
        let task = self
            .agent
            .send_async(message_to(&self.worker, "bench"), blocking())
            .expect("submit")
            .await
            .expect("send");
        let d = t.elapsed();
        assert_eq!(task.status.state, State::Completed, "{task:?}");
        d
    }
}

async fn register(client: &Client) -> Agent {
    let n = REQ_N.fetch_add(1, Ordering::Relaxed);
    client
        .register_async(
            &format!("bench-{n}"),
            a2a_client::agent_card(&format!("bench-req-{n}")),
            Delivery::Push,
        )
        .expect("submit")
        .await
        .expect("register")
}

/// A gateway child (`args` after the binary, the broker's secret in its
/// environment), once it is ready: `serve`'s ready line on stderr, or
/// `remote add`'s line on stdout.
fn spawn_gateway(
    bin: &Path,
    args: &[&str],
    secret: &str,
    ready_on_stdout: bool,
) -> (Child, String) {
    let mut child = Command::new(bin)
        .args(args)
        .env(a2a_client::SECRET_ENV, secret)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a2a-gateway");
    let (stdout, stderr) = (
        child.stdout.take().expect("stdout"),
        child.stderr.take().expect("stderr"),
    );
    let mut out = BufReader::new(stdout).lines();
    let mut err = BufReader::new(stderr).lines();
    let mut peer = String::new();
    if ready_on_stdout {
        // `remote add`: one `remote URL -> peer NAME` line per remote.
        let line = out.next().expect("remote add's line").expect("read");
        assert!(line.starts_with("remote "), "{line}");
        peer = line.rsplit(' ').next().unwrap_or_default().to_owned();
    } else {
        loop {
            let line = err.next().expect("gateway ready line").expect("read");
            if serde_json::from_str::<Value>(&line).is_ok_and(|v| v["ready"] == true) {
                break;
            }
        }
    }
    std::thread::spawn(move || for _ in out {});
    std::thread::spawn(move || {
        for l in err.map_while(Result::ok) {
            eprintln!("gateway: {l}");
        }
    });
    (child, peer)
}

/// Phase 1's table: each mode's percentiles, against the local ones.
fn report_latency(rounds: usize, modes: &[Mode], lat: &[Vec<Duration>]) {
    println!(
        "phase 1: {} paired sequential round trips (send -> completed), one in flight",
        rounds
    );
    println!("mode        p50_us   p99_us   mean_us");
    let sorted: Vec<Vec<Duration>> = lat
        .iter()
        .map(|l| {
            let mut s = l.clone();
            s.sort();
            s
        })
        .collect();
    for &m in modes {
        let s = &sorted[m as usize];
        let mean = s.iter().map(Duration::as_secs_f64).sum::<f64>() / s.len() as f64;
        println!(
            "{:<10} {:>8.0} {:>8.0} {:>9.0}   p50 x{:.2}, p99 x{:.2} of local",
            m.name(),
            pct(s, 0.5),
            pct(s, 0.99),
            mean * 1e6,
            pct(s, 0.5) / pct(&sorted[0], 0.5),
            pct(s, 0.99) / pct(&sorted[0], 0.99),
        );
    }
}

/// With `--stub`: the federated chain as its two parts. B's part is
/// `fed-to-stub` less the stub's own stream; A's part is `stream-to-A`
/// (what B's bridge waits for). Their sum, against the federated p50.
fn report_parts(lat: &[Vec<Duration>]) {
    let p50 = |m: Mode| {
        let mut s = lat[m as usize].clone();
        s.sort();
        pct(&s, 0.5)
    };
    let local = p50(Mode::Local);
    let b_part = p50(Mode::FedStub) - p50(Mode::StreamStub);
    let a_part = p50(Mode::StreamA);
    println!(
        "parts (p50): B's = fed-to-stub - stream-to-stub = {b_part:.0} us (x{:.2} of local); A's = stream-to-A = {a_part:.0} us (x{:.2}); sum x{:.2}, federated x{:.2}",
        b_part / local,
        a_part / local,
        (b_part + a_part) / local,
        p50(Mode::Federated) / local
    );
}

/// Phase 2: `concurrency` conversations per mode (local on A's broker,
/// federated on B's), modes alternating in slices; tasks per second.
async fn phase2(a: &Args, brokers: [&tck::BrokerChild; 2], worker: &str) {
    let mut total = [(0u64, Duration::ZERO); 2];
    for _ in 0..a.slices {
        for m in MODES {
            let count = Arc::new(AtomicU64::new(0));
            let mut reqs = Vec::new();
            for _ in 0..a.concurrency {
                let b = brokers[usize::from(m != Mode::Local)];
                let client = Client::connect(&b.socket, &b.secret).expect("connect");
                reqs.push(Requester::new(client, worker).await);
            }
            let t0 = Instant::now();
            let end = t0 + a.slice;
            let joins: Vec<_> = reqs
                .into_iter()
                .map(|mut r| {
                    let count = count.clone();
                    tokio::spawn(async move {
                        while Instant::now() < end {
                            r.send().await;
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            for j in joins {
                j.await.expect("conversation");
            }
            total[m as usize].0 += count.load(Ordering::Relaxed);
            total[m as usize].1 += t0.elapsed();
        }
    }
    println!(
        "phase 2: {} concurrent conversations per mode, {} slices of {:?} per mode, alternating",
        a.concurrency, a.slices, a.slice
    );
    let rows: Vec<_> = MODES
        .iter()
        .map(|&m| (m.name(), total[m as usize].0, total[m as usize].1))
        .collect();
    print_rates(&rows, 10, "tasks", "local");
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let dir = exe_dir();
    let gateway_bin = dir.join("a2a-gateway");
    // Host A: broker, worker, `serve` on a fixed free port.
    let broker_a = tck::spawn_broker(&dir.join("a2a-broker")).expect("broker A");
    let worker_client = Client::connect(&broker_a.socket, &broker_a.secret).expect("connect");
    let worker = tck::register_sut(&worker_client).expect("worker");
    let listen = format!("127.0.0.1:{}", a2a_testkit::process::free_port());
    let socket_a = broker_a.socket.display().to_string();
    let (mut serve, _) = spawn_gateway(
        &gateway_bin,
        &[
            "serve",
            "--listen",
            &listen,
            "--rate",
            "0",
            "--expose",
            worker.id(),
            "--socket",
            &socket_a,
        ],
        &broker_a.secret,
        false,
    );
    // Host B: broker, `remote add` of A's worker.
    let broker_b = tck::spawn_broker(&dir.join("a2a-broker")).expect("broker B");
    let socket_b = broker_b.socket.display().to_string();
    let url = format!("http://{listen}/agents/{}", worker.id());
    let (mut bridge, _) = spawn_gateway(
        &gateway_bin,
        &["remote", "add", "--socket", &socket_b, &url],
        &broker_b.secret,
        true,
    );
    println!(
        "host A: broker + serve pid {} at {url}; host B: broker + remote add pid {}",
        serve.id(),
        bridge.id()
    );
    let connect = |b: &tck::BrokerChild| Client::connect(&b.socket, &b.secret).expect("connect");
    let mut local = Requester::new(connect(&broker_a), worker.id()).await;
    let mut fed = Requester::new(connect(&broker_b), worker.id()).await;
    let http = reqwest::Client::builder().no_proxy().build().expect("http");
    let mut http_n = 0u64;
    // With `--stub`: the stub, and a second bridge on B to it.
    let mut stubbed = None;
    if a.stub {
        let stub_url = stub::serve(stub::record(&http, &url).await, &url).await;
        let (child, peer) = spawn_gateway(
            &gateway_bin,
            &["remote", "add", "--socket", &socket_b, &stub_url],
            &broker_b.secret,
            true,
        );
        println!(
            "stub at {stub_url}, bridged into B as {peer} by pid {}",
            child.id()
        );
        let requester = Requester::new(connect(&broker_b), &peer).await;
        stubbed = Some((child, requester, stub_url));
    }
    let modes: &[Mode] = if a.stub { &PHASE1_STUB } else { &PHASE1 };
    let mut stream_n = 0u64;
    let mut round = async |mode: Mode| match (mode, &mut stubbed) {
        (Mode::Local, _) => local.send().await,
        (Mode::Federated, _) => fed.send().await,
        (Mode::Http, _) => http_send(&http, &url, &mut http_n).await,
        (Mode::StreamA, _) => stream_send(&http, &url, &mut stream_n).await,
        (Mode::FedStub, Some((_, r, _))) => r.send().await,
        (Mode::StreamStub, Some((_, _, u))) => stream_send(&http, u, &mut stream_n).await,
        (m, None) => unreachable!("{m:?} runs only with --stub"),
    };

    // Warm-up (connections, contexts, caches).
    for _ in 0..30 {
        for &m in modes {
            round(m).await;
        }
    }
    // Phase 1: paired round trips, order rotated each round.
    let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); PHASE1_STUB.len()];
    for i in 0..a.rounds {
        for k in 0..modes.len() {
            let mode = modes[(i + k) % modes.len()];
            let d = round(mode).await;
            lat[mode as usize].push(d);
        }
    }
    report_latency(a.rounds, modes, &lat);
    if a.stub {
        report_parts(&lat);
    }

    phase2(&a, [&broker_a, &broker_b], worker.id()).await;
    let _ = bridge.kill();
    let _ = bridge.wait();
    if let Some((mut child, _, _)) = stubbed {
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = serve.kill();
    let _ = serve.wait();
}
