//! The abuse run, alone in its test binary so that no other test
//! shares the machine with it: while hostile clients do the three attacks
//! of the pressure tests at once (unauthenticated connections streaming lines that
//! never end; 30 MB batch lines; 1 MiB artifact appends by a worker; many
//! registrations under one name), a well-behaved client's median round trip
//! stays within 3x of its unloaded median, and the broker's peak resident
//! memory stays under 400 MB.
//!
//! This machine is shared and noisy, so quiet and loaded rounds alternate
//! and the verdict is the median of the paired ratios. Each hostile loop
//! pauses `PACE` between rounds: attackers spinning flat out on a 2-core
//! machine take the cores from everyone, the victim's own test thread
//! included, which measures the machine rather than the broker (the
//! unpaced figure is in SECURITY.md). `HOSTILE=13` runs only those kinds.

use a2a_testkit::measure::{median, peak_rss};
use a2a_testkit::raw::RawConn;
use a2a_testkit::{Spawn, TIMEOUT};
use serde_json::json;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PACE: Duration = Duration::from_millis(20);
const ROUNDS: usize = 7;
const TRIPS: usize = 100;

/// Runs `f` until `stop`, only while `active`, counting rounds in `work`.
fn hostile(
    stop: &Arc<AtomicBool>,
    active: &Arc<AtomicBool>,
    work: &Arc<AtomicU64>,
    mut f: impl FnMut() + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let (stop, active, work) = (stop.clone(), active.clone(), work.clone());
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if !active.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            f();
            work.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(PACE);
        }
    })
}

#[test]
fn hostile_clients_do_not_stall_a_well_behaved_one() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    let p = Spawn::new(dir.path().join("abuse.db"))
        .socket(dir.path().join("run").join("b.sock"))
        .args(["--durability", "normal"])
        .start(TIMEOUT)
        .expect("broker ready");
    let path: PathBuf = p.socket().unwrap();
    let secret = p.secret().unwrap();
    let open = || RawConn::socket(&path, &secret).expect("connect");

    let mut victim = open();
    let (_, vreq) = victim.register("v1", "v-req");
    let (vw, vwrk) = victim.register("v2", "v-wrk");
    let task = victim.task(&vreq, &vw);
    let mut round_trips = |n: usize| -> Duration {
        median(
            (0..n)
                .map(|i| {
                    let t = Instant::now();
                    if i % 2 == 0 {
                        victim.ok(
                            "a2a.tasks.get",
                            json!({"token": vreq, "id": task, "historyLength": 1}),
                        );
                    } else {
                        victim.ok(
                            "a2a.tasks.status",
                            json!({"token": vwrk, "id": task, "state": "working"}),
                        );
                    }
                    t.elapsed()
                })
                .collect(),
        )
    };
    round_trips(50); // warm up

    let stop = Arc::new(AtomicBool::new(false));
    let active = Arc::new(AtomicBool::new(false));
    let work = Arc::new(AtomicU64::new(0));
    let only = std::env::var("HOSTILE").unwrap_or_else(|_| "1234".into());
    let mut threads = Vec::new();
    // Item 1: unauthenticated connections streaming a line that never ends.
    for _ in 0..if only.contains('1') { 8 } else { 0 } {
        let path = path.clone();
        threads.push(hostile(&stop, &active, &work, move || {
            let chunk = vec![b'x'; 1 << 20];
            let mut s = UnixStream::connect(&path).unwrap();
            s.set_read_timeout(Some(TIMEOUT)).unwrap();
            while s.write_all(&chunk).is_ok() {}
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink);
        }));
    }
    // Item 1: 30 MB batch lines from an authenticated client.
    if only.contains('2') {
        let mut c = open();
        let mut line = String::from("[");
        line.push_str(&"0,".repeat(15_000_000));
        line.push('0');
        line.push(']');
        threads.push(hostile(&stop, &active, &work, move || {
            c.send_line(&line);
            let (_, r) = c.next_response_line();
            assert_eq!(r["error"]["data"]["reason"], "batch too large");
        }));
    }
    // Item 2: a worker appending 1 MiB chunks to an artifact, starting it
    // over when the artifact bound refuses the next one.
    if only.contains('3') {
        let mut c = open();
        let (_, req) = c.register("h1", "h-req");
        let (w, wrk) = c.register("h2", "h-wrk");
        let id = c.task(&req, &w);
        let bytes = base64::engine::general_purpose::STANDARD.encode(vec![3u8; 1 << 20]);
        let mut append = false;
        threads.push(hostile(&stop, &active, &work, move || {
            let art =
                json!({"artifactId": "big", "parts": [{"kind": "file", "file": {"bytes": bytes}}]});
            append = c.succeeds(
                "a2a.tasks.artifact",
                json!({"token": wrk, "id": id, "artifact": art, "append": append}),
            );
        }));
    }
    // Item 3: registrations under one name, 100 at a time.
    if only.contains('4') {
        let mut c = open();
        let mut k = 0u64;
        threads.push(hostile(&stop, &active, &work, move || {
            let ids: Vec<u64> = (0..100)
                .map(|_| {
                    k += 1;
                    c.request(
                        "a2a.agents.register",
                        json!({"contextId": format!("r{k}"), "card": {"name": "same"}}),
                    )
                })
                .collect();
            for i in ids {
                c.raw_response(i);
            }
        }));
    }

    let mut ratios = Vec::new();
    let mut figures = Vec::new();
    for _ in 0..ROUNDS {
        active.store(false, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(100));
        let quiet = round_trips(TRIPS);
        active.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(200));
        let loaded = round_trips(TRIPS);
        ratios.push(loaded.as_secs_f64() / quiet.as_secs_f64());
        figures.push((quiet, loaded));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let peak = peak_rss(p.pid);
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    let ratio = sorted[sorted.len() / 2];
    eprintln!(
        "abuse run: median of {ROUNDS} paired ratios {ratio:.2}x (rounds: {figures:?}); \
         hostile rounds {}; broker peak RSS {} MB",
        work.load(Ordering::Relaxed),
        peak >> 20
    );
    assert!(ratio <= 3.0, "the well-behaved client slowed {ratio:.2}x");
    assert!(peak < 400 << 20, "broker peak RSS {} MB", peak >> 20);
}
