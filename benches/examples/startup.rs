//! Start-up against the number of stored tasks: time from
//! spawning `a2a-broker serve` to its ready line, on an empty database and
//! on one of `--tasks` tasks, in alternation, after a clean exit (the
//! start checks the header, schema and lock) and after a kill -9 (it reads
//! every page first). With `--old PATH`, another broker binary (e.g. the
//! previous release, which read every page at every start) is measured in
//! the same rounds on the same files.
//!
//! ```text
//! cargo run --release -p a2a-benches --example startup -- \
//!     [--tasks 1000000] [--rounds 7] [--old /path/to/a2a-broker]
//! ```
//!
//! The big database is built by the raw writer `a2a_benches::scale` (the
//! workload of `db_scaling`: one 200-character message per task, then a
//! broker note cancelling it); it holds no clean-exit record, so the first
//! start on it reads every page, as a database of an earlier broker does.

use a2a_benches::binaries::broker_binary;
use a2a_benches::scale;
use a2a_benches::stdio::Proc;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Starts `bin` on `db`: the process and its time to ready.
fn start(bin: &Path, db: &Path) -> (Proc, Duration) {
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .arg("--db")
        .arg(db)
        .arg("--durability")
        .arg("normal");
    Proc::spawn_until_ready(cmd)
}

/// A start then a clean exit: the time to ready.
fn clean_start(bin: &Path, db: &Path) -> Duration {
    let (p, t) = start(bin, db);
    p.finish();
    t
}

/// A start, a kill -9 (`Proc`'s drop), then a start that finds the kill:
/// its time to ready; then a clean exit.
fn start_after_kill(bin: &Path, db: &Path) -> Duration {
    let (p, _) = start(bin, db);
    drop(p);
    clean_start(bin, db)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let n: u64 = arg("--tasks")
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = arg("--rounds").and_then(|s| s.parse().ok()).unwrap_or(7);
    let mut bins: Vec<(&str, PathBuf)> = vec![("new", broker_binary().to_path_buf())];
    if let Some(old) = arg("--old") {
        bins.push(("old", PathBuf::from(old)));
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let empty = dir.path().join("empty.db");
    let big = dir.path().join("big.db");
    eprintln!("load average {}", a2a_benches::report::load_average());
    let built = std::time::Instant::now();
    scale::build(&big, n, scale::TEXT_200);
    let disk = scale::disk_bytes(&big);
    eprintln!(
        "built {n} tasks in {:.1} s: {:.0} B per task; PRAGMA quick_check alone {:.0} ms",
        built.elapsed().as_secs_f64(),
        disk as f64 / n as f64,
        ms(scale::page_check(&big))
    );
    // The first start on the built database (no clean-exit record: every
    // page read), with the new broker; it creates the empty one too.
    let first = clean_start(&bins[0].1, &big);
    clean_start(&bins[0].1, &empty);
    println!(
        "first start on the built {n}-task database (pages read): {:.1} ms",
        ms(first)
    );
    println!("load average {}", a2a_benches::report::load_average());
    println!();
    println!("| broker | empty, after a clean exit | {n} tasks, after a clean exit | ratio (median of rounds) | {n} tasks, after a kill -9 |");
    println!("|---|---:|---:|---:|---:|");
    let mut per_bin: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = vec![Default::default(); bins.len()];
    for _ in 0..rounds {
        for (k, (_, bin)) in bins.iter().enumerate() {
            let e = ms(clean_start(bin, &empty));
            let b = ms(clean_start(bin, &big));
            per_bin[k].0.push(e);
            per_bin[k].1.push(b);
            per_bin[k].2.push(b / e);
        }
    }
    for (k, (name, bin)) in bins.iter().enumerate() {
        let killed: Vec<f64> = (0..3).map(|_| ms(start_after_kill(bin, &big))).collect();
        let (e, b, r) = per_bin[k].clone();
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {:.2}x | {:.0} ms |",
            median(e),
            median(b),
            median(r),
            median(killed)
        );
    }
    println!("load average {}", a2a_benches::report::load_average());
}
