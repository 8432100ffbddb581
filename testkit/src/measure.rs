//! What a test may measure of a broker process without timing it: its peak
//! resident memory and one thread's CPU time (both from `/proc`, Linux),
//! compared as ratios within one run. Absolute times mean little on a
//! shared, noisy machine.

use std::time::Duration;

/// Peak resident set of a process (`VmHWM`), in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    status_kb(pid, "VmHWM") * 1024
}

/// Current resident set of a process (`VmRSS`), in bytes.
pub fn rss(pid: u32) -> u64 {
    status_kb(pid, "VmRSS") * 1024
}

fn status_kb(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

/// CPU time used so far by the process's thread named `name` (ns
/// resolution, from `schedstat`; a tick-based `stat` would round to 10 ms).
pub fn thread_cpu(pid: u32, name: &str) -> Duration {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/task: {e}"));
    for entry in tasks.flatten() {
        let dir = entry.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(dir.join("schedstat")).expect("schedstat");
            let ns: u64 = stat
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .expect("schedstat's first field");
            return Duration::from_nanos(ns);
        }
    }
    panic!("no thread named {name} in process {pid}");
}

/// The median of some durations.
pub fn median(mut v: Vec<Duration>) -> Duration {
    assert!(!v.is_empty(), "the median of nothing");
    v.sort();
    v[v.len() / 2]
}
