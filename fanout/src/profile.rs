//! Where the CPU went during a run, without `perf`: each thread's CPU time
//! from `/proc/PID/task/*/schedstat` (ns resolution), read at the start and
//! the end of the measured phase, for the broker and for the generator's
//! own process (its client connection threads). Threads are grouped by
//! name with trailing digits dropped (`a2a-read-3` → `a2a-read-*`); a group
//! busy for nearly the whole wall time of one of its threads is a
//! bottleneck candidate. The second `schedstat` field, time spent runnable
//! but waiting for a core, tells a thread that was busy from one that was
//! starved (a shared machine).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// CPU ns per thread id, with the thread's name.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// tid → (name, CPU ns, run-queue wait ns).
    threads: HashMap<u32, (String, u64, u64)>,
    at: Option<Instant>,
}

/// Reads every thread of `pid` (`"self"` for this process).
pub fn snapshot(pid: &str) -> Snapshot {
    let mut threads = HashMap::new();
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for entry in dir.flatten() {
            let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let p = entry.path();
            let name = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
            let Ok(stat) = std::fs::read_to_string(p.join("schedstat")) else {
                continue;
            };
            let mut f = stat.split_whitespace().map(|v| v.parse::<u64>().ok());
            if let (Some(Some(cpu)), Some(Some(wait))) = (f.next(), f.next()) {
                threads.insert(tid, (name.trim().to_owned(), cpu, wait));
            }
        }
    }
    Snapshot {
        threads,
        at: Some(Instant::now()),
    }
}

/// One group of threads' CPU over the phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThreadCpu {
    /// `broker` or `generator`.
    pub process: String,
    /// The threads' name, digits folded (`a2a-read-*`).
    pub name: String,
    pub threads: usize,
    /// CPU seconds used over the phase.
    pub cpu_s: f64,
    /// CPU seconds per wall second of the busiest thread of the group (1.0:
    /// one thread saturated).
    pub busiest: f64,
    /// Seconds its threads were runnable but waited for a core (summed).
    pub waited_s: f64,
}

fn group_name(name: &str) -> String {
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if trimmed.len() < name.len() {
        format!("{trimmed}*")
    } else {
        name.to_owned()
    }
}

/// The CPU each thread group used between two snapshots, busiest first.
pub fn diff(process: &str, a: &Snapshot, b: &Snapshot) -> Vec<ThreadCpu> {
    let wall = match (a.at, b.at) {
        (Some(x), Some(y)) => y.duration_since(x).as_secs_f64().max(1e-9),
        _ => return Vec::new(),
    };
    let mut groups: BTreeMap<String, (usize, u64, u64, u64)> = BTreeMap::new();
    for (tid, (name, ns, wait)) in &b.threads {
        let (cpu0, wait0) = a.threads.get(tid).map_or((0, 0), |t| (t.1, t.2));
        let used = ns.saturating_sub(cpu0);
        let g = groups.entry(group_name(name)).or_default();
        g.0 += 1;
        g.1 += used;
        g.2 = g.2.max(used);
        g.3 += wait.saturating_sub(wait0);
    }
    let mut out: Vec<ThreadCpu> = groups
        .into_iter()
        .map(|(name, (threads, total, max, waited))| ThreadCpu {
            process: process.to_owned(),
            name,
            threads,
            cpu_s: total as f64 / 1e9,
            busiest: max as f64 / 1e9 / wall,
            waited_s: waited as f64 / 1e9,
        })
        .filter(|t| t.cpu_s > 0.0)
        .collect();
    out.sort_by(|x, y| y.cpu_s.total_cmp(&x.cpu_s));
    out
}
