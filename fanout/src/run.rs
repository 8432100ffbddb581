//! One run of the generator: a broker (started on a temporary database,
//! or a running one), a driver per transport, the engine's phases, the
//! progress display, the CPU profile, and the [`Report`]. With
//! `processes`, the delegates are split over worker processes (this binary
//! re-executed as `a2a-fanout worker`), which report their tallies to the
//! parent as JSON lines on stdout:
//!
//! - `{"progress": [tasks, events]}` now and then while working,
//! - `{"requestsDone": true}` once its delegates' requests are all done,
//! - then, after the parent writes `finish` on its stdin (every worker's
//!   requests being done, so no task of theirs is still moving),
//!   `{"tally": {...}}`, and it exits.

use crate::binary::BinaryDriver;
use crate::driver::Driver;
use crate::engine::{Engine, Plan, Tally, Workload};
pub use crate::error::FanoutError;
use crate::ndjson::NdjsonDriver;
use crate::profile::{diff, snapshot, ThreadCpu};
use crate::report::{Labels, Report};
use crate::soak::{Sampler, SoakConfig};
use a2a_testkit::bin::{locate, Build, Profile};
use a2a_testkit::process::{socket_path_for, BrokerProcess, Spawn};
use serde_json::Value;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The environment variable a worker process gets the socket secret in.
pub const SECRET_ENV: &str = "A2A_BROKER_SECRET";

/// The transports a run can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// NDJSON on the broker's stdin/stdout (one connection).
    Stdio,
    /// NDJSON on the local socket (the minimal driver of this crate).
    SocketNdjson,
    /// Binary frames on the local socket (the Rust client `a2a-client`).
    SocketBinary,
    /// Binary frames, events through the shared-memory ring if the broker
    /// grants it.
    Ring,
}

impl Transport {
    /// Every transport, in table order.
    pub const ALL: [Transport; 4] = [
        Transport::Stdio,
        Transport::SocketNdjson,
        Transport::SocketBinary,
        Transport::Ring,
    ];

    /// The name on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::SocketNdjson => "socket-ndjson",
            Transport::SocketBinary => "socket-binary",
            Transport::Ring => "ring",
        }
    }
}

/// The broker's `--durability`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// `synchronous=FULL`: an fsync per commit group.
    Full,
    /// `synchronous=NORMAL`: no fsync per commit (WAL).
    Normal,
}

impl Durability {
    pub fn name(self) -> &'static str {
        match self {
            Durability::Full => "full",
            Durability::Normal => "normal",
        }
    }
}

/// A broker to use instead of starting one.
#[derive(Debug, Clone)]
pub struct External {
    pub socket: PathBuf,
    pub secret: String,
}

/// One run's options.
#[derive(Debug, Clone)]
pub struct Config {
    pub transport: Transport,
    pub durability: Durability,
    pub delegates: usize,
    pub tasks: Option<u64>,
    pub seconds: Option<f64>,
    pub window: usize,
    /// Connections (per process with `processes`).
    pub connections: usize,
    /// Worker processes (`None`: threads of this process).
    pub processes: Option<usize>,
    pub broker_bin: Option<PathBuf>,
    pub external: Option<External>,
    /// Show progress on stderr.
    pub progress: bool,
    pub timeout: Duration,
    /// Sample the broker as it runs (`--soak`; a broker started here).
    pub soak: Option<SoakConfig>,
    /// How delegates take their files (leases by default).
    pub workload: Workload,
}

impl Config {
    /// A config with the defaults of the command line.
    pub fn new(transport: Transport, durability: Durability, delegates: usize) -> Config {
        Config {
            transport,
            durability,
            delegates,
            tasks: Some(2000),
            seconds: None,
            window: 2,
            connections: delegates.clamp(1, 8),
            processes: None,
            broker_bin: None,
            external: None,
            progress: false,
            timeout: Duration::from_secs(120),
            soak: None,
            workload: Workload::Leases,
        }
    }

