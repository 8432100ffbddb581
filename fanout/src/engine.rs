//! The delegates' state machine. Every delegate is one agent (plus, when
//! its send budget is spent, a fresh registration for its further
//! requests) driven entirely by events: no thread per delegate.
//!
//! A job task, requester R and worker W (each arrow is an event):
//! R creates it → W `submitted`; W asks `input-required` → R; R answers →
//! W `working`; W attaches an artifact → R `artifact-update`; W completes →
//! R `completed`. Five events, each stamped with its sender's clock for the
//! latency.
//!
//! Before its jobs a delegate takes its files, one of two ways
//! ([`Workload`]):
//! - leases (the default): it leases its own directory and one file it
//!   shares with its neighbour (`src/shared/mI.rs`, the odd delegate of a
//!   pair by a pattern, `src/shared/mI.*`), through a second registration
//!   in the run's shared context (leases live in the caller's context;
//!   each delegate's tasks keep their own), holds them for [`LEASE_HOLD`]
//!   (the edit) and releases them. A conflict (the neighbour holds the
//!   file) is counted and the delegate asks again, parked until the
//!   release; the summary has grants, conflicts and the time spent
//!   waiting, and the run fails if two conflicting leases were ever held
//!   at once (the spans from grant to release, seen from the client, lie
//!   within the broker's);
//! - claims: a broadcast (`to: "*"`) whose tasks each worker acknowledges
//!   by completing them: two events per peer.
//!
//! Checks, per recipient agent: `seq` strictly +1 from 1 (a repeat or a
//! step back is out of order, a jump is a gap), no (task, version) twice,
//! no `a2a.lagged`; and at the end every event expected arrived and no task
//! of any agent is left in a non-terminal state (asked of the broker).
//!
//! Bounds of the contract the workload respects: `A2A_MAX_SENDS_PER_RUN`
//! (a delegate whose registration has spent its sends registers again, as
//! a restarted delegate would: the broker names it `dI-2`, and only its
//! requests move there), and `A2A_MAX_TASKS_PER_CONTEXT` (a broadcast to
//! more peers than it allows is replaced by claims sent to
//! [`NEIGHBOUR_CLAIMS`] neighbours, and the summary says so).

use crate::driver::{
    now_ns, Done, Driver, Ev, EvKind, LeaseAnswer, LeaseAsk, StatusTo, OPEN_STATES,
};
use a2a_client::proto::limits::{A2A_MAX_SENDS_PER_RUN, A2A_MAX_TASKS_PER_CONTEXT};
use parking_lot::{Condvar, Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Peers a claim goes to when a broadcast would exceed the contract's
/// bounds.
pub const NEIGHBOUR_CLAIMS: usize = 16;

/// Events of one job task, and of one claim task.
pub const JOB_EVENTS: u64 = 5;
pub const CLAIM_EVENTS: u64 = 2;

/// How delegates take their files before their jobs (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// `a2a.leases.acquire` of overlapping files, held for the edit.
    Leases,
    /// A broadcast claim, acknowledged by every peer.
    Claims,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Leases => "leases",
            Workload::Claims => "claims",
        }
    }
}

/// The context every delegate's lease-taking registration joins: leases
/// live in their caller's context, so delegates share one to meet.
pub const LEASE_CONTEXT: &str = "fanout-files";

/// A lease's TTL: far beyond a run's hold, so none expires mid-edit.
pub const LEASE_TTL_SECONDS: u64 = 60;

/// How long a refused delegate parks for the holder's release (within
/// `A2A_MAX_LEASE_WAIT_SECONDS`).
pub const LEASE_WAIT_SECONDS: u64 = 30;

/// How long a delegate holds its lease: the edit.
pub const LEASE_HOLD: Duration = Duration::from_millis(20);

/// What delegate `index` leases: its own directory and the file it shares
/// with its pair (the odd one names it by a pattern).
pub fn lease_paths(index: usize) -> Vec<String> {
    let pair = index / 2;
    let shared = if index % 2 == 0 {
        format!("src/shared/m{pair}.rs")
    } else {
        format!("src/shared/m{pair}.*")
    };
    vec![format!("src/d{index}/"), shared]
}

/// One granted lease as its holder saw it: from the grant's answer to the
/// release's request, a span inside the broker's own.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LeaseSpan {
    /// The delegate index.
    pub holder: usize,
    pub paths: Vec<String>,
    pub from_ns: u64,
    pub to_ns: u64,
}

/// Pairs of spans of different holders whose paths overlap and whose
/// times intersect: conflicting leases held at once (all exclusive).
pub fn overlapping_grants(spans: &[LeaseSpan]) -> u64 {
    use a2a_client::proto::lease_path::{normalize, overlaps};
    let normal: Vec<Vec<String>> = spans
        .iter()
        .map(|s| {
            s.paths
                .iter()
                .map(|p| normalize(p).unwrap_or_else(|_| p.clone()))
                .collect()
        })
        .collect();
    let mut n = 0;
    for (i, a) in spans.iter().enumerate() {
        for (j, b) in spans.iter().enumerate().skip(i + 1) {
            let at_once = a.from_ns < b.to_ns && b.from_ns < a.to_ns;
            if a.holder != b.holder
                && at_once
                && normal[i]
                    .iter()
                    .any(|p| normal[j].iter().any(|q| overlaps(p, q)))
            {
                n += 1;
            }
        }
    }
    n
}

