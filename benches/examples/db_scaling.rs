//! How the broker's costs grow with its database: start-up to
//! ready, creation rate, `a2a.tasks.get` of an old task against a fresh
//! one, resident memory, and disk per task, for databases of 0, 10k, 100k
//! and 1M stored tasks, each paired with the empty database's figure in the
//! same run. Prints a table and a text chart, and writes an SVG chart.
//!
//! ```text
//! cargo run --release -p a2a-benches --example db_scaling -- \
//!     [--sizes 10000,100000,1000000] [--svg FILE] [--disk N] [--messages 1,4,16]
//! ```
//!
//! - The databases are built by a raw writer (`a2a_benches::scale`): rows
//!   of the broker's shapes (the workload: one 200-character
//!   message per task, 100 tasks per requester context, then each requester
//!   deregistered, which cancels its tasks with a broker note), written
//!   straight into SQLite in large transactions, in the order the broker
//!   writes them.
//! - Each database is then served by the release binary on stdio
//!   (`--durability normal`): start-up is the time from spawning it to its
//!   ready line; RSS is `VmRSS` right after the ready line and again after
//!   the creations. The empty database is served beside each size: both
//!   brokers run at once and creations alternate between them, 7 rounds
//!   of 1 500 pipelined sends (64 outstanding) from fresh requesters; the
//!   creation figure is the median of the per-round ratios. `tasks.get` is
//!   unpipelined, 300 distinct old tasks (each loaded from SQLite)
//!   alternating with 300 fresh ones (in memory).
//! - `--disk N` fills a database through the broker itself with N tasks of
//!   the workload above and reports bytes per task, then the same for tasks
//!   of 1, 4 and 16 messages (`--messages`), and the raw builder's bytes
//!   per task for the same workload (they must agree: the builder is only
//!   valid if its rows are the broker's).

