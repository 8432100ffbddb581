//! Benchmark 3: the local socket (`transport::socket`), both codecs, each
//! figure beside a raw Unix-socket baseline of the same run. The broker
//! runs in this process (`server::start` + `socket::listen`, durability
//! normal), so its server's `write_stats()` is readable.
//!
//! (a) Round trip, one outstanding: `a2a.tasks.get` (`historyLength: 1`)
//!     with binary frames and with NDJSON, against a raw server thread
//!     that decodes the same request bytes and answers a frame of the
//!     broker's response size. The typed `a2a-client` (`Agent::get_task`)
//!     is timed too, for information. Target: broker/raw >= 0.5.
//! (b) Events per second delivered to one client, binary vs NDJSON:
//!     - `resub1`: pipelined `a2a.tasks.resubscribe` notifications on the
//!       receiving agent's own connection, one status event each (every
//!       event is one call through the writer thread);
//!     - `replay`: the same with `afterVersion: 0` on a task whose log
//!       holds 202 entries: one call, 203 events;
//!     - `status`: a worker on another connection pipelines `working ->
//!       working` status updates (one commit-batched write each);
//!     - `inject`: the resubscribe's event pushed by a bench thread straight
//!       into the receiver's outbox (no writer thread): the transport alone;
//!     raw baseline: the same requests to a raw server thread answering
//!     each with the same number of event-sized frames, buffered.
//!     Target: binary events/s >= 1.5x NDJSON.
//! (c) Frames per write call (`write_stats()` deltas) during (b).
//!
//! After criterion's runs, the configurations are run again in alternation
//! ([`PAIRS`] rounds) and the medians of the per-round ratios are reported
//! (the figures judged against the targets), with the CPU each thread
//! spent per event.
//!
//! Run: `cargo bench -p a2a-benches --bench socket`.

/// The same allocator as the `a2a-broker` binary, for the in-process broker
/// and its baseline alike.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use a2a_benches::report::{bench_mode, fmt_rate, fmt_ratio, load_average, median, Samples};
use a2a_benches::socket::{
    cpu_delta, process_cpu, spawn_raw, thread_cpu, Codec, Conn, EventStreams, Flow, Kind, RawReply,
    SocketBroker,
};
use a2a_broker::Durability;
use criterion::{Criterion, SamplingMode, Throughput};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const SAMPLES: usize = 10;
/// Round trips per paired burst.
const RT_BURST: u64 = 2_000;
/// Alternating rounds after criterion's runs.
const PAIRS: usize = 8;
/// Events per paired burst.
const STREAM_EVENTS: u64 = 20_000;

/// One codec's round-trip connections: to the broker and to its raw server.
struct RoundTrips {
    codec: Codec,
    broker: Conn,
    raw: Conn,
    /// The `tasks.get` request, and the broker's response size.
    get: Vec<u8>,
    resp_len: usize,
}

impl RoundTrips {
    fn new(sb: &SocketBroker, codec: Codec, get_params: &Value) -> RoundTrips {
        let mut broker = sb.connect(codec);
        let get = codec.encode(Some(7), "a2a.tasks.get", get_params);
        let resp_len = broker.response_len(&get);
        let raw_path = spawn_raw(
            sb.scratch(),
            &format!("raw-rt-{}", codec.label()),
            RawReply {
                codec,
                kind: Kind::Response,
                wire_len: resp_len,
                fanout: 1,
            },
        );
        let mut raw = Conn::open(&raw_path, codec);
        assert_eq!(
            raw.response_len(&get),
            resp_len,
            "the raw server answers frames of the broker's size"
        );
        RoundTrips {
            codec,
            broker,
            raw,
            get,
            resp_len,
        }
    }

    fn broker(&mut self, n: u64) -> Duration {
        self.broker.round_trips(&self.get, n)
    }

    fn raw(&mut self, n: u64) -> Duration {
        self.raw.round_trips(&self.get, n)
    }
}

/// Frames, write calls, CPU per thread and events over a configuration's paired runs.
#[derive(Default)]
struct Tally {
    frames: u64,
    writes: u64,
    events: u64,
    cpu: BTreeMap<String, Duration>,
    cpu_total: Duration,
}

impl Tally {
    fn frames_per_write(&self) -> String {
        if self.writes == 0 {
            return "-".into();
        }
        format!("{:.1}", self.frames as f64 / self.writes as f64)
    }

