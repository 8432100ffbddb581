//! Floods from other connections, and a well-behaved client measured
//! beside them (`examples/fair_share.rs`, `tests/fair_share.rs`).
//!
//! The well-behaved client does what an agent does most: a send that
//! creates a task, and its worker completing it, one after the other; its
//! figure is that pair's round trip. Each flooder is a thread with its own
//! socket connection that keeps the broker as busy as it can, in one of
//! four ways ([`Flood`]), each waiting only for its own answers (a closed
//! loop: a flooder that never waited would measure its socket buffer).

use a2a_testkit::raw::RawConn;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Sends per burst of the pipelined and batch floods (also the open-task
/// bound of one requester context, so each burst has its own context).
pub const BURST: usize = 128;
/// Sends of a 1 MiB file part per burst of the files flood.
pub const FILE_WINDOW: usize = 16;
/// Bytes of one junk line (just under the 32 MiB frame bound: it is read whole).
pub const JUNK_BYTES: usize = 30_000_000;

/// What a flooder does, over and over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flood {
    /// `BURST` sends written as separate lines, then their answers read.
    Pipelined,
    /// `BURST` sends in one NDJSON batch line.
    Batches,
    /// A 30 MB line that is not JSON (answered `-32700`).
    Junk,
    /// `FILE_WINDOW` pipelined sends, each with a 1 MiB file part.
    Files,
}

impl Flood {
    pub const ALL: [Flood; 4] = [Flood::Pipelined, Flood::Batches, Flood::Junk, Flood::Files];

    pub fn name(self) -> &'static str {
        match self {
            Flood::Pipelined => "pipelined sends",
            Flood::Batches => "128-entry batches",
            Flood::Junk => "30 MB junk lines",
            Flood::Files => "1 MiB file parts",
        }
    }

    /// By its short name (`pipelined`, `batches`, `junk`, `files`).
    pub fn parse(s: &str) -> Option<Flood> {
        Some(match s {
            "pipelined" => Flood::Pipelined,
            "batches" => Flood::Batches,
            "junk" => Flood::Junk,
            "files" => Flood::Files,
            _ => return None,
        })
    }
}

/// Where the broker listens.
#[derive(Clone)]
pub struct Target {
    pub socket: PathBuf,
    pub secret: String,
}

impl Target {
    fn open(&self) -> RawConn {
        RawConn::socket(&self.socket, &self.secret).expect("connect to the broker")
    }
}

/// Flooder threads; they work only while [`Flooders::set_active`] says so.
pub struct Flooders {
    stop: Arc<AtomicBool>,
    active: Arc<AtomicBool>,
    /// Requests the flooders had answered.
    pub answered: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Flooders {
    /// `n` flooders of `kind`, connected and registered, idle.
    pub fn start(target: &Target, kind: Flood, n: usize) -> Flooders {
        let stop = Arc::new(AtomicBool::new(false));
        let active = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicU64::new(0));
        let threads = (0..n)
            .map(|k| {
                let mut f = Flooder::new(target.open(), kind, k);
                let (stop, active, answered) = (stop.clone(), active.clone(), answered.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if !active.load(Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(2));
                            continue;
                        }
                        f.round(&answered);
                    }
                })
            })
            .collect();
        Flooders {
            stop,
            active,
            answered,
            threads,
        }
    }

    pub fn set_active(&self, on: bool) {
        self.active.store(on, Ordering::Relaxed);
    }

    /// Stops the flooders after their current round.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("a flooder panicked");
        }
    }
}

struct Flooder {
    conn: RawConn,
    kind: Flood,
    name: usize,
    rounds: u64,
    junk: String,
    file: String,
}

impl Flooder {
    fn new(conn: RawConn, kind: Flood, name: usize) -> Flooder {
        use base64::Engine;
        let junk = if kind == Flood::Junk {
            "x".repeat(JUNK_BYTES)
        } else {
            String::new()
        };
        let file = if kind == Flood::Files {
            base64::engine::general_purpose::STANDARD.encode(vec![7u8; 1 << 20])
        } else {
            String::new()
        };
        Flooder {
            conn,
            kind,
            name,
            rounds: 0,
            junk,
            file,
        }
    }

    /// One round, counting each answer in `answered` as it comes.
    fn round(&mut self, answered: &AtomicU64) {
        self.rounds += 1;
        match self.kind {
            Flood::Pipelined | Flood::Batches => self.sends(BURST, answered),
            Flood::Junk => {
                self.conn.send_line(&self.junk);
                let _ = self.conn.next_response_line();
                answered.fetch_add(1, Ordering::Relaxed);
            }
            Flood::Files => self.sends(FILE_WINDOW, answered),
        }
    }

