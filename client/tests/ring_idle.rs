//! Stuck ring consumers cost the broker nothing: N socket
//! connections, each granted a small ring that holds two of its agent's
//! three events, the third queued in the broker behind it, and none ever
//! read. The broker then waits for the consumers' own signal (the ring's
//! reverse eventcount) instead of retrying on a timer, so its CPU time over
//! an idle window (`/proc/PID/stat`, utime + stime) stays near zero. Before
//! the change each such connection's writer task retried every 2 ms: 200 of
//! them kept the idle broker at ~12% of a core.
//!
//! `A2A_IDLE_RINGS=1000` (at most `--max-connections`, 1024) and
//! `A2A_IDLE_SECONDS` set the size of the run; the BENCHMARKS.md figure is
//! `A2A_IDLE_RINGS=1000 cargo test --release -p a2a-client --test ring_idle
//! -- --nocapture`.

use a2a_ring::Segment;
use a2a_testkit::{BrokerProcess, Spawn, TIMEOUT};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// The ring each connection asks for: the smallest (4 KiB).
const RING_BYTES: u64 = 4096;
/// Events per agent, each with this much text (~1.7 KB framed): two fit
/// the ring, the third waits behind it.
const EVENTS: usize = 3;
const TEXT: usize = 1500;

/// A bare NDJSON connection (no reader thread: a thousand of them).
struct Line {
    w: UnixStream,
    r: BufReader<UnixStream>,
    next: u64,
}

impl Line {
    fn open(path: &Path, secret: &str) -> (Line, String) {
        let w = UnixStream::connect(path).expect("connect");
        let r = BufReader::new(w.try_clone().unwrap());
        let mut c = Line { w, r, next: 0 };
        let hs = c.call(
            "app.handshake",
            json!({"protocolVersion": 10, "secret": secret, "eventRing": {"bytes": RING_BYTES}}),
        );
        let name = hs["eventRing"]["name"]
            .as_str()
            .unwrap_or_else(|| panic!("no ring granted: {hs}"))
            .to_owned();
        (c, name)
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let line = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        writeln!(self.w, "{line}").unwrap();
        self.next
    }

    fn answer(&mut self, id: u64) -> Value {
        loop {
            let mut l = String::new();
            assert!(self.r.read_line(&mut l).unwrap() > 0, "connection closed");
            let v: Value = serde_json::from_str(&l).unwrap();
            if v["id"] == json!(id) {
                assert!(v.get("error").is_none(), "{v}");
                return v["result"].clone();
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.answer(id)
    }
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command name (in parentheses): field 3 is index 0, utime
    // (14) index 11, stime (15) index 12.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// `/proc` counts CPU time in USER_HZ ticks, which Linux fixes at 100 a
/// second whatever the kernel's own tick rate (`getconf CLK_TCK`).
fn ticks_per_second() -> f64 {
    100.0
}

/// Bytes in use in a ring (`head - tail`, read from its header).
fn ring_used(name: &str) -> u64 {
    let f = std::fs::File::open(format!("/dev/shm{name}")).unwrap();
    let (mut head, mut tail) = ([0u8; 8], [0u8; 8]);
    f.read_exact_at(&mut head, 64).unwrap();
    f.read_exact_at(&mut tail, 128).unwrap();
    u64::from_le_bytes(head) - u64::from_le_bytes(tail)
}

fn env_or(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn full_unread_rings_cost_an_idle_broker_no_cpu() {
    let n = env_or("A2A_IDLE_RINGS", 200) as usize;
    let window = Duration::from_secs(env_or("A2A_IDLE_SECONDS", 5));
    let dir = tempfile::tempdir().unwrap();
    let p: BrokerProcess = Spawn::new(dir.path().join("db"))
        .socket(dir.path().join("run").join("sock"))
        .no_stdio()
        .args(["--durability", "normal"])
        .start(TIMEOUT)
        .expect("broker ready");
    let (socket, secret) = (p.socket().unwrap(), p.secret().unwrap());
    let text = "x".repeat(TEXT);
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        let (mut c, name) = Line::open(&socket, &secret);
        let reg = |c: &mut Line, ctx: String, who: String| {
            c.call(
                "a2a.agents.register",
                json!({"contextId": ctx, "card": {"name": who}}),
            )["token"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        reg(&mut c, format!("cw{i}"), format!("w{i}"));
        let req = reg(&mut c, format!("cr{i}"), format!("r{i}"));
        let ids: Vec<u64> = (0..EVENTS)
            .map(|k| {
                c.send(
                    "a2a.message.send",
                    json!({"token": req, "message": {"role": "user", "messageId": format!("m{k}"),
                        "to": format!("w{i}"), "parts": [{"kind": "text", "text": text}]}}),
                )
            })
            .collect();
        for id in ids {
            c.answer(id);
        }
        conns.push((c, name));
    }
    // Every ring is full: the third event cannot fit and waits in the broker.
    let deadline = Instant::now() + TIMEOUT;
    for (_, name) in &conns {
        while RING_BYTES - ring_used(name) >= 1800 {
            assert!(Instant::now() < deadline, "{name} never filled");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // Let the connections' tasks settle, then measure an idle window.
    std::thread::sleep(Duration::from_secs(1));
    let before = cpu_ticks(p.pid);
    let started = Instant::now();
    std::thread::sleep(window);
    let ticks = cpu_ticks(p.pid) - before;
    let secs = started.elapsed().as_secs_f64();
    let share = ticks as f64 / ticks_per_second() / secs;
    eprintln!(
        "{n} connections with full, unread 4 KiB rings: the idle broker used {ticks} ticks in {secs:.1} s = {:.2}% of a core",
        share * 100.0
    );
    // Before the change: ~12% of a core for 200 such connections. Generous
    // for a machine shared with other builds, yet far below that.
    assert!(
        share < 0.03,
        "an idle broker with {n} stuck ring consumers used {:.2}% of a core",
        share * 100.0
    );

    // The waiting backlog still moves as soon as a consumer reads: its
    // own signal wakes the broker.
    let (_, name) = &conns[0];
    let mut consumer = Segment::open(name, RING_BYTES as usize).unwrap();
    let mut seen = 0;
    let deadline = Instant::now() + TIMEOUT;
    while seen < EVENTS {
        assert!(
            Instant::now() < deadline,
            "only {seen} of {EVENTS} events after the consumer read"
        );
        consumer.wait(Some(Duration::from_millis(100))).unwrap();
        seen += consumer.drain(usize::MAX, |_| {}).unwrap();
    }
    drop(conns);
}
