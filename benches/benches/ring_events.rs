//! The broker's event path over the shared-memory ring against the same
//! path over the socket (docs/protocol.md §1, the event ring), in one run, for status events
//! whose message text is 64 B, 512 B or 4 KiB; a client connection that
//! was granted a ring and one that was not, in alternating rounds.
//!
//! Part 1, delivery (pinned: every thread on one CPU, then the client's
//! threads on the other): events enter the requester's outbox as the
//! writer's routing puts them there right after a commit
//! (`a2a_broker::bench::EventInjector`), and are timed from that moment to
//! the client's event handler (the consumer observing the event; `wait`
//! and `try_events` read the same queue behind it). Reported: events/s of
//! a stream kept 1,024 deep; latency p50/p99 with the consumer active (an
//! event every 20 µs, cross-core) and sparse (every 200 µs, sleep-paced);
//! and system calls per event on the delivery side: the ring producer's
//! futex wake-ups, the socket path's write calls; and the events the broker
//! dropped over the row's rounds (its `a2a.lagged` counts: a stream kept
//! 1,024 deep should lose none).
//!
//! Part 2, through the writer (unpinned): a worker's `a2a.tasks.status`
//! calls, so each event also pays its call and its commit: events/s of a
//! pipelined stream and single-event latency from the worker's
//! submission.
//!
//! `cargo bench -p a2a-benches --bench ring_events`
//! (`A2A_RING_EVENTS_PART=1` or `=2` runs one part).

use a2a_benches::pin;
use a2a_benches::socket::SocketBroker;
use a2a_broker::bench::EventInjector;
use a2a_broker::Durability;
use a2a_client::proto::types::{
    Notification, StatusUpdate, StreamEvent, TaskEventParams, TaskStatus,
};
use a2a_client::{
    agent_card, message_to, Agent, Client, ClientOptions, Delivery, Message, Part, State,
};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;
const STREAM: usize = 8_000; // with SINGLES, at most 205 messages per task
const SINGLES: usize = 200;

fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// A status message whose text starts with its sending time (ns since `base`).
fn stamped(size: usize) -> Message {
    let mut text = format!("{:020} ", base().elapsed().as_nanos());
    text.push_str(&"x".repeat(size.saturating_sub(text.len())));
    Message {
        parts: vec![Part::text(text)],
        ..a2a_client::text_message("")
    }
}

/// The sending time in an event's message.
fn sent_at(ev: &a2a_client::Event) -> Option<Duration> {
    let a2a_client::Notification::TaskEvent(p) = ev else {
        return None;
    };
    let a2a_client::proto::types::StreamEvent::Status(s) = &p.event else {
        return None;
    };
    let Part::Text { text, .. } = s.status.message.as_ref()?.parts.first()? else {
        return None;
    };
    text.get(..20)?.parse().ok().map(Duration::from_nanos)
}

/// Tasks per path: a task holds at most 256 messages (`A2A_MAX_TASK_HISTORY`),
/// and each event here carries one; status changes go round the tasks.
const TASKS: usize = 40;

struct Path {
    _client: Client,
    req: Agent,
    wrk: Agent,
    tasks: Vec<String>,
    rx: mpsc::Receiver<Duration>,
}

fn path(sb: &SocketBroker, ring: bool, k: usize) -> Path {
    let opts = ClientOptions {
        event_ring_bytes: ring.then_some(4 << 20),
        ..Default::default()
    };
    let client = Client::connect_with(&sb.path, &sb.secret, opts).expect("connect");
    assert_eq!(client.uses_event_ring(), ring);
    let worker_client = Client::connect(&sb.path, &sb.secret).expect("connect");
    let ctx = format!("k{k}-{ring}");
    let req = client
        .register(&ctx, agent_card("req"), Delivery::Push)
        .expect("register");
    let wrk = worker_client
        .register(&format!("{ctx}-w"), agent_card("wrk"), Delivery::Push)
        .expect("register");
    let tasks = (0..TASKS)
        .map(|_| req.send(message_to(wrk.id(), "go"), None).expect("send").id)
        .collect();
    let (tx, rx) = mpsc::channel();
    req.set_event_handler(Some(Box::new(move |_, ev| {
        if let Some(sent) = sent_at(&ev) {
            let _ = tx.send(base().elapsed().saturating_sub(sent));
        }
    })));
    std::mem::forget(worker_client); // lives as long as `wrk`, for the run
    Path {
        _client: client,
        req,
        wrk,
        tasks,
        rx,
    }
}

