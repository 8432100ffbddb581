//! The summary of a run: throughput, latency percentiles, the checks and
//! the CPU profile, as a table for people and JSON for machines.

use crate::engine::{overlapping_grants, Faults, Tally};
use crate::profile::ThreadCpu;
use serde::{Deserialize, Serialize};

/// Send-to-event latency, µs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub samples: u64,
}

impl Latency {
    /// Percentiles of `v` (sorted here).
    pub fn of(mut v: Vec<u32>) -> Latency {
        if v.is_empty() {
            return Latency::default();
        }
        v.sort_unstable();
        let at = |q: f64| u64::from(v[((v.len() - 1) as f64 * q).round() as usize]);
        Latency {
            p50_us: at(0.50),
            p99_us: at(0.99),
            max_us: at(1.0),
            samples: v.len() as u64,
        }
    }
}

/// The exactly-once, in-order and terminal checks.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Checks {
    /// Everything below holds.
    pub passed: bool,
    /// Every task created completed, and the broker lists none open.
    pub all_terminal: bool,
    /// Every expected event arrived, none twice, none dropped (lagged).
    pub exactly_once: bool,
    /// Per recipient, `seq` went 1, 2, 3, … with no step back or jump.
    pub in_order: bool,
    /// The lease workload: every delegate got its lease, and no two
    /// conflicting leases were held at once (always true for claims).
    #[serde(default)]
    pub leases_exclusive: bool,
    /// Pairs of conflicting leases whose spans intersect.
    #[serde(default)]
    pub overlapping_grants: u64,
    pub expected_events: u64,
    pub received_events: u64,
    /// The tally's counts, as they are (flattened: the report's JSON
    /// keeps its fields).
    #[serde(flatten)]
    pub faults: Faults,
    pub tasks_unfinished: u64,
    pub errors: u64,
    pub error_samples: Vec<String>,
}

/// The lease workload's figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Leases {
    /// Leases granted (one per delegate).
    pub granted: u64,
    /// Acquires refused with A2A_LEASE_CONFLICT.
    pub conflicts: u64,
    /// Time refused delegates then waited for their lease: the sum and
    /// the longest, ms.
    pub wait_ms: f64,
    pub wait_max_ms: f64,
    /// `a2a.lease.released` events received (not in `events`).
    pub released_events: u64,
}

/// One run's summary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub transport: String,
    /// Whether every connection got the event ring (`ring` only).
    pub event_ring: Option<bool>,
    /// What the transport column means when it is not what was asked.
    pub note: Option<String>,
    pub durability: String,
    pub delegates: usize,
    /// Worker processes (0: threads of this process).
    pub processes: usize,
    pub connections: usize,
    pub window: usize,
    /// The measured phase (claims and jobs), seconds.
    pub seconds: f64,
    pub tasks: u64,
    pub claims: u64,
    /// `broadcast` or `neighbours` (claims), `leases`.
    pub claim_mode: String,
    /// The lease workload's figures (`None` for claims).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leases: Option<Leases>,
    pub events: u64,
    pub registrations: u64,
    pub tasks_per_s: f64,
    pub events_per_s: f64,
    /// Every event's send-to-event latency.
    pub latency: Latency,
    /// Job tasks' events only (claims left out: a broadcast's claim storm
    /// grows as N²).
    pub job_latency: Latency,
    pub checks: Checks,
    /// Thread groups by CPU over the measured phase, busiest first.
    pub cpu: Vec<ThreadCpu>,
    /// The thread group with the busiest thread, as a sentence.
    pub bottleneck: Option<String>,
    /// The machine's 1-minute load average at the end (a shared machine
    /// starves every thread alike: read the figures beside it).
    pub load_avg: Option<f64>,
    /// The soak's samples (`--soak` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<crate::soak::SoakReport>,
}

/// What the caller knows that the tally does not.
pub struct Labels {
    pub transport: String,
    pub event_ring: Option<bool>,
    pub durability: String,
    pub delegates: usize,
    pub processes: usize,
    pub connections: usize,
    pub window: usize,
}