/// Text prefixes that tell a claim from a job at the worker, and the
/// claim's acknowledgement at the requester.
const CLAIM: &str = "claim";
const CLAIM_ACK: &str = "claim acknowledged";

/// What one process runs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Delegates in the whole run (N).
    pub delegates: usize,
    /// The first delegate index this process runs.
    pub first: usize,
    /// How many delegates this process runs.
    pub count: usize,
    /// Job tasks in the whole run (split evenly over the delegates).
    pub tasks: Option<u64>,
    /// Or: start new tasks for this long.
    pub seconds: Option<f64>,
    /// Job tasks each delegate keeps in flight.
    pub window: usize,
    /// Connections the agents are spread over.
    pub connections: usize,
    /// Longest the run may take before it is called failed.
    pub timeout: Duration,
    /// How delegates take their files.
    pub workload: Workload,
}

/// What a run (or one worker process of it) counted. Worker processes
/// send theirs to the parent as JSON, which adds them up.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Tally {
    pub registrations: u64,
    pub jobs_created: u64,
    pub jobs_completed: u64,
    pub claims_created: u64,
    pub claims_completed: u64,
    /// `broadcast` or `neighbours` (see the module doc); `leases` for the
    /// lease workload.
    pub claim_mode: String,
    /// Leases granted, refused (conflicts), and the time refused delegates
    /// then waited for theirs (sum and longest, ms).
    #[serde(default)]
    pub leases_granted: u64,
    #[serde(default)]
    pub lease_conflicts: u64,
    #[serde(default)]
    pub lease_wait_ms: f64,
    #[serde(default)]
    pub lease_wait_max_ms: f64,
    /// `a2a.lease.released` events (counted apart: how many a release
    /// wakes is the broker's to say).
    #[serde(default)]
    pub lease_events: u64,
    /// Every granted lease's span, for the overlap check.
    #[serde(default)]
    pub lease_spans: Vec<LeaseSpan>,
    pub expected_events: u64,
    pub events: u64,
    /// What went wrong with the events and tasks (flattened: the JSON
    /// between processes keeps its fields).
    #[serde(flatten)]
    pub faults: Faults,
    pub errors: u64,
    pub error_samples: Vec<String>,
    /// Send-to-event latencies, µs (every event).
    pub latencies_us: Vec<u32>,
    /// The same, of job tasks' events only (claims left out).
    #[serde(default)]
    pub job_latencies_us: Vec<u32>,
    /// The measured phase (claims, then jobs), ns since the Unix epoch.
    pub t0_ns: u64,
    pub t1_ns: u64,
}

/// What a run's event and task checks count as wrong: each must end at 0
/// for the run to pass. A worker's tally carries it, the parent adds them
/// up, and the report's checks show it as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Faults {
    pub duplicates: u64,
    pub out_of_order: u64,
    pub gaps: u64,
    pub lagged: u64,
    /// Events the workload never causes (a push, a failed task).
    pub unexpected: u64,
    /// Tasks the broker still lists in a non-terminal state at the end.
    pub open_tasks: u64,
}

impl Faults {
    /// Adds another process's counts to these.
    pub fn add(&mut self, o: Faults) {
        self.duplicates += o.duplicates;
        self.out_of_order += o.out_of_order;
        self.gaps += o.gaps;
        self.lagged += o.lagged;
        self.unexpected += o.unexpected;
        self.open_tasks += o.open_tasks;
    }

    /// Every expected event arrived at most once and none was dropped or
    /// unasked for (the count of arrivals is the caller's to compare).
    pub fn once(&self) -> bool {
        self.duplicates == 0 && self.lagged == 0 && self.unexpected == 0
    }

    /// Per recipient, `seq` went 1, 2, 3, … with no step back or jump.
    pub fn in_order(&self) -> bool {
        self.out_of_order == 0 && self.gaps == 0
    }
}

impl Tally {
    /// Adds another process's tally to this one.
    pub fn merge(&mut self, o: Tally) {
        self.registrations += o.registrations;
        self.jobs_created += o.jobs_created;
        self.jobs_completed += o.jobs_completed;
        self.claims_created += o.claims_created;
        self.claims_completed += o.claims_completed;
        self.leases_granted += o.leases_granted;
        self.lease_conflicts += o.lease_conflicts;
        self.lease_wait_ms += o.lease_wait_ms;
        self.lease_wait_max_ms = self.lease_wait_max_ms.max(o.lease_wait_max_ms);
        self.lease_events += o.lease_events;
        self.lease_spans.extend(o.lease_spans);
        if self.claim_mode.is_empty() {
            self.claim_mode = o.claim_mode;
        }
        self.expected_events += o.expected_events;
        self.events += o.events;
        self.faults.add(o.faults);
        self.errors += o.errors;
        for e in o.error_samples {
            if self.error_samples.len() < 10 {
                self.error_samples.push(e);
            }
        }
        self.latencies_us.extend(o.latencies_us);
        self.job_latencies_us.extend(o.job_latencies_us);
        self.t0_ns = if self.t0_ns == 0 {
            o.t0_ns
        } else {
            self.t0_ns.min(o.t0_ns)
        };
        self.t1_ns = self.t1_ns.max(o.t1_ns);
    }
}

/// One registered agent's receiving side.
struct SlotState {
    /// Index into [`Engine::dels`].
    del: usize,
    /// Sends charged (or reserved) to this registration.
    sends: u32,
    /// The registration in [`LEASE_CONTEXT`] (no tasks: left out of the
    /// open-task check).
    editor: bool,
    last_seq: Option<u64>,
    seen: HashSet<(String, u64)>,
}