/// Events/s of a pipelined stream of `n` status changes.
fn stream(p: &Path, size: usize, n: usize) -> f64 {
    let t = Instant::now();
    let pend: Vec<_> = (0..n)
        .map(|i| {
            p.wrk
                .set_status_async(&p.tasks[i % TASKS], State::Working, Some(stamped(size)))
                .expect("submit")
        })
        .collect();
    for _ in 0..n {
        p.rx.recv_timeout(Duration::from_secs(60)).expect("event");
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    for pd in pend {
        pd.wait(Duration::from_secs(60)).expect("answer");
    }
    rate
}

/// p50 and p99 of single events, the consumer idle between them.
fn singles(p: &Path, size: usize, n: usize) -> (Duration, Duration) {
    let mut lat: Vec<Duration> = (0..n)
        .map(|i| {
            p.wrk
                .set_status(&p.tasks[i % TASKS], State::Working, Some(stamped(size)))
                .expect("status");
            let d = p.rx.recv_timeout(Duration::from_secs(60)).expect("event");
            std::thread::sleep(Duration::from_millis(2));
            d
        })
        .collect();
    lat.sort();
    (lat[lat.len() / 2], lat[lat.len() * 99 / 100])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One round of part 2: events/s ring, socket; (p50, p99) ring, socket.
type Row = (f64, f64, (Duration, Duration), (Duration, Duration));

/// `f` on the ring path and on the socket path, each going first in every
/// other round (the writer's checkpoints and the disk drift within a
/// round); `(ring, socket)`.
fn in_turn<T>(k: usize, ring: &Path, sock: &Path, f: impl Fn(&Path) -> T) -> (T, T) {
    if k % 2 == 0 {
        let r = f(ring);
        (r, f(sock))
    } else {
        let s = f(sock);
        (f(ring), s)
    }
}

/// Part 2: through the writer.
fn through_writer(sb: &SocketBroker) {
    println!(
        "\nPart 2, through the writer (unpinned): status calls, 5 alternating rounds, median\n"
    );
    println!("| event text | events/s ring | events/s socket | ratio | p50 ring | p50 socket | p50 ratio (socket/ring) | p99 ring | p99 socket | ring wakes/event (stream) | events per ring publish (stream) |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut k = 0;
    for size in [64usize, 512, 4096] {
        let (mut rates, mut p50s, mut rows) = (Vec::new(), Vec::new(), Vec::new());
        let (mut wakes, mut per_publish) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            k += 1;
            // Fresh tasks each round: the task log bound is 10,000 changes.
            let ring = path(sb, true, k);
            let sock = path(sb, false, k);
            let w0 = sb.ring_wake_stats();
            let (rr, rs) = in_turn(k, &ring, &sock, |p| stream(p, size, STREAM));
            let w1 = sb.ring_wake_stats();
            let staged = (w1.0 - w0.0).max(1) as f64;
            wakes.push((w1.1 - w0.1) as f64 / staged);
            per_publish.push(staged / (w1.2 - w0.2).max(1) as f64);
            let (lr, ls) = in_turn(k, &ring, &sock, |p| singles(p, size, SINGLES));
            rates.push(rr / rs);
            p50s.push(ls.0.as_secs_f64() / lr.0.as_secs_f64());
            rows.push((rr, rs, lr, ls));
            drop((ring.req, sock.req));
        }
        // Each column its own median over the rounds; the ratios are the
        // medians of the per-round ratios.
        let col = |f: &dyn Fn(&Row) -> f64| median(rows.iter().map(f).collect());
        let at = |f: &dyn Fn(&Row) -> Duration| {
            us(Duration::from_secs_f64(col(&|r| f(r).as_secs_f64())))
        };
        println!(
            "| {size} B | {:.0} | {:.0} | {:.2}x | {} | {} | {:.2}x | {} | {} | {:.4} | {:.1} |",
            col(&|r| r.0),
            col(&|r| r.1),
            median(rates),
            at(&|r| r.2 .0),
            at(&|r| r.3 .0),
            median(p50s),
            at(&|r| r.2 .1),
            at(&|r| r.3 .1),
            median(wakes),
            median(per_publish),
        );
    }
}

fn main() {
    // `cargo bench` passes flags (e.g. `--bench`); nothing else to parse.
    if !std::env::args().any(|a| a == "--bench") {
        println!("ring_events: run with `cargo bench`");
        return;
    }
    let part = std::env::var("A2A_RING_EVENTS_PART").unwrap_or_default();
    let sb = SocketBroker::start(Durability::Normal);
    println!("load average {}", load_average());
    if part != "2" {
        delivery(&sb);
    }
    if part != "1" {
        through_writer(&sb);
    }
    println!("\nload average {}", load_average());
    sb.shutdown();
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

// ---- Part 1: delivery ------------------------------------------------

/// Events of a throughput stream, and how many may be unreceived (below
/// the outbox's bound, so nothing is dropped as lag).
const DELIVERY_STREAM: usize = 200_000;
const DELIVERY_DEPTH: usize = 1_024;
/// Latency probes per round and their paces.
const ACTIVE_EVENTS: usize = 5_000;
const ACTIVE_GAP: Duration = Duration::from_micros(30);
const SPARSE_EVENTS: usize = 500;
const SPARSE_GAP: Duration = Duration::from_micros(200);

/// One requester connection (with or without a ring) and its outbox.
struct Receiver {
    client: Client,
    _req: Agent,
    inject: EventInjector,
    seen: Arc<AtomicUsize>,
    /// Events the broker dropped (its `a2a.lagged` counts), also counted
    /// in `seen`: a drop shows in the table instead of stalling the run.
    dropped: Arc<AtomicUsize>,
    lat: Arc<Mutex<Vec<Duration>>>,
    template: TaskEventParams,
}

fn receiver(sb: &SocketBroker, ring: bool, k: usize, size: usize) -> Receiver {
    let opts = ClientOptions {
        event_ring_bytes: ring.then_some(4 << 20),
        ..Default::default()
    };
    let client = Client::connect_with(&sb.path, &sb.secret, opts).expect("connect");
    assert_eq!(client.uses_event_ring(), ring);
    let ctx = format!("d{k}-{ring}");
    let req = client
        .register(&ctx, agent_card("rx"), Delivery::Push)
        .expect("register");
    let inject = EventInjector::for_agent(&sb.broker, req.id()).expect("a push agent");
    let (seen, dropped, lat) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let (s, d, l) = (seen.clone(), dropped.clone(), lat.clone());
    req.set_event_handler(Some(Box::new(move |_, ev| {
        let now = base().elapsed();
        if let Some(sent) = sent_at(&ev) {
            l.lock().push(now.saturating_sub(sent));
        }
        // A lag notification stands for the events it reports dropped.
        let n = match &ev {
            Notification::Lagged(p) => {
                d.fetch_add(p.dropped as usize, Ordering::Relaxed);
                p.dropped as usize
            }
            _ => 1,
        };
        s.fetch_add(n, Ordering::Release);
    })));
    let text = "x".repeat(size);
    let template = TaskEventParams {
        recipient: req.id().to_owned(),
        recipient_context_id: ctx.clone(),
        context_id: ctx.clone(),
        seq: 0,
        task_version: 1,
        event: StreamEvent::Status(StatusUpdate {
            task_id: "00000000-0000-7000-8000-000000000000".into(),
            context_id: ctx,
            status: TaskStatus {
                state: State::Working,
                message: Some(Arc::new(Message {
                    parts: vec![Part::text(text)],
                    ..a2a_client::text_message("")
                })),
                timestamp: a2a_broker::bench::now(),
            },
            is_final: false,
        }),
    };
    Receiver {
        client,
        _req: req,
        inject,
        seen,
        dropped,
        lat,
        template,
    }
}

impl Receiver {
    /// An event stamped with now (ns since `base`) in its text's first 20
    /// characters, the rest of the text as sized.
    fn stamped(&self) -> Notification {
        let mut p = self.template.clone();
        if let StreamEvent::Status(u) = &mut p.event {
            if let Some(m) = &mut u.status.message {
                let m = Arc::make_mut(m);
                if let Some(Part::Text { text, .. }) = m.parts.first_mut() {
                    let stamp = format!("{:020}", base().elapsed().as_nanos());
                    let n = stamp.len().min(text.len());
                    text.replace_range(..n, &stamp[..n]);
                }
            }
        }
        Notification::TaskEvent(p)
    }

    /// Waits until `n` events were received in all (or fails after 60 s).
    fn until_seen(&self, n: usize) {
        let t = Instant::now();
        while self.seen.load(Ordering::Acquire) < n {
            assert!(t.elapsed() < Duration::from_secs(60), "events lost");
            std::thread::yield_now();
        }
    }

    /// Events/s of `n` events, at most `DELIVERY_DEPTH` unreceived.
    fn stream(&self, n: usize) -> f64 {
        let ev = self.stamped();
        let start = self.seen.load(Ordering::Acquire);
        let t = Instant::now();
        for i in 0..n {
            while i - (self.seen.load(Ordering::Acquire) - start) >= DELIVERY_DEPTH {
                // Yield, not spin: this thread shares its CPU with the
                // broker's connection writer it waits for.
                std::thread::yield_now();
            }
            self.inject.push(ev.clone());
        }
        self.until_seen(start + n);
        n as f64 / t.elapsed().as_secs_f64()
    }

    /// p50 and p99 of `n` events sent `gap` apart. Slept, not spun: this
    /// thread shares its CPU with the broker's connection writer (the
    /// timer slack is set to 1 ns, so a 30 µs sleep is about 30 µs).
    fn latency(&self, n: usize, gap: Duration) -> (Duration, Duration) {
        self.lat.lock().clear();
        let start = self.seen.load(Ordering::Acquire);
        for _ in 0..n {
            self.inject.push(self.stamped());
            std::thread::sleep(gap);
        }
        self.until_seen(start + n);
        let mut lat = std::mem::take(&mut *self.lat.lock());
        lat.sort();
        (lat[lat.len() / 2], lat[lat.len() * 99 / 100])
    }
}

/// One path's figures in one round.
#[derive(Clone, Copy)]
struct Figures {
    rate: f64,
    active: Option<(Duration, Duration)>,
    sparse: (Duration, Duration),
    /// Ring: futex wake-ups per event; socket: write calls per event.
    syscalls: f64,
    /// Events the broker dropped in the round (`a2a.lagged`).
    dropped: usize,
    /// Events per ring publish (ring) or per write call (socket).
    per_batch: f64,
}

fn measure(sb: &SocketBroker, ring: bool, k: usize, size: usize, cpus: (usize, usize)) -> Figures {
    let rx = receiver(sb, ring, k, size);
    pin::place(cpus.0, cpus.1);
    // Warm up (first touches of the ring, the buffers, the allocator).
    rx.stream(2_000);
    let (w0, f0) = (sb.ring_wake_stats(), sb.write_stats());
    let rate = rx.stream(DELIVERY_STREAM);
    let (w1, f1) = (sb.ring_wake_stats(), sb.write_stats());
    let (syscalls, per_batch) = if ring {
        let staged = (w1.0 - w0.0).max(1) as f64;
        (
            (w1.1 - w0.1) as f64 / staged,
            staged / (w1.2 - w0.2).max(1) as f64,
        )
    } else {
        let writes = (f1.1 - f0.1).max(1) as f64;
        (
            writes / DELIVERY_STREAM as f64,
            DELIVERY_STREAM as f64 / writes,
        )
    };
    // An active consumer spins on its own core: cross-core only.
    let active = (cpus.0 != cpus.1).then(|| rx.latency(ACTIVE_EVENTS, ACTIVE_GAP));
    let sparse = rx.latency(SPARSE_EVENTS, SPARSE_GAP);
    let dropped = rx.dropped.load(Ordering::Relaxed);
    drop(rx.client);
    Figures {
        rate,
        active,
        sparse,
        syscalls,
        per_batch,
        dropped,
    }
}

fn median_by<T: Copy>(v: &[T], key: impl Fn(&T) -> f64) -> f64 {
    median(v.iter().map(key).collect())
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// Part 1: delivery, pinned.
fn delivery(sb: &SocketBroker) {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and only changes
    // this thread's timer slack (the default 50 µs would stretch every
    // pacing sleep by that much).
    #[allow(unsafe_code)]
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    println!("\nPart 1, delivery (routing -> client handler), pinned; {ROUNDS} alternating rounds, median\n");
    println!("| placement | event text | events/s ring | events/s socket | ring/socket | p50 active ring | p50 active socket | socket/ring | p99 active ring | p99 active socket | p50 sparse ring | p50 sparse socket | socket/ring | p99 sparse ring | p99 sparse socket | ring wakes/event | socket writes/event | events per ring publish | events per socket write | events dropped ring, socket |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut k = 0;
    for &(placement, bcpu, ccpu) in pin::placements() {
        for size in [64usize, 512, 4096] {
            let (mut ring, mut sock) = (Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                k += 1;
                ring.push(measure(sb, true, k, size, (bcpu, ccpu)));
                sock.push(measure(sb, false, k, size, (bcpu, ccpu)));
            }
            pin::unpin_all();
            let ratio = |f: &dyn Fn(usize) -> f64| median((0..ROUNDS).map(f).collect());
            let secs = |d: Duration| d.as_secs_f64();
            let act = |v: &[Figures], p99: bool| {
                v[0].active.map(|_| {
                    Duration::from_secs_f64(median_by(v, |f| {
                        f.active.map_or(0.0, |a| secs(if p99 { a.1 } else { a.0 }))
                    }))
                })
            };
            let sp = |v: &[Figures], p99: bool| {
                Duration::from_secs_f64(median_by(v, |f| {
                    secs(if p99 { f.sparse.1 } else { f.sparse.0 })
                }))
            };
            let opt = |d: Option<Duration>| d.map_or("-".to_string(), us);
            let act_ratio = if ring[0].active.is_some() {
                format!(
                    "{:.1}x",
                    ratio(&|i| secs(sock[i].active.unwrap_or_default().0)
                        / secs(ring[i].active.unwrap_or_default().0).max(1e-9))
                )
            } else {
                "-".into()
            };
            println!(
                "| {placement} | {size} B | {:.0} | {:.0} | {:.2}x | {} | {} | {act_ratio} | {} | {} | {} | {} | {:.1}x | {} | {} | {:.4} | {:.4} | {:.1} | {:.1} | {}, {} |",
                median_by(&ring, |f| f.rate),
                median_by(&sock, |f| f.rate),
                ratio(&|i| ring[i].rate / sock[i].rate),
                opt(act(&ring, false)),
                opt(act(&sock, false)),
                opt(act(&ring, true)),
                opt(act(&sock, true)),
                us(sp(&ring, false)),
                us(sp(&sock, false)),
                ratio(&|i| secs(sock[i].sparse.0) / secs(ring[i].sparse.0).max(1e-9)),
                us(sp(&ring, true)),
                us(sp(&sock, true)),
                median_by(&ring, |f| f.syscalls),
                median_by(&sock, |f| f.syscalls),
                median_by(&ring, |f| f.per_batch),
                median_by(&sock, |f| f.per_batch),
                ring.iter().map(|f| f.dropped).sum::<usize>(),
                sock.iter().map(|f| f.dropped).sum::<usize>(),
            );
        }
    }
}
