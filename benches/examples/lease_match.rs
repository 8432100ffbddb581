//! Lease path comparison at the bounds (docs/protocol.md §11 Leases): the
//! cost of one pair of costly paths (`lease_path::overlaps`) against a raw
//! baseline, a plain byte comparison of the same strings, and against the
//! table the broker filled before (`lease_path::table::table_overlaps`:
//! every segment against every segment, every byte against every byte);
//! then the cost of one call that spends its whole budget
//! (`A2A_MAX_LEASE_MATCH_STEPS`) comparing 64 asked paths with 64 x 64 held
//! ones, the way the broker's writer does (`Pattern::overlaps` within one
//! `Work`), beside what the table would have taken for the same pairs.
//!
//! ```text
//! cargo run --release -p a2a-benches --example lease_match [-- --rounds 7]
//! ```

use a2a_proto::lease_path::table::table_overlaps;
use a2a_proto::lease_path::{overlaps, Pattern, Work};
use a2a_proto::limits::{A2A_MAX_LEASE_MATCH_STEPS, A2A_MAX_LEASE_PATHS, A2A_MAX_LEASE_PATH_BYTES};
use std::hint::black_box;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn rounds() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
}

/// `unit` repeated to fill a path at the bound, then `end`.
fn fill(unit: &str, end: &str) -> String {
    let mut p = unit.repeat((A2A_MAX_LEASE_PATH_BYTES - 8) / unit.len());
    p.push_str(end);
    p
}

/// CPU time of this thread so far (ns, `schedstat`): what the broker's
/// writer would spend, without the time a busy machine gives other
/// processes meanwhile.
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let ns = stat
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .expect("schedstat's first field");
    Duration::from_nanos(ns)
}

/// The median CPU time of one run of `f`, over `rounds` rounds of about
/// 100 ms each (the scheduler adds up a thread's time at its ticks, so a
/// shorter round would read as zero or as a whole tick).
fn median_each(rounds: usize, mut f: impl FnMut()) -> Duration {
    let (t, mut reps) = (std::time::Instant::now(), 0u32);
    while t.elapsed() < Duration::from_millis(20) {
        f();
        reps += 1;
    }
    let reps = reps * 5;
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = thread_cpu();
            for _ in 0..reps {
                f();
            }
            (thread_cpu() - t) / reps
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// The `i`th path of a kind.
type PathOf = fn(usize) -> String;

/// A run of segments sought along 1,000 bytes of one-byte segments.
fn run_of(n: usize) -> String {
    format!("**/{}b/**", "a/".repeat(n))
}

fn main() {
    let rounds = rounds();
    println!("one pair (median CPU time of {rounds} rounds): before (the table), now, a byte comparison of the same strings");
    let pairs = [
        ("two a*a* globs", fill("a*", "x1"), fill("a*", "x2")),
        ("glob vs literal", fill("a*", "b"), fill("a", "a")),
        ("500 segments each", fill("a/", "x1"), fill("a/", "x2")),
        ("a ** run along 500", fill("a/", "x1"), run_of(250)),
        (
            "4 plain segments",
            "src/lease/path/h1.rs".into(),
            "src/lease/path/a1.rs".into(),
        ),
    ];
    let mut before_per_pair = Vec::new();
    for (name, a, b) in &pairs {
        assert_eq!(overlaps(a, b), table_overlaps(a, b), "{name}");
        let before = median_each(rounds, || {
            black_box(table_overlaps(black_box(a), black_box(b)));
        });
        let now = median_each(rounds, || {
            black_box(overlaps(black_box(a), black_box(b)));
        });
        let same = a.clone();
        let base = median_each(rounds, || {
            black_box(black_box(a.as_bytes()) == black_box(same.as_bytes()));
        });
        // A comparison of 20 bytes reads as 0 ns: count it as 1.
        let x = |t: Duration| t.as_secs_f64() / base.max(Duration::from_nanos(1)).as_secs_f64();
        println!(
            "  {name:<20} before {before:>10.1?} (x{:.0})  now {now:>9.1?} (x{:.0})  bytes {base:>7.1?}",
            x(before),
            x(now),
        );
        before_per_pair.push(before);
    }

    println!(
        "one call: 64 asked x {0} x {0} held paths, budget {A2A_MAX_LEASE_MATCH_STEPS} steps",
        A2A_MAX_LEASE_PATHS
    );
    let calls: [(&str, PathOf, PathOf); 5] = [
        (
            "a*a* globs",
            |i| fill("a*", &format!("x{i}")),
            |k| fill("b*", &format!("y{k}")),
        ),
        (
            "glob vs literal",
            |i| fill("a*", &format!("x{i}")),
            |k| fill("a", &format!("x{k}")),
        ),
        (
            "500 segments each",
            |i| fill("a/", &format!("x{i}")),
            |k| fill("a/", &format!("y{k}")),
        ),
        (
            "a ** run along 500",
            |i| fill("a/", &format!("x{i}")),
            |_| run_of(250),
        ),
        (
            "4 plain segments",
            |i| format!("src/lease/path/h{i}.rs"),
            |k| format!("src/lease/path/a{k}.rs"),
        ),
    ];
    for ((name, held, asked), before) in calls.into_iter().zip(before_per_pair) {
        let n = A2A_MAX_LEASE_PATHS;
        let held: Vec<Pattern> = (0..n * n).map(|i| Pattern::new(&held(i))).collect();
        let asked: Vec<Pattern> = (0..n).map(|k| Pattern::new(&asked(k))).collect();
        let mut spent = 0;
        let mut pairs = 0u64;
        let t = median_each(rounds, || {
            let mut work = Work::new(A2A_MAX_LEASE_MATCH_STEPS);
            pairs = 0;
            'call: for h in &held {
                for a in &asked {
                    pairs += 1;
                    match h.overlaps(a, &mut work) {
                        Ok(hit) => {
                            black_box(hit);
                        }
                        Err(_) => break 'call,
                    }
                }
            }
            spent = work.spent();
        });
        println!(
            "  {name:<20} now {t:>9.2?}  {pairs:>6} pairs  {spent:>7} steps  {:.2} ns/step;  before ~{:.1?} (all {} pairs x one pair's table)",
            t.as_nanos() as f64 / spent as f64,
            before * (n * n * n) as u32,
            n * n * n
        );
    }
}
