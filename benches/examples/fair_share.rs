//! Fair share of the broker: a well-behaved client's send + complete while
//! other connections flood (`a2a_benches::flood`), as ratios to its own
//! quiet p50 measured in alternating rounds; each flood kind on a fresh
//! broker, and with `--old PATH` the same for another broker binary right
//! after (paired before/after).
//!
//! ```sh
//! cargo run --release -p a2a-benches --example fair_share -- \
//!     [--old OLD/a2a-broker] [--kinds pipelined,batches,junk,files] \
//!     [--flooders 2] [--rounds 5] [--pairs 100] [--durability full|normal]
//! ```

use a2a_benches::binaries::broker_binary;
use a2a_benches::flood::{measure, spawn, Flood, Outcome};
use std::path::PathBuf;

fn main() {
    let mut old: Option<PathBuf> = None;
    let mut kinds: Vec<Flood> = Flood::ALL.to_vec();
    let (mut flooders, mut rounds, mut pairs) = (2usize, 5usize, 100usize);
    let mut durability = "full".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--old" => old = Some(PathBuf::from(value())),
            "--kinds" => {
                kinds = value()
                    .split(',')
                    .map(|k| Flood::parse(k).unwrap_or_else(|| panic!("unknown flood kind {k}")))
                    .collect()
            }
            "--flooders" => flooders = value().parse().expect("--flooders N"),
            "--rounds" => rounds = value().parse().expect("--rounds N"),
            "--pairs" => pairs = value().parse().expect("--pairs N"),
            "--durability" => durability = value(),
            other => panic!("unknown argument {other}"),
        }
    }
    let new = broker_binary().to_path_buf();
    let mut bins = vec![("new", new)];
    if let Some(o) = old {
        bins.insert(0, ("old", o));
    }
    println!(
        "fair share: {flooders} flooders, {rounds} rounds of {pairs} send + complete pairs, --durability {durability}"
    );
    println!("| flood | binary | quiet p50 | p50 (x quiet) | p99 (x quiet) | mean (x quiet) | paired p50 ratio | flood answers/s |");
    println!("|---|---|---|---|---|---|---|---|");
    for kind in kinds {
        for (label, bin) in &bins {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let (mut p, target) = spawn(bin, dir.path(), &["--durability", &durability]);
            let o: Outcome = measure(&target, kind, flooders, rounds, pairs);
            p.kill();
            let q = o.quiet_p50.as_secs_f64();
            println!(
                "| {} | {label} | {:.0} µs | {:.0} µs ({:.1}x) | {:.0} µs ({:.1}x) | {:.0} µs ({:.1}x) | {:.2}x | {:.0} |",
                kind.name(),
                q * 1e6,
                o.p50.as_secs_f64() * 1e6,
                o.p50.as_secs_f64() / q,
                o.p99.as_secs_f64() * 1e6,
                o.p99.as_secs_f64() / q,
                o.mean.as_secs_f64() * 1e6,
                o.mean.as_secs_f64() / q,
                o.paired_ratio,
                o.flood_rate,
            );
        }
    }
}