    fn check(&self) -> Result<(), FanoutError> {
        if self.delegates < 2 {
            return Err(FanoutError::Options(
                "--delegates must be at least 2".into(),
            ));
        }
        if self.window == 0 {
            return Err(FanoutError::Options("--window must be at least 1".into()));
        }
        if self.tasks.is_none() && self.seconds.is_none() {
            return Err(FanoutError::Options("give --tasks or --seconds".into()));
        }
        if self.soak.is_some() && self.external.is_some() {
            return Err(FanoutError::Options(
                "--soak samples the broker it starts (its /proc files and database): leave out --socket".into(),
            ));
        }
        if self.transport == Transport::Stdio
            && (self.processes.is_some() || self.external.is_some())
        {
            return Err(FanoutError::Options(
                "stdio is the broker's own pipe: one process, a broker started here".into(),
            ));
        }
        Ok(())
    }
}

/// The broker a run talks to.
struct Target {
    process: Option<BrokerProcess>,
    socket: Option<PathBuf>,
    secret: String,
    /// The database of a broker started here.
    db: Option<PathBuf>,
    _dir: Option<tempfile::TempDir>,
}

fn start_broker(cfg: &Config) -> Result<Target, FanoutError> {
    if let Some(e) = &cfg.external {
        return Ok(Target {
            process: None,
            socket: Some(e.socket.clone()),
            secret: e.secret.clone(),
            db: None,
            _dir: None,
        });
    }
    let dir = tempfile::Builder::new().prefix("a2a-fanout").tempdir()?;
    let db = dir.path().join("fanout.db");
    let bin = match &cfg.broker_bin {
        Some(b) => b.clone(),
        None => locate(Profile::current(), Build::IfMissing)?,
    };
    let mut spawn = Spawn::new(&db)
        .bin(bin)
        .arg("--durability")
        .arg(cfg.durability.name());
    let socket = (cfg.transport != Transport::Stdio).then(|| socket_path_for(&db));
    if let Some(s) = &socket {
        spawn = spawn.socket(s);
    }
    let process = spawn.start(Duration::from_secs(30))?;
    let secret = if socket.is_some() {
        process
            .secret()
            .ok_or_else(|| FanoutError::Connect("the broker wrote no secret file".into()))?
    } else {
        String::new()
    };
    Ok(Target {
        process: Some(process),
        socket,
        secret,
        db: Some(db),
        _dir: Some(dir),
    })
}

/// Makes the driver for `transport` (stdio takes the broker's pipes).
fn driver(
    transport: Transport,
    target: &mut Target,
    connections: usize,
    engine: &Arc<Engine>,
) -> Result<Arc<dyn Driver>, FanoutError> {
    let sink = engine.sink();
    let socket = target.socket.clone();
    let sock = || {
        socket
            .clone()
            .ok_or_else(|| FanoutError::Connect("no socket".into()))
    };
    let d: Arc<dyn Driver> = match transport {
        Transport::SocketBinary | Transport::Ring => Arc::new(
            BinaryDriver::connect(
                &sock()?,
                &target.secret,
                connections,
                transport == Transport::Ring,
                sink,
            )
            .map_err(|e| FanoutError::Connect(e.to_string()))?,
        ),
        Transport::SocketNdjson => Arc::new(
            NdjsonDriver::socket(&sock()?, &target.secret, connections, sink)
                .map_err(FanoutError::Connect)?,
        ),
        Transport::Stdio => {
            let p = target
                .process
                .as_mut()
                .ok_or_else(|| FanoutError::Connect("stdio needs a broker started here".into()))?;
            let (Some(w), Some(r)) = (p.take_stdin(), p.take_stdout()) else {
                return Err(FanoutError::Connect(
                    "the broker's stdio is not piped".into(),
                ));
            };
            Arc::new(NdjsonDriver::over(vec![(w, r)], None, sink).map_err(FanoutError::Connect)?)
        }
    };
    engine.attach(d.clone());
    Ok(d)
}

