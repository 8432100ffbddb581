//! Benchmark 4: the non-blocking core of `a2a-client`, against the broker's
//! local socket in this process (durability normal), in alternating short
//! rounds; every figure is a median over the rounds, and every ratio the
//! median of the per-round ratios (this machine's speed swings between
//! rounds).
//!
//! (a) Throughput of `Agent::get_task` (`historyLength: 1`) on one task:
//!     - `async-256`: one thread keeping 256 `get_task_async` calls in
//!       flight (submit until 256 are outstanding, wait for the oldest,
//!       take the answers already there behind it, refill);
//!     - `blocking-1`: the same thread calling the blocking `get_task` in a
//!       loop;
//!     - `blocking-64`: 64 threads calling the blocking `get_task`, all on
//!       the same connection.
//!     In calls/s and CPU per call: the whole process (broker included),
//!     the broker's threads, the client's reader and writer threads, and
//!     the calling threads (the rest). Targets: async-256 / blocking-1 >=
//!     3x, async-256 / blocking-64 >= 1x.
//! (b) What the client adds per completion, one call outstanding, beside
//!     the raw ping-pong of the socket benchmark: a minimal binary client
//!     (one blocking socket, no threads) to the broker, and to a raw server
//!     thread answering frames of the broker's response size; then the
//!     typed client completing through `wait` (condvar), `on_complete` (a
//!     callback on the reader thread sending on a channel) and a waker (a
//!     minimal executor: `poll`, park, unpark). The client's cost is the
//!     difference to the minimal client's round trip.
//!
//! Run: `cargo bench -p a2a-benches --bench client_async`.

/// The same allocator as the `a2a-broker` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use a2a_benches::report::{bench_mode, load_average, median};
use a2a_benches::socket::{
    cpu_delta, process_cpu, spawn_raw, thread_cpu, Codec, Kind, RawReply, SocketBroker,
};
use a2a_benches::window::get_task_window;
use a2a_broker::Durability;
use a2a_client::Agent;
use serde_json::json;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// Alternating rounds.
const ROUNDS: usize = 10;
/// Calls in flight for `async-256`.
const WINDOW: usize = 256;
/// Threads of `blocking-64`.
const THREADS: usize = 64;
/// Calls per round, per configuration.
const N_ASYNC: u64 = 20_000;
const N_BLOCKING_1: u64 = 3_000;
const N_BLOCKING_64: u64 = 20_000;
/// Round trips per round, per one-outstanding mode.
const N_RTT: u64 = 2_000;
/// Bound of any single answer.
const T: Duration = Duration::from_secs(60);

fn async_window(agent: &Agent, task: &str, n: u64) -> Duration {
    get_task_window(agent, task, n, WINDOW, T)
}

fn blocking_loop(agent: &Agent, task: &str, n: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        agent.get_task(task, Some(1)).expect("tasks.get");
    }
    start.elapsed()
}

fn blocking_threads(agent: &Agent, task: &str, n: u64) -> Duration {
    let per = n / THREADS as u64;
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            std::thread::Builder::new()
                .name("bench-caller".into())
                .spawn_scoped(s, || blocking_loop(agent, task, per))
                .expect("spawn a caller");
        }
    });
    start.elapsed()
}

fn rtt_wait(agent: &Agent, task: &str, n: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        agent
            .get_task_async(task, Some(1))
            .expect("submit")
            .wait(T)
            .expect("tasks.get");
    }
    start.elapsed()
}

fn rtt_callback(agent: &Agent, task: &str, n: u64) -> Duration {
    let (tx, rx) = std::sync::mpsc::channel();
    let start = Instant::now();
    for _ in 0..n {
        let tx = tx.clone();
        agent
            .get_task_async(task, Some(1))
            .expect("submit")
            .on_complete(move |r| {
                let _ = tx.send(r.is_ok());
            });
        assert!(rx.recv_timeout(T).expect("callback ran"), "tasks.get");
    }
    start.elapsed()
}

/// A waker that unparks the benchmark thread.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

fn rtt_waker(agent: &Agent, task: &str, n: u64) -> Duration {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let start = Instant::now();
    for _ in 0..n {
        let mut p = agent.get_task_async(task, Some(1)).expect("submit");
        let deadline = Instant::now() + T;
        loop {
            match Pin::new(&mut p).poll(&mut cx) {
                Poll::Ready(r) => {
                    r.expect("tasks.get");
                    break;
                }
                Poll::Pending => {
                    assert!(Instant::now() < deadline, "never woken");
                    std::thread::park_timeout(T);
                }
            }
        }
    }
    start.elapsed()
}

