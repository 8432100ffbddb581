//! The producer/consumer protocol under the loom model checker: every
//! interleaving (up to a preemption bound) of a producer pushing records into
//! a tiny ring and a consumer that parks on the eventcount when it finds the
//! ring empty. Loom fails the test on a lost wake-up (every thread blocked),
//! on a torn record (the data words are loom cells, so an unordered access to
//! the same word is reported as a race), and on any assertion below.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p a2a-ring --release --test loom`
//! (a plain `cargo test` compiles this file to nothing).

#![cfg(loom)]

use a2a_ring::{local, OverflowBound, Popped, Published, Publisher, PushError};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// Three 8-byte records through a 32-byte ring (two fit): the producer meets
/// a full ring and the positions wrap; the consumer parks between records.
#[test]
fn every_record_arrives_in_order_and_no_wake_up_is_lost() {
    model(|| {
        let (mut p, mut c) = local(32);
        let producer = thread::spawn(move || {
            for i in 0..3u8 {
                loop {
                    match p.try_push(&[i; 8]) {
                        Ok(()) => break,
                        Err(PushError::Full) => thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        });
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while got.len() < 3 {
            // An untimed wait: a lost wake-up blocks every thread, which
            // loom reports as a deadlock.
            assert_eq!(c.wait(None), Ok(true));
            while let Some(popped) = c.try_pop(&mut buf).unwrap() {
                assert_eq!(popped, Popped::Event);
                assert_eq!(buf, [got.len() as u8; 8]);
                got.push(buf[0]);
            }
        }
        producer.join().unwrap();
    });
}

/// The reverse eventcount: a producer that finds the ring full sleeps
/// until the consumer frees room (an untimed futex wait on the `space`
/// word) instead of retrying on a timer, and the consumer's release
/// signals it. Three 8-byte records through a 16-byte ring (one fits), so
/// each side sleeps in turn: a lost signal leaves the producer asleep while
/// the consumer waits for the next record, and every thread blocked is a
/// deadlock loom reports.
#[test]
fn a_producer_waiting_for_room_is_always_woken() {
    model(|| {
        let (mut p, mut c) = local(16);
        let producer = thread::spawn(move || {
            for i in 0..3u8 {
                loop {
                    match p.try_push(&[i; 8]) {
                        Ok(()) => break,
                        Err(PushError::Full) => p.wait_for_space(None),
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        });
        let mut buf = Vec::new();
        let mut got = 0u8;
        while got < 3 {
            assert_eq!(c.wait(None), Ok(true));
            while let Some(popped) = c.try_pop(&mut buf).unwrap() {
                assert_eq!(popped, Popped::Event);
                assert_eq!(buf, [got; 8]);
                got += 1;
            }
        }
        producer.join().unwrap();
    });
}

/// A payload split across the end of the data area (12 bytes starting 8
/// bytes before the end of a 32-byte ring) is read back whole.
#[test]
fn a_split_record_is_never_torn() {
    model(|| {
        let (mut p, mut c) = local(32);
        let producer = thread::spawn(move || {
            p.try_push(&[1; 8]).unwrap();
            let split: Vec<u8> = (0..12).collect();
            loop {
                match p.try_push(&split) {
                    Ok(()) => break,
                    Err(PushError::Full) => thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            }
        });
        let mut buf = Vec::new();
        let mut n = 0;
        while n < 2 {
            assert_eq!(c.wait(None), Ok(true));
            while let Some(popped) = c.try_pop(&mut buf).unwrap() {
                assert_eq!(popped, Popped::Event);
                if n == 0 {
                    assert_eq!(buf, [1; 8]);
                } else {
                    assert_eq!(buf, (0..12).collect::<Vec<u8>>());
                }
                n += 1;
            }
        }
        producer.join().unwrap();
    });
}

/// The overflow path: with one slot and no queue, what the consumer reads
/// is events in order plus lag records that account exactly for every
/// missing one, whatever the interleaving.
#[test]
fn lag_records_account_for_every_dropped_event() {
    model(|| {
        let (p, mut c) = local(16);
        let bound = OverflowBound {
            max_records: 0,
            max_bytes: 0,
        };
        let done = Arc::new(AtomicBool::new(false));
        let producer_done = done.clone();
        let producer = thread::spawn(move || {
            let mut publisher = Publisher::new(p, bound);
            let mut dropped = 0;
            for i in 0..3u8 {
                if let Published::Queued { dropped: d } = publisher.publish(&[i]).unwrap() {
                    dropped += d;
                }
            }
            // Write the last lag record once the consumer makes room.
            while publisher.pending_lag() > 0 {
                publisher.flush().unwrap();
                thread::yield_now();
            }
            producer_done.store(true, Ordering::Release);
            dropped
        });
        let mut buf = Vec::new();
        let mut log = Vec::new();
        loop {
            let finished = done.load(Ordering::Acquire);
            while let Some(popped) = c.try_pop(&mut buf).unwrap() {
                log.push(match popped {
                    Popped::Event => Ok(u64::from(buf[0])),
                    Popped::Lagged(n) => Err(n),
                });
            }
            if finished {
                break;
            }
            thread::yield_now();
        }
        let dropped = producer.join().unwrap();
        let (mut next, mut skipped, mut lagged) = (0u64, 0u64, 0u64);
        for entry in log {
            match entry {
                Err(n) => {
                    skipped += n;
                    lagged += n;
                }
                Ok(i) => {
                    assert_eq!(i, next + skipped, "a gap no lag record covers");
                    next = i + 1;
                    skipped = 0;
                }
            }
        }
        assert_eq!(next + skipped, 3, "events seen + dropped = published");
        assert_eq!(lagged, dropped);
    });
}
