//! What one socket connection, or many, can make the broker hold, against
//! the real binary over its real socket (memory and threads read from
//! `/proc/PID`):
//!
//! - a connection that never reads holds at most the outbox's byte bounds
//!   (`OUTBOX_EVENT_BYTES`): its oldest events are dropped and reported
//!   with `a2a.lagged`, every one accounted for;
//! - connections that connect, shake hands and go leave no threads and
//!   no memory behind once the churn stops;
//! - connections that never present the secret cannot lock the clients
//!   that do out: at `--max-connections` the oldest of them gives its place.

use a2a_testkit::measure::{peak_rss, rss};
use a2a_testkit::raw::RawConn;
use a2a_testkit::{BrokerProcess, Spawn, TIMEOUT};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

const MIB: u64 = 1024 * 1024;

/// A socket broker (`--durability normal`: nothing here is about power
/// loss) in a directory of its own.
fn start(extra: &[&str]) -> (BrokerProcess, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let p = Spawn::new(dir.path().join("b.db"))
        .socket(dir.path().join("run").join("b.sock"))
        .args(["--durability", "normal"])
        .args(extra)
        .start(TIMEOUT)
        .expect("broker ready");
    (p, dir)
}

fn handshake_line(secret: &str) -> String {
    let hs = json!({"jsonrpc": "2.0", "id": 1, "method": "app.handshake",
        "params": {"protocolVersion": 10, "secret": secret}});
    format!("{hs}\n")
}

/// Connects and completes a handshake; the stream and a reader on it.
fn handshaken(p: &BrokerProcess) -> (UnixStream, BufReader<UnixStream>) {
    let mut s = UnixStream::connect(p.socket().expect("a socket")).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.write_all(handshake_line(&p.secret().expect("a secret")).as_bytes())
        .unwrap();
    let mut rd = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    rd.read_line(&mut line).unwrap();
    assert!(line.contains("\"result\""), "handshake refused: {line}");
    (s, rd)
}

fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("/proc/PID/task")
        .count()
}

/// Resident memory once it has settled: the lowest of a few samples.
fn settled_rss(pid: u32) -> u64 {
    (0..5)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(200));
            rss(pid)
        })
        .min()
        .expect("samples")
}

// ---- a connection that never reads ----

/// Senders, tasks each, and the bytes of each task's file part: 300 events
/// of about 1 MiB for a worker whose connection never reads (before the
/// byte bound all of them were held, under the count bound of 65,536: the
/// broker's peak RSS grew by ~350 MiB; ~105 MiB with it).
const SENDERS: usize = 3;
const TASKS_EACH: usize = 100;
const EVENT_BYTES: usize = 1 << 20;