/// CPU per call of one configuration, split by thread group.
#[derive(Default)]
struct Cpu {
    calls: u64,
    total: Duration,
    groups: BTreeMap<&'static str, Duration>,
}

impl Cpu {
    fn add(&mut self, calls: u64, total: Duration, threads: &BTreeMap<String, Duration>) {
        self.calls += calls;
        self.total += total;
        let mut named = Duration::ZERO;
        for (name, d) in threads {
            let group = if name.starts_with("a2a-client-rea") {
                "client reader"
            } else if name.starts_with("a2a-client-wri") {
                "client writer"
            } else if name.starts_with("a2a-socket") || name.starts_with("a2a-writer") {
                "broker"
            } else {
                continue;
            };
            *self.groups.entry(group).or_default() += *d;
            named += *d;
        }
        // Everything else (the calling threads, short-lived ones included)
        // is the total minus the named long-lived threads.
        *self.groups.entry("callers+other").or_default() += total.saturating_sub(named);
    }

    fn us(&self, d: Duration) -> f64 {
        d.as_secs_f64() * 1e6 / self.calls.max(1) as f64
    }

    fn line(&self) -> String {
        let parts: Vec<String> = self
            .groups
            .iter()
            .map(|(k, v)| format!("{k} {:.2}", self.us(*v)))
            .collect();
        format!(
            "CPU/call {:.2} us ({})",
            self.us(self.total),
            parts.join(", ")
        )
    }
}

/// One round of (b): the minimal client, the raw server and the typed
/// client's three ways of waiting, one call outstanding; us per round trip
/// into `rtt`, the typed client's over the minimal one into `overhead`.
fn one_outstanding(
    minimal: &mut a2a_benches::socket::Conn,
    raw: &mut a2a_benches::socket::Conn,
    get: &[u8],
    (req, task): (&Agent, &str),
    rtt: &mut BTreeMap<&'static str, Vec<f64>>,
    overhead: &mut BTreeMap<&'static str, Vec<f64>>,
) {
    let us = |n: u64, d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    let m = us(N_RTT, minimal.round_trips(get, N_RTT));
    let r = us(N_RTT, raw.round_trips(get, N_RTT));
    let w = us(N_RTT, rtt_wait(req, task, N_RTT));
    let c = us(N_RTT, rtt_callback(req, task, N_RTT));
    let k = us(N_RTT, rtt_waker(req, task, N_RTT));
    for (name, v) in [
        ("raw server", r),
        ("minimal client", m),
        ("wait", w),
        ("on_complete", c),
        ("waker", k),
    ] {
        rtt.entry(name).or_default().push(v);
    }
    for (name, v) in [("wait", w), ("on_complete", c), ("waker", k)] {
        overhead.entry(name).or_default().push(v - m);
    }
}

/// The SUMMARY lines: (a)'s rates, CPU and paired ratios, (b)'s round
/// trips and the typed client's overhead over the minimal one.
fn report(
    rates: &BTreeMap<&str, Vec<f64>>,
    (ratio_1, ratio_64): (&Vec<f64>, &Vec<f64>),
    cpu: &BTreeMap<&str, Cpu>,
    rtt: &BTreeMap<&str, Vec<f64>>,
    overhead: &BTreeMap<&str, Vec<f64>>,
    async_frames: (u64, u64),
) {
    let med = |v: &Vec<f64>| median(v.clone()).unwrap_or(f64::NAN);
    for name in ["async-256", "blocking-1", "blocking-64"] {
        eprintln!(
            "SUMMARY client_async {name}: {:.0} calls/s (median of {ROUNDS} rounds); {}",
            med(&rates[name]),
            cpu[name].line()
        );
    }
    let (r1, r64) = (med(ratio_1), med(ratio_64));
    eprintln!(
        "SUMMARY client_async ratios (median of paired rounds): async-256 / blocking-1 {r1:.2}x [{}] \
         (target >= 3x); async-256 / blocking-64 {r64:.2}x [{}] (target >= 1x); \
         async-256 frames per write {:.1}",
        if r1 >= 3.0 { "met" } else { "MISSED" },
        if r64 >= 1.0 { "met" } else { "MISSED" },
        async_frames.0 as f64 / async_frames.1.max(1) as f64,
    );
    let reader = cpu["async-256"].groups.get("client reader").copied();
    eprintln!(
        "SUMMARY client_async reader thread CPU per completion at 256 in flight: {:.2} us",
        reader.map_or(f64::NAN, |d| cpu["async-256"].us(d))
    );
    let parts: Vec<String> = [
        "raw server",
        "minimal client",
        "wait",
        "on_complete",
        "waker",
    ]
    .iter()
    .map(|k| format!("{k} {:.1} us", med(&rtt[k])))
    .collect();
    let over: Vec<String> = ["wait", "on_complete", "waker"]
        .iter()
        .map(|k| format!("{k} +{:.1} us", med(&overhead[k])))
        .collect();
    eprintln!(
        "SUMMARY client_async one outstanding, round trip: {}; typed client over the minimal \
         client (paired medians): {}",
        parts.join(", "),
        over.join(", ")
    );
}

