//! Hand-off latency of one event: from the producer's publish to the
//! consumer's `wait` returning with it, over the ring (default spin policy,
//! and with spinning off) and over a Unix socket pair (a blocking `read` of
//! the same record), for 64 B, 512 B and 4 KiB records, threads pinned
//! same-core and cross-core.
//!
//! Two paces:
//! - **active**: an event every 30 µs, paced by busy-waiting (cross-core
//!   only: a busy-waiting producer would starve a consumer on its core).
//!   Within the consumer's 60 µs spin window: the ring consumer is still
//!   spinning when the event lands. (The broker's `ring_events` bench uses
//!   the same pace.)
//! - **sparse**: an event every 200 µs, paced by `sleep`: the consumer
//!   parks between events and every event pays a wake-up.
//!
//! Each record carries the nanoseconds since a shared start `Instant`; the
//! consumer subtracts it from its own reading right after `wait` (or
//! `read`) returns. Reported: p50 and p99 over all events, and the socket's
//! p50 over the ring's.
//!
//! Run: `cargo bench -p a2a-ring --bench latency` (about 45 s).

mod common;

/// Loom builds have no shared memory; the bench is then an empty program.
fn main() {
    #[cfg(not(loom))]
    bench::main();
}

#[cfg(not(loom))]
mod bench {
    use crate::common::{bench_mode, load_average, pin, placements};
    use a2a_ring::{Record, Segment, SpinPolicy};
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};

    pub fn main() {
        if !bench_mode() {
            eprintln!("latency: skipped (runs under `cargo bench` only)");
            return;
        }
        println!("latency bench: load average {}", load_average());
        println!(
            "{:<11} {:>6} {:<7} {:>7} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9} | {:>12}",
            "placement",
            "record",
            "pace",
            "events",
            "ring p50",
            "ring p99",
            "nospin p50",
            "p99",
            "sock p50",
            "sock p99",
            "sock/ring p50"
        );
        for &(placement, pcpu, ccpu) in placements() {
            for (size, pace, interval, events) in
                [64usize, 512, 4096].into_iter().flat_map(|size| {
                    [
                        (size, "active", Duration::from_micros(30), 20_000usize),
                        (size, "sparse", Duration::from_micros(200), 3_000),
                    ]
                })
            {
                if pace == "active" && pcpu == ccpu {
                    continue;
                }
                let run = (size, interval, events, pcpu, ccpu);
                let ring = percentiles(ring_latency(run, SpinPolicy::default()));
                let nospin = percentiles(ring_latency(run, SpinPolicy::OFF));
                let sock = percentiles(socket_latency(run));
                let ratio = sock.0 as f64 / ring.0.max(1) as f64;
                println!(
                    "{placement:<11} {size:>6} {pace:<7} {events:>7} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9} | {ratio:>11.1}x",
                    us(ring.0), us(ring.1), us(nospin.0), us(nospin.1), us(sock.0), us(sock.1)
                );
                println!(
                    "SUMMARY latency placement={placement} record={size} pace={pace} ring_p50_ns={} ring_p99_ns={} nospin_p50_ns={} nospin_p99_ns={} socket_p50_ns={} socket_p99_ns={} socket_over_ring_p50={ratio:.2}",
                    ring.0, ring.1, nospin.0, nospin.1, sock.0, sock.1
                );
            }
        }
    }

    fn us(ns: u64) -> String {
        format!("{:.1} µs", ns as f64 / 1000.0)
    }

    /// (p50, p99) in nanoseconds.
    fn percentiles(mut v: Vec<u64>) -> (u64, u64) {
        v.sort_unstable();
        if v.is_empty() {
            return (0, 0);
        }
        (v[v.len() / 2], v[(v.len() * 99 / 100).min(v.len() - 1)])
    }

    /// Waits until `at`: busy for short intervals (sleep overshoots by tens
    /// of µs), sleeping for long ones.
    fn pace(at: Instant, interval: Duration) {
        if interval >= Duration::from_micros(100) {
            if let Some(d) = at.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
        } else {
            while Instant::now() < at {
                std::hint::spin_loop();
            }
        }
    }

    /// Writes the sending time into a record's first 8 bytes.
    fn stamp(base: Instant, rec: &mut [u8]) {
        rec[..8].copy_from_slice(&(base.elapsed().as_nanos() as u64).to_le_bytes());
    }

    fn age(base: Instant, rec: &[u8]) -> u64 {
        let sent = u64::from_le_bytes(rec[..8].try_into().unwrap_or_default());
        (base.elapsed().as_nanos() as u64).saturating_sub(sent)
    }

    /// Record size, pace, events, producer CPU, consumer CPU.
    type Run = (usize, Duration, usize, usize, usize);

    /// The producer's side of a run, on CPU `pcpu`: `events` records of
    /// `size` bytes, one per `interval`, each stamped with its age's start
    /// and handed to `send`.
    fn produce((size, interval, events, pcpu, _): Run, base: Instant, mut send: impl FnMut(&[u8])) {
        pin(pcpu);
        let mut rec = vec![0u8; size];
        let mut next = Instant::now() + interval;
        for _ in 0..events {
            pace(next, interval);
            next += interval;
            stamp(base, &mut rec);
            send(&rec);
        }
    }

    fn ring_latency((size, interval, events, pcpu, ccpu): Run, policy: SpinPolicy) -> Vec<u64> {
        let (mut producer, name) = Segment::create_with_prefix("a2a-ring-bench-", 1 << 16).unwrap();
        let mut consumer = Segment::open(&name, producer.capacity()).unwrap();
        consumer.set_spin_policy(policy);
        let base = Instant::now();
        let reader = std::thread::spawn(move || {
            pin(ccpu);
            let mut ages = Vec::with_capacity(events);
            while ages.len() < events {
                if !consumer.wait(Some(Duration::from_secs(10))).unwrap() {
                    break;
                }
                consumer
                    .drain(usize::MAX, |r| {
                        if let Record::Event(b) = r {
                            ages.push(age(base, b));
                        }
                    })
                    .unwrap();
            }
            ages
        });
        produce((size, interval, events, pcpu, ccpu), base, |rec| {
            while producer.try_push(rec).is_err() {
                std::thread::yield_now();
            }
        });
        reader.join().unwrap()
    }

    fn socket_latency((size, interval, events, pcpu, ccpu): Run) -> Vec<u64> {
        let (mut tx, mut rx) = UnixStream::pair().unwrap();
        let base = Instant::now();
        let reader = std::thread::spawn(move || {
            pin(ccpu);
            let mut ages = Vec::with_capacity(events);
            let mut rec = vec![0u8; size];
            while ages.len() < events && rx.read_exact(&mut rec).is_ok() {
                ages.push(age(base, &rec));
            }
            ages
        });
        produce((size, interval, events, pcpu, ccpu), base, |rec| {
            tx.write_all(rec).unwrap()
        });
        reader.join().unwrap()
    }
}
