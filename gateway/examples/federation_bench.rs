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
//! the latency percentiles; phase 2 runs `--concurrency` conversations per
//! mode (each its own requester and context), modes alternating in slices,
//! for tasks per second.
//!
//! ```text
//! cargo build --release -p a2a-broker -p a2a-gateway --examples --bins
//! target/release/examples/federation_bench --rounds 200 --concurrency 16
//! ```

mod bench;

use a2a_client::{message_to, Agent, Client, Delivery, State};
use a2a_gateway::tck;
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
}

const MODES: [Mode; 2] = [Mode::Local, Mode::Federated];
const PHASE1: [Mode; 3] = [Mode::Local, Mode::Federated, Mode::Http];

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Local => "local",
            Mode::Federated => "federated",
            Mode::Http => "http-to-A",
        }
    }
}

/// `SendMessage` to A's gateway over one kept-alive connection, in a
/// context renewed before the broker's send bound.
async fn http_send(http: &reqwest::Client, url: &str, n: &mut u64) -> Duration {
    *n += 1;
    let ctx = format!("bench-http-{}", *n / u64::from(SENDS_PER_REQUESTER));
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

struct Args {
    rounds: usize,
    concurrency: usize,
    slice: Duration,
    slices: usize,
}

fn args() -> Args {
    let mut a = Args {
        rounds: 200,
        concurrency: 16,
        slice: Duration::from_secs(3),
        slices: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut num = || it.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        match k.as_str() {
            "--rounds" => a.rounds = num().max(1) as usize,
            "--concurrency" => a.concurrency = num().max(1) as usize,
            "--slice-ms" => a.slice = Duration::from_millis(num()),
            "--slices" => a.slices = num().max(1) as usize,
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
fn spawn_gateway(bin: &Path, args: &[&str], secret: &str, ready_on_stdout: bool) -> Child {
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
    if ready_on_stdout {
        // `remote add`: one `remote URL -> peer NAME` line per remote.
        let line = out.next().expect("remote add's line").expect("read");
        assert!(line.starts_with("remote "), "{line}");
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
    child
}

/// Phase 1's table: each mode's percentiles, against the local ones.
fn report_latency(rounds: usize, lat: &[Vec<Duration>; 3]) {
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
    for m in PHASE1 {
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
    let mut serve = spawn_gateway(
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
    let mut bridge = spawn_gateway(
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

    // Warm-up (connections, contexts, caches).
    for _ in 0..30 {
        local.send().await;
        fed.send().await;
        http_send(&http, &url, &mut http_n).await;
    }
    // Phase 1: paired round trips, order alternated each round.
    let mut lat: [Vec<Duration>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for i in 0..a.rounds {
        for k in 0..3 {
            let mode = PHASE1[(i + k) % 3];
            let d = match mode {
                Mode::Local => local.send().await,
                Mode::Federated => fed.send().await,
                Mode::Http => http_send(&http, &url, &mut http_n).await,
            };
            lat[mode as usize].push(d);
        }
    }
    report_latency(a.rounds, &lat);

    // Phase 2: `concurrency` conversations per mode, modes alternating.
    let mut total = [(0u64, Duration::ZERO); 2];
    for _ in 0..a.slices {
        for m in MODES {
            let count = Arc::new(AtomicU64::new(0));
            let mut reqs = Vec::new();
            for _ in 0..a.concurrency {
                let b = if m == Mode::Local {
                    &broker_a
                } else {
                    &broker_b
                };
                reqs.push(Requester::new(connect(b), worker.id()).await);
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
    let _ = bridge.kill();
    let _ = bridge.wait();
    let _ = serve.kill();
    let _ = serve.wait();
}