    /// `total X us/event (a2a-socket Y, a2a-writer Z, client W)`.
    fn cpu(&self) -> String {
        let per = |d: Duration| d.as_secs_f64() * 1e6 / self.events.max(1) as f64;
        let get = |k: &str| {
            self.cpu
                .iter()
                .filter(|(n, _)| n.starts_with(k))
                .map(|(_, d)| *d)
                .sum::<Duration>()
        };
        let (sock, writer) = (get("a2a-socket"), get("a2a-writer"));
        let rest = self.cpu_total.saturating_sub(sock + writer);
        format!(
            "CPU/event {:.2} us (a2a-socket {:.2}, a2a-writer {:.2}, client+other {:.2})",
            per(self.cpu_total),
            per(sock),
            per(writer),
            per(rest)
        )
    }
}

/// (a) again with the threads pinned (`A2A_SOCKET_RTT_PINNED=1`, instead
/// of everything else): the bench thread is the client; the broker's
/// threads and the raw server thread are the server side. Same core: both
/// on CPU 0; cross core: the client on CPU 1. Round trips of the broker
/// and of the raw server alternate, [`PAIRS`] rounds; medians.
fn pinned_round_trips(rts: &mut [RoundTrips]) {
    println!("| placement | codec | broker round trips/s | raw round trips/s | broker/raw (median of pairs) |");
    println!("|---|---|---|---|---|");
    for &(placement, server_cpu, client_cpu) in a2a_benches::pin::placements() {
        a2a_benches::pin::place_with(server_cpu, client_cpu, true);
        for rt in rts.iter_mut() {
            rt.broker(RT_BURST / 4); // warm up in this placement
            rt.raw(RT_BURST / 4);
            let (mut b, mut r, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..PAIRS {
                let (db, dr) = (rt.broker(RT_BURST), rt.raw(RT_BURST));
                b.push(RT_BURST as f64 / db.as_secs_f64());
                r.push(RT_BURST as f64 / dr.as_secs_f64());
                ratio.push(dr.as_secs_f64() / db.as_secs_f64());
            }
            println!(
                "| {placement} | {} | {:.0} | {:.0} | {:.2}x |",
                rt.codec.label(),
                median(b).unwrap_or(0.0),
                median(r).unwrap_or(0.0),
                median(ratio).unwrap_or(0.0)
            );
        }
    }
    a2a_benches::pin::unpin_all();
    eprintln!("socket: load average at end {}", load_average());
}

/// Criterion's samples of (a) (by `broker/<codec>`, `raw/<codec>`,
/// `typed/binary`) and of (b) (by codec and flow).
struct CriterionSamples {
    rt: BTreeMap<String, Samples>,
    ev: BTreeMap<(&'static str, Flow), Samples>,
}

/// Criterion's runs of (a) and (b).
fn criterion_runs(
    c: &mut Criterion,
    rts: &mut [RoundTrips],
    evs: &mut [EventStreams],
    typed_rt: &dyn Fn(u64) -> Duration,
) -> CriterionSamples {
    // (a) round trips; one criterion iteration is one round trip.
    let mut rt_samples: BTreeMap<String, Samples> = BTreeMap::new();
    {
        let mut g = c.benchmark_group("socket_rtt");
        g.sampling_mode(SamplingMode::Flat)
            .throughput(Throughput::Elements(1));
        for rt in rts.iter_mut() {
            let l = rt.codec.label();
            let sm = rt_samples.entry(format!("broker/{l}")).or_default().clone();
            g.bench_function(format!("broker/{l}"), |b| {
                b.iter_custom(|iters| sm.record(iters, rt.broker(iters)))
            });
            let sm = rt_samples.entry(format!("raw/{l}")).or_default().clone();
            g.bench_function(format!("raw/{l}"), |b| {
                b.iter_custom(|iters| sm.record(iters, rt.raw(iters)))
            });
        }
        let sm = rt_samples.entry("typed/binary".into()).or_default().clone();
        g.bench_function("typed-client/binary", |b| {
            b.iter_custom(|iters| sm.record(iters, typed_rt(iters)))
        });
        g.finish();
    }

    // (b) event streams; one criterion iteration is one event.
    let mut ev_samples: BTreeMap<(&'static str, Flow), Samples> = BTreeMap::new();
    {
        let mut g = c.benchmark_group("socket_events");
        g.sampling_mode(SamplingMode::Flat)
            .throughput(Throughput::Elements(1));
        for ev in evs.iter_mut() {
            let l = ev.codec.label();
            for flow in Flow::ALL {
                let sm = ev_samples.entry((l, flow)).or_default().clone();
                g.bench_function(format!("{l}/{}", flow.label()), |b| {
                    b.iter_custom(|iters| {
                        // A replay comes whole: time per event asked for.
                        let made = ev.events_made(flow, iters);
                        let d = ev.run(flow, iters);
                        sm.record(made, d);
                        d.mul_f64(iters as f64 / made as f64)
                    })
                });
            }
        }
        g.finish();
    }

    CriterionSamples {
        rt: rt_samples,
        ev: ev_samples,
    }
}

/// The paired rounds' figures: per-round broker/raw ratios of (a) by
/// codec, rates of (a) by configuration and of (b) by codec and flow, and
/// (b)'s tallies.
struct Paired {
    rt_pairs: BTreeMap<&'static str, Vec<f64>>,
    rt_rates: BTreeMap<String, Vec<f64>>,
    ev_rates: BTreeMap<(&'static str, Flow), Vec<f64>>,
    tallies: BTreeMap<(&'static str, Flow), Tally>,
}

/// Paired rounds: every configuration once per round, in alternation.
fn paired_rounds(
    sb: &SocketBroker,
    rts: &mut [RoundTrips],
    evs: &mut [EventStreams],
    typed_rt: &dyn Fn(u64) -> Duration,
) -> Paired {
    let rate = |n: u64, d: Duration| n as f64 / d.as_secs_f64();
    let mut rt_pairs: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut rt_rates: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut ev_rates: BTreeMap<(&'static str, Flow), Vec<f64>> = BTreeMap::new();
    let mut tallies: BTreeMap<(&'static str, Flow), Tally> = BTreeMap::new();
    for _ in 0..PAIRS {
        for rt in rts.iter_mut() {
            let l = rt.codec.label();
            let b = rt.broker(RT_BURST);
            let r = rt.raw(RT_BURST);
            rt_pairs
                .entry(l)
                .or_default()
                .push(r.as_secs_f64() / b.as_secs_f64());
            let mut push = |k: String, d: Duration| {
                rt_rates.entry(k).or_default().push(rate(RT_BURST, d));
            };
            push(format!("broker/{l}"), b);
            push(format!("raw/{l}"), r);
        }
        let t = typed_rt(RT_BURST);
        rt_rates
            .entry("typed/binary".into())
            .or_default()
            .push(rate(RT_BURST, t));
        for flow in Flow::ALL {
            for ev in evs.iter_mut() {
                let n = match flow {
                    Flow::Status => STREAM_EVENTS / 2,
                    _ => STREAM_EVENTS,
                };
                let made = ev.events_made(flow, n);
                let (w0, cpu0, p0) = (sb.write_stats(), thread_cpu(), process_cpu());
                let d = ev.run(flow, n);
                let (w1, cpu1, p1) = (sb.write_stats(), thread_cpu(), process_cpu());
                let tally = tallies.entry((ev.codec.label(), flow)).or_default();
                tally.frames += w1.0 - w0.0;
                tally.writes += w1.1 - w0.1;
                tally.events += made;
                tally.cpu_total += p1.saturating_sub(p0);
                for (k, v) in cpu_delta(&cpu0, &cpu1) {
                    *tally.cpu.entry(k).or_default() += v;
                }
                ev_rates
                    .entry((ev.codec.label(), flow))
                    .or_default()
                    .push(rate(made, d));
            }
        }
    }

    Paired {
        rt_pairs,
        rt_rates,
        ev_rates,
        tallies,
    }
}

/// The SUMMARY lines: (a) per codec and the typed client, (b) per flow,
/// and the CPU per thread of (b)'s broker flows.
fn report(rts: &[RoundTrips], evs: &[EventStreams], criterion: &CriterionSamples, paired: &Paired) {
    let med = |v: Option<&Vec<f64>>| v.and_then(|v| median(v.clone()));
    let per_round = |a: &[f64], b: &[f64]| -> Option<f64> {
        median(a.iter().zip(b).map(|(a, b)| a / b).collect())
    };
    let us = |r: Option<f64>| r.map_or(f64::NAN, |r| 1e6 / r);
    for rt in rts {
        let l = rt.codec.label();
        let rb = criterion.rt[&format!("broker/{l}")].rate(SAMPLES);
        let rr = criterion.rt[&format!("raw/{l}")].rate(SAMPLES);
        let p = median(paired.rt_pairs[l].clone()).unwrap_or(0.0);
        eprintln!(
            "SUMMARY socket rtt {l}: tasks.get one outstanding, response {} B: broker {} ({:.1} us) \
             raw {} ({:.1} us) broker/raw {}; paired median {:.2}x [{}] (target >= 0.50x); \
             paired rates broker {} raw {}",
            rt.resp_len,
            fmt_rate(rb),
            us(rb),
            fmt_rate(rr),
            us(rr),
            fmt_ratio(rb, rr),
            p,
            if p >= 0.5 { "met" } else { "MISSED" },
            fmt_rate(med(paired.rt_rates.get(&format!("broker/{l}")))),
            fmt_rate(med(paired.rt_rates.get(&format!("raw/{l}")))),
        );
    }
    let ty = criterion.rt["typed/binary"].rate(SAMPLES);
    let tp = med(paired.rt_rates.get("typed/binary"));
    let bp = med(paired.rt_rates.get("broker/binary"));
    eprintln!(
        "SUMMARY socket rtt typed a2a-client (Agent::get_task): {} ({:.1} us); \
         paired {} = {} of the minimal binary client",
        fmt_rate(ty),
        us(ty),
        fmt_rate(tp),
        fmt_ratio(tp, bp),
    );
    for flow in [Flow::Resub1, Flow::Replay, Flow::Status, Flow::Inject] {
        let mut parts = Vec::new();
        for ev in evs {
            let l = ev.codec.label();
            let (b, r) = (
                &paired.ev_rates[&(l, flow)],
                &paired.ev_rates[&(l, flow.raw())],
            );
            parts.push(format!(
                "{l}: broker {} raw {} (criterion broker {} raw {}), broker/raw paired {:.2}x, \
                 frames/write {}, {}",
                fmt_rate(median(b.clone())),
                fmt_rate(median(r.clone())),
                fmt_rate(criterion.ev[&(l, flow)].rate(SAMPLES)),
                fmt_rate(criterion.ev[&(l, flow.raw())].rate(SAMPLES)),
                per_round(b, r).unwrap_or(0.0),
                paired.tallies[&(l, flow)].frames_per_write(),
                paired.tallies[&(l, flow)].cpu(),
            ));
        }
        let p = per_round(
            &paired.ev_rates[&("binary", flow)],
            &paired.ev_rates[&("ndjson", flow)],
        )
        .unwrap_or(0.0);
        let raw_p = per_round(
            &paired.ev_rates[&("binary", flow.raw())],
            &paired.ev_rates[&("ndjson", flow.raw())],
        )
        .unwrap_or(0.0);
        eprintln!(
            "SUMMARY socket events {}: {}; binary/ndjson paired {:.2}x [{}] (target >= 1.50x), \
             raw binary/ndjson {:.2}x",
            flow.label(),
            parts.join("; "),
            p,
            if p >= 1.5 { "met" } else { "MISSED" },
            raw_p,
        );
    }
    for ((l, flow), t) in &paired.tallies {
        if !flow.is_broker() {
            continue;
        }
        let threads: Vec<String> = t
            .cpu
            .iter()
            .map(|(k, v)| format!("{k} {:.0} ms", v.as_secs_f64() * 1e3))
            .collect();
        eprintln!(
            "socket cpu {l}/{}: {} events, process {:.0} ms; {}",
            flow.label(),
            t.events,
            t.cpu_total.as_secs_f64() * 1e3,
            threads.join(", ")
        );
    }
}

fn main() {
    if !bench_mode() {
        eprintln!("socket: skipped (runs under `cargo bench` only)");
        return;
    }
    eprintln!("socket: load average at start {}", load_average());
    let sb = SocketBroker::start(Durability::Normal);

    // Setup for (a): a typed client registers a requester and a worker and
    // creates one task to read.
    let (typed, req, task) = sb.task_to_read();
    let get_params = json!({"token": req.token(), "id": task, "historyLength": 1});
    let codecs = [Codec::Binary, Codec::Ndjson];
    let mut rts = codecs.map(|c| RoundTrips::new(&sb, c, &get_params));
    let mut evs = codecs.map(|c| EventStreams::setup(&sb, c));
    for (rt, ev) in rts.iter().zip(&evs) {
        eprintln!(
            "socket {}: tasks.get request {} B, response {} B; events: resubscribe {} B, \
             replay {} events of {} B on average, status {} B",
            rt.codec.label(),
            rt.get.len(),
            rt.resp_len,
            ev.event_len,
            ev.fanout,
            ev.replay_event_len,
            ev.status_event_len,
        );
    }
    let typed_rt = |n: u64| {
        let start = Instant::now();
        for _ in 0..n {
            req.get_task(&task, Some(1)).expect("tasks.get");
        }
        start.elapsed()
    };
    if std::env::var_os("A2A_SOCKET_RTT_PINNED").is_some() {
        return pinned_round_trips(&mut rts);
    }

    let mut c = Criterion::default()
        .sample_size(SAMPLES)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .without_plots()
        .configure_from_args();

    let criterion = criterion_runs(&mut c, &mut rts, &mut evs, &typed_rt);
    let paired = paired_rounds(&sb, &mut rts, &mut evs, &typed_rt);
    report(&rts, &evs, &criterion, &paired);
    eprintln!("socket: load average at end {}", load_average());
    drop((rts, evs, req, typed));
    sb.shutdown();
    c.final_summary();
}
