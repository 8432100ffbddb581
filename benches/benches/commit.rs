//! Benchmark 2: task creations through the broker's group-committing
//! writer, against the same rows inserted by plain rusqlite, in one run.
//!
//! - raw: the rows of one creation per transaction (`tx1`) and 64 creations
//!   per transaction (`tx64`), on a database opened by the broker's own
//!   `open_writer` (`a2a_broker::bench`);
//! - broker in process (the library's memory pair: NDJSON lines in,
//!   response lines out, no pipe or child process), 64 creations
//!   outstanding, group commit (`batch_max = 256`, the default) and one
//!   transaction per call (`batch_max = 1`);
//! - end to end: the release binary on stdio, 1, 8 and 64 outstanding;
//!
//! each with `synchronous = FULL` and `NORMAL`, plus the WAL bytes written
//! per creation (raw and in process). One criterion iteration is one task
//! creation. After criterion's runs, the raw tx64 baseline and the two
//! in-process modes are run again in alternation ([`PAIRS`] rounds), and
//! the median of the per-round ratios is reported beside the ratio of the
//! criterion medians: on a shared machine the paired figure is the one
//! that load drifting over the run does not bias. Targets: group commit
//! at least 0.7x raw tx64, and at least 10x its own `batch_max = 1`,
//! 64 outstanding, durability full.
//!
//! `A2A_BENCH_DIAG=1` adds raw variants to show where the time goes:
//! random v4 ids (as the broker minted them before 6aea4da), and a
//! `SAVEPOINT` per creation as the broker's writer takes one per call, with
//! the sub-journal in a temporary file (the default) or in memory.
//!
//! Run: `cargo bench -p a2a-benches --bench commit`.

/// The same allocator as the `a2a-broker` binary, for the in-process broker
/// and its baseline alike.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use a2a_benches::binaries::broker_binary;
use a2a_benches::disk::{describe, sync_latency};
use a2a_benches::inproc::InProc;
use a2a_benches::raw_sqlite::{RawStore, Variant};
use a2a_benches::report::{
    bench_mode, fmt_rate, fmt_ratio, load_average, median, verdict, Samples,
};
use a2a_benches::stdio::Proc;
use a2a_benches::wal::{truncate, WalProbe};
use a2a_benches::workload::{handshake, Client, Creator};
use a2a_broker::Durability;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const SAMPLES: usize = 10;
/// Creations outstanding in the in-process runs.
const DEPTH: usize = 64;
/// Creations whose WAL bytes are counted, per configuration.
const WAL_CALLS: u64 = 512;
/// Alternating rounds for the paired ratios.
const PAIRS: usize = 5;
/// Creations per paired round (group commit and raw), and for `batch_max = 1`.
const PAIR_CALLS: u64 = 1024;
const PAIR_CALLS_B1: u64 = 256;

fn label(d: Durability) -> &'static str {
    match d {
        Durability::Full => "full",
        Durability::Normal => "normal",
    }
}

/// What one configuration measured.
#[derive(Default)]
struct Figures {
    samples: Samples,
    wal_per_call: Option<f64>,
    /// Broker only: calls per transaction during the WAL count.
    calls_per_commit: Option<f64>,
    /// `fsync` latency just before the run (the disk is shared: it varies).
    sync: Option<(Duration, Duration)>,
}

impl Figures {
    fn rate(&self) -> Option<f64> {
        self.samples.rate(SAMPLES)
    }

    fn wal(&self) -> String {
        let wal = self
            .wal_per_call
            .map_or_else(|| "-".into(), |b| format!("{b:.0} B"));
        let sync = self.sync.map_or_else(String::new, |s| {
            format!(", fsync {:.0} us before", s.0.as_secs_f64() * 1e6)
        });
        match self.calls_per_commit {
            Some(c) => format!("{wal}/call, {c:.1} calls/commit{sync}"),
            None => format!("{wal}/call{sync}"),
        }
    }
}