struct Del {
    /// The global delegate index (`dI`).
    index: usize,
    slot0: usize,
    /// The slot its requests go out from (changes when its budget is spent).
    requester: usize,
    peers: Vec<String>,
    next_peer: usize,
    in_flight: usize,
    started: u64,
    quota: u64,
    claim_calls: usize,
    claims_left: i64,
    /// The lease workload: the lease-taking slot, and when it was first
    /// refused (ns; 0: not refused).
    editor: Option<usize>,
    refused_at: u64,
    jobs_on: bool,
    rotating: bool,
    failed: bool,
    finished: bool,
}

#[derive(Default)]
struct Counters {
    registrations: AtomicU64,
    jobs_created: AtomicU64,
    jobs_completed: AtomicU64,
    claims_created: AtomicU64,
    claims_completed: AtomicU64,
    leases_granted: AtomicU64,
    lease_conflicts: AtomicU64,
    lease_events: AtomicU64,
    expected: AtomicU64,
    events: AtomicU64,
    duplicates: AtomicU64,
    out_of_order: AtomicU64,
    gaps: AtomicU64,
    lagged: AtomicU64,
    unexpected: AtomicU64,
    errors: AtomicU64,
}

/// A countdown with a deadline.
struct Latch {
    left: Mutex<usize>,
    cv: Condvar,
}

impl Latch {
    fn new(n: usize) -> Arc<Latch> {
        Arc::new(Latch {
            left: Mutex::new(n),
            cv: Condvar::new(),
        })
    }
    fn down(&self) {
        let mut l = self.left.lock();
        *l = l.saturating_sub(1);
        if *l == 0 {
            self.cv.notify_all();
        }
    }
    fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut l = self.left.lock();
        while *l > 0 {
            if self.cv.wait_until(&mut l, deadline).timed_out() {
                return *l == 0;
            }
        }
        true
    }
}

/// The state machine of one process's delegates.
pub struct Engine {
    plan: Plan,
    driver: OnceLock<Arc<dyn Driver>>,
    slots: RwLock<Vec<Arc<Mutex<SlotState>>>>,
    dels: Vec<Mutex<Del>>,
    c: Counters,
    lat: Mutex<Vec<u32>>,
    job_lat: Mutex<Vec<u32>>,
    samples: Mutex<Vec<String>>,
    deadline: OnceLock<Instant>,
    stop: AtomicBool,
    finished: Mutex<usize>,
    finished_cv: Condvar,
    claim_mode: OnceLock<&'static str>,
    lease_spans: Mutex<Vec<LeaseSpan>>,
    /// Waits of refused delegates, ms.
    lease_waits: Mutex<Vec<f64>>,
}

