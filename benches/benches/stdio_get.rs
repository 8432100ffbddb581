//! Benchmark 1: pipelined `a2a.tasks.get` through the real broker on stdio,
//! against `raw_echo` (parse each line, answer a line of the same size) on
//! the same kind of pipe, with the same client, in the same run.
//!
//! Run: `cargo bench -p a2a-benches --bench stdio_get`. Prints one summary
//! line with both rates, the ratio of criterion's medians, and the median
//! ratio over interleaved broker/raw bursts (the figure judged against the
//! target, 0.5: on a shared machine it is the one that load drifting over
//! the run does not bias), and the CPU each child spent per request.

use a2a_benches::binaries::broker_binary;
use a2a_benches::report::{
    bench_mode, fmt_rate, fmt_ratio, load_average, median, verdict, Samples,
};
use a2a_benches::stdio::Proc;
use a2a_benches::workload::{handshake, register, request_line, Client};
use criterion::{Criterion, SamplingMode, Throughput};
use serde_json::json;
use std::process::Command;
use std::time::Duration;

/// Requests per burst (one criterion iteration).
const N: usize = 20_000;
/// Most unanswered requests.
const DEPTH: usize = 256;
const SAMPLES: usize = 10;
/// Interleaved broker/raw bursts after criterion's runs, for a paired ratio.
const PAIRS: usize = 10;

fn main() {
    if !bench_mode() {
        eprintln!("stdio_get: skipped (runs under `cargo bench` only)");
        return;
    }
    eprintln!("stdio_get: load average at start {}", load_average());
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("bench.db");

    // The broker, with one task to read.
    let mut cmd = Command::new(broker_binary());
    cmd.arg("serve").arg("--db").arg(&db);
    let mut broker = Proc::spawn(cmd);
    handshake(&mut broker);
    let req = register(&mut broker, "bench", "req");
    register(&mut broker, "bench", "wrk");
    let created = broker.call(
        "a2a.message.send",
        json!({"token": req, "message": {"role": "user", "parts": [{"kind": "text", "text": "hello"}],
               "messageId": "m1", "to": "wrk"}}),
    );
    let task_id = created["task"]["id"].as_str().expect("task id").to_owned();
    let get = json!({"token": req, "id": task_id, "historyLength": 1});
    let resp_len = broker.call_line("a2a.tasks.get", get.clone()).len();
    let lines: Vec<Vec<u8>> = (0..N)
        .map(|_| request_line(broker.next_id(), "a2a.tasks.get", &get))
        .collect();

    // The baseline answers the same lines with lines of the same length.
    let mut raw = Proc::spawn({
        let mut c = Command::new(env!("CARGO_BIN_EXE_raw_echo"));
        c.arg(resp_len.to_string());
        c
    });
    let raw_len = raw.call_line("a2a.tasks.get", get.clone()).len();
    assert_eq!(
        raw_len, resp_len,
        "raw_echo answers lines of the broker's length"
    );

    let mut c = Criterion::default()
        .sample_size(SAMPLES)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .without_plots()
        .configure_from_args();
    let mut g = c.benchmark_group("stdio_get");
    g.sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements(N as u64));
    let (sb, sr) = (Samples::new(), Samples::new());
    g.bench_function("broker", |b| {
        b.iter_custom(|iters| {
            let t: Duration = (0..iters).map(|_| broker.timed(&lines, DEPTH)).sum();
            sb.record(iters * N as u64, t)
        })
    });
    g.bench_function("raw", |b| {
        b.iter_custom(|iters| {
            let t: Duration = (0..iters).map(|_| raw.timed(&lines, DEPTH)).sum();
            sr.record(iters * N as u64, t)
        })
    });
    g.finish();

    // Paired: alternate bursts, so drifting machine load hits both alike.
    // Also the CPU each child spends per request: less sensitive to the
    // machine's load than a rate, and it says where a difference comes from.
    let (mut cpu_b, mut cpu_r) = (Duration::ZERO, Duration::ZERO);
    let pairs: Vec<f64> = (0..PAIRS)
        .map(|_| {
            let c0 = broker.cpu_time();
            let b = broker.timed(&lines, DEPTH);
            cpu_b += broker.cpu_time().saturating_sub(c0);
            let c0 = raw.cpu_time();
            let r = raw.timed(&lines, DEPTH);
            cpu_r += raw.cpu_time().saturating_sub(c0);
            r.as_secs_f64() / b.as_secs_f64()
        })
        .collect();
    let paired = median(pairs).unwrap_or(0.0);
    let (rb, rr) = (sb.rate(SAMPLES), sr.rate(SAMPLES));
    eprintln!(
        "SUMMARY stdio_get: tasks.get x{N}, {DEPTH} outstanding, response {resp_len} B: \
         broker {} raw {} broker/raw {}, interleaved pairs median {:.2}x (target >= 0.50x on the pairs: {}); \
         CPU per request: broker {:.2} us, raw {:.2} us",
        fmt_rate(rb),
        fmt_rate(rr),
        fmt_ratio(rb, rr),
        paired,
        verdict(Some(paired), Some(1.0), 0.5),
        cpu_b.as_secs_f64() * 1e6 / (PAIRS * N) as f64,
        cpu_r.as_secs_f64() * 1e6 / (PAIRS * N) as f64,
    );
    eprintln!("stdio_get: load average at end {}", load_average());
    broker.finish();
    raw.finish();
    c.final_summary();
}