/// Live progress on stderr: a bar on a terminal, a plain line a second
/// otherwise. `read` gives (tasks done, events).
struct Progress {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(
        enabled: bool,
        label: String,
        target: Option<u64>,
        seconds: Option<f64>,
        read: impl Fn() -> (u64, u64) + Send + 'static,
    ) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        if !enabled {
            return Progress { stop, handle: None };
        }
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let start = Instant::now();
            let tty = std::io::stderr().is_terminal();
            let bar = tty.then(|| {
                let len = target.unwrap_or_else(|| (seconds.unwrap_or(1.0) * 1000.0) as u64);
                let pb = indicatif::ProgressBar::new(len);
                let unit = if target.is_some() { "tasks" } else { "ms" };
                pb.set_style(
                    indicatif::ProgressStyle::with_template(&format!(
                        "{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {unit} {{msg}}"
                    ))
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                pb.set_prefix(label.clone());
                pb
            });
            let mut last_line = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let (tasks, events) = read();
                let secs = start.elapsed().as_secs_f64();
                let rate = if secs > 0.0 {
                    events as f64 / secs
                } else {
                    0.0
                };
                match &bar {
                    Some(pb) => {
                        pb.set_position(if target.is_some() {
                            tasks
                        } else {
                            start.elapsed().as_millis() as u64
                        });
                        pb.set_message(format!("{tasks} tasks, {events} events, {rate:.0} ev/s"));
                    }
                    None if last_line.elapsed() >= Duration::from_secs(1) => {
                        last_line = Instant::now();
                        let of = target.map(|t| format!("/{t}")).unwrap_or_default();
                        eprintln!(
                            "a2a-fanout: {label}: {secs:.1} s, {tasks}{of} tasks, {events} events ({rate:.0}/s)"
                        );
                    }
                    None => {}
                }
            }
            if let Some(pb) = bar {
                pb.finish_and_clear();
            }
        });
        Progress {
            stop,
            handle: Some(handle),
        }
    }

    fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn label(cfg: &Config) -> String {
    format!(
        "{} {} N={}",
        cfg.transport.name(),
        cfg.durability.name(),
        cfg.delegates
    )
}

/// Runs one configuration and reports.
pub fn run(cfg: &Config) -> Result<Report, FanoutError> {
    cfg.check()?;
    let mut target = start_broker(cfg)?;
    let broker_pid = target.process.as_ref().map(|p| p.pid.to_string());
    let soak = cfg.soak.as_ref().and_then(|s| {
        let pid = target.process.as_ref()?.pid;
        Some(SoakStart {
            pid,
            db: target.db.clone()?,
            cfg: s,
        })
    });
    let ((tally, cpu, ring, sampler), processes) = match cfg.processes {
        None => (
            run_threads(cfg, &mut target, broker_pid.as_deref(), soak)?,
            0,
        ),
        Some(p) => {
            let p = p.clamp(1, cfg.delegates);
            (
                run_processes(cfg, &target, p, broker_pid.as_deref(), soak)?,
                p,
            )
        }
    };
    // The idle tail of a soak, before the broker goes.
    let soak = sampler.map(Sampler::finish);
    let durability = if cfg.external.is_some() {
        "external".to_owned()
    } else {
        cfg.durability.name().to_owned()
    };
    // The broker (and its temporary database) go now.
    drop(target);
    let mut report = Report::new(
        Labels {
            transport: cfg.transport.name().into(),
            event_ring: ring,
            durability,
            delegates: cfg.delegates,
            processes,
            connections: cfg.connections,
            window: cfg.window,
        },
        tally,
        cpu,
    );
    if let Some(s) = soak {
        if let Some(dir) = cfg.soak.as_ref().and_then(|c| c.out_dir.as_ref()) {
            let title = format!(
                "a2a-fanout --soak: {} {} N = {}",
                cfg.transport.name(),
                cfg.durability.name(),
                cfg.delegates
            );
            crate::soak::write(&s, &title, dir)?;
        }
        report.soak = Some(s);
    }
    Ok(report)
}

/// What a soak's sampler needs of the run.
struct SoakStart<'a> {
    pid: u32,
    db: PathBuf,
    cfg: &'a SoakConfig,
}

