//! The floor under the broker's bytes written per fan-out job by raw SQLite, the
//! broker's rows replayed in the broker's commit pattern, for the
//! broker's table layout and for leaner ones.
//!
//! `cargo run --release -p a2a-benches --example wal_floor -- [--delegates N]
//! [--window W] [--share P] [--jobs N] [--warmup N] [--layouts a,b,...]
//! [--page-sizes 2048,...]`
//!
//! The replay: `--delegates` delegates (16), each in a context of its own
//! and with `--window` jobs in flight (2, as `a2a-fanout`'s default), each
//! job the five calls a fan-out job makes (the
//! creation, the worker's `input-required` with a question, the
//! requester's answer, the artifact, the completion with a message), each
//! call the rows the broker writes for it, in the broker's encodings (row
//! texts as a fan-out run stores them). A commit group takes the next call
//! of each job in flight with probability `--share` (0.55: the ~17.5 calls
//! per commit the broker's groups hold at N = 16, BENCHMARKS.md
//! "Sustained load"); a job's next call waits for a later group, as it
//! waits for its answer's event. A delegate's jobs go to the others in
//! turn; its requester registers again before the send bound, as the
//! fan-out's do; message ids come from one counter as the client mints
//! them.
//!
//! Measured: the write-ahead log's frames (the log is restarted at the
//! broker's length, `bench::LOG_RESTART_BYTES`) and `write_bytes` of `/proc/self/io`, per
//! job after `--warmup` jobs. Counting frames is exact: the figures do not
//! depend on the machine's load.
//!
//! Layouts: `broker` (the broker's own schema, from `open_writer`);
//! `rowid` (messages, task log and artifacts as rowid tables, their
//! primary keys kept as unique keys, so new rows land at the end of their
//! table); `rowid-noparty` (and without the requester and worker indexes);
//! `floor` (rowid, and no secondary index at all).

use a2a_broker::{bench, Durability};
use a2a_proto::limits::A2A_MAX_SENDS_PER_RUN;
use a2a_proto::types::{
    Artifact, ArtifactUpdate, Message, Object, Part, Role, State, StreamEvent, TaskStatus,
};
use rusqlite::{params, Connection};
use std::path::Path;
use std::sync::Arc;

/// The metadata a fan-out message or artifact carries (its sender's clock).
fn meta() -> Option<Object> {
    serde_json::from_value(serde_json::json!({"t": 1796183989833890511u64})).ok()
}
/// Jobs per requester registration: a job costs its requester two sends.
const JOBS_PER_REGISTRATION: u64 = A2A_MAX_SENDS_PER_RUN as u64 / 2;

struct Args {
    jobs: u64,
    warmup: u64,
    delegates: usize,
    window: usize,
    share: f64,
    layouts: Vec<String>,
    page_sizes: Vec<u32>,
}

fn args() -> Args {
    let mut a = Args {
        jobs: 20_000,
        warmup: 20_000,
        delegates: 16,
        window: 2,
        share: 0.55,
        layouts: ["broker", "rowid", "rowid-noparty", "floor"]
            .map(String::from)
            .to_vec(),
        page_sizes: vec![2048],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--jobs" => a.jobs = value().parse().unwrap_or_else(|_| usage("--jobs: a count")),
            "--warmup" => {
                a.warmup = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--warmup: a count"))
            }
            "--delegates" => {
                a.delegates = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--delegates: a count"))
            }
            "--window" => {
                a.window = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--window: a count"))
            }
            "--share" => a.share = value().parse().unwrap_or_else(|_| usage("--share: 0..1")),
            "--layouts" => a.layouts = value().split(',').map(String::from).collect(),
            "--page-sizes" => {
                a.page_sizes = value()
                    .split(',')
                    .map(|v| match v.parse() {
                        Ok(n @ (512 | 1024 | 2048 | 4096 | 8192)) => n,
                        _ => usage("--page-sizes: 512, 1024, 2048, 4096 or 8192"),
                    })
                    .collect()
            }
            _ => usage(&format!("unknown argument {flag}")),
        }
    }
    if a.delegates < 2 || a.window == 0 || !(a.share > 0.0 && a.share <= 1.0) {
        usage("--delegates must be at least 2, --window at least 1 and --share in (0, 1]");
    }
    a
}

