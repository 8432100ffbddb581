//! What the benchmarks print: rates from the samples criterion measured,
//! and ratios against the baseline of the same run.
//!
//! Criterion keeps its statistics to itself, so each benchmark's
//! `iter_custom` closure also records here what it measured; criterion
//! calls it for its warm-up first and then exactly `sample_size` times, so
//! the last `sample_size` records are the samples.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// Is this a `cargo bench` run? (`cargo test --benches` runs bench targets
/// without `--bench`; they then only say so and exit.)
pub fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// `/proc/loadavg`'s first three fields (the 1, 5 and 15 minute load), so a
/// reader of the figures knows how busy the shared machine was.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The samples of one benchmark: (items done, time taken).
#[derive(Clone, Default)]
pub struct Samples(Rc<RefCell<Vec<(u64, Duration)>>>);

impl Samples {
    pub fn new() -> Samples {
        Samples::default()
    }

    /// Records one run of `items` that took `d`; returns `d`.
    pub fn record(&self, items: u64, d: Duration) -> Duration {
        self.0.borrow_mut().push((items, d));
        d
    }

    /// The median rate (items per second) over the last `last` records;
    /// `None` if the benchmark did not run (filtered out).
    pub fn rate(&self, last: usize) -> Option<f64> {
        let v = self.0.borrow();
        let from = v.len().saturating_sub(last);
        median(
            v[from..]
                .iter()
                .map(|(n, d)| *n as f64 / d.as_secs_f64().max(1e-9))
                .collect(),
        )
    }
}

/// The median of some values (`None` for none).
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// A rate for a table: `123456/s`, or `-` when it did not run.
pub fn fmt_rate(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{r:.0}/s"))
}

/// `a / b` as `0.73x`, or `-`.
pub fn fmt_ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    }
}

/// `met` / `MISSED` for a ratio against its target.
pub fn verdict(a: Option<f64>, b: Option<f64>, target: f64) -> &'static str {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a / b >= target => "met",
        (Some(_), Some(_)) => "MISSED",
        _ => "not run",
    }
}