/// How long a run starts new jobs (`None`: a number of tasks).
fn load_for(cfg: &Config) -> Option<Duration> {
    cfg.seconds
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
}

/// What a run of the delegates gives back.
type Ran = (Tally, Vec<ThreadCpu>, Option<bool>, Option<Sampler>);

fn plan(cfg: &Config, first: usize, count: usize) -> Plan {
    Plan {
        delegates: cfg.delegates,
        first,
        count,
        tasks: cfg.tasks,
        seconds: cfg.seconds,
        window: cfg.window,
        connections: cfg.connections.max(1),
        timeout: cfg.timeout,
        workload: cfg.workload,
    }
}

fn run_threads(
    cfg: &Config,
    target: &mut Target,
    broker_pid: Option<&str>,
    soak: Option<SoakStart<'_>>,
) -> Result<Ran, FanoutError> {
    let engine = Engine::new(plan(cfg, 0, cfg.delegates));
    let d = driver(cfg.transport, target, cfg.connections, &engine)?;
    let ring = d.event_ring();
    let ready = engine.register_all() && engine.discover_all();
    let e = engine.clone();
    let progress = Progress::start(
        cfg.progress,
        label(cfg),
        engine.target(),
        cfg.seconds,
        move || e.progress(),
    );
    let sampler = soak.map(|s| {
        let e = engine.clone();
        Sampler::start(s.pid, s.db, s.cfg, load_for(cfg), move || e.progress())
    });
    let b0 = broker_pid.map(snapshot);
    let g0 = snapshot("self");
    let (t0, t1) = if ready {
        engine.work()
    } else {
        let t = crate::driver::now_ns();
        (t, t)
    };
    let mut cpu = b0
        .zip(broker_pid)
        .map(|(b0, pid)| diff("broker", &b0, &snapshot(pid)))
        .unwrap_or_default();
    cpu.extend(diff("generator", &g0, &snapshot("self")));
    progress.finish();
    let tally = engine.finish(t0, t1);
    Ok((tally, cpu, ring, sampler))
}

/// One worker process, as the parent sees it.
struct Child {
    proc: std::process::Child,
    pid: String,
    stdin: Option<std::process::ChildStdin>,
}

enum Msg {
    Done,
    Tally(Box<Tally>),
    Gone(usize, String),
}

/// The delegates one worker process runs: its index, the first
/// delegate's number and how many.
#[derive(Clone, Copy)]
struct Span {
    index: usize,
    first: usize,
    count: usize,
}

/// Starts the worker process for `span`, and the thread that reads its
/// progress, its end of requests and its tally into `tx`.
fn spawn_worker(
    cfg: &Config,
    target: &Target,
    socket: &std::path::Path,
    exe: &std::path::Path,
    span: Span,
    tx: mpsc::Sender<Msg>,
    progress_of: Arc<Vec<(AtomicU64, AtomicU64)>>,
) -> Result<Child, FanoutError> {
    let mut cmd = Command::new(exe);
    cmd.arg("worker")
        .arg("--socket")
        .arg(socket)
        .arg("--transport")
        .arg(cfg.transport.name())
        .arg("--delegates")
        .arg(cfg.delegates.to_string())
        .arg("--first")
        .arg(span.first.to_string())
        .arg("--count")
        .arg(span.count.to_string())
        .arg("--window")
        .arg(cfg.window.to_string())
        .arg("--connections")
        .arg(cfg.connections.to_string())
        .arg("--timeout")
        .arg(cfg.timeout.as_secs().to_string())
        .arg("--workload")
        .arg(cfg.workload.name())
        .env(SECRET_ENV, &target.secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(t) = cfg.tasks {
        cmd.arg("--tasks").arg(t.to_string());
    }
    if let Some(s) = cfg.seconds {
        cmd.arg("--seconds").arg(s.to_string());
    }
    let mut proc = cmd.spawn()?;
    let stdout = proc
        .stdout
        .take()
        .ok_or_else(|| FanoutError::Worker("no stdout".into()))?;
    let prog = progress_of;
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if let Some(p) = v.get("progress") {
                prog[span.index]
                    .0
                    .store(p[0].as_u64().unwrap_or(0), Ordering::Relaxed);
                prog[span.index]
                    .1
                    .store(p[1].as_u64().unwrap_or(0), Ordering::Relaxed);
            } else if v.get("requestsDone").is_some() {
                let _ = tx.send(Msg::Done);
            } else if let Some(t) = v.get("tally") {
                let msg = match serde_json::from_value::<Tally>(t.clone()) {
                    Ok(t) => Msg::Tally(Box::new(t)),
                    Err(e) => Msg::Gone(span.index, format!("bad tally: {e}")),
                };
                let _ = tx.send(msg);
                return;
            }
        }
        let _ = tx.send(Msg::Gone(span.index, "exited without a tally".into()));
    });
    Ok(Child {
        pid: proc.id().to_string(),
        stdin: proc.stdin.take(),
        proc,
    })
}