/// Average sizes of the JSON columns a creation writes: (status, message, log payload).
fn row_sizes(db: &Path) -> (f64, f64, f64) {
    let c = rusqlite::Connection::open(db).expect("open for sizes");
    let avg = |sql: &str| {
        c.query_row(sql, [], |r| r.get::<_, Option<f64>>(0))
            .expect("size query")
            .unwrap_or(0.0)
    };
    (
        avg("SELECT avg(length(status)) FROM a2a_tasks"),
        avg("SELECT avg(length(body)) FROM a2a_messages"),
        avg("SELECT avg(length(payload)) FROM a2a_task_log"),
    )
}

/// The raw baseline, one configuration.
struct Raw {
    name: String,
    store: RawStore,
    per_tx: u64,
    fig: Figures,
}

impl Raw {
    fn new(d: Durability, per_tx: u64, variant: Variant, suffix: &str) -> Raw {
        Raw {
            name: format!("raw/{}/tx{per_tx}{suffix}", label(d)),
            store: RawStore::open_variant(d, variant),
            per_tx,
            fig: Figures::default(),
        }
    }

    fn bench(&mut self, g: &mut BenchmarkGroup<'_, WallTime>) {
        self.fig.sync = Some(sync_latency(9));
        let (store, per_tx, samples) = (&mut self.store, self.per_tx, self.fig.samples.clone());
        g.bench_function(&self.name, |b| {
            b.iter_custom(|iters| samples.record(iters, store.run(iters, per_tx)))
        });
        if self.fig.rate().is_none() {
            return;
        }
        truncate(&self.store.db);
        self.store.run(per_tx, per_tx);
        let probe = WalProbe::pin(&self.store.db);
        self.store.run(WAL_CALLS, per_tx);
        self.fig.wal_per_call = Some(probe.grown() as f64 / WAL_CALLS as f64);
        probe.release();
    }
}

/// The broker in process, one configuration.
struct Broker {
    name: String,
    broker: InProc,
    creator: Creator,
    fig: Figures,
}

impl Broker {
    fn new(d: Durability, batch_max: usize) -> Broker {
        let mut broker = InProc::start(d, batch_max);
        handshake(&mut broker);
        let creator = Creator::new(&mut broker);
        Broker {
            name: format!("broker/{}/batch{batch_max}", label(d)),
            broker,
            creator,
            fig: Figures::default(),
        }
    }

    /// `n` creations at [`DEPTH`] outstanding (requesters registered untimed).
    fn run(&mut self, n: u64) -> Duration {
        let lines = self.creator.prepare(&mut self.broker, n);
        self.broker.timed(&lines, DEPTH)
    }

    fn bench(&mut self, g: &mut BenchmarkGroup<'_, WallTime>) {
        self.fig.sync = Some(sync_latency(9));
        let samples = self.fig.samples.clone();
        let name = self.name.clone();
        g.bench_function(&name, |b| {
            b.iter_custom(|iters| samples.record(iters, self.run(iters)))
        });
        if self.fig.rate().is_none() {
            return;
        }
        let lines = self
            .creator
            .prepare(&mut self.broker, DEPTH as u64 + WAL_CALLS);
        let (first, rest) = lines.split_at(DEPTH);
        truncate(&self.broker.db);
        self.broker.timed(first, DEPTH);
        let probe = WalProbe::pin(&self.broker.db);
        let (commits, calls) = self.broker.commits();
        self.broker.timed(rest, DEPTH);
        let (commits_after, calls_after) = self.broker.commits();
        self.fig.wal_per_call = Some(probe.grown() as f64 / WAL_CALLS as f64);
        self.fig.calls_per_commit =
            Some((calls_after - calls) as f64 / (commits_after - commits).max(1) as f64);
        probe.release();
    }
}