fn usage(why: &str) -> ! {
    eprintln!("wal_floor: {why}\nusage: wal_floor [--delegates N] [--window W] [--share P] [--jobs N] [--warmup N] [--layouts broker,rowid,rowid-noparty,floor] [--page-sizes 2048,...]");
    std::process::exit(2)
}

/// The schema changes that make `layout` from the broker's (on an empty
/// database).
fn reshape(c: &Connection, layout: &str, page_size: u32) {
    let rowid = "
        DROP TABLE a2a_messages; DROP TABLE a2a_task_log; DROP TABLE a2a_artifacts;
        CREATE TABLE a2a_messages (task_id TEXT NOT NULL, message_id TEXT NOT NULL,
            pos INTEGER NOT NULL, from_peer TEXT NOT NULL, body TEXT NOT NULL,
            PRIMARY KEY (task_id, message_id));
        CREATE TABLE a2a_task_log (task_id TEXT NOT NULL, version INTEGER NOT NULL,
            kind TEXT NOT NULL, actor TEXT NOT NULL, payload TEXT NOT NULL, at TEXT NOT NULL,
            PRIMARY KEY (task_id, version));
        CREATE TABLE a2a_artifacts (task_id TEXT NOT NULL, artifact_id TEXT NOT NULL,
            pos INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (task_id, artifact_id));";
    let noparty = "DROP INDEX a2a_tasks_requester; DROP INDEX a2a_tasks_worker;";
    let nothing = "DROP INDEX a2a_tasks_open; DROP INDEX a2a_tasks_seq;";
    let sql = match layout {
        "broker" => String::new(),
        "rowid" => rowid.to_owned(),
        "rowid-noparty" => format!("{rowid}{noparty}"),
        "floor" => format!("{rowid}{noparty}{nothing}"),
        other => usage(&format!("unknown layout {other}")),
    };
    c.execute_batch(&sql).expect("reshape the schema");
    // The page size of a database in WAL mode is changed by a vacuum out
    // of it.
    c.execute_batch(&format!(
        "PRAGMA journal_mode = DELETE; PRAGMA page_size = {page_size}; VACUUM; PRAGMA journal_mode = WAL;"
    ))
    .expect("set the page size");
}

/// A small deterministic generator (xorshift), so every layout replays
/// the same interleaving.
struct Rng(u64);
impl Rng {
    fn chance(&mut self, p: f64) -> bool {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// One job in flight.
struct Job {
    id: String,
    delegate: usize,
    requester: String,
    worker: usize,
    /// Its creation order (`a2a_tasks.seq`).
    seq: i64,
    /// Calls made so far (0..5).
    step: u8,
}

struct Replay<'c> {
    c: &'c Connection,
    prefix: String,
    next_id: u64,
    seq: i64,
    /// Jobs each delegate started.
    jobs_by: Vec<u64>,
    started: u64,
}

impl Replay<'_> {
    fn mid(&mut self) -> String {
        self.next_id += 1;
        format!("{}-{}", self.prefix, self.next_id)
    }

    fn start(&mut self, delegate: usize) -> Job {
        let n = self.jobs_by[delegate];
        self.jobs_by[delegate] += 1;
        self.started += 1;
        let requester = match n / JOBS_PER_REGISTRATION {
            0 => format!("d{delegate}"),
            k => format!("d{delegate}-{}", k + 1),
        };
        self.seq += 1;
        let d = self.jobs_by.len();
        let worker = (delegate + 1 + (n as usize % (d - 1))) % d;
        Job {
            id: bench::uuid(),
            delegate,
            requester,
            worker,
            seq: self.seq,
            step: 0,
        }
    }