/// Is `name` a delegate's first registration (`d` and digits), the only
/// agents jobs are sent to?
fn is_delegate(name: &str) -> bool {
    name.strip_prefix('d')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

impl Engine {
    /// An engine for `plan`; [`Engine::attach`] gives it its driver.
    pub fn new(plan: Plan) -> Arc<Engine> {
        let per = |d: usize| -> u64 {
            match plan.tasks {
                Some(t) => {
                    let n = plan.delegates.max(1) as u64;
                    t / n + u64::from((d as u64) < t % n)
                }
                None => u64::MAX,
            }
        };
        let dels = (0..plan.count)
            .map(|k| {
                Mutex::new(Del {
                    index: plan.first + k,
                    slot0: k,
                    requester: k,
                    peers: Vec::new(),
                    next_peer: k,
                    in_flight: 0,
                    started: 0,
                    quota: per(plan.first + k),
                    claim_calls: 0,
                    claims_left: 0,
                    editor: None,
                    refused_at: 0,
                    jobs_on: false,
                    rotating: false,
                    failed: false,
                    finished: false,
                })
            })
            .collect();
        let slots = (0..plan.count)
            .map(|k| {
                Arc::new(Mutex::new(SlotState {
                    del: k,
                    sends: 0,
                    editor: false,
                    last_seq: None,
                    seen: HashSet::new(),
                }))
            })
            .collect();
        Arc::new(Engine {
            plan,
            driver: OnceLock::new(),
            slots: RwLock::new(slots),
            dels,
            c: Counters::default(),
            lat: Mutex::new(Vec::new()),
            job_lat: Mutex::new(Vec::new()),
            samples: Mutex::new(Vec::new()),
            deadline: OnceLock::new(),
            stop: AtomicBool::new(false),
            finished: Mutex::new(0),
            finished_cv: Condvar::new(),
            claim_mode: OnceLock::new(),
            lease_spans: Mutex::new(Vec::new()),
            lease_waits: Mutex::new(Vec::new()),
        })
    }

    /// The sink a driver hands events to (weak: the driver's agents must
    /// not keep the engine alive).
    pub fn sink(self: &Arc<Self>) -> crate::driver::Sink {
        let weak = Arc::downgrade(self);
        Arc::new(move |slot, ev| {
            if let Some(e) = weak.upgrade() {
                e.on_event(slot, ev);
            }
        })
    }

    /// Gives the engine its driver (once).
    pub fn attach(&self, driver: Arc<dyn Driver>) {
        let _ = self.driver.set(driver);
    }

    fn driver(&self) -> &Arc<dyn Driver> {
        self.driver.get().expect("Engine::attach before running")
    }

    /// Job tasks completed and events received so far (for progress).
    pub fn progress(&self) -> (u64, u64) {
        (
            self.c.jobs_completed.load(Ordering::Relaxed),
            self.c.events.load(Ordering::Relaxed),
        )
    }

    /// Job tasks this process will run (`None` when time-bound).
    pub fn target(&self) -> Option<u64> {
        self.plan
            .tasks
            .map(|_| self.dels.iter().map(|d| d.lock().quota).sum())
    }

    fn error(&self, what: impl Into<String>) {
        self.c.errors.fetch_add(1, Ordering::Relaxed);
        let mut s = self.samples.lock();
        if s.len() < 10 {
            s.push(what.into());
        }
    }

    /// A completion that only reports a failure.
    fn check(self: &Arc<Self>, what: &'static str) -> Done<()> {
        let me = self.clone();
        Box::new(move |r| {
            if let Err(e) = r {
                me.error(format!("{what}: {e}"));
            }
        })
    }

    fn slot(&self, slot: usize) -> Option<Arc<Mutex<SlotState>>> {
        self.slots.read().get(slot).cloned()
    }

    /// Phase 1: registers every delegate; false on failure.
    pub fn register_all(self: &Arc<Self>) -> bool {
        let latch = Latch::new(self.plan.count);
        for k in 0..self.plan.count {
            let index = self.plan.first + k;
            let me = self.clone();
            let l = latch.clone();
            self.driver().register(
                k,
                k % self.plan.connections.max(1),
                &format!("fanout-{index}"),
                &format!("d{index}"),
                Box::new(move |r| {
                    match r {
                        Ok(_) => {
                            me.c.registrations.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => me.error(format!("register d{index}: {e}")),
                    }
                    l.down();
                }),
            );
        }
        if !(latch.wait(self.plan.timeout) && self.c.errors.load(Ordering::Relaxed) == 0) {
            return false;
        }
        self.plan.workload != Workload::Leases || self.register_editors()
    }

    /// The lease workload: registers each delegate again in
    /// [`LEASE_CONTEXT`] (as `dI-files`), where it takes its leases.
    fn register_editors(self: &Arc<Self>) -> bool {
        let latch = Latch::new(self.plan.count);
        for k in 0..self.plan.count {
            let index = self.plan.first + k;
            let slot = {
                let mut slots = self.slots.write();
                slots.push(Arc::new(Mutex::new(SlotState {
                    del: k,
                    sends: 0,
                    editor: true,
                    last_seq: None,
                    seen: HashSet::new(),
                })));
                slots.len() - 1
            };
            let me = self.clone();
            let l = latch.clone();
            self.driver().register(
                slot,
                k % self.plan.connections.max(1),
                LEASE_CONTEXT,
                &format!("d{index}-files"),
                Box::new(move |r| {
                    match r {
                        Ok(_) => {
                            me.c.registrations.fetch_add(1, Ordering::Relaxed);
                            me.dels[k].lock().editor = Some(slot);
                        }
                        Err(e) => me.error(format!("register d{index}-files: {e}")),
                    }
                    l.down();
                }),
            );
        }
        latch.wait(self.plan.timeout) && self.c.errors.load(Ordering::Relaxed) == 0
    }

    /// Phase 2: every delegate lists the others until it sees all N - 1
    /// (other processes register at their own pace); false on timeout.
    pub fn discover_all(self: &Arc<Self>) -> bool {
        let want = self.plan.delegates.saturating_sub(1);
        let deadline = Instant::now() + self.plan.timeout;
        loop {
            let missing: Vec<usize> = (0..self.plan.count)
                .filter(|&k| self.dels[k].lock().peers.len() < want)
                .collect();
            if missing.is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                self.error(format!(
                    "{} delegates never saw all {want} peers",
                    missing.len()
                ));
                return false;
            }
            let latch = Latch::new(missing.len());
            for k in missing {
                let me = self.clone();
                let l = latch.clone();
                self.driver().list_agents(
                    k,
                    Box::new(move |r| {
                        match r {
                            Ok(names) => {
                                let mut peers: Vec<String> =
                                    names.into_iter().filter(|n| is_delegate(n)).collect();
                                peers.sort_by_key(|n| n[1..].parse::<usize>().unwrap_or(0));
                                me.dels[k].lock().peers = peers;
                            }
                            Err(e) => me.error(format!("list agents: {e}")),
                        }
                        l.down();
                    }),
                );
            }
            latch.wait(deadline.saturating_duration_since(Instant::now()));
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Phase 3 and 4: claims, then jobs, all event-driven; waits until
    /// every delegate is done (or the timeout), and returns the measured
    /// phase's start and end.
    pub fn work(self: &Arc<Self>) -> (u64, u64) {
        let t0 = now_ns();
        let start = Instant::now();
        if let Some(s) = self.plan.seconds {
            let _ = self.deadline.set(start + Duration::from_secs_f64(s));
        }
        if self.plan.workload == Workload::Leases {
            let _ = self.claim_mode.set("leases");
            for k in 0..self.plan.count {
                self.lease(k, None);
            }
        } else {
            let peers = self.plan.delegates.saturating_sub(1);
            let broadcast =
                peers <= A2A_MAX_TASKS_PER_CONTEXT && peers <= A2A_MAX_SENDS_PER_RUN as usize;
            let _ = self
                .claim_mode
                .set(if broadcast { "broadcast" } else { "neighbours" });
            for k in 0..self.plan.count {
                self.claim(k, broadcast);
            }
        }
        let limit =
            start + self.plan.timeout + Duration::from_secs_f64(self.plan.seconds.unwrap_or(0.0));
        let mut f = self.finished.lock();
        while *f < self.plan.count {
            if self.finished_cv.wait_until(&mut f, limit).timed_out() {
                let left = self.plan.count - *f;
                drop(f);
                self.stop.store(true, Ordering::Relaxed);
                self.error(format!("timed out with {left} delegates unfinished"));
                return (t0, now_ns());
            }
        }
        (t0, now_ns())
    }

    fn claim(self: &Arc<Self>, k: usize, broadcast: bool) {
        let (slot, index, targets) = {
            let mut d = self.dels[k].lock();
            let targets: Vec<String> = if broadcast {
                vec!["*".into()]
            } else {
                let n = d.peers.len();
                (0..NEIGHBOUR_CLAIMS.min(n))
                    .map(|j| d.peers[(d.index + j) % n].clone())
                    .collect()
            };
            d.claim_calls = targets.len();
            (d.slot0, d.index, targets)
        };
        let cost = if broadcast {
            self.plan.delegates - 1
        } else {
            targets.len()
        };
        if let Some(s) = self.slot(slot) {
            s.lock().sends += cost as u32;
        }
        if targets.is_empty() {
            self.claims_settled(k);
        }
        for to in targets {
            let me = self.clone();
            self.driver().create(
                slot,
                &to,
                &format!("{CLAIM} src/d{index}/**"),
                now_ns(),
                Box::new(move |r| {
                    let mut d = me.dels[k].lock();
                    d.claim_calls -= 1;
                    match r {
                        Ok(ids) => {
                            let n = ids.len() as u64;
                            me.c.claims_created.fetch_add(n, Ordering::Relaxed);
                            me.c.expected.fetch_add(n * CLAIM_EVENTS, Ordering::Relaxed);
                            d.claims_left += n as i64;
                        }
                        Err(e) => {
                            d.failed = true;
                            drop(d);
                            me.error(format!("claim: {e}"));
                            me.maybe_finish(k);
                            return;
                        }
                    }
                    drop(d);
                    me.claims_settled(k);
                }),
            );
        }
    }

    /// The lease workload: asks for the delegate's files (parked up to
    /// `wait` seconds after a refusal); once granted, holds them for
    /// [`LEASE_HOLD`] and releases them, then starts the jobs.
    fn lease(self: &Arc<Self>, k: usize, wait: Option<u64>) {
        let (slot, index) = {
            let d = self.dels[k].lock();
            (d.editor, d.index)
        };
        let Some(slot) = slot else {
            self.fail(k, format!("d{index} has no lease registration"));
            return;
        };
        let paths = lease_paths(index);
        let me = self.clone();
        self.driver().acquire_lease(
            slot,
            LeaseAsk {
                paths: &paths.clone(),
                ttl_seconds: LEASE_TTL_SECONDS,
                wait_seconds: wait,
            },
            Box::new(move |r| match r {
                Ok(LeaseAnswer::Granted { id }) => {
                    let from_ns = now_ns();
                    me.c.leases_granted.fetch_add(1, Ordering::Relaxed);
                    let refused_at = me.dels[k].lock().refused_at;
                    if refused_at > 0 {
                        let ms = from_ns.saturating_sub(refused_at) as f64 / 1e6;
                        me.lease_waits.lock().push(ms);
                    }
                    // The edit: on a thread of its own, so that no reader
                    // thread sleeps.
                    let me2 = me.clone();
                    let spawned = std::thread::Builder::new()
                        .name("fanout-edit".into())
                        .spawn(move || {
                            std::thread::sleep(LEASE_HOLD);
                            me2.release(k, slot, id, paths, from_ns);
                        });
                    if let Err(e) = spawned {
                        me.fail(k, format!("edit thread: {e}"));
                    }
                }
                Ok(LeaseAnswer::Conflict { holder }) if wait.is_none() => {
                    me.c.lease_conflicts.fetch_add(1, Ordering::Relaxed);
                    me.dels[k].lock().refused_at = now_ns();
                    let _ = holder;
                    me.lease(k, Some(LEASE_WAIT_SECONDS));
                }
                Ok(LeaseAnswer::Conflict { holder }) => {
                    me.c.lease_conflicts.fetch_add(1, Ordering::Relaxed);
                    me.fail(
                        k,
                        format!(
                            "d{index}: {holder} still held its files after {LEASE_WAIT_SECONDS} s"
                        ),
                    );
                }
                Err(e) => me.fail(k, format!("lease: {e}")),
            }),
        );
    }

    fn release(
        self: &Arc<Self>,
        k: usize,
        slot: usize,
        id: String,
        paths: Vec<String>,
        from_ns: u64,
    ) {
        let holder = self.dels[k].lock().index;
        // Stamped before the request leaves: the broker releases after it.
        self.lease_spans.lock().push(LeaseSpan {
            holder,
            paths,
            from_ns,
            to_ns: now_ns(),
        });
        let me = self.clone();
        self.driver().release_lease(
            slot,
            &id,
            Box::new(move |r| match r {
                Ok(()) => me.claims_settled(k),
                Err(e) => me.fail(k, format!("release: {e}")),
            }),
        );
    }

    /// A delegate that cannot go on: counted, and finished.
    fn fail(&self, k: usize, what: String) {
        self.dels[k].lock().failed = true;
        self.error(what);
        self.maybe_finish(k);
    }

    /// Starts the jobs once every claim call is answered and every claim
    /// acknowledged.
    fn claims_settled(self: &Arc<Self>, k: usize) {
        {
            let mut d = self.dels[k].lock();
            if d.jobs_on || d.claim_calls > 0 || d.claims_left > 0 {
                return;
            }
            d.jobs_on = true;
        }
        self.start_next(k);
    }

    fn may_start(&self, d: &Del) -> bool {
        d.started < d.quota
            && !self.stop.load(Ordering::Relaxed)
            && self.deadline.get().is_none_or(|t| Instant::now() < *t)
    }

    fn start_next(self: &Arc<Self>, k: usize) {
        loop {
            let mut d = self.dels[k].lock();
            if d.failed || !d.jobs_on || d.rotating || d.peers.is_empty() {
                break;
            }
            if d.in_flight >= self.plan.window || !self.may_start(&d) {
                break;
            }
            let slot = d.requester;
            let Some(s) = self.slot(slot) else { break };
            {
                // A job costs its requester two sends: the creation and
                // the answer.
                let mut s = s.lock();
                if s.sends + 2 > A2A_MAX_SENDS_PER_RUN {
                    d.rotating = true;
                    drop(s);
                    drop(d);
                    self.rotate(k);
                    return;
                }
                s.sends += 2;
            }
            let to = d.peers[d.next_peer % d.peers.len()].clone();
            d.next_peer += 1;
            d.in_flight += 1;
            d.started += 1;
            let n = d.started;
            let index = d.index;
            drop(d);
            let me = self.clone();
            self.driver().create(
                slot,
                &to,
                &format!("job {n} of d{index}: fix the failing test"),
                now_ns(),
                Box::new(move |r| match r {
                    Ok(ids) => {
                        me.c.jobs_created
                            .fetch_add(ids.len() as u64, Ordering::Relaxed);
                        me.c.expected
                            .fetch_add(ids.len() as u64 * JOB_EVENTS, Ordering::Relaxed);
                    }
                    Err(e) => {
                        me.error(format!("create job: {e}"));
                        let mut d = me.dels[k].lock();
                        d.in_flight -= 1;
                        d.failed = true;
                        drop(d);
                        me.maybe_finish(k);
                    }
                }),
            );
        }
        self.maybe_finish(k);
    }

    /// Registers a fresh agent for a delegate's further requests.
    fn rotate(self: &Arc<Self>, k: usize) {
        let index = self.dels[k].lock().index;
        let slot = {
            let mut slots = self.slots.write();
            slots.push(Arc::new(Mutex::new(SlotState {
                del: k,
                sends: 0,
                editor: false,
                last_seq: None,
                seen: HashSet::new(),
            })));
            slots.len() - 1
        };
        let me = self.clone();
        self.driver().register(
            slot,
            k % self.plan.connections.max(1),
            &format!("fanout-{index}"),
            &format!("d{index}"),
            Box::new(move |r| {
                {
                    let mut d = me.dels[k].lock();
                    d.rotating = false;
                    match r {
                        Ok(_) => {
                            me.c.registrations.fetch_add(1, Ordering::Relaxed);
                            d.requester = slot;
                        }
                        Err(e) => {
                            d.failed = true;
                            drop(d);
                            me.error(format!("register again: {e}"));
                        }
                    }
                }
                me.start_next(k);
            }),
        );
    }

    fn maybe_finish(&self, k: usize) {
        let mut d = self.dels[k].lock();
        if d.finished || d.rotating || d.in_flight > 0 {
            return;
        }
        // Done: failed, or working and allowed to start nothing more.
        if !(d.failed || (d.jobs_on && !self.may_start(&d))) {
            return;
        }
        d.finished = true;
        drop(d);
        *self.finished.lock() += 1;
        self.finished_cv.notify_all();
    }

    fn job_done(self: &Arc<Self>, k: usize) {
        {
            let mut d = self.dels[k].lock();
            d.in_flight = d.in_flight.saturating_sub(1);
        }
        self.start_next(k);
    }

    /// Counts `ev` against its connection's order (sequence gaps, events
    /// out of order, duplicates); the delegate the connection belongs to.
    fn note_order(&self, s: &Mutex<SlotState>, ev: &Ev) -> usize {
        let mut s = s.lock();
        if let Some(seq) = ev.seq {
            match s.last_seq {
                None if seq != 1 => {
                    self.c.gaps.fetch_add(1, Ordering::Relaxed);
                }
                Some(l) if seq <= l => {
                    self.c.out_of_order.fetch_add(1, Ordering::Relaxed);
                }
                Some(l) if seq > l + 1 => {
                    self.c.gaps.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
            s.last_seq = Some(s.last_seq.map_or(seq, |l| l.max(seq)));
        }
        if ev.version > 0 && !s.seen.insert((ev.task_id.clone(), ev.version)) {
            self.c.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        s.del
    }

    fn on_event(self: &Arc<Self>, slot: usize, ev: Ev) {
        let now = now_ns();
        let Some(s) = self.slot(slot) else {
            self.c.unexpected.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let k = self.note_order(&s, &ev);
        if ev.kind == EvKind::LeaseReleased {
            self.c.lease_events.fetch_add(1, Ordering::Relaxed);
        } else {
            self.c.events.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(t) = ev.sent_ns {
            let us = (now.saturating_sub(t) / 1000).min(u64::from(u32::MAX)) as u32;
            self.lat.lock().push(us);
            let claim = matches!(ev.kind, EvKind::Status { .. }) && ev.text.starts_with(CLAIM);
            if !claim {
                self.job_lat.lock().push(us);
            }
        }
        let d = self.driver();
        let task = ev.task_id.as_str();
        match ev.kind {
            EvKind::Lagged { dropped } => {
                self.c.lagged.fetch_add(dropped.max(1), Ordering::Relaxed);
            }
            // The generator sets no push config.
            EvKind::Push => {
                self.c.unexpected.fetch_add(1, Ordering::Relaxed);
            }
            EvKind::Artifact => {}
            // A lease it waited on ended: the parked acquire answers by
            // itself.
            EvKind::LeaseReleased => {}
            EvKind::Status { state, is_final } => match state.as_str() {
                "submitted" if ev.text.starts_with(CLAIM) => {
                    d.status(
                        slot,
                        task,
                        StatusTo {
                            state: "completed",
                            text: CLAIM_ACK,
                        },
                        now_ns(),
                        self.check("ack claim"),
                    );
                }
                "submitted" => {
                    d.status(
                        slot,
                        task,
                        StatusTo {
                            state: "input-required",
                            text: "which branch?",
                        },
                        now_ns(),
                        self.check("ask for input"),
                    );
                }
                "input-required" => {
                    d.reply(slot, task, "main", now_ns(), self.check("answer"));
                }
                "working" => {
                    let me = self.clone();
                    let t = task.to_owned();
                    d.artifact(
                        slot,
                        task,
                        now_ns(),
                        Box::new(move |r| match r {
                            Ok(()) => me.driver().status(
                                slot,
                                &t,
                                StatusTo {
                                    state: "completed",
                                    text: "done",
                                },
                                now_ns(),
                                me.check("complete"),
                            ),
                            Err(e) => me.error(format!("artifact: {e}")),
                        }),
                    );
                }
                "completed" if ev.text == CLAIM_ACK => {
                    self.c.claims_completed.fetch_add(1, Ordering::Relaxed);
                    self.dels[k].lock().claims_left -= 1;
                    self.claims_settled(k);
                }
                "completed" => {
                    self.c.jobs_completed.fetch_add(1, Ordering::Relaxed);
                    self.job_done(k);
                }
                other => {
                    self.c.unexpected.fetch_add(1, Ordering::Relaxed);
                    if is_final {
                        self.error(format!("task {task} ended {other}"));
                        self.job_done(k);
                    }
                }
            },
        }
    }

    /// Phase 5 (after every process's requests are done): waits briefly
    /// for the expected events, asks the broker for every agent's open
    /// tasks, closes the connections and returns the tally.
    pub fn finish(self: &Arc<Self>, t0: u64, t1: u64) -> Tally {
        let settle = Instant::now() + Duration::from_secs(5);
        while self.c.events.load(Ordering::Relaxed) < self.c.expected.load(Ordering::Relaxed)
            && Instant::now() < settle
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        // One registration per delegate: a delegate's registrations are one
        // party (`fanout-I`/`dI`, registered again), whose tasks each of
        // them lists alike; listing through every one of them (thousands in
        // a soak) would list the same tasks that many times.
        let latest: Vec<usize> = {
            let slots = self.slots.read();
            let mut by_del = std::collections::BTreeMap::new();
            for (i, s) in slots.iter().enumerate() {
                let s = s.lock();
                if !s.editor {
                    by_del.insert(s.del, i);
                }
            }
            by_del.into_values().collect()
        };
        let open = Arc::new(AtomicU64::new(0));
        let latch = Latch::new(latest.len() * OPEN_STATES.len());
        for slot in latest {
            for state in OPEN_STATES {
                let me = self.clone();
                let l = latch.clone();
                let open = open.clone();
                self.driver().count_tasks(
                    slot,
                    state,
                    Box::new(move |r| {
                        match r {
                            Ok(n) => {
                                open.fetch_add(n, Ordering::Relaxed);
                            }
                            Err(e) => me.error(format!("list open tasks: {e}")),
                        }
                        l.down();
                    }),
                );
            }
        }
        if !latch.wait(Duration::from_secs(30)) {
            self.error("no answer to the open-task check");
        }
        self.driver().close();
        let c = &self.c;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let waits = std::mem::take(&mut *self.lease_waits.lock());
        Tally {
            leases_granted: get(&c.leases_granted),
            lease_conflicts: get(&c.lease_conflicts),
            lease_wait_ms: waits.iter().sum(),
            lease_wait_max_ms: waits.iter().copied().fold(0.0, f64::max),
            lease_events: get(&c.lease_events),
            lease_spans: std::mem::take(&mut *self.lease_spans.lock()),
            registrations: get(&c.registrations),
            jobs_created: get(&c.jobs_created),
            jobs_completed: get(&c.jobs_completed),
            claims_created: get(&c.claims_created),
            claims_completed: get(&c.claims_completed),
            claim_mode: self.claim_mode.get().copied().unwrap_or("none").to_owned(),
            expected_events: get(&c.expected),
            events: get(&c.events),
            faults: Faults {
                duplicates: get(&c.duplicates),
                out_of_order: get(&c.out_of_order),
                gaps: get(&c.gaps),
                lagged: get(&c.lagged),
                unexpected: get(&c.unexpected),
                open_tasks: open.load(Ordering::Relaxed),
            },
            errors: get(&c.errors),
            error_samples: self.samples.lock().clone(),
            latencies_us: std::mem::take(&mut *self.lat.lock()),
            job_latencies_us: std::mem::take(&mut *self.job_lat.lock()),
            t0_ns: t0,
            t1_ns: t1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Done;

    /// A driver that registers nothing and answers every check with zero:
    /// enough to feed the engine events by hand.
    struct Null;

    impl Driver for Null {
        fn register(&self, _: usize, _: usize, _: &str, _: &str, done: Done<String>) {
            done(Ok("d0".into()))
        }
        fn list_agents(&self, _: usize, done: Done<Vec<String>>) {
            done(Ok(Vec::new()))
        }
        fn create(&self, _: usize, _: &str, _: &str, _: u64, done: Done<Vec<String>>) {
            done(Ok(Vec::new()))
        }
        fn reply(&self, _: usize, _: &str, _: &str, _: u64, done: Done<()>) {
            done(Ok(()))
        }
        fn status(&self, _: usize, _: &str, _: StatusTo<'_>, _: u64, done: Done<()>) {
            done(Ok(()))
        }
        fn artifact(&self, _: usize, _: &str, _: u64, done: Done<()>) {
            done(Ok(()))
        }
        fn count_tasks(&self, _: usize, _: &'static str, done: Done<u64>) {
            done(Ok(0))
        }
        fn acquire_lease(&self, _: usize, _: LeaseAsk<'_>, done: Done<LeaseAnswer>) {
            done(Ok(LeaseAnswer::Granted { id: "l".into() }))
        }
        fn release_lease(&self, _: usize, _: &str, done: Done<()>) {
            done(Ok(()))
        }
        fn close(&self) {}
    }

    fn engine() -> Arc<Engine> {
        let e = Engine::new(Plan {
            delegates: 2,
            first: 0,
            count: 1,
            tasks: Some(0),
            seconds: None,
            window: 1,
            connections: 1,
            timeout: Duration::from_secs(5),
            workload: Workload::Claims,
        });
        e.attach(Arc::new(Null));
        e
    }

    fn artifact(seq: u64, task: &str, version: u64) -> Ev {
        Ev {
            seq: Some(seq),
            task_id: task.into(),
            version,
            kind: EvKind::Artifact,
            sent_ns: Some(now_ns()),
            text: String::new(),
        }
    }

    #[test]
    fn a_clean_stream_counts_no_fault() {
        let e = engine();
        for (i, v) in [(1, 1), (2, 2), (3, 3)] {
            e.on_event(0, artifact(i, "t", v));
        }
        let t = e.finish(0, 1);
        assert_eq!(
            (
                t.events,
                t.faults.out_of_order,
                t.faults.gaps,
                t.faults.duplicates
            ),
            (3, 0, 0, 0)
        );
        assert_eq!(t.latencies_us.len(), 3);
    }

    #[test]
    fn repeats_steps_back_jumps_and_replays_are_each_counted() {
        let e = engine();
        // 1, 2, 2 (repeat), 5 (jump), 3 (step back), and a second event
        // for (t, 1) under a fresh seq (a replay).
        for (seq, v) in [(1, 1), (2, 2), (2, 3), (5, 4), (3, 5), (6, 1)] {
            e.on_event(0, artifact(seq, "t", v));
        }
        let t = e.finish(0, 1);
        assert_eq!(t.faults.out_of_order, 2, "{t:?}");
        assert_eq!(t.faults.gaps, 1, "{t:?}");
        assert_eq!(t.faults.duplicates, 1, "{t:?}");
    }

    #[test]
    fn a_first_seq_other_than_one_is_a_gap_and_lagged_is_counted() {
        let e = engine();
        e.on_event(0, artifact(2, "t", 1));
        e.on_event(
            0,
            Ev {
                seq: None,
                task_id: String::new(),
                version: 0,
                kind: EvKind::Lagged { dropped: 3 },
                sent_ns: None,
                text: String::new(),
            },
        );
        let t = e.finish(0, 1);
        assert_eq!((t.faults.gaps, t.faults.lagged), (1, 3));
    }

    fn span(holder: usize, index: usize, from_ns: u64, to_ns: u64) -> LeaseSpan {
        LeaseSpan {
            holder,
            paths: lease_paths(index),
            from_ns,
            to_ns,
        }
    }

    #[test]
    fn pairs_share_one_file_and_only_overlapping_spans_of_a_pair_count() {
        use a2a_client::proto::lease_path::{normalize, overlaps};
        let p = |i| {
            lease_paths(i)
                .into_iter()
                .map(|p| normalize(&p).unwrap())
                .collect::<Vec<_>>()
        };
        let any = |a: &[String], b: &[String]| a.iter().any(|x| b.iter().any(|y| overlaps(x, y)));
        assert!(any(&p(4), &p(5)), "a pair's paths overlap");
        assert!(!any(&p(5), &p(6)), "neighbouring pairs' do not");
        // One after the other: fine; at once: one violation; another
        // pair's at once: fine.
        assert_eq!(
            overlapping_grants(&[span(4, 4, 0, 10), span(5, 5, 10, 20)]),
            0
        );
        assert_eq!(
            overlapping_grants(&[span(4, 4, 0, 10), span(5, 5, 9, 20)]),
            1
        );
        assert_eq!(
            overlapping_grants(&[span(4, 4, 0, 10), span(6, 6, 0, 10)]),
            0
        );
    }

    #[test]
    fn delegate_names_are_told_from_re_registrations() {
        assert!(is_delegate("d0") && is_delegate("d511"));
        assert!(!is_delegate("d3-2") && !is_delegate("d") && !is_delegate("x1"));
    }
}
