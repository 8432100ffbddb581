//! The shared-memory event ring (PROTOCOL.md §1.3), producer side: a local
//! socket connection that asks for one in its handshake gets a segment
//! (owner-only, named in the handshake result), and from then on its
//! connection writer puts the connection's notifications there instead of
//! on the socket; requests and responses stay on the socket.
//!
//! The ring never blocks the broker: a full ring queues events in the
//! connection's publisher up to a bound, past which the oldest are dropped,
//! counted, and reported to the client by a lag record before the next
//! event (`a2a_ring::Publisher`). An event larger than the ring goes over
//! the socket instead. The writer publishes once per drained batch (one
//! memory fence and at most one wake-up per batch, not per event).
//!
//! Segments go with their connection (dropping the publisher removes the
//! name), with the broker ([`remove_live`] at exit), and after a crash at
//! the next start ([`cleanup_stale`]).

use a2a_proto::limits::MAX_EVENT_RING_BYTES;
use a2a_proto::params::EventRingInfo;
use a2a_ring::{OverflowBound, Publisher, Segment};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

/// Names of the segments this process has created and not yet removed.
static LIVE: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Events staged into rings, the futex wake-ups the producers issued for
/// them, and the publishes, over all connections so far (for the
/// benchmarks: wake-up system calls per event, events per publish).
static STAGED: AtomicU64 = AtomicU64::new(0);
static WAKES: AtomicU64 = AtomicU64::new(0);
static PUBLISHES: AtomicU64 = AtomicU64::new(0);

/// `(events staged, wake-ups, publishes)` over all rings so far.
pub(crate) fn wake_stats() -> (u64, u64, u64) {
    (
        STAGED.load(Ordering::Relaxed),
        WAKES.load(Ordering::Relaxed),
        PUBLISHES.load(Ordering::Relaxed),
    )
}

/// One connection's ring: empty until its handshake asks for one.
#[derive(Default)]
pub struct RingSlot {
    ring: Mutex<Option<EventRing>>,
}

/// A granted ring and its publisher.
pub struct EventRing {
    pub publisher: Publisher<Segment>,
    info: EventRingInfo,
    /// Events staged since the last [`EventRing::commit`].
    staged: u64,
}

impl EventRing {
    /// Stages one event's record (see `Publisher::stage`); `false` when
    /// it must go over the socket instead (larger than the ring).
    pub fn stage(&mut self, record: &[u8]) -> bool {
        let ok = self.publisher.stage(record).is_ok();
        self.staged += u64::from(ok);
        ok
    }

    /// Publishes what was staged: one fence, at most one wake-up.
    pub fn commit(&mut self) {
        self.counted(|p| p.commit());
    }

    /// Moves events queued behind a full ring in, as room allows.
    pub fn flush(&mut self) {
        self.counted(|p| {
            let _ = p.flush();
        });
    }

    fn counted(&mut self, f: impl FnOnce(&mut Publisher<Segment>)) {
        let before = self.publisher.producer().wake_count();
        f(&mut self.publisher);
        let wakes = self.publisher.producer().wake_count() - before;
        // Relaxed adds once per batch: counters only, nothing synchronises
        // through them.
        STAGED.fetch_add(std::mem::take(&mut self.staged), Ordering::Relaxed);
        WAKES.fetch_add(wakes, Ordering::Relaxed);
        PUBLISHES.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for EventRing {
    fn drop(&mut self) {
        if let Some(live) = LIVE.lock().as_mut() {
            live.remove(&self.info.name);
        }
    }
}

impl RingSlot {
    /// Grants a ring of about `bytes` (clamped to the ring's limits and
    /// `MAX_EVENT_RING_BYTES`), or the one already granted (a repeated
    /// handshake changes nothing). `None` when shared memory is not
    /// available: the connection then gets its events on the socket.
    pub fn grant(&self, bytes: u64) -> Option<EventRingInfo> {
        let mut slot = self.ring.lock();
        if let Some(r) = slot.as_ref() {
            return Some(r.info.clone());
        }
        let bytes = (bytes as usize).min(MAX_EVENT_RING_BYTES);
        let (producer, name) = Segment::create(bytes).ok()?;
        let info = EventRingInfo {
            name: name.clone(),
            bytes: producer.capacity() as u64,
        };
        LIVE.lock().get_or_insert_with(HashSet::new).insert(name);
        *slot = Some(EventRing {
            publisher: Publisher::new(producer, OverflowBound::default()),
            info,
            staged: 0,
        });
        Some(slot.as_ref().expect("just set").info.clone())
    }

    /// Runs `f` on the ring, if one was granted.
    pub fn with<R>(&self, f: impl FnOnce(&mut EventRing) -> R) -> Option<R> {
        self.ring.lock().as_mut().map(f)
    }

    /// The slot itself, for a writer that publishes a whole batch under
    /// one lock.
    pub fn lock(&self) -> parking_lot::MutexGuard<'_, Option<EventRing>> {
        self.ring.lock()
    }
}

/// Removes every segment this process still holds (at exit: connection
/// tasks may outlive the runtime's shutdown, their segments must not).
pub fn remove_live() {
    if let Some(live) = LIVE.lock().take() {
        for name in live {
            a2a_ring::remove(&name);
        }
    }
}

/// Removes the segments left by a crashed broker (their creator's pid is
/// gone); at start-up.
pub fn cleanup_stale() {
    let _ = a2a_ring::cleanup_stale(a2a_ring::NAME_PREFIX);
}