/// The release binary on stdio, 1, 8 and 64 outstanding.
fn stdio(g: &mut BenchmarkGroup<'_, WallTime>, d: Durability, out: &mut BTreeMap<String, Figures>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cmd = Command::new(broker_binary());
    cmd.arg("serve")
        .arg("--db")
        .arg(dir.path().join("bench.db"))
        .arg("--durability")
        .arg(label(d));
    let mut broker = Proc::spawn(cmd);
    handshake(&mut broker);
    let mut creator = Creator::new(&mut broker);
    for depth in [1, 8, 64] {
        let name = format!("stdio/{}/depth{depth}", label(d));
        let samples = out.entry(name.clone()).or_default().samples.clone();
        g.bench_function(&name, |b| {
            b.iter_custom(|iters| {
                let lines = creator.prepare(&mut broker, iters);
                samples.record(iters, broker.timed(&lines, depth))
            })
        });
    }
    broker.finish();
}

/// Paired ratios: (group / raw tx64, group / batch1), medians over rounds.
fn paired(raw64: &mut Raw, group: &mut Broker, b1: &mut Broker) -> (Option<f64>, Option<f64>) {
    if raw64.fig.rate().is_none() || group.fig.rate().is_none() || b1.fig.rate().is_none() {
        return (None, None);
    }
    let rate = |n: u64, d: Duration| n as f64 / d.as_secs_f64();
    let (mut vs_raw, mut vs_b1, mut rounds) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..PAIRS {
        let r = rate(PAIR_CALLS, raw64.store.run(PAIR_CALLS, raw64.per_tx));
        let g = rate(PAIR_CALLS, group.run(PAIR_CALLS));
        let b = rate(PAIR_CALLS_B1, b1.run(PAIR_CALLS_B1));
        vs_raw.push(g / r);
        vs_b1.push(g / b);
        rounds.push(format!("{r:.0}/{g:.0}/{b:.0}"));
    }
    eprintln!(
        "pairs {}: raw-tx64/group/batch1 per round (creations/s): {}",
        group.name,
        rounds.join(", ")
    );
    (median(vs_raw), median(vs_b1))
}

/// `A2A_BENCH_DIAG`: the raw baseline (durability full, tx1 and tx64)
/// with random ids, with a savepoint per call, and with savepoints and
/// an in-memory temp store.
fn diagnostic_variants(g: &mut BenchmarkGroup<'_, WallTime>) -> Vec<(&'static str, [Raw; 2])> {
    let mut diag = Vec::new();
    let variants = [
        (
            "-random",
            Variant {
                random_ids: true,
                ..Variant::default()
            },
        ),
        (
            "-savepoint",
            Variant {
                savepoints: true,
                ..Variant::default()
            },
        ),
        (
            "-savepoint-memtemp",
            Variant {
                savepoints: true,
                temp_store_memory: true,
                ..Variant::default()
            },
        ),
    ];
    for (suffix, v) in variants {
        let mut pair = [
            Raw::new(Durability::Full, 1, v, suffix),
            Raw::new(Durability::Full, 64, v, suffix),
        ];
        for x in pair.iter_mut() {
            x.bench(g);
        }
        diag.push((suffix, pair));
    }
    diag
}

