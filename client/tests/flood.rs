//! A client flooding the broker (reads and commits as fast as it can, on
//! several connections) does not slow a well-behaved client beyond a stated
//! bound.
//!
//! The bound: under the flood, the median round trip of the well-behaved
//! client's calls (a read and a committed status change, alternating) stays
//! under 100 ms, and no single call takes over 5 s. These are deliberately
//! generous (unloaded, a round trip takes well under a millisecond here; see
//! the figures this test prints) so that a noisy shared machine cannot make
//! the test flaky, while a broker that starved other connections behind a
//! flooder — a writer queue that never yields, a connection task that never
//! yields its worker thread — would blow far past them.

mod common;

use a2a_client::{agent_card, message_to, Delivery, State};
use common::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[test]
fn a_flooding_client_does_not_starve_others() {
    let broker = Broker::start();
    let victim = broker.connect();
    let req = victim
        .register("victim", agent_card("v-req"), Delivery::Push)
        .unwrap();
    let wrk = victim
        .register("victim", agent_card("v-wrk"), Delivery::Push)
        .unwrap();
    let task = req.send(message_to("v-wrk", "work"), None).unwrap();
    let round_trips = |n: usize| -> Vec<Duration> {
        (0..n)
            .map(|i| {
                let t = Instant::now();
                if i % 2 == 0 {
                    req.get_task(&task.id, Some(1)).unwrap();
                } else {
                    wrk.set_status(&task.id, State::Working, None).unwrap();
                }
                t.elapsed()
            })
            .collect()
    };
    let quiet = median(round_trips(200));

    // The flood: 3 connections of readers and 2 of committers, each
    // calling back to back.
    let stop = Arc::new(AtomicBool::new(false));
    let flooded = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for k in 0..5 {
        let client = broker.connect();
        let ctx = format!("flood-{k}");
        let r = client
            .register(&ctx, agent_card(&format!("f-req-{k}")), Delivery::Push)
            .unwrap();
        let w = client
            .register(&ctx, agent_card(&format!("f-wrk-{k}")), Delivery::Push)
            .unwrap();
        let t = r.send(message_to(w.id(), "flood"), None).unwrap();
        let (stop, flooded) = (stop.clone(), flooded.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if k < 3 {
                    r.get_task(&t.id, Some(1)).unwrap();
                } else {
                    w.set_status(&t.id, State::Working, None).unwrap();
                }
                flooded.fetch_add(1, Ordering::Relaxed);
                // The flooder's own events pile up unread: drain them now and then.
                if flooded.load(Ordering::Relaxed) % 512 == 0 {
                    let _ = r.wait(Duration::ZERO);
                }
            }
        }));
    }
    // Let the flood get going.
    let deadline = Instant::now() + TIMEOUT;
    while flooded.load(Ordering::Relaxed) < 2_000 {
        assert!(Instant::now() < deadline, "the flood never got going");
        std::thread::yield_now();
    }
    let before = flooded.load(Ordering::Relaxed);
    let loaded = round_trips(200);
    let during = flooded.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let worst = *loaded.iter().max().unwrap();
    let busy = median(loaded);
    eprintln!(
        "victim round trip: median {quiet:?} quiet, {busy:?} under a flood of {during} calls ({:.1}x); worst {worst:?}",
        busy.as_secs_f64() / quiet.as_secs_f64()
    );
    assert!(during > 0, "the flood ran while the victim measured");
    assert!(
        busy < Duration::from_millis(100),
        "median {busy:?} under flood exceeds the stated bound"
    );
    assert!(
        worst < Duration::from_secs(5),
        "a call took {worst:?} under flood"
    );
}