#[test]
fn a_socket_that_never_reads_costs_at_most_its_byte_bound() {
    let (p, _dir) = start(&[]);
    let socket = p.socket().unwrap();
    let secret = p.secret().unwrap();

    // The victim: a worker that registers, then never reads again.
    let (mut victim, mut victim_rd) = handshaken(&p);
    let reg = json!({"jsonrpc": "2.0", "id": 2, "method": "a2a.agents.register",
        "params": {"contextId": "v", "card": {"name": "victim"}}});
    victim.write_all(format!("{reg}\n").as_bytes()).unwrap();
    let mut line = String::new();
    victim_rd.read_line(&mut line).unwrap();
    assert!(line.contains("\"token\""), "{line}");

    let before = peak_rss(p.pid);
    // Base64 of EVENT_BYTES * 3 / 4 bytes: a file part of EVENT_BYTES on the wire.
    let blob = "QUJD".repeat(EVENT_BYTES / 4);
    let mut sender = RawConn::socket(&socket, &secret).unwrap();
    for s in 0..SENDERS {
        let (_, token) = sender.register(&format!("s{s}"), &format!("sender{s}"));
        // Pipelined, ten at a time; the answers without the history.
        for _ in 0..TASKS_EACH / 10 {
            let ids: Vec<u64> = (0..10)
                .map(|_| {
                    let m = a2a_testkit::parts_msg(
                        json!([{"kind": "file", "file": {"name": "f.bin", "bytes": blob}}]),
                        "victim",
                    );
                    sender.request(
                        "a2a.message.send",
                        json!({"token": token, "message": m,
                            "configuration": {"historyLength": 0}}),
                    )
                })
                .collect();
            for id in ids {
                let r = sender.raw_response(id);
                assert!(r.contains("\"result\""), "a send failed: {r}");
            }
        }
    }
    let grew = peak_rss(p.pid).saturating_sub(before);
    eprintln!(
        "peak RSS grew by {} MiB for {} unread events of {} KiB",
        grew / MIB,
        SENDERS * TASKS_EACH,
        EVENT_BYTES >> 10
    );

    // Now it reads: every event came, or was reported dropped.
    let total = (SENDERS * TASKS_EACH) as u64;
    let (mut got, mut dropped) = (0u64, 0u64);
    let deadline = Instant::now() + TIMEOUT;
    while got + dropped < total {
        assert!(
            Instant::now() < deadline,
            "{got} events and {dropped} dropped of {total}"
        );
        line.clear();
        victim_rd.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        match v["method"].as_str() {
            Some("a2a.lagged") => dropped += v["params"]["dropped"].as_u64().unwrap(),
            Some(_) => got += 1,
            None => panic!("not a notification: {}", &line[..line.len().min(200)]),
        }
    }
    eprintln!("the victim read {got} events and a2a.lagged for {dropped}");
    assert_eq!(got + dropped, total);
    assert!(
        dropped >= total / 2,
        "only {dropped} of {total} events dropped: the outbox held {got} of about 1 MiB"
    );
    // What is left resident is the byte bound (64 MiB) and what the load
    // itself took (parsing the sends, the task cache's 32 MiB), not the
    // 300 MiB of events.
    assert!(
        grew < 200 * MIB,
        "peak RSS grew by {} MiB for a connection that never reads",
        grew / MIB
    );
}

// ---- churn ----

/// Rounds of connect, handshake (and for some a registration), drop, and
/// connections per round (from a few client threads at once).
const ROUNDS: usize = 3;
const PER_ROUND: usize = 2_000;
const CLIENT_THREADS: usize = 8;
const REGISTER: &str = r#"{"jsonrpc":"2.0","id":2,"method":"a2a.agents.register","params":{"contextId":"churn","card":{"name":"c"}}}"#;

