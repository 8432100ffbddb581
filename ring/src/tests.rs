//! In-process tests of the ring logic over [`LocalMemory`]: framing and wrap,
//! full and too-large, the overflow queue's exact lag accounting, hostile
//! headers and records, the wake-up handshake between two threads, and a
//! model-based property test of push/pop.

use crate::layout::{encode_record_header, KIND_EVENT};
use crate::sync::Ordering;
use crate::*;
use proptest::prelude::*;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn pop_all(c: &mut Consumer<Arc<LocalMemory>>) -> Vec<Result<Vec<u8>, u64>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(p) = c.try_pop(&mut buf).expect("ring valid") {
        out.push(match p {
            Popped::Event => Ok(buf.clone()),
            Popped::Lagged(n) => Err(n),
        });
    }
    out
}

#[test]
fn records_round_trip_across_the_wrap() {
    let (mut p, mut c) = local(64);
    let mut buf = Vec::new();
    // Sizes chosen so payloads start at every alignment and several split
    // across the end of the 64-byte area.
    for round in 0..50u8 {
        let len = (round as usize * 7) % 41;
        let rec: Vec<u8> = (0..len as u8).map(|b| b ^ round).collect();
        p.try_push(&rec).unwrap();
        assert_eq!(c.try_pop(&mut buf).unwrap(), Some(Popped::Event));
        assert_eq!(buf, rec, "round {round}");
        assert_eq!(c.try_pop(&mut buf).unwrap(), None);
    }
}

#[test]
fn a_record_of_the_whole_capacity_fits_an_empty_ring_and_larger_is_refused() {
    let (mut p, mut c) = local(64);
    assert_eq!(p.max_record(), 56);
    // Move the positions off zero so the big record splits.
    p.try_push(&[1; 20]).unwrap();
    let mut buf = Vec::new();
    c.try_pop(&mut buf).unwrap();
    let big: Vec<u8> = (0..56).collect();
    p.try_push(&big).unwrap();
    assert_eq!(p.try_push(&[]), Err(PushError::Full));
    assert_eq!(c.try_pop(&mut buf).unwrap(), Some(Popped::Event));
    assert_eq!(buf, big);
    assert_eq!(
        p.try_push(&[0; 57]),
        Err(PushError::TooLarge { len: 57, max: 56 })
    );
}

#[test]
fn full_ring_refuses_until_the_consumer_releases() {
    let (mut p, mut c) = local(64);
    let mut n = 0u8;
    while p.try_push(&[n; 8]).is_ok() {
        n += 1;
    }
    assert_eq!(n, 4, "four 16-byte records fill 64 bytes");
    assert_eq!(p.try_push(&[9; 8]), Err(PushError::Full));
    let mut seen = Vec::new();
    assert_eq!(
        c.drain(2, |r| {
            if let Record::Event(b) = r {
                seen.push(b[0])
            }
        })
        .unwrap(),
        2
    );
    assert_eq!(seen, [0, 1]);
    p.try_push(&[4; 8]).unwrap();
    p.try_push(&[5; 8]).unwrap();
    assert_eq!(p.try_push(&[6; 8]), Err(PushError::Full));
    let rest: Vec<u8> = pop_all(&mut c).into_iter().map(|r| r.unwrap()[0]).collect();
    assert_eq!(rest, [2, 3, 4, 5]);
}

#[test]
fn overflow_queue_drops_oldest_and_reports_exact_lag() {
    // 64 bytes hold four 16-byte records; the queue holds three more.
    let (p, mut c) = local(64);
    let bound = OverflowBound {
        max_records: 3,
        max_bytes: usize::MAX,
    };
    let mut publisher = Publisher::new(p, bound);
    let mut outcomes = Vec::new();
    for i in 0..20u64 {
        outcomes.push(publisher.publish(&i.to_le_bytes()).unwrap());
    }
    assert_eq!(outcomes[..4], [Published::Ring; 4]);
    assert_eq!(outcomes[4..7], [Published::Queued { dropped: 0 }; 3]);
    assert!(outcomes[7..]
        .iter()
        .all(|o| *o == Published::Queued { dropped: 1 }));
    // Events 4..=16 were dropped (13), 17..=19 are queued.
    assert_eq!(publisher.dropped(), 13);
    assert_eq!(publisher.queued(), 3);
    assert_eq!(c.producer_dropped(), 13);

    let mut got = pop_all(&mut c);
    assert_eq!(publisher.flush().unwrap(), 3);
    got.extend(pop_all(&mut c));
    let expected: Vec<Result<Vec<u8>, u64>> = (0..4u64)
        .map(|i| Ok(i.to_le_bytes().to_vec()))
        .chain([Err(13)])
        .chain((17..20u64).map(|i| Ok(i.to_le_bytes().to_vec())))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(publisher.pending_lag(), 0);

    // Once drained, publishing goes straight to the ring again.
    assert_eq!(publisher.publish(&[7]).unwrap(), Published::Ring);
}