    /// The rows of `job`'s next call, as the broker writes them.
    fn call(&mut self, job: &mut Job) {
        let c = self.c;
        let now = bench::now();
        let ctx = format!("fanout-{}", job.delegate);
        let (req, wrk) = (job.requester.clone(), format!("d{}", job.worker));
        let version = i64::from(job.step) + 1;
        let started = self.started;
        let (actor, kind, payload) = match job.step {
            0 => {
                let text = format!("job {} of d{}: fix the failing test", started, job.delegate);
                let msg = self.message(&job.id, &req, &wrk, Role::User, &text, 0);
                let status = TaskStatus {
                    state: State::Submitted,
                    message: Some(msg.clone()),
                    timestamp: now.clone(),
                };
                c.prepare_cached(
                    "INSERT INTO a2a_tasks (id, seq, context_id, requester_peer, worker_ctx, worker_peer,
                       state, status, version, create_message_id, broadcast, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'submitted', ?7, 1, ?8, 0, ?9, ?9)",
                )
                .unwrap()
                .execute(params![
                    job.id,
                    job.seq,
                    ctx,
                    req,
                    format!("fanout-{}", job.worker),
                    wrk,
                    bench::status_row(&status, Some(0)),
                    msg.message_id,
                    now
                ])
                .expect("task");
                (
                    req.clone(),
                    "status-update",
                    bench::log_status(&status, Some(0), &now),
                )
            }
            1 | 2 | 4 => {
                let (from, to, role, text, state, pos) = match job.step {
                    1 => (
                        &wrk,
                        &req,
                        Role::Agent,
                        "which branch?",
                        State::InputRequired,
                        1,
                    ),
                    2 => (&req, &wrk, Role::User, "main", State::Working, 2),
                    _ => (&wrk, &req, Role::Agent, "done", State::Completed, 3),
                };
                let msg = self.message(&job.id, from, to, role, text, pos);
                let status = TaskStatus {
                    state,
                    message: Some(msg),
                    timestamp: now.clone(),
                };
                self.status(&job.id, &status, pos, version);
                (
                    from.clone(),
                    "status-update",
                    bench::log_status(&status, Some(pos as usize), &now),
                )
            }
            _ => {
                let artifact = Artifact {
                    artifact_id: "patch".into(),
                    name: None,
                    description: None,
                    parts: vec![Part::text("diff --git a/src/lib.rs b/src/lib.rs")],
                    metadata: meta(),
                };
                let art = serde_json::to_string(&artifact).expect("artifact");
                c.prepare_cached("INSERT INTO a2a_artifacts (task_id, artifact_id, pos, body) VALUES (?1, 'patch', 0, ?2)")
                    .unwrap()
                    .execute(params![job.id, art])
                    .expect("artifact");
                c.prepare_cached(
                    "UPDATE a2a_tasks SET version = ?2, updated_at = ?3 WHERE id = ?1",
                )
                .unwrap()
                .execute(params![job.id, version, now])
                .expect("artifact version");
                let event = StreamEvent::Artifact(ArtifactUpdate {
                    task_id: job.id.clone(),
                    context_id: ctx,
                    artifact,
                    append: false,
                    last_chunk: true,
                });
                let payload = serde_json::to_string(&event).expect("event");
                (wrk.clone(), "artifact-update", payload)
            }
        };
        c.prepare_cached("INSERT INTO a2a_task_log (task_id, version, kind, actor, payload, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
            .unwrap()
            .execute(params![job.id, version, kind, actor, payload, now])
            .expect("log");
        job.step += 1;
    }

