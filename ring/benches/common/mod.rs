//! Helpers shared by the ring benches: thread pinning (from the test kit), the load average,
//! rate formatting, medians. None under loom (no shared memory: the
//! benches are then empty programs).

#![cfg(not(loom))]

pub use a2a_testkit::pin::{pin_self as pin, placements};

/// The 1, 5 and 15 minute load averages, as printed in /proc/loadavg.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Whether cargo runs this as a benchmark (`cargo bench` passes `--bench`;
/// `cargo test --benches` does not).
pub fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}