#[test]
fn connection_churn_leaves_no_threads_and_no_memory_behind() {
    let (p, _dir) = start(&[]);
    let socket = p.socket().unwrap();
    let secret = p.secret().unwrap();
    let churn = |n: usize| {
        let workers: Vec<_> = (0..CLIENT_THREADS)
            .map(|_| {
                let (socket, line) = (socket.clone(), handshake_line(&secret));
                std::thread::spawn(move || {
                    for i in 0..n / CLIENT_THREADS {
                        let mut s = UnixStream::connect(&socket).unwrap();
                        s.set_read_timeout(Some(TIMEOUT)).unwrap();
                        let mut lines = line.clone();
                        // One in eight also registers an agent: its end then
                        // waits for the writer to kill the agent's token.
                        let registers = i % 8 == 0;
                        if registers {
                            lines.push_str(&format!("{REGISTER}\n"));
                        }
                        s.write_all(lines.as_bytes()).unwrap();
                        let mut rd = BufReader::new(s);
                        for _ in 0..1 + usize::from(registers) {
                            let mut answer = String::new();
                            rd.read_line(&mut answer).unwrap();
                            assert!(answer.contains("\"result\""), "{answer}");
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    };
    // The runtime's own start (its workers, the first allocations) is
    // not what is measured.
    churn(CLIENT_THREADS * 20);
    std::thread::sleep(Duration::from_secs(2));
    let (threads_0, rss_0) = (threads(p.pid), settled_rss(p.pid));
    for _ in 0..ROUNDS {
        churn(PER_ROUND);
    }
    let (threads_peak, rss_peak) = (threads(p.pid), rss(p.pid));
    // Idle blocking threads end within a second.
    std::thread::sleep(Duration::from_secs(3));
    let (threads_1, rss_1) = (threads(p.pid), settled_rss(p.pid));
    eprintln!(
        "{} connections: threads {threads_0} -> {threads_peak} -> {threads_1}, \
         RSS {} -> {} -> {} MiB",
        ROUNDS * PER_ROUND,
        rss_0 / MIB,
        rss_peak / MIB,
        rss_1 / MIB
    );
    assert!(
        threads_1 <= threads_0 + 1,
        "{threads_0} threads before the churn, {threads_1} after it"
    );
    assert!(
        rss_1 < rss_0 + 64 * MIB,
        "RSS {} MiB before the churn, {} MiB after it",
        rss_0 / MIB,
        rss_1 / MIB
    );
}

// ---- connections that never present the secret ----

/// Places, and how many real clients come once they are all taken.
const PLACES: usize = 32;
const CLIENTS: usize = 5;

#[test]
fn silent_connections_give_their_places_to_clients_with_the_secret() {
    let (p, _dir) = start(&["--max-connections", &PLACES.to_string()]);
    let socket = p.socket().unwrap();
    // Every place taken by a connection that never completes a handshake:
    // the oldest chose NDJSON and trickled half a line, the rest are silent.
    let mut silent: Vec<UnixStream> = (0..PLACES)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    silent[0].write_all(b"{\"jsonrpc\":").unwrap();
    // The broker has taken them all (a handshaken connection would be
    // refused now: it is not, below).
    std::thread::sleep(Duration::from_millis(300));

    let t = Instant::now();
    let clients: Vec<_> = (0..CLIENTS).map(|_| handshaken(&p)).collect();
    eprintln!(
        "{CLIENTS} clients shook hands in {:?} with all {PLACES} places held by silent connections",
        t.elapsed()
    );
    assert_eq!(clients.len(), CLIENTS);

    // The oldest gave way, told why if it had chosen a codec; the others
    // are still open.
    let mut first = Vec::new();
    silent[0].set_read_timeout(Some(TIMEOUT)).unwrap();
    silent[0].read_to_end(&mut first).unwrap();
    let answer: Value = serde_json::from_slice(first.split(|&b| b == b'\n').next().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&first)));
    assert_eq!(
        answer["error"]["data"]["reason"], "evicted before handshake",
        "{answer}"
    );
    for s in &mut silent[1..CLIENTS] {
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        let mut buf = Vec::new();
        assert_eq!(s.read_to_end(&mut buf).unwrap(), 0, "closed without a word");
    }
    for (i, s) in silent.iter_mut().enumerate().skip(CLIENTS) {
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 16];
        match s.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("silent connection {i} was closed too: {other:?}"),
        }
    }
    let evictions = || {
        p.stderr
            .all()
            .iter()
            .filter(|l| l.contains("evicted before its handshake"))
            .count()
    };
    // Logged before each connection closed; read by the kit's stderr thread.
    let deadline = Instant::now() + TIMEOUT;
    while evictions() < CLIENTS && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(evictions(), CLIENTS, "one log line per eviction");

    // With every place held by a handshaken connection, the next is
    // refused as before.
    drop(silent);
    let mut held = clients;
    let deadline = Instant::now() + TIMEOUT;
    while held.len() < PLACES {
        let mut s = UnixStream::connect(&socket).unwrap();
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        s.write_all(handshake_line(&p.secret().unwrap()).as_bytes())
            .unwrap();
        let mut rd = BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        let _ = rd.read_line(&mut line);
        if line.contains("\"result\"") {
            held.push((s, rd));
        } else {
            // The silent ones' places come back as their tasks end.
            assert!(Instant::now() < deadline, "no place came back: {line}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let mut extra = UnixStream::connect(&socket).unwrap();
    extra.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut got = Vec::new();
    extra.read_to_end(&mut got).unwrap();
    let refused: Value =
        serde_json::from_slice(got.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(refused["error"]["data"]["reason"], "too many connections");
}