#[test]
fn lag_record_is_written_even_with_a_zero_bound_and_before_the_next_event() {
    let (p, mut c) = local(32);
    let mut publisher = Publisher::new(
        p,
        OverflowBound {
            max_records: 0,
            max_bytes: 0,
        },
    );
    assert_eq!(publisher.publish(&[1; 8]).unwrap(), Published::Ring);
    assert_eq!(publisher.publish(&[2; 8]).unwrap(), Published::Ring);
    assert_eq!(
        publisher.publish(&[3; 8]).unwrap(),
        Published::Queued { dropped: 1 }
    );
    assert_eq!(
        publisher.publish(&[4; 8]).unwrap(),
        Published::Queued { dropped: 1 }
    );
    let mut buf = Vec::new();
    assert_eq!(c.try_pop(&mut buf).unwrap(), Some(Popped::Event));
    // One slot free: the lag record for 3 and 4 takes it at the next
    // publish, and 5 itself finds the ring full again and is dropped.
    assert_eq!(
        publisher.publish(&[5; 8]).unwrap(),
        Published::Queued { dropped: 1 }
    );
    assert_eq!(publisher.pending_lag(), 1);
    assert_eq!(c.try_pop(&mut buf).unwrap(), Some(Popped::Event));
    assert_eq!(buf, [2; 8]);
    assert_eq!(c.try_pop(&mut buf).unwrap(), Some(Popped::Lagged(2)));
    assert_eq!(c.try_pop(&mut buf).unwrap(), None);
    // Room again: the lag record for 5, then 6 itself.
    assert_eq!(publisher.publish(&[6; 8]).unwrap(), Published::Ring);
    assert_eq!(c.try_pop(&mut buf).unwrap(), Some(Popped::Lagged(1)));
    assert_eq!(c.try_pop(&mut buf).unwrap(), Some(Popped::Event));
    assert_eq!(buf, [6; 8]);
    assert_eq!(publisher.dropped(), 3);
}

#[test]
fn byte_bound_counts_payload_bytes() {
    let (p, _c) = local(32);
    let mut publisher = Publisher::new(
        p,
        OverflowBound {
            max_records: usize::MAX,
            max_bytes: 20,
        },
    );
    publisher.publish(&[0; 8]).unwrap();
    publisher.publish(&[0; 8]).unwrap();
    for _ in 0..2 {
        assert_eq!(
            publisher.publish(&[0; 10]).unwrap(),
            Published::Queued { dropped: 0 }
        );
    }
    // 30 bytes > 20: the oldest queued one goes.
    assert_eq!(
        publisher.publish(&[0; 10]).unwrap(),
        Published::Queued { dropped: 1 }
    );
    assert_eq!(publisher.queued(), 2);
    assert_eq!(
        publisher.publish(&[0; 25]),
        Err(PublishError::TooLarge { len: 25, max: 24 })
    );
}

fn corrupted(setup: impl FnOnce(&LocalMemory)) -> RingError {
    let (mut p, mut c) = local(64);
    p.try_push(&[7; 8]).unwrap();
    setup(c.memory());
    let mut buf = Vec::new();
    let err = c
        .try_pop(&mut buf)
        .expect_err("corruption must be detected");
    // Poisoned for good, on every entry point.
    assert_eq!(c.try_pop(&mut buf), Err(err.clone()));
    assert_eq!(c.wait(Some(Duration::ZERO)), Err(err.clone()));
    assert_eq!(c.drain(10, |_| {}), Err(err.clone()));
    err
}