impl Report {
    /// Builds the summary and runs the checks.
    pub fn new(l: Labels, t: Tally, cpu: Vec<ThreadCpu>) -> Report {
        let seconds = (t.t1_ns.saturating_sub(t.t0_ns)) as f64 / 1e9;
        let per_s = |n: u64| {
            if seconds > 0.0 {
                n as f64 / seconds
            } else {
                0.0
            }
        };
        let unfinished = (t.jobs_created - t.jobs_completed.min(t.jobs_created))
            + (t.claims_created - t.claims_completed.min(t.claims_created));
        let all_terminal = t.faults.open_tasks == 0 && unfinished == 0;
        let exactly_once = t.faults.once() && t.events == t.expected_events;
        let in_order = t.faults.in_order();
        let leasing = t.claim_mode == "leases";
        let overlapping = overlapping_grants(&t.lease_spans);
        let leases_exclusive =
            !leasing || (overlapping == 0 && t.leases_granted == l.delegates as u64);
        let checks = Checks {
            passed: all_terminal
                && exactly_once
                && in_order
                && leases_exclusive
                && t.errors == 0
                && t.jobs_completed > 0,
            all_terminal,
            exactly_once,
            in_order,
            leases_exclusive,
            overlapping_grants: overlapping,
            expected_events: t.expected_events,
            received_events: t.events,
            faults: t.faults,
            tasks_unfinished: unfinished,
            errors: t.errors,
            error_samples: t.error_samples,
        };
        let note = match l.event_ring {
            Some(false) => {
                Some("event ring declined by the broker: events came on the socket".into())
            }
            _ => None,
        };
        let bottleneck = cpu
            .iter()
            .max_by(|a, b| a.busiest.total_cmp(&b.busiest))
            .map(|t| {
                format!(
                    "{} `{}` ({} thread{}): busiest {:.0}% of a core, {:.2} CPU-s, {:.2} s waiting for a core",
                    t.process,
                    t.name,
                    t.threads,
                    if t.threads == 1 { "" } else { "s" },
                    t.busiest * 100.0,
                    t.cpu_s,
                    t.waited_s
                )
            });
        Report {
            transport: l.transport,
            event_ring: l.event_ring,
            note,
            durability: l.durability,
            delegates: l.delegates,
            processes: l.processes,
            connections: l.connections,
            window: l.window,
            seconds,
            tasks: t.jobs_completed,
            claims: t.claims_completed,
            leases: leasing.then_some(Leases {
                granted: t.leases_granted,
                conflicts: t.lease_conflicts,
                wait_ms: t.lease_wait_ms,
                wait_max_ms: t.lease_wait_max_ms,
                released_events: t.lease_events,
            }),
            claim_mode: t.claim_mode,
            events: t.events,
            registrations: t.registrations,
            tasks_per_s: per_s(t.jobs_completed),
            events_per_s: per_s(t.events),
            latency: Latency::of(t.latencies_us),
            job_latency: Latency::of(t.job_latencies_us),
            checks,
            cpu: cpu.into_iter().take(8).collect(),
            bottleneck,
            load_avg: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok())),
            soak: None,
        }
    }

    /// The transport as the table shows it (`ring (declined)` when the
    /// broker said no).
    pub fn transport_label(&self) -> String {
        match self.event_ring {
            Some(false) => format!("{} (declined)", self.transport),
            _ => self.transport.clone(),
        }
    }
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

