//! The event ring against a raw shared-memory SPSC ring, same record sizes,
//! same run, threads pinned.
//!
//! - **raw**: fixed-size slots in a `memfd` mapping, head and tail on their
//!   own cache lines, both indices cached on the other side, no length
//!   prefix, no validation, no eventcount: the producer busy-polls while
//!   full, the consumer while empty, each yielding the core after 60 µs of
//!   polling (the ring consumer's spin window; without it the same-core
//!   pair would only progress at timeslice ends). The consumer
//!   copies each record out, as the ring's consumer does.
//! - **ring**: this crate over a [`Segment`]: `Producer::try_write` +
//!   `Producer::publish` after every record (as `try_push`), and, in the
//!   `batch32` variant, after every 32 records (as `Publisher::stage` +
//!   `commit` for a commit batch of events), retrying with the same
//!   poll-then-yield while full; `Consumer::wait` + `Consumer::drain` (spin
//!   window, then park on the futex).
//!
//! For 64 B, 512 B and 4 KiB records, with producer and consumer pinned to
//! the same core and to different cores (`sched_setaffinity`): records/s
//! (median of the rounds), the median of the per-round ring/raw ratios, and
//! FUTEX_WAKE calls per record issued by the ring's producer. Raw and ring
//! alternate round by round, so both see the same machine load.
//!
//! Run: `cargo bench -p a2a-ring` (about 30 s). Under `cargo test
//! --benches` it prints `skipped` and exits.

#![allow(unsafe_code)] // the raw baseline's mapping

mod common;

/// Loom builds have no shared memory; the bench is then an empty program.
fn main() {
    #[cfg(not(loom))]
    bench::main();
}

#[cfg(not(loom))]
mod bench {
    use crate::common::{bench_mode, load_average, pin, placements};
    use a2a_ring::{Record, Segment};
    use memmap2::{MmapOptions, MmapRaw};
    use std::hint::black_box;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    /// Data bytes of both rings.
    const RING_BYTES: usize = 1 << 20;
    /// Rounds per configuration (raw and ring alternate).
    const ROUNDS: usize = 7;
    /// Records per publish in the batched variant (the broker publishes the
    /// events of one commit batch together).
    const BATCH: u64 = 32;

    pub fn main() {
        if !bench_mode() {
            eprintln!("ring: skipped (runs under `cargo bench` only)");
            return;
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        println!(
            "ring bench: {} rounds per configuration, ring {} KiB, {} CPUs, load average {}",
            ROUNDS,
            RING_BYTES >> 10,
            cpus,
            load_average()
        );
        println!(
            "{:<11} {:>6} {:>11} | {:>11} {:>8} {:>9} | {:>11} {:>8} {:>9}",
            "placement",
            "record",
            "raw rec/s",
            "ring rec/s",
            "ring/raw",
            "wakes/rec",
            format!("batch{BATCH}"),
            "ring/raw",
            "wakes/rec"
        );
        let placements = placements();
        // `A2A_RING_BENCH=cross-core:512` (placement and/or size) runs a subset.
        let only = std::env::var("A2A_RING_BENCH").unwrap_or_default();
        let wanted = |placement: &str, size: usize| {
            only.split(',').any(|w| {
                w.is_empty()
                    || w == placement
                    || w == size.to_string()
                    || w == format!("{placement}:{size}")
            })
        };
        // `A2A_RING_BENCH_SIZES=56,64` replaces the record sizes (diagnostics).
        let sizes: Vec<(usize, u64)> = match std::env::var("A2A_RING_BENCH_SIZES") {
            Ok(list) => list
                .split(',')
                .filter_map(|s| s.parse::<usize>().ok())
                .map(|s| (s, (128_000_000 / s.max(64)) as u64))
                .collect(),
            Err(_) => vec![(64, 8_000_000), (512, 2_000_000), (4096, 400_000)],
        };
        for &(placement, pcpu, ccpu) in placements {
            for &(size, records) in &sizes {
                if !wanted(placement, size) {
                    continue;
                }
                let mut raw_rates = Vec::new();
                let mut ring_rates = [Vec::new(), Vec::new()];
                let mut ratios = [Vec::new(), Vec::new()];
                let mut wakes = [0u64; 2];
                for _ in 0..ROUNDS {
                    let raw = records as f64 / raw_round(size, records, pcpu, ccpu).as_secs_f64();
                    raw_rates.push(raw);
                    for (k, batch) in [1, BATCH].into_iter().enumerate() {
                        let (t, w) = ring_round(size, records, batch, pcpu, ccpu);
                        let ring = records as f64 / t.as_secs_f64();
                        wakes[k] += w;
                        ring_rates[k].push(ring);
                        ratios[k].push(ring / raw);
                    }
                }
                let raw = median(raw_rates);
                let [r1, rb] = ring_rates.map(median);
                let [x1, xb] = ratios.map(median);
                let [w1, wb] = wakes.map(|w| w as f64 / (records * ROUNDS as u64) as f64);
                println!(
                    "{placement:<11} {size:>6} {:>11} | {:>11} {x1:>7.2}x {w1:>9.5} | {:>11} {xb:>7.2}x {wb:>9.5}",
                    fmt_rate(raw),
                    fmt_rate(r1),
                    fmt_rate(rb),
                );
                for (label, rate, ratio, per) in [("1", r1, x1, w1), ("batch", rb, xb, wb)] {
                    println!(
                        "SUMMARY ring placement={placement} record={size} publish={label} raw_per_s={raw:.0} ring_per_s={rate:.0} ratio={ratio:.3} wakes_per_record={per:.6}"
                    );
                }
            }
        }
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    }

    fn fmt_rate(r: f64) -> String {
        if r >= 1e6 {
            format!("{:.2} M", r / 1e6)
        } else {
            format!("{:.0} k", r / 1e3)
        }
    }

    /// Busy-polls for up to [`SPIN`] (the ring consumer's default spin window),
    /// then yields the core on each further call (the other side may share it).
    struct Backoff {
        spins: u32,
        since: Option<Instant>,
    }

    /// How long a waiting side busy-polls before yielding.
    const SPIN: Duration = Duration::from_micros(60);

    impl Backoff {
        fn new() -> Backoff {
            Backoff {
                spins: 0,
                since: None,
            }
        }
        fn snooze(&mut self) {
            self.spins += 1;
            if self.spins % 64 != 0 {
                std::hint::spin_loop();
                return;
            }
            let since = *self.since.get_or_insert_with(Instant::now);
            if since.elapsed() >= SPIN {
                std::thread::yield_now();
            }
        }
    }

    /// The raw baseline's mapping: two index lines and the slots.
    struct Raw {
        map: MmapRaw,
        slots: usize,
        size: usize,
    }

    // SAFETY: plain shared memory, accessed by one producer and one consumer
    // under the head/tail protocol below.
    unsafe impl Sync for Raw {}
    unsafe impl Send for Raw {}

    impl Raw {
        fn new(size: usize) -> Raw {
            // SAFETY: memfd_create with a static name; the fd is owned by `file`.
            let file = unsafe {
                let fd = libc::memfd_create(c"a2a-raw-ring".as_ptr(), libc::MFD_CLOEXEC);
                assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
                <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd)
            };
            file.set_len((128 + RING_BYTES) as u64).unwrap();
            let map = MmapOptions::new()
                .len(128 + RING_BYTES)
                .map_raw(&file)
                .unwrap();
            Raw {
                map,
                slots: RING_BYTES / size,
                size,
            }
        }
        fn index(&self, line: usize) -> &AtomicU64 {
            // SAFETY: page-aligned mapping; lines 0 and 1 hold one u64 each.
            unsafe { &*(self.map.as_ptr().add(line * 64) as *const AtomicU64) }
        }
        fn slot(&self, i: u64) -> *mut u8 {
            // SAFETY: slot index reduced modulo the slot count.
            unsafe {
                self.map
                    .as_mut_ptr()
                    .add(128 + (i as usize % self.slots) * self.size)
            }
        }
    }