#[test]
fn corrupt_indices_and_records_are_errors_not_panics() {
    let head =
        |v: u64| move |m: &LocalMemory| m.header_for_test().head.0.store(v, Ordering::SeqCst);
    assert_eq!(corrupted(head(1 << 40)), RingError::BadIndex);
    assert_eq!(corrupted(head(12)), RingError::BadIndex);
    assert_eq!(corrupted(head(u64::MAX - 7)), RingError::BadIndex);
    let record = |bytes: [u8; 8]| move |m: &LocalMemory| m.write(0, &bytes);
    assert_eq!(
        corrupted(record(encode_record_header(9, KIND_EVENT))),
        RingError::BadRecord,
        "length past the published bytes"
    );
    assert_eq!(
        corrupted(record(encode_record_header(u32::MAX, KIND_EVENT))),
        RingError::BadRecord
    );
    assert_eq!(
        corrupted(record(encode_record_header(8, 99))),
        RingError::BadRecord,
        "unknown kind"
    );
    assert_eq!(
        corrupted(record(encode_record_header(4, crate::layout::KIND_LAG))),
        RingError::BadRecord,
        "lag record of the wrong size"
    );
    assert_eq!(
        corrupted(record([8, 0, 0, 0, KIND_EVENT, 0, 1, 0])),
        RingError::BadRecord,
        "reserved bytes"
    );
}

#[test]
fn corrupt_tail_is_an_error_for_the_producer() {
    let (mut p, c) = local(64);
    for _ in 0..4 {
        p.try_push(&[0; 8]).unwrap();
    }
    c.memory()
        .header_for_test()
        .tail
        .0
        .store(1 << 50, Ordering::SeqCst);
    assert_eq!(p.try_push(&[0; 8]), Err(PushError::Corrupt));
}

#[test]
fn opening_checks_the_header() {
    let mem = LocalMemory::new(64);
    assert_eq!(mem.header().validate(64), Ok(()));
    assert_eq!(
        mem.header().validate(128),
        Err(HeaderError::CapacityMismatch {
            expected: 128,
            found: 64
        })
    );
    mem.header_for_test()
        .ident
        .0
        .version
        .store(1, Ordering::SeqCst);
    assert_eq!(mem.header().validate(64), Err(HeaderError::BadVersion(1)));
    mem.header_for_test()
        .ident
        .0
        .magic
        .store(0, Ordering::SeqCst);
    assert_eq!(mem.header().validate(64), Err(HeaderError::BadMagic));
}