/// The summary table, one row per run, then each run's check details and
/// bottleneck.
pub fn table(reports: &[Report]) -> String {
    let mut out = String::new();
    let header = [
        "transport",
        "durability",
        "N",
        "procs",
        "tasks",
        "events",
        "secs",
        "tasks/s",
        "events/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "jobs p99",
        "checks",
    ];
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            vec![
                r.transport_label(),
                r.durability.clone(),
                r.delegates.to_string(),
                if r.processes == 0 {
                    "threads".into()
                } else {
                    r.processes.to_string()
                },
                r.tasks.to_string(),
                r.events.to_string(),
                format!("{:.2}", r.seconds),
                format!("{:.0}", r.tasks_per_s),
                format!("{:.0}", r.events_per_s),
                ms(r.latency.p50_us),
                ms(r.latency.p99_us),
                ms(r.latency.max_us),
                ms(r.job_latency.p99_us),
                if r.checks.passed {
                    "pass".into()
                } else {
                    "FAIL".into()
                },
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<String>| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i < 2 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    out.push_str(&line(header.iter().map(|s| s.to_string()).collect()));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    for r in reports {
        let c = &r.checks;
        let taking = match &r.leases {
            Some(l) => format!(
                "leases {} granted, {} conflicts, waited {:.1} ms (longest {:.1} ms), {} release events, {} conflicting held at once",
                l.granted, l.conflicts, l.wait_ms, l.wait_max_ms, l.released_events, c.overlapping_grants
            ),
            None => format!("claims {} ({})", r.claims, r.claim_mode),
        };
        out.push_str(&format!(
            "\n{} / {} / N={}: {taking}, {} registrations; events {}/{} expected, {} duplicate, {} out of order, {} gaps, {} lagged, {} unexpected; open tasks {}, unfinished {}; errors {}",
            r.transport_label(), r.durability, r.delegates, r.registrations,
            c.received_events, c.expected_events, c.faults.duplicates, c.faults.out_of_order, c.faults.gaps, c.faults.lagged,
            c.faults.unexpected, c.faults.open_tasks, c.tasks_unfinished, c.errors
        ));
        if let Some(n) = &r.note {
            out.push_str(&format!("\n  note: {n}"));
        }
        if let Some(b) = &r.bottleneck {
            out.push_str(&format!("\n  busiest thread: {b}"));
        }
        if let Some(l) = r.load_avg {
            out.push_str(&format!("\n  machine load average: {l:.1}"));
        }
        if let Some(s) = &r.soak {
            out.push_str(&format!("\n  {}", s.summary()));
        }
        for e in &c.error_samples {
            out.push_str(&format!("\n  error: {e}"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Labels {
        Labels {
            transport: "socket-binary".into(),
            event_ring: None,
            durability: "full".into(),
            delegates: 2,
            processes: 0,
            connections: 1,
            window: 1,
        }
    }

    fn clean() -> Tally {
        Tally {
            registrations: 2,
            jobs_created: 2,
            jobs_completed: 2,
            claims_created: 2,
            claims_completed: 2,
            claim_mode: "broadcast".into(),
            expected_events: 14,
            events: 14,
            latencies_us: (1..=100).collect(),
            t0_ns: 0,
            t1_ns: 2_000_000_000,
            ..Tally::default()
        }
    }

    #[test]
    fn a_clean_tally_passes_with_rates_and_percentiles() {
        let r = Report::new(labels(), clean(), Vec::new());
        assert!(r.checks.passed, "{:?}", r.checks);
        assert_eq!(r.tasks_per_s, 1.0);
        assert_eq!(r.events_per_s, 7.0);
        assert_eq!(
            (r.latency.p50_us, r.latency.p99_us, r.latency.max_us),
            (51, 99, 100)
        );
    }

    /// The faults are one struct in the code, flattened in the JSON: a
    /// worker's tally and the report keep the fields they had.
    #[test]
    fn faults_keep_their_json_fields() {
        let mut t = clean();
        t.faults.gaps = 2;
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["gaps"], 2, "{v}");
        let back: Tally = serde_json::from_value(v).unwrap();
        assert_eq!(back.faults, t.faults);
        let r = Report::new(labels(), t, Vec::new());
        assert_eq!(serde_json::to_value(&r.checks).unwrap()["gaps"], 2);
    }

    #[test]
    fn each_fault_fails_its_check() {
        type Fault = (&'static str, fn(&mut Tally));
        let faults: [Fault; 8] = [
            ("missing event", |t| t.events -= 1),
            ("duplicate", |t| t.faults.duplicates = 1),
            ("out of order", |t| t.faults.out_of_order = 1),
            ("gap", |t| t.faults.gaps = 1),
            ("lagged", |t| t.faults.lagged = 1),
            ("open task", |t| t.faults.open_tasks = 1),
            ("unfinished job", |t| t.jobs_completed -= 1),
            ("error", |t| t.errors = 1),
        ];
        for (what, f) in faults {
            let mut t = clean();
            f(&mut t);
            let r = Report::new(labels(), t, Vec::new());
            assert!(!r.checks.passed, "{what} passed");
            assert!(table(&[r]).contains("FAIL"), "{what}");
        }
    }

    #[test]
    fn leases_pass_only_when_every_delegate_got_one_and_none_overlapped() {
        use crate::engine::{lease_paths, LeaseSpan};
        let leased = |spans: Vec<LeaseSpan>| {
            let mut t = clean();
            t.claim_mode = "leases".into();
            t.claims_created = 0;
            t.claims_completed = 0;
            t.leases_granted = spans.len() as u64;
            t.lease_conflicts = 1;
            t.lease_spans = spans;
            Report::new(labels(), t, Vec::new())
        };
        let span = |holder, from_ns, to_ns| LeaseSpan {
            holder,
            paths: lease_paths(holder),
            from_ns,
            to_ns,
        };
        let r = leased(vec![span(0, 0, 10), span(1, 10, 20)]);
        assert!(r.checks.passed, "{:?}", r.checks);
        assert_eq!(r.leases.as_ref().map(|l| l.conflicts), Some(1));
        assert!(table(&[r]).contains("1 conflicts"));
        let r = leased(vec![span(0, 0, 10), span(1, 5, 20)]);
        assert!(!r.checks.passed && r.checks.overlapping_grants == 1);
        assert!(table(&[r]).contains("FAIL"));
        let r = leased(vec![span(0, 0, 10)]);
        assert!(!r.checks.leases_exclusive, "a delegate without its lease");
    }

    #[test]
    fn a_declined_ring_is_labelled() {
        let mut l = labels();
        l.transport = "ring".into();
        l.event_ring = Some(false);
        let r = Report::new(l, clean(), Vec::new());
        assert_eq!(r.transport_label(), "ring (declined)");
        assert!(r.note.is_some());
    }
}
