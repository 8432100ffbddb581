//! The broker's resident memory with many open tasks: starts
//! the real `a2a-broker` (release build: `cargo run --release -p a2a-broker
//! --example open_tasks_rss -- [MAX] [STEP]`), makes open tasks of 15 KB
//! text each (`tests/support/open_tasks.rs`: a fresh requester context per
//! 128 tasks, none answered), and prints its `VmRSS` (from
//! `/proc/PID/status`) every STEP tasks up to MAX (default 100,000 by
//! 10,000), beside its RSS with none (the baseline) and the database's size.

#[path = "../tests/support/open_tasks.rs"]
mod open_tasks;

use a2a_testkit::process::socket_path_for;
use a2a_testkit::temp::TestDb;
use a2a_testkit::{measure, Broker, Transport};
use std::time::{Duration, Instant};

const MIB: f64 = 1024.0 * 1024.0;

fn rss_mib(pid: u32) -> f64 {
    // The lowest of a few samples: what stays once freed pages went back.
    (0..5)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(200));
            measure::rss(pid)
        })
        .min()
        .unwrap_or(0) as f64
        / MIB
}

fn main() {
    let mut args = std::env::args().skip(1);
    let max: usize = args.next().map_or(100_000, |a| a.parse().expect("MAX"));
    let step: usize = args.next().map_or(10_000, |a| a.parse().expect("STEP"));
    let db = TestDb::new();
    let b = Broker::start_on(Transport::Socket, &db.path, &["--durability", "normal"]);
    let socket = socket_path_for(&db.path);
    let secret = a2a_client::read_secret(&socket).expect("secret");
    let mut load = open_tasks::OpenTasks::connect(&socket, &secret);
    println!("| open tasks | broker RSS (MiB) | database (MiB) | seconds |");
    println!("|---:|---:|---:|---:|");
    println!("| 0 | {:.1} | - | - |", rss_mib(b.pid));
    let started = Instant::now();
    let mut at = step;
    while at <= max {
        load.fill(at);
        let size = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let wal = db.path.with_extension("db-wal");
        let bytes = size(&db.path) + size(&wal);
        println!(
            "| {at} | {:.1} | {:.0} | {:.0} |",
            rss_mib(b.pid),
            bytes as f64 / MIB,
            started.elapsed().as_secs_f64()
        );
        at += step;
    }
    println!(
        "peak RSS (VmHWM): {:.1} MiB",
        measure::peak_rss(b.pid) as f64 / MIB
    );
}