fn run_processes(
    cfg: &Config,
    target: &Target,
    processes: usize,
    broker_pid: Option<&str>,
    soak: Option<SoakStart<'_>>,
) -> Result<Ran, FanoutError> {
    let socket = target
        .socket
        .clone()
        .ok_or_else(|| FanoutError::Options("--processes needs the socket".into()))?;
    let exe = std::env::current_exe()?;
    let progress_of: Arc<Vec<(AtomicU64, AtomicU64)>> = Arc::new(
        (0..processes)
            .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
            .collect(),
    );
    let (tx, rx) = mpsc::channel::<Msg>();
    let mut children = Vec::new();
    let per = cfg.delegates / processes;
    let extra = cfg.delegates % processes;
    let mut first = 0;
    for i in 0..processes {
        let count = per + usize::from(i < extra);
        let span = Span {
            index: i,
            first,
            count,
        };
        children.push(spawn_worker(
            cfg,
            target,
            &socket,
            &exe,
            span,
            tx.clone(),
            progress_of.clone(),
        )?);
        first += count;
    }
    drop(tx);
    let target_tasks = cfg.tasks;
    let prog = progress_of.clone();
    let progress = Progress::start(
        cfg.progress,
        label(cfg),
        target_tasks,
        cfg.seconds,
        move || sum_progress(&prog),
    );
    let sampler = soak.map(|s| {
        let prog = progress_of.clone();
        Sampler::start(s.pid, s.db, s.cfg, load_for(cfg), move || {
            sum_progress(&prog)
        })
    });
    let b0 = broker_pid.map(snapshot);
    let g0: Vec<_> = children.iter().map(|c| snapshot(&c.pid)).collect();
    let limit =
        Instant::now() + cfg.timeout + Duration::from_secs_f64(cfg.seconds.unwrap_or(0.0) + 30.0);
    let mut done = 0;
    let mut tally = Tally::default();
    let mut failures = Vec::new();
    let mut tallies = 0;
    while done < processes {
        match rx.recv_timeout(limit.saturating_duration_since(Instant::now())) {
            Ok(Msg::Done) => done += 1,
            Ok(Msg::Tally(t)) => {
                tallies += 1;
                tally.merge(*t);
            }
            Ok(Msg::Gone(i, why)) => {
                failures.push(format!("worker {i}: {why}"));
                done += 1;
            }
            Err(_) => {
                failures.push("timed out waiting for the workers".into());
                break;
            }
        }
    }
    let mut cpu = b0
        .zip(broker_pid)
        .map(|(b0, pid)| diff("broker", &b0, &snapshot(pid)))
        .unwrap_or_default();
    let mut gen = Vec::new();
    for (c, g0) in children.iter().zip(&g0) {
        gen.extend(diff("generator", g0, &snapshot(&c.pid)));
    }
    cpu.extend(merge_groups(gen));
    progress.finish();
    for c in &mut children {
        if let Some(mut s) = c.stdin.take() {
            let _ = s.write_all(b"finish\n");
        }
    }
    while tallies + failures.len() < processes {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Msg::Tally(t)) => {
                tallies += 1;
                tally.merge(*t);
            }
            Ok(Msg::Gone(i, why)) => failures.push(format!("worker {i}: {why}")),
            Ok(Msg::Done) => {}
            Err(_) => {
                failures.push("timed out waiting for the workers' tallies".into());
                break;
            }
        }
    }
    reap(&mut children, &mut tally, failures);
    Ok((tally, cpu, None, sampler))
}