    fn raw_round(size: usize, records: u64, pcpu: usize, ccpu: usize) -> Duration {
        let raw = std::sync::Arc::new(Raw::new(size));
        let reader = raw.clone();
        let start = Instant::now();
        let consumer = std::thread::spawn(move || {
            pin(ccpu);
            let r = &*reader;
            let mut buf = vec![0u8; r.size];
            let (mut tail, mut head) = (0u64, 0u64);
            while tail < records {
                let mut backoff = Backoff::new();
                while tail == head {
                    head = r.index(0).load(Ordering::Acquire);
                    if tail == head {
                        backoff.snooze();
                    }
                }
                while tail < head {
                    // SAFETY: slot `tail` is published (tail < head) and not
                    // reused before we release it.
                    unsafe {
                        std::ptr::copy_nonoverlapping(r.slot(tail), buf.as_mut_ptr(), r.size)
                    };
                    black_box(&buf);
                    tail += 1;
                }
                r.index(1).store(tail, Ordering::Release);
            }
        });
        pin(pcpu);
        let rec = vec![0xA5u8; size];
        let (mut head, mut tail) = (0u64, 0u64);
        for _ in 0..records {
            let mut backoff = Backoff::new();
            while head - tail == raw.slots as u64 {
                tail = raw.index(1).load(Ordering::Acquire);
                if head - tail == raw.slots as u64 {
                    backoff.snooze();
                }
            }
            // SAFETY: slot `head` is free (head - tail < slots).
            unsafe { std::ptr::copy_nonoverlapping(rec.as_ptr(), raw.slot(head), size) };
            head += 1;
            raw.index(0).store(head, Ordering::Release);
        }
        consumer.join().unwrap();
        start.elapsed()
    }

    fn ring_round(
        size: usize,
        records: u64,
        batch: u64,
        pcpu: usize,
        ccpu: usize,
    ) -> (Duration, u64) {
        let (mut producer, name) =
            Segment::create_with_prefix("a2a-ring-bench-", RING_BYTES).unwrap();
        let mut consumer = Segment::open(&name, producer.capacity()).unwrap();
        let start = Instant::now();
        let reader = std::thread::spawn(move || {
            pin(ccpu);
            let mut seen = 0u64;
            while seen < records {
                if !consumer.wait(Some(Duration::from_secs(10))).unwrap() {
                    panic!("ring bench: no record for 10 s at {seen}");
                }
                consumer
                    .drain(usize::MAX, |r| {
                        if let Record::Event(b) = r {
                            black_box(b);
                            seen += 1;
                        }
                    })
                    .unwrap();
            }
        });
        pin(pcpu);
        let rec = vec![0xA5u8; size];
        for i in 0..records {
            let mut backoff = Backoff::new();
            // `try_write` publishes by itself when it finds the ring full.
            while producer.try_write(&rec).is_err() {
                backoff.snooze();
            }
            if (i + 1) % batch == 0 {
                producer.publish();
            }
        }
        producer.publish();
        reader.join().unwrap();
        (start.elapsed(), producer.wake_count())
    }
}