use a2a_benches::binaries::broker_binary;
use a2a_benches::scale;
use a2a_benches::stdio::Proc;
use a2a_benches::workload::{handshake, register, request_line, Client, Creator};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// One database's figures.
#[derive(Debug, Clone, Default)]
struct Figures {
    tasks: u64,
    build: Duration,
    disk_bytes: u64,
    startup: Duration,
    /// `PRAGMA quick_check(1)` alone on the same file (the page check that
    /// start-up runs before anything writes, `store::check_read_only`).
    page_check: Duration,
    rss_start_kb: u64,
    rss_after_kb: u64,
    creations_per_s: f64,
    get_old_us: f64,
    get_fresh_us: f64,
    /// Creations/s against the empty database's, median of the paired rounds.
    creation_ratio: f64,
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn list(name: &str, default: &[u64]) -> Vec<u64> {
    arg(name)
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn main() {
    if let Some(n) = arg("--disk").and_then(|s| s.parse().ok()) {
        disk(n, &list("--messages", &[1, 4, 16]));
        return;
    }
    let sizes = list("--sizes", &[10_000, 100_000, 1_000_000]);
    let svg = arg("--svg").unwrap_or_else(|| "db_scaling.svg".into());
    eprintln!("load average {}", a2a_benches::report::load_average());
    let mut rows = Vec::new();
    for &n in &sizes {
        // The empty database beside each size: the pair is measured under
        // the same load.
        let (base, fig) = measure_pair(n);
        print_pair(&base, &fig);
        rows.push((base, fig));
    }
    let Some(empty) = rows.first().map(|(b, _)| b.clone()) else {
        return;
    };
    println!();
    println!("| stored tasks | build | disk per task | start-up (vs empty) | of which page check | creations/s (vs empty) | get old / fresh | RSS after start (vs empty) | RSS after creations (vs empty) |");
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| 0 | – | – | {:.1} ms | {:.1} ms | {:.0} | {:.0} / {:.0} µs | {:.1} MB | {:.1} MB |",
        ms(empty.startup),
        ms(empty.page_check),
        empty.creations_per_s,
        empty.get_old_us,
        empty.get_fresh_us,
        mb(empty.rss_start_kb),
        mb(empty.rss_after_kb)
    );
    for (base, f) in &rows {
        println!(
            "| {} | {:.1} s | {:.0} B | {:.1} ms ({:.2}x) | {:.1} ms | {:.0} ({:.2}x) | {:.0} / {:.0} µs ({:.2}x) | {:.1} MB ({:+.1} MB) | {:.1} MB ({:+.1} MB) |",
            f.tasks,
            f.build.as_secs_f64(),
            f.disk_bytes as f64 / f.tasks as f64,
            ms(f.startup),
            ms(f.startup) / ms(base.startup),
            ms(f.page_check),
            f.creations_per_s,
            f.creation_ratio,
            f.get_old_us,
            f.get_fresh_us,
            f.get_old_us / f.get_fresh_us,
            mb(f.rss_start_kb),
            mb(f.rss_start_kb) - mb(base.rss_start_kb),
            mb(f.rss_after_kb),
            mb(f.rss_after_kb) - mb(base.rss_after_kb),
        );
    }
    println!();
    print!("{}", text_chart(&rows));
    std::fs::write(&svg, svg_chart(&rows)).expect("write the SVG chart");
    println!("chart written to {svg}");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn print_pair(base: &Figures, f: &Figures) {
    eprintln!(
        "{} tasks: start-up {:.1} ms (page check {:.1} ms; empty {:.1}), creations {:.0}/s (empty {:.0}), get old {:.0} µs / fresh {:.0} µs, RSS {:.1} MB (empty {:.1})",
        f.tasks,
        ms(f.startup),
        ms(f.page_check),
        ms(base.startup),
        f.creations_per_s,
        base.creations_per_s,
        f.get_old_us,
        f.get_fresh_us,
        mb(f.rss_start_kb),
        mb(base.rss_start_kb)
    );
}

/// A broker serving a database of `n` stored tasks, with its figures so far.
struct Running {
    broker: Proc,
    creator: Creator,
    token: String,
    fig: Figures,
    old_ids: Vec<String>,
    _dir: tempfile::TempDir,
}

/// Builds a database of `n` tasks (none for 0), starts the broker on it.
fn start(n: u64) -> Running {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("scale.db");
    let t = Instant::now();
    let old_ids = if n > 0 {
        scale::build(&db, n, scale::TEXT_200)
    } else {
        Vec::new()
    };
    let build = t.elapsed();
    let disk_bytes = scale::disk_bytes(&db);
    let page_check = scale::page_check(&db);
    let mut cmd = Command::new(broker_binary());
    cmd.arg("serve")
        .arg("--db")
        .arg(&db)
        .arg("--durability")
        .arg("normal");
    let (mut broker, startup) = Proc::spawn_until_ready(cmd);
    let rss_start_kb = broker.rss_kb();
    handshake(&mut broker);
    // The builder's tasks went to `wrk` in `bench-workers`: registering
    // that name again makes the bench a party to every old task.
    let creator = Creator::new(&mut broker);
    let token = creator.worker_token.clone();
    Running {
        broker,
        creator,
        token,
        fig: Figures {
            tasks: n,
            build,
            disk_bytes,
            startup,
            page_check,
            rss_start_kb,
            ..Figures::default()
        },
        old_ids,
        _dir: dir,
    }
}

/// Creation rounds per pair, alternating between the two brokers.
const ROUNDS: usize = 7;
/// Creations per round (64 outstanding).
const PER_ROUND: u64 = 1500;

/// The empty database and one of `n` tasks, served side by side and
/// measured in alternation: `(empty, n)`.
fn measure_pair(n: u64) -> (Figures, Figures) {
    let mut runs = [start(0), start(n)];
    for r in runs.iter_mut() {
        // The empty database's "old" tasks: created, then pushed out of the
        // broker's task cache by 9 000 newer ones (made on both brokers, so
        // that memory after the run compares).
        let early = created_ids(&mut r.broker, &mut r.creator, 300);
        let more = r.creator.prepare(&mut r.broker, 9000);
        r.broker.timed(&more, 64);
        if r.old_ids.is_empty() {
            r.old_ids = early;
        }
    }
    let mut rates = [Vec::new(), Vec::new()];
    for _ in 0..ROUNDS {
        for (k, r) in runs.iter_mut().enumerate() {
            let lines = r.creator.prepare(&mut r.broker, PER_ROUND);
            let d = r.broker.timed(&lines, 64);
            rates[k].push(PER_ROUND as f64 / d.as_secs_f64());
        }
    }
    let ratio =
        a2a_benches::report::median(rates[1].iter().zip(&rates[0]).map(|(b, a)| b / a).collect())
            .unwrap_or(f64::NAN);
    for (k, r) in runs.iter_mut().enumerate() {
        r.fig.creations_per_s = a2a_benches::report::median(rates[k].clone()).unwrap_or(0.0);
        // Fresh tasks: the last ones created (in the broker's memory).
        let fresh = created_ids(&mut r.broker, &mut r.creator, 300);
        let (o, f) = median_gets(&mut r.broker, &r.token, &r.old_ids, &fresh);
        r.fig.get_old_us = o;
        r.fig.get_fresh_us = f;
        r.fig.rss_after_kb = r.broker.rss_kb();
    }
    runs[1].fig.creation_ratio = ratio;
    let [a, b] = runs;
    a.broker.finish();
    b.broker.finish();
    (a.fig, b.fig)
}

/// Creates `n` tasks and returns their ids.
fn created_ids(broker: &mut Proc, creator: &mut Creator, n: u64) -> Vec<String> {
    let lines = creator.prepare(broker, n);
    broker
        .collect(&lines, 64)
        .into_iter()
        .map(|v| {
            v["result"]["task"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("creation failed: {v}"))
                .to_owned()
        })
        .collect()
}

/// Unpipelined `tasks.get` of each id once, old and fresh alternating
/// (so that load changes hit both alike): the median round trips in µs.
fn median_gets(broker: &mut Proc, token: &str, old: &[String], fresh: &[String]) -> (f64, f64) {
    let mut times = [Vec::new(), Vec::new()];
    for (o, f) in old.iter().zip(fresh) {
        for (k, id) in [(0, o), (1, f)] {
            let t = Instant::now();
            let line = broker.call_line(
                "a2a.tasks.get",
                json!({"token": token, "id": id, "historyLength": 1}),
            );
            times[k].push(t.elapsed().as_secs_f64() * 1e6);
            assert!(line.contains("\"result\""), "tasks.get failed: {line}");
        }
    }
    let [o, f] = times;
    let m = |v| a2a_benches::report::median(v).unwrap_or(f64::NAN);
    (m(o), m(f))
}

/// Disk per task through the broker itself, against the raw builder.
fn disk(n: u64, messages: &[u64]) {
    eprintln!("load average {}", a2a_benches::report::load_average());
    let dir = tempfile::tempdir().expect("temp dir");
    let raw = dir.path().join("raw.db");
    scale::build(&raw, n, scale::TEXT_200);
    let raw_bytes = scale::disk_bytes(&raw) as f64 / n as f64;
    let before = dir.path().join("before.db");
    scale::build_as(&before, n, scale::TEXT_200, scale::Forms::Full);
    let before_bytes = scale::disk_bytes(&before) as f64 / n as f64;
    println!("| workload | tasks | bytes per task |");
    println!("|---|---|---|");
    for &m in messages {
        let db = dir.path().join(format!("broker-{m}.db"));
        let per = through_broker(&db, n, m);
        println!("| broker, {m} message(s) per task, requester deregistered | {n} | {per:.0} |");
    }
    println!("| raw builder, 1 message per task, requester deregistered | {n} | {raw_bytes:.0} |");
    println!("| raw builder, the same, rows of the broker before its compact writer (full status and log) | {n} | {before_bytes:.0} |");
    println!(
        "raw builder: this broker's rows / the earlier broker's: {:.2}x",
        raw_bytes / before_bytes
    );
    println!();
    println!("Where the bytes are (broker, 1 message per task), per task:");
    println!();
    println!("| table or index | on pages | in cells | unused |");
    println!("|---|---|---|---|");
    for (name, pages, cells, unused) in scale::breakdown(&dir.path().join("broker-1.db")) {
        let per = |b: u64| b as f64 / n as f64;
        println!(
            "| {name} | {:.0} B | {:.0} B | {:.0} B |",
            per(pages),
            per(cells),
            per(unused)
        );
    }
}

/// Fills `db` through the release broker: `n` tasks, each of `messages`
/// messages (the creating one and appends by the requester), 100 per
/// requester (fewer where the 200 sends of a registration would not
/// cover them), each requester deregistered after its tasks. Bytes per task
/// after a clean exit.
fn through_broker(db: &Path, n: u64, messages: u64) -> f64 {
    let mut cmd = Command::new(broker_binary());
    cmd.arg("serve")
        .arg("--db")
        .arg(db)
        .arg("--durability")
        .arg("normal");
    let (mut broker, _) = Proc::spawn_until_ready(cmd);
    handshake(&mut broker);
    let worker = register(&mut broker, "bench-workers", "wrk");
    let _ = worker;
    // A registration may make 200 sends (A2A_MAX_SENDS_PER_RUN).
    let per_ctx = (200 / messages).min(100);
    let mut made = 0;
    let mut k = 0;
    while made < n {
        k += 1;
        let token = register(&mut broker, &format!("disk-ctx-{k}"), &format!("req{k}"));
        let batch = per_ctx.min(n - made);
        let lines: Vec<Vec<u8>> = (0..batch)
            .map(|i| {
                let params = json!({"token": token, "message": {
                    "role": "user",
                    "parts": [{"kind": "text", "text": scale::TEXT_200}],
                    "messageId": format!("m{k}-{i}"),
                    "to": "wrk",
                }});
                request_line(broker.next_id(), "a2a.message.send", &params)
            })
            .collect();
        let ids: Vec<String> = broker
            .collect(&lines, 64)
            .into_iter()
            .map(|v| v["result"]["task"]["id"].as_str().expect("task").to_owned())
            .collect();
        for extra in 1..messages {
            let lines: Vec<Vec<u8>> = ids
                .iter()
                .enumerate()
                .map(|(i, id)| {
                    let params = json!({"token": token, "message": {
                        "role": "user",
                        "parts": [{"kind": "text", "text": scale::TEXT_200}],
                        "messageId": format!("m{k}-{i}-{extra}"),
                        "taskId": id,
                    }});
                    request_line(broker.next_id(), "a2a.message.send", &params)
                })
                .collect();
            for v in broker.collect(&lines, 64) {
                assert!(v.get("result").is_some(), "append failed: {v}");
            }
        }
        broker.call("a2a.agents.deregister", json!({"token": token}));
        made += batch;
    }
    broker.finish();
    scale::disk_bytes(db) as f64 / n as f64
}

/// A chart panel: its title, the value of a size against the empty
/// database, and the target.
type Panel = (&'static str, fn(&Figures, &Figures) -> f64, f64);

/// What the charts show: each figure against the empty database's, and
/// the target set for it.
const PANELS: [Panel; 4] = [
    (
        "start-up / empty db",
        |b, f| ms(f.startup) / ms(b.startup),
        2.0,
    ),
    ("creations/s / empty db", |_, f| f.creation_ratio, 0.9),
    (
        "tasks.get old / fresh",
        |_, f| f.get_old_us / f.get_fresh_us,
        2.0,
    ),
    (
        "RSS after start - empty db (MB)",
        |b, f| mb(f.rss_start_kb) - mb(b.rss_start_kb),
        10.0,
    ),
];

/// Four small text charts, one line per size.
fn text_chart(rows: &[(Figures, Figures)]) -> String {
    let mut out = String::new();
    for (title, value, target) in PANELS {
        out.push_str(&format!("{title} (target {target}):\n"));
        let max = rows
            .iter()
            .map(|(b, f)| value(b, f).abs())
            .fold(target, f64::max);
        for (b, f) in rows {
            let v = value(b, f);
            let width = ((v.abs() / max) * 50.0).round() as usize;
            out.push_str(&format!(
                "  {:>9} tasks |{:<50}| {v:.2}\n",
                f.tasks,
                "#".repeat(width)
            ));
        }
    }
    out
}

/// The same four panels as an SVG: each value against stored tasks (log
/// scale), with the target as a dashed line.
fn svg_chart(rows: &[(Figures, Figures)]) -> String {
    let (pw, ph) = (320.0, 200.0);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">"#,
        pw * 2.0 + 40.0,
        ph * 2.0 + 40.0
    );
    for (i, (title, value, target)) in PANELS.into_iter().enumerate() {
        let ox = 20.0 + (i % 2) as f64 * (pw + 10.0);
        let oy = 20.0 + (i / 2) as f64 * (ph + 10.0);
        let vals: Vec<(f64, f64)> = rows
            .iter()
            .map(|(b, f)| ((f.tasks.max(1) as f64).log10(), value(b, f)))
            .collect();
        let ymax = vals.iter().map(|v| v.1).fold(target * 1.25, f64::max);
        let ymin = vals.iter().map(|v| v.1).fold(0.0, f64::min);
        let (x0, x1) = (3.5, 6.5);
        let px = |x: f64| ox + 40.0 + (x - x0) / (x1 - x0) * (pw - 60.0);
        let py = |y: f64| oy + ph - 30.0 - (y - ymin) / (ymax - ymin) * (ph - 60.0);
        s.push_str(&format!(
            r#"<rect x="{ox}" y="{oy}" width="{pw}" height="{ph}" fill="none" stroke="gray"/><text x="{}" y="{}">{title}</text>"#,
            ox + 8.0,
            oy + 16.0
        ));
        s.push_str(&format!(
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="red" stroke-dasharray="4,3"/><text x="{}" y="{}" fill="red">target {target}</text>"#,
            px(x0),
            py(target),
            px(x1),
            py(target),
            px(x1) - 60.0,
            py(target) - 4.0
        ));
        for (k, label) in [(4.0, "10k"), (5.0, "100k"), (6.0, "1M")] {
            s.push_str(&format!(
                r#"<text x="{}" y="{}" text-anchor="middle">{label}</text>"#,
                px(k),
                oy + ph - 12.0
            ));
        }
        s.push_str(&format!(
            r#"<text x="{}" y="{}" text-anchor="end">{ymax:.1}</text><text x="{}" y="{}" text-anchor="end">{ymin:.1}</text>"#,
            ox + 36.0,
            py(ymax) + 4.0,
            ox + 36.0,
            py(ymin) + 4.0
        ));
        let pts: Vec<String> = vals
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        s.push_str(&format!(
            r#"<polyline points="{}" fill="none" stroke="steelblue" stroke-width="2"/>"#,
            pts.join(" ")
        ));
        for (x, y) in &vals {
            s.push_str(&format!(
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="steelblue"/><text x="{:.1}" y="{:.1}">{y:.2}</text>"#,
                px(*x),
                py(*y),
                px(*x) + 5.0,
                py(*y) - 5.0
            ));
        }
    }
    s.push_str("</svg>\n");
    s
}