/// The workers' progress summed: (tasks done, events).
fn sum_progress(prog: &[(AtomicU64, AtomicU64)]) -> (u64, u64) {
    prog.iter().fold((0, 0), |(a, b), p| {
        (
            a + p.0.load(Ordering::Relaxed),
            b + p.1.load(Ordering::Relaxed),
        )
    })
}

/// Waits for the workers to exit (killing one that does not within 10 s)
/// and counts each worker's failure as an error of the run.
fn reap(children: &mut [Child], tally: &mut Tally, failures: Vec<String>) {
    for c in children {
        if a2a_testkit::process::wait_exit(&mut c.proc, Duration::from_secs(10)).is_none() {
            let _ = c.proc.kill();
            let _ = c.proc.wait();
        }
    }
    for f in failures {
        tally.errors += 1;
        if tally.error_samples.len() < 10 {
            tally.error_samples.push(f);
        }
    }
}

/// Sums thread groups of the same process and name (worker processes).
fn merge_groups(v: Vec<ThreadCpu>) -> Vec<ThreadCpu> {
    let mut out: Vec<ThreadCpu> = Vec::new();
    for t in v {
        match out
            .iter_mut()
            .find(|o| o.name == t.name && o.process == t.process)
        {
            Some(o) => {
                o.threads += t.threads;
                o.cpu_s += t.cpu_s;
                o.busiest = o.busiest.max(t.busiest);
                o.waited_s += t.waited_s;
            }
            None => out.push(t),
        }
    }
    out.sort_by(|x, y| y.cpu_s.total_cmp(&x.cpu_s));
    out
}

/// What a worker process is told on its command line.
#[derive(Debug, Clone)]
pub struct WorkerArgs {
    pub socket: PathBuf,
    pub transport: Transport,
    pub first: usize,
    pub count: usize,
}

/// The body of `a2a-fanout worker`: runs its share of the delegates and
/// speaks the line protocol of the module doc on stdout/stdin.
pub fn worker(cfg: &Config, w: &WorkerArgs) -> Result<(), FanoutError> {
    let secret = std::env::var(SECRET_ENV)
        .map_err(|_| FanoutError::Options(format!("{SECRET_ENV} is not set")))?;
    let mut target = Target {
        process: None,
        socket: Some(w.socket.clone()),
        secret,
        db: None,
        _dir: None,
    };
    let engine = Engine::new(plan(cfg, w.first, w.count));
    driver(w.transport, &mut target, cfg.connections, &engine)?;
    let out = Arc::new(parking_lot::Mutex::new(std::io::stdout()));
    let say = |v: Value| {
        let mut o = out.lock();
        let _ = writeln!(o, "{v}");
        let _ = o.flush();
    };
    let ready = engine.register_all() && engine.discover_all();
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (e, stop, out) = (engine.clone(), stop.clone(), out.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let (t, ev) = e.progress();
                let mut o = out.lock();
                let _ = writeln!(o, "{}", serde_json::json!({"progress": [t, ev]}));
                let _ = o.flush();
            }
        })
    };
    let (t0, t1) = if ready {
        engine.work()
    } else {
        let t = crate::driver::now_ns();
        (t, t)
    };
    stop.store(true, Ordering::Relaxed);
    let _ = ticker.join();
    say(serde_json::json!({"requestsDone": true}));
    // Keep serving the other workers' tasks until the parent says all
    // requests are done (or goes away).
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    let tally = engine.finish(t0, t1);
    say(serde_json::json!({ "tally": tally }));
    Ok(())
}