    /// A fresh requester context (open tasks are bounded per context), then
    /// a burst of `n` sends (each with a 1 MiB file part in the files flood).
    fn sends(&mut self, n: usize, answered: &AtomicU64) {
        let ctx = format!("flood{}-{}", self.name, self.rounds);
        let (wrk, _) = self.conn.register(&ctx, "wrk");
        let (_, req) = self.conn.register(&ctx, "req");
        answered.fetch_add(2, Ordering::Relaxed);
        let mut parts = vec![json!({"kind": "text", "text": "flood"})];
        if self.kind == Flood::Files {
            parts.push(json!({"kind": "file", "file": {"name": "f.bin", "bytes": self.file}}));
        }
        let lines: Vec<String> = (0..n)
            .map(|i| {
                json!({"jsonrpc": "2.0", "id": 1_000_000 + i, "method": "a2a.message.send",
                    "params": {"token": req, "message": {"messageId": format!("m{i}"), "to": wrk,
                        "parts": parts}}})
                .to_string()
            })
            .collect();
        if self.kind == Flood::Batches {
            self.conn.send_line(&format!("[{}]", lines.join(",")));
            loop {
                if self.conn.next_line().starts_with('[') {
                    break;
                }
            }
            answered.fetch_add(n as u64, Ordering::Relaxed);
        } else {
            for l in &lines {
                self.conn.send_line(l);
            }
            // One connection's answers come in its order.
            for i in 0..n as u64 {
                self.conn.raw_response(1_000_000 + i);
                answered.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The well-behaved client: a requester and its worker on one connection.
pub struct Victim {
    conn: RawConn,
    ctx: String,
    worker_id: String,
    worker: String,
    requester: String,
    sent: usize,
    registrations: usize,
}

impl Victim {
    pub fn new(target: &Target) -> Victim {
        let mut conn = target.open();
        let ctx = "victim".to_owned();
        let (worker_id, worker) = conn.register(&ctx, "wrk");
        let (_, requester) = conn.register(&ctx, "req0");
        Victim {
            conn,
            ctx,
            worker_id,
            worker,
            requester,
            sent: 0,
            registrations: 1,
        }
    }

    /// One send + complete: the time from the send's request to the
    /// completion's answer.
    pub fn send_complete(&mut self) -> Duration {
        // Sends per registration are bounded: a new requester now and then,
        // outside the measured pair.
        if self.sent == 150 {
            let name = format!("req{}", self.registrations);
            self.requester = self.conn.register(&self.ctx, &name).1;
            self.registrations += 1;
            self.sent = 0;
        }
        self.sent += 1;
        let t = Instant::now();
        let id = self.conn.task(&self.requester, &self.worker_id);
        self.conn.ok(
            "a2a.tasks.status",
            json!({"token": self.worker, "id": id, "state": "completed"}),
        );
        t.elapsed()
    }

    /// `n` pairs' round trips.
    pub fn pairs(&mut self, n: usize) -> Vec<Duration> {
        (0..n).map(|_| self.send_complete()).collect()
    }
}

/// The `q`-quantile (0..=1) of `v`.
pub fn quantile(v: &[Duration], q: f64) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s[((s.len() - 1) as f64 * q).round() as usize]
}

/// What one flood did to the well-behaved client, over paired rounds.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub quiet_p50: Duration,
    pub p50: Duration,
    pub p99: Duration,
    /// The mean under the flood: unlike the quantiles, it weighs a long
    /// stall by its length (a client stalled for a second takes one sample
    /// in that second, a client slowed a little takes many).
    pub mean: Duration,
    /// The median over rounds of (p50 under the flood / p50 of the quiet round before it).
    pub paired_ratio: f64,
    /// Requests the flooders had answered while they flooded.
    pub flood_answered: u64,
    /// The same, per second of flooding.
    pub flood_rate: f64,
}

/// Alternates `rounds` quiet and flooded rounds of `pairs` send + complete
/// pairs each, `flooders` flooders of `kind`.
pub fn measure(
    target: &Target,
    kind: Flood,
    flooders: usize,
    rounds: usize,
    pairs: usize,
) -> Outcome {
    let mut victim = Victim::new(target);
    victim.pairs(pairs.min(50)); // warm up
    let f = Flooders::start(target, kind, flooders);
    let (mut quiet_all, mut busy_all, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut answered = 0;
    let mut flooding = Duration::ZERO;
    for _ in 0..rounds {
        f.set_active(false);
        // The flooders finish their round; the broker drains it.
        std::thread::sleep(Duration::from_millis(300));
        let quiet = victim.pairs(pairs);
        let before = f.answered.load(Ordering::Relaxed);
        let t = Instant::now();
        f.set_active(true);
        std::thread::sleep(Duration::from_millis(200));
        let busy = victim.pairs(pairs);
        answered += f.answered.load(Ordering::Relaxed) - before;
        flooding += t.elapsed();
        ratios.push(quantile(&busy, 0.5).as_secs_f64() / quantile(&quiet, 0.5).as_secs_f64());
        quiet_all.extend(quiet);
        busy_all.extend(busy);
    }
    f.set_active(false);
    f.stop();
    ratios.sort_by(f64::total_cmp);
    Outcome {
        quiet_p50: quantile(&quiet_all, 0.5),
        p50: quantile(&busy_all, 0.5),
        p99: quantile(&busy_all, 0.99),
        mean: busy_all.iter().sum::<Duration>() / busy_all.len() as u32,
        paired_ratio: ratios[ratios.len() / 2],
        flood_answered: answered,
        flood_rate: answered as f64 / flooding.as_secs_f64(),
    }
}

/// A broker of `bin` on a fresh database in `dir`, on a socket.
pub fn spawn(
    bin: &Path,
    dir: &Path,
    extra: &[&str],
) -> (a2a_testkit::process::BrokerProcess, Target) {
    let p = a2a_testkit::Spawn::new(dir.join("fair.db"))
        .bin(bin)
        .socket(dir.join("run").join("b.sock"))
        .args(extra.iter().copied())
        .start(a2a_testkit::TIMEOUT)
        .expect("broker ready");
    let target = Target {
        socket: p.socket().expect("socket path"),
        secret: p.secret().expect("secret"),
    };
    (p, target)
}
