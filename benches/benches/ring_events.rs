//! The broker's event path over the shared-memory ring against the same
//! path over the socket (PROTOCOL.md §1.3), in one run: a worker changes a
//! task's status with a message of 64 B, 512 B or 4 KiB, and the
//! requester's client receives each event, once on a connection that was
//! granted a ring and once on one that was not. Reported: events/s
//! (pipelined stream of status changes) and the latency of single events
//! (the worker's submission to the requester's handler, one at a time, so
//! the consumer goes idle between them), p50 and p99, as ratios of the two
//! paths measured in alternating rounds.
//!
//! `cargo bench -p a2a-benches --bench ring_events`

use a2a_benches::socket::SocketBroker;
use a2a_broker::Durability;
use a2a_client::{
    agent_card, message_to, Agent, Client, ClientOptions, Delivery, Message, Part, State,
};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;
const STREAM: usize = 2_000; // with SINGLES, at most 220 messages per task
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
const TASKS: usize = 10;

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

fn main() {
    // `cargo bench` passes flags (e.g. `--bench`); nothing to parse.
    let sb = SocketBroker::start(Durability::Normal);
    println!("| event text | events/s ring | events/s socket | ratio | p50 ring | p50 socket | p50 ratio (socket/ring) | p99 ring | p99 socket |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut k = 0;
    for size in [64usize, 512, 4096] {
        let (mut rates, mut p50s, mut rows) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            k += 1;
            // Fresh tasks each round: the task log bound is 10,000 changes.
            let ring = path(&sb, true, k);
            let sock = path(&sb, false, k);
            let (rr, rs) = (stream(&ring, size, STREAM), stream(&sock, size, STREAM));
            let (lr, ls) = (singles(&ring, size, SINGLES), singles(&sock, size, SINGLES));
            rates.push(rr / rs);
            p50s.push(ls.0.as_secs_f64() / lr.0.as_secs_f64());
            rows.push((rr, rs, lr, ls));
            drop((ring.req, sock.req));
        }
        let (rr, rs, lr, ls) = rows[rows.len() / 2];
        println!(
            "| {size} B | {rr:.0} | {rs:.0} | {:.2}x | {:?} | {:?} | {:.2}x | {:?} | {:?} |",
            median(rates),
            lr.0,
            ls.0,
            median(p50s),
            lr.1,
            ls.1
        );
    }
    sb.shutdown();
}