    /// A message row, in the broker's row form; the message as stamped.
    fn message(
        &mut self,
        task: &str,
        from: &str,
        to: &str,
        role: Role,
        text: &str,
        pos: i64,
    ) -> Arc<Message> {
        let msg = Arc::new(Message {
            role,
            parts: vec![Part::text(text)],
            message_id: self.mid(),
            task_id: Some(task.to_owned()),
            context_id: None,
            from: Some(from.to_owned()),
            to: Some(to.to_owned()),
            metadata: meta(),
        });
        self.c
            .prepare_cached("INSERT INTO a2a_messages (task_id, message_id, pos, from_peer, body) VALUES (?1, ?2, ?3, ?4, ?5)")
            .unwrap()
            .execute(params![task, msg.message_id, pos, from, bench::message_row(&msg)])
            .expect("message");
        msg
    }

    fn status(&self, id: &str, status: &TaskStatus, pos: i64, version: i64) {
        self.c
            .prepare_cached("UPDATE a2a_tasks SET state = ?2, status = ?3, version = ?4, updated_at = ?5 WHERE id = ?1")
            .unwrap()
            .execute(params![
                id,
                status.state.as_str(),
                bench::status_row(status, Some(pos as usize)),
                version,
                status.timestamp
            ])
            .expect("status");
    }
}

/// This process's `write_bytes` so far.
fn write_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn wal_len(db: &Path) -> u64 {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(Path::new(&wal)).map_or(0, |m| m.len())
}

/// What one layout wrote: (log bytes per job, write_bytes per job, commit
/// groups, calls).
fn run(layout: &str, page_size: u32, a: &Args) -> (f64, f64, u64, u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("floor.db");
    let c = bench::open_writer(&db, Durability::Normal).expect("open");
    reshape(&c, layout, page_size);
    c.execute_batch("PRAGMA wal_autocheckpoint = 0;")
        .expect("no autocheckpoint");
    let mut r = Replay {
        c: &c,
        prefix: "6f66a7d6adf28146".into(),
        next_id: 0,
        seq: 0,
        jobs_by: vec![0; a.delegates],
        started: 0,
    };
    let mut flight: Vec<Job> = (0..a.delegates * a.window)
        .map(|k| r.start(k % a.delegates))
        .collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut done, mut log_bytes, mut groups, mut calls) = (0u64, 0u64, 0u64, 0u64);
    let mut mark: Option<(u64, u64)> = None;
    let total = a.warmup + a.jobs;
    while done < total {
        if mark.is_none() && done >= a.warmup {
            mark = Some((log_bytes + wal_len(&db), write_bytes()));
            (groups, calls) = (0, 0);
        }
        let tx = r.c.unchecked_transaction().expect("begin");
        for job in flight.iter_mut() {
            if rng.chance(a.share) {
                r.call(job);
                calls += 1;
            }
        }
        tx.commit().expect("commit");
        groups += 1;
        for job in flight.iter_mut().filter(|j| j.step == 5) {
            done += 1;
            *job = r.start(job.delegate);
        }
        let len = wal_len(&db);
        if len > bench::LOG_RESTART_BYTES as u64 {
            log_bytes += len;
            r.c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
                .expect("restart the log");
        }
    }
    let (log0, wb0) = mark.expect("measured after the warm-up");
    let jobs = (done - a.warmup) as f64;
    (
        (log_bytes + wal_len(&db) - log0) as f64 / jobs,
        (write_bytes() - wb0) as f64 / jobs,
        groups,
        calls,
    )
}

fn main() {
    let a = args();
    println!(
        "{} jobs after {} of warm-up; {} delegates, {} jobs in flight each; share {}",
        a.jobs, a.warmup, a.delegates, a.window, a.share
    );
    println!("layout         page  log B/job  write_bytes/job  calls/commit  write_bytes vs first");
    let mut base = None;
    for &page_size in &a.page_sizes {
        for layout in &a.layouts {
            let (log, wb, groups, calls) = run(layout, page_size, &a);
            let base = *base.get_or_insert(wb);
            println!(
                "{layout:<14} {page_size:>4} {log:>10.0} {wb:>16.0} {:>13.1} {:>20.2}x",
                calls as f64 / groups.max(1) as f64,
                wb / base
            );
        }
    }
}