fn main() {
    if !bench_mode() {
        eprintln!("client_async: skipped (runs under `cargo bench` only)");
        return;
    }
    eprintln!("client_async: load average at start {}", load_average());
    let sb = SocketBroker::start(Durability::Normal);
    let (client, req, task) = sb.task_to_read();

    // Baselines of (b): the minimal binary client, to the broker and to a
    // raw server answering frames of the broker's response size.
    let get = Codec::Binary.encode(
        Some(7),
        "a2a.tasks.get",
        &json!({"token": req.token(), "id": task, "historyLength": 1}),
    );
    let mut minimal = sb.connect(Codec::Binary);
    let resp_len = minimal.response_len(&get);
    let raw_path = spawn_raw(
        sb.scratch(),
        "raw-client-async",
        RawReply {
            codec: Codec::Binary,
            kind: Kind::Response,
            wire_len: resp_len,
            fanout: 1,
        },
    );
    let mut raw = a2a_benches::socket::Conn::open(&raw_path, Codec::Binary);
    eprintln!(
        "client_async: tasks.get request {} B, response {} B",
        get.len(),
        resp_len
    );

    // Warm-up: every path once.
    async_window(&req, &task, 2_000);
    blocking_loop(&req, &task, 500);
    blocking_threads(&req, &task, 2_000);

    let rate = |n: u64, d: Duration| n as f64 / d.as_secs_f64();
    let mut rates: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut ratio_1: Vec<f64> = Vec::new();
    let mut ratio_64: Vec<f64> = Vec::new();
    let mut cpu: BTreeMap<&str, Cpu> = BTreeMap::new();
    let mut rtt: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut overhead: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let (frames0, writes0) = client.write_stats();
    let mut async_frames = (0u64, 0u64);
    for round in 0..ROUNDS {
        // (a), in an order that rotates so that no configuration always
        // runs first.
        let mut round_rates: BTreeMap<&str, f64> = BTreeMap::new();
        let configs: [(&str, u64); 3] = [
            ("async-256", N_ASYNC),
            ("blocking-1", N_BLOCKING_1),
            ("blocking-64", N_BLOCKING_64),
        ];
        for k in 0..configs.len() {
            let (name, n) = configs[(k + round) % configs.len()];
            let (t0, p0) = (thread_cpu(), process_cpu());
            let w0 = client.write_stats();
            let d = match name {
                "async-256" => async_window(&req, &task, n),
                "blocking-1" => blocking_loop(&req, &task, n),
                _ => blocking_threads(&req, &task, n),
            };
            let (t1, p1) = (thread_cpu(), process_cpu());
            if name == "async-256" {
                let w1 = client.write_stats();
                async_frames.0 += w1.0 - w0.0;
                async_frames.1 += w1.1 - w0.1;
            }
            cpu.entry(name)
                .or_default()
                .add(n, p1.saturating_sub(p0), &cpu_delta(&t0, &t1));
            round_rates.insert(name, rate(n, d));
            rates.entry(name).or_default().push(rate(n, d));
        }
        ratio_1.push(round_rates["async-256"] / round_rates["blocking-1"]);
        ratio_64.push(round_rates["async-256"] / round_rates["blocking-64"]);

        // (b)
        one_outstanding(
            &mut minimal,
            &mut raw,
            &get,
            (&req, &task),
            &mut rtt,
            &mut overhead,
        );
    }

    report(
        &rates,
        (&ratio_1, &ratio_64),
        &cpu,
        &rtt,
        &overhead,
        async_frames,
    );
    let (frames1, writes1) = client.write_stats();
    eprintln!(
        "client_async: all rounds, {} frames in {} writes",
        frames1 - frames0,
        writes1 - writes0
    );
    eprintln!("client_async: load average at end {}", load_average());
    drop((minimal, raw, req, client));
    sb.shutdown();
}