proptest! {
    /// Whatever the other side writes into the header and the data area,
    /// the consumer answers with records or an error, never a panic or an
    /// out-of-bounds access, and never reads a record past `capacity`.
    #[test]
    fn arbitrary_shared_bytes_never_panic(
        head in any::<u64>(),
        tail in any::<u64>(),
        data in proptest::collection::vec(any::<u8>(), 64),
        small in any::<bool>(),
    ) {
        let mem = LocalMemory::new(64);
        mem.write(0, &data);
        let h = mem.header_for_test();
        let (head, tail) = if small { (head % 256, tail % 256) } else { (head, tail) };
        h.tail.0.store(tail, Ordering::SeqCst);
        h.head.0.store(head, Ordering::SeqCst);
        let mut c = Consumer::new(mem.clone());
        let mut buf = Vec::new();
        for _ in 0..16 {
            match c.try_pop(&mut buf) {
                Ok(Some(Popped::Event)) => prop_assert!(buf.len() <= 56),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let _ = c.wait(Some(Duration::ZERO));
        let _ = c.drain(16, |_| {});
        let mut p = Producer::new(mem);
        let _ = p.try_push(&data[..8]);
    }

    /// Any interleaving of pushes and pops behaves like a bounded FIFO of
    /// the same byte capacity.
    #[test]
    fn push_pop_matches_a_fifo_model(ops in proptest::collection::vec((any::<bool>(), 0usize..60), 1..200)) {
        let (mut p, mut c) = local(128);
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        let mut used = 0usize;
        let mut buf = Vec::new();
        for (i, (push, len)) in ops.into_iter().enumerate() {
            if push {
                let rec: Vec<u8> = (0..len).map(|b| (b + i) as u8).collect();
                let framed = 8 + len.div_ceil(8) * 8;
                match p.try_push(&rec) {
                    Ok(()) => { used += framed; model.push_back(rec); }
                    Err(PushError::Full) => prop_assert!(used + framed > 128),
                    Err(PushError::TooLarge { .. }) => prop_assert!(framed > 128),
                    Err(e) => prop_assert!(false, "{e}"),
                }
            } else {
                let got = c.try_pop(&mut buf).unwrap();
                match model.pop_front() {
                    Some(rec) => {
                        prop_assert_eq!(got, Some(Popped::Event));
                        prop_assert_eq!(&buf, &rec);
                        used -= 8 + rec.len().div_ceil(8) * 8;
                    }
                    None => prop_assert_eq!(got, None),
                }
            }
        }
    }
}

/// Waits (with a deadline) until the consumer has announced that it parks.
fn until_sleeping(p: &Producer<Arc<LocalMemory>>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !p.consumer_sleeping() {
        assert!(Instant::now() < deadline, "consumer never parked");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_parked_consumer_is_woken_once_per_park() {
    let (mut p, mut c) = local(4096);
    c.set_spin_policy(SpinPolicy::OFF);
    let rounds = 5u64;
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut got = Vec::new();
        for _ in 0..rounds {
            if !c.wait(Some(Duration::from_secs(20))).unwrap() {
                break;
            }
            // Read the round only once all of it is published, so that the
            // consumer parks exactly once per round.
            if done_rx.recv_timeout(Duration::from_secs(20)).is_err() {
                break;
            }
            while let Some(Popped::Event) = c.try_pop(&mut buf).unwrap() {
                got.push(buf[0]);
            }
        }
        got
    });
    for r in 0..rounds {
        until_sleeping(&p);
        // Three records per park: only the first one pays a wake-up.
        for k in 0..3 {
            p.try_push(&[(r * 3 + k) as u8]).unwrap();
        }
        done_tx.send(()).unwrap();
    }
    let got = reader.join().unwrap();
    assert_eq!(got, (0..15).collect::<Vec<u8>>());
    assert_eq!(p.wake_count(), rounds);
}

#[test]
fn a_busy_producer_without_a_parked_consumer_makes_no_wake_call() {
    let (mut p, mut c) = local(4096);
    let mut buf = Vec::new();
    for i in 0..10_000u32 {
        p.try_push(&i.to_le_bytes()).unwrap();
        assert_eq!(c.try_pop(&mut buf).unwrap(), Some(Popped::Event));
    }
    assert_eq!(p.wake_count(), 0);
}

#[test]
fn idle_wait_times_out_without_a_record() {
    let (_p, mut c) = local(4096);
    assert_eq!(c.wait(Some(Duration::from_millis(20))), Ok(false));
    assert_eq!(c.wait(Some(Duration::ZERO)), Ok(false));
}

#[test]
fn a_thread_stream_arrives_complete_and_in_order() {
    let (mut p, mut c) = local(1 << 14);
    let n: u64 = if cfg!(debug_assertions) {
        200_000
    } else {
        2_000_000
    };
    let reader = std::thread::spawn(move || {
        let mut next = 0u64;
        let mut bad = 0u64;
        while next < n {
            if !c.wait(Some(Duration::from_secs(20))).unwrap() {
                break;
            }
            c.drain(256, |r| match r {
                Record::Event(b) if b.len() == 16 && b[..8] == next.to_le_bytes() => next += 1,
                _ => bad += 1,
            })
            .unwrap();
        }
        (next, bad)
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut rec = [0u8; 16];
    for i in 0..n {
        rec[..8].copy_from_slice(&i.to_le_bytes());
        while let Err(e) = p.try_push(&rec) {
            assert_eq!(e, PushError::Full);
            assert!(Instant::now() < deadline, "consumer stalled at {i}");
            std::thread::yield_now();
        }
    }
    assert_eq!(reader.join().unwrap(), (n, 0));
}

#[test]
fn written_records_stay_invisible_until_published_and_full_publishes_them() {
    let (mut p, mut c) = local(64);
    let mut buf = Vec::new();
    p.try_write(&[1; 8]).unwrap();
    p.try_write(&[2; 8]).unwrap();
    assert!(p.has_unpublished());
    assert_eq!(c.try_pop(&mut buf).unwrap(), None);
    p.publish();
    assert!(!p.has_unpublished());
    assert_eq!(pop_all(&mut c), vec![Ok(vec![1; 8]), Ok(vec![2; 8])]);
    for i in 0..4u8 {
        p.try_write(&[i; 8]).unwrap();
    }
    // Full: what was written is published, so a retrying writer progresses.
    assert_eq!(p.try_write(&[9; 8]), Err(PushError::Full));
    assert!(!p.has_unpublished());
    assert_eq!(pop_all(&mut c).len(), 4);
}

#[test]
fn a_staged_batch_becomes_visible_at_commit_with_one_wake_up() {
    let (p, mut c) = local(4096);
    c.set_spin_policy(SpinPolicy::OFF);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        while got.len() < 10 {
            if !c.wait(Some(Duration::from_secs(20))).unwrap() {
                break;
            }
            c.drain(usize::MAX, |r| {
                if let Record::Event(b) = r {
                    got.push(b[0])
                }
            })
            .unwrap();
        }
        got
    });
    let mut publisher = Publisher::new(p, OverflowBound::default());
    until_sleeping(publisher.producer());
    for i in 0..10u8 {
        assert_eq!(publisher.stage(&[i]).unwrap(), Published::Ring);
    }
    assert_eq!(publisher.producer().wake_count(), 0);
    assert!(
        publisher.producer().consumer_sleeping(),
        "nothing visible yet"
    );
    publisher.commit();
    assert_eq!(reader.join().unwrap(), (0..10).collect::<Vec<u8>>());
    assert_eq!(publisher.producer().wake_count(), 1);
}

#[test]
fn the_spin_window_follows_the_gaps_between_records() {
    use crate::consumer::next_window;
    let p = SpinPolicy::default();
    let us = Duration::from_micros;
    // Active: a spin and park shorter than `active_gap` grow it, up to `max`.
    assert_eq!(next_window(&p, Duration::ZERO, us(30)), us(1));
    assert_eq!(next_window(&p, us(8), us(30)), us(16));
    assert_eq!(next_window(&p, us(32), us(30)), p.max);
    // Records further apart than the longest spin catches: a full window
    // that missed by more than a wake-up shrinks, instead of burning the
    // core for nothing at every record.
    assert_eq!(next_window(&p, p.max, us(50)), p.max / 2);
    // Sparse: longer parks halve it, down to off.
    assert_eq!(next_window(&p, us(20), us(300)), us(10));
    assert_eq!(next_window(&p, us(1), us(300)), Duration::ZERO);
    // Idle: off at once.
    assert_eq!(
        next_window(&p, us(20), Duration::from_millis(5)),
        Duration::ZERO
    );
    // A policy without spinning never spins.
    assert_eq!(
        next_window(&SpinPolicy::OFF, us(20), us(30)),
        Duration::ZERO
    );
}

/// The reverse eventcount between two threads: a producer facing a full
/// ring sleeps on the `space` word and the consumer's release wakes it;
/// the consumer signals once per wait, and never when no producer waits
/// (its fast path: a fence and a load, no system call).
#[test]
fn a_producer_waiting_for_room_sleeps_until_the_consumer_frees_it() {
    let (mut p, mut c) = local(64);
    // Without a waiting producer, releases signal nothing.
    p.try_push(&[1; 8]).unwrap();
    assert_eq!(pop_all(&mut c).len(), 1);
    assert_eq!(c.space_wake_count(), 0);
    while p.try_push(&[2; 8]).is_ok() {}
    let producer = std::thread::spawn(move || {
        let start = Instant::now();
        p.wait_for_space(Some(Duration::from_secs(10)));
        let waited = start.elapsed();
        p.try_push(&[3; 8]).expect("room after the signal");
        waited
    });
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(c.space_wake_count(), 0, "the consumer has not read yet");
    let mut buf = Vec::new();
    c.try_pop(&mut buf).unwrap();
    let waited = producer.join().unwrap();
    assert!(
        waited >= Duration::from_millis(150) && waited < Duration::from_secs(5),
        "the producer slept {waited:?}: it must sleep until the release, and wake on it"
    );
    assert_eq!(c.space_wake_count(), 1);
    // Further releases signal nothing: that wait was signalled once.
    pop_all(&mut c);
    assert_eq!(c.space_wake_count(), 1);
}

/// Arming finds room freed since the producer last looked and does not
/// wait for it.
#[test]
fn arming_after_the_consumer_already_freed_room_does_not_wait() {
    let (mut p, mut c) = local(64);
    while p.try_push(&[2; 8]).is_ok() {}
    let mut buf = Vec::new();
    c.try_pop(&mut buf).unwrap();
    assert_eq!(p.arm_space_signal(), None);
    p.try_push(&[3; 8]).unwrap();
    assert_eq!(p.try_push(&[4; 8]), Err(PushError::Full));
    assert!(
        p.arm_space_signal().is_some(),
        "no room freed since the last look"
    );
}

/// Shared-memory segments are backed at creation: the whole file is
/// allocated (its blocks cover its size), not sparse.
#[test]
fn a_new_segment_is_backed_not_sparse() {
    use std::os::unix::fs::MetadataExt;
    let (producer, name) = Segment::create_with_prefix("a2a-ring-test-backed-", 1 << 20).unwrap();
    let meta = std::fs::metadata(format!("/dev/shm{name}")).unwrap();
    assert_eq!(meta.len(), (HEADER_BYTES + (1 << 20)) as u64);
    assert!(
        meta.blocks() * 512 >= meta.len(),
        "{} of {} bytes allocated",
        meta.blocks() * 512,
        meta.len()
    );
    assert_eq!(footprint(1 << 20), (1 << 20) + 4096);
    drop(producer);
}

/// The broker's way of waiting: a [`SpaceWatcher`] thread sleeps on the
/// ring's `space` word; nothing happens while the consumer does not read,
/// and the consumer's first release runs `ready`. A cancelled watch never
/// runs it.
#[test]
fn a_space_watcher_runs_ready_when_the_consumer_frees_room_and_not_before() {
    use std::sync::atomic::AtomicUsize;
    let watcher = SpaceWatcher::new();
    let (producer, name) = Segment::create_with_prefix("a2a-ring-test-watch-", 4096).unwrap();
    let mut consumer = Segment::open(&name, 4096).unwrap();
    let mut publisher = Publisher::new(producer, OverflowBound::default());
    for _ in 0..100 {
        publisher.publish(&[7; 100]).unwrap();
    }
    assert!(publisher.has_backlog());
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let watch = publisher
        .watch_space(&watcher, move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })
        .expect("the consumer has read nothing yet");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!watch.fired());
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    consumer.drain(1, |_| {}).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !watch.fired() {
        assert!(Instant::now() < deadline, "the watch never fired");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(publisher.flush().unwrap() > 0);
    // A watch dropped before the consumer reads never fires.
    let cancelled = Arc::new(AtomicUsize::new(0));
    let counter = cancelled.clone();
    let watch = publisher
        .watch_space(&watcher, move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })
        .expect("full again");
    drop(watch);
    consumer.drain(usize::MAX, |_| {}).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(cancelled.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(watcher.threads(), 1);
}

/// The broker's backlog loop under a stream: a producer thread that
/// stages into a small ring, and whenever a backlog remains, flushes and
/// sleeps until a [`SpaceWatcher`] says the consumer freed room (never a
/// timer), against a consumer thread that drains as it is woken. At most
/// `DEPTH` events are unreceived (as in the `ring_events` bench, more than
/// the ring holds). Every event arrives: no lost signal in either
/// direction.
#[test]
fn a_backlog_served_only_by_the_watcher_never_stalls() {
    use std::sync::atomic::{AtomicU64, AtomicUsize};
    use std::sync::{Condvar, Mutex};
    const EVENTS: u64 = 20_000;
    const DEPTH: u64 = 64;
    let watcher = Arc::new(SpaceWatcher::new());
    let (producer, name) = Segment::create_with_prefix("a2a-ring-test-stream-", 4096).unwrap();
    let mut consumer = Segment::open(&name, 4096).unwrap();
    let seen = Arc::new(AtomicU64::new(0));
    let seen_c = seen.clone();
    let reader = std::thread::spawn(move || {
        let mut next = 0u64;
        while next < EVENTS {
            assert!(
                consumer.wait(Some(Duration::from_secs(10))).unwrap(),
                "reader starved at {next}"
            );
            consumer
                .drain(usize::MAX, |r| match r {
                    Record::Event(p) => {
                        assert_eq!(u64::from_le_bytes(p[..8].try_into().unwrap()), next);
                        next += 1;
                    }
                    Record::Lagged(n) => panic!("lagged {n}"),
                })
                .unwrap();
            seen_c.store(next, std::sync::atomic::Ordering::Release);
        }
    });
    let mut publisher = Publisher::new(producer, OverflowBound::default());
    let signal = Arc::new((Mutex::new(0usize), Condvar::new()));
    let fires = Arc::new(AtomicUsize::new(0));
    let mut payload = vec![0u8; 700];
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..EVENTS {
        while i - seen.load(std::sync::atomic::Ordering::Acquire) >= DEPTH {
            std::thread::yield_now();
            assert!(Instant::now() < deadline, "stalled at {i}");
        }
        payload[..8].copy_from_slice(&i.to_le_bytes());
        publisher.stage(&payload).unwrap();
        publisher.commit();
        // The writer task's service loop, with a condvar for its Notify.
        while publisher.has_backlog() {
            publisher.flush().unwrap();
            if !publisher.has_backlog() {
                break;
            }
            let before = *signal.0.lock().unwrap();
            let (s, f) = (signal.clone(), fires.clone());
            let Some(watch) = publisher.watch_space(&watcher, move || {
                f.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                *s.0.lock().unwrap() += 1;
                s.1.notify_all();
            }) else {
                continue;
            };
            let mut n = signal.0.lock().unwrap();
            while *n == before {
                let (g, t) = signal.1.wait_timeout(n, Duration::from_secs(10)).unwrap();
                assert!(!t.timed_out(), "no signal for a waiting backlog at {i}");
                n = g;
            }
            drop(n);
            drop(watch);
        }
    }
    reader.join().unwrap();
    assert!(
        fires.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the backlog never waited"
    );
}

/// The `ring_events` bench's cross-core 4 KiB row, scripted in one thread
/// so that it runs the same way every time: the client's handler counts
/// each event as the drain hands it over (before the drain returns), and
/// the broker keeps pace with that count, never more than `DEPTH` events
/// ahead of it, where `DEPTH` events take a little more than the ring and
/// much less than the ring plus the overflow queue's byte bound (the
/// bench: 1,024 events of ~4.2 KB, a 4 MiB ring, a 4 MiB bound). A
/// consumer that handed room back only once it had read all it saw in the
/// ring let the broker's events pile up in the queue meanwhile (a whole
/// ring's worth: past the bound, so events were dropped); one that hands
/// it back as it goes keeps the queue short. No event is dropped, and all
/// arrive in order.
#[test]
fn a_consumer_that_reads_a_full_ring_hands_room_back_as_it_goes() {
    const RING: usize = 64 * 1024;
    // 1,024 bytes framed: 64 records fill the ring.
    const RECORD: usize = 1016;
    const DEPTH: u64 = 66;
    const EVENTS: u64 = 5_000;
    let (producer, mut consumer) = local(RING);
    let mut publisher = Publisher::new(
        producer,
        OverflowBound {
            max_records: 4096,
            max_bytes: RING,
        },
    );
    let mut payload = vec![0u8; RECORD];
    let (mut injected, mut seen) = (0u64, 0u64);
    // The broker: routing stages and publishes each event as it comes.
    let mut keep_pace =
        |publisher: &mut Publisher<Arc<LocalMemory>>, injected: &mut u64, seen: u64| {
            while *injected < EVENTS && *injected - seen < DEPTH {
                payload[..8].copy_from_slice(&injected.to_le_bytes());
                publisher.stage(&payload).unwrap();
                publisher.commit();
                *injected += 1;
            }
        };
    keep_pace(&mut publisher, &mut injected, seen);
    assert!(
        publisher.has_backlog(),
        "the depth is more than the ring holds"
    );
    while seen < EVENTS {
        let drained = consumer
            .drain(usize::MAX, |r| match r {
                Record::Event(p) => {
                    assert_eq!(u64::from_le_bytes(p[..8].try_into().unwrap()), seen);
                    seen += 1;
                    keep_pace(&mut publisher, &mut injected, seen);
                }
                Record::Lagged(n) => panic!("{n} events dropped after {seen}"),
            })
            .unwrap();
        assert!(drained > 0 || publisher.has_backlog(), "stalled at {seen}");
        // The writer task's turn once the consumer signals.
        publisher.flush().unwrap();
    }
    assert_eq!(publisher.dropped(), 0);
}