fn main() {
    if !bench_mode() {
        eprintln!("commit: skipped (runs under `cargo bench` only)");
        return;
    }
    eprintln!("commit: load average at start {}", load_average());
    let sync_before = sync_latency(30);
    let mut c = Criterion::default()
        .sample_size(SAMPLES)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .without_plots()
        .configure_from_args();
    let mut g = c.benchmark_group("commit");
    g.sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements(1));

    let durabilities = [Durability::Full, Durability::Normal];
    let mut raws: Vec<[Raw; 2]> = Vec::new();
    let mut brokers: Vec<[Broker; 2]> = Vec::new();
    for d in durabilities {
        let mut r = [
            Raw::new(d, 1, Variant::default(), ""),
            Raw::new(d, 64, Variant::default(), ""),
        ];
        let mut b = [Broker::new(d, 256), Broker::new(d, 1)];
        for x in r.iter_mut() {
            x.bench(&mut g);
        }
        for x in b.iter_mut() {
            x.bench(&mut g);
        }
        raws.push(r);
        brokers.push(b);
    }
    let mut stdio_figs = BTreeMap::new();
    for d in durabilities {
        stdio(&mut g, d, &mut stdio_figs);
    }
    let diag = if std::env::var_os("A2A_BENCH_DIAG").is_some() {
        diagnostic_variants(&mut g)
    } else {
        Vec::new()
    };
    g.finish();

    let (s, m, l) = row_sizes(&raws[0][1].store.db);
    eprintln!("row sizes, raw: status {s:.0} B, message {m:.0} B, log payload {l:.0} B");
    let (s, m, l) = row_sizes(&brokers[0][0].broker.db);
    eprintln!("row sizes, broker: status {s:.0} B, message {m:.0} B, log payload {l:.0} B");
    eprintln!("paired rounds start: {}", describe(sync_latency(30)));
    for (i, d) in durabilities.into_iter().enumerate() {
        let [r1, r64] = &mut raws[i];
        let [bg, b1] = &mut brokers[i];
        let (p_raw, p_b1) = paired(r64, bg, b1);
        let l = label(d);
        let fmt_p = |p: Option<f64>| p.map_or_else(|| "-".into(), |p| format!("{p:.2}x"));
        let targets = if d == Durability::Full {
            " (targets: >= 0.70x raw tx64, >= 10x batch1)"
        } else {
            ""
        };
        eprintln!(
            "SUMMARY commit {l}: raw tx1 {} ({}), raw tx64 {} ({}), broker group {} ({}), \
             broker batch1 {} ({}); group/raw-tx64 {} paired {} [{}], group/batch1 {} paired {} [{}]{targets}",
            fmt_rate(r1.fig.rate()),
            r1.fig.wal(),
            fmt_rate(r64.fig.rate()),
            r64.fig.wal(),
            fmt_rate(bg.fig.rate()),
            bg.fig.wal(),
            fmt_rate(b1.fig.rate()),
            b1.fig.wal(),
            fmt_ratio(bg.fig.rate(), r64.fig.rate()),
            fmt_p(p_raw),
            verdict(p_raw, Some(1.0), 0.7),
            fmt_ratio(bg.fig.rate(), b1.fig.rate()),
            fmt_p(p_b1),
            verdict(p_b1, Some(1.0), 10.0),
        );
        let get = |k: String| stdio_figs.get(&k).and_then(Figures::rate);
        let s = |depth: u32| get(format!("stdio/{l}/depth{depth}"));
        eprintln!(
            "SUMMARY commit stdio {l}: depth1 {}, depth8 {}, depth64 {}; depth64/raw-tx64 {}, depth64/in-process {}",
            fmt_rate(s(1)),
            fmt_rate(s(8)),
            fmt_rate(s(64)),
            fmt_ratio(s(64), r64.fig.rate()),
            fmt_ratio(s(64), bg.fig.rate()),
        );
    }
    for (suffix, [t1, t64]) in &diag {
        eprintln!(
            "DIAG commit full raw{suffix}: tx1 {} ({}), tx64 {} ({}), tx64/tx1 {}",
            fmt_rate(t1.fig.rate()),
            t1.fig.wal(),
            fmt_rate(t64.fig.rate()),
            t64.fig.wal(),
            fmt_ratio(t64.fig.rate(), t1.fig.rate()),
        );
    }
    let sync_after = sync_latency(30);
    eprintln!(
        "SUMMARY commit disk (4 KiB overwrite + sync, median of 30): before {}; after {}",
        describe(sync_before),
        describe(sync_after)
    );
    eprintln!("commit: load average at end {}", load_average());
    for pair in brokers {
        for b in pair {
            b.broker.shutdown();
        }
    }
    c.final_summary();
}
