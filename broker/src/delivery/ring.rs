//! The shared-memory event ring (docs/protocol.md §1 Framing), producer
//! side: a local socket connection that asks for one in its handshake gets
//! a segment (owner-only, named in the handshake result), and from then on
//! the notifications of its push agents go there instead of on the socket;
//! requests and responses stay on the socket.
//!
//! A ring is granted only when the broker can back it (docs/protocol.md §1
//! Framing, the event ring): every page of the segment is allocated at
//! creation (`posix_fallocate`: a full `/dev/shm` then refuses the ring
//! instead of killing the broker with SIGBUS on a later write), and all
//! rings together stay within
//! [`RingBudget`]. A declined ring leaves `eventRing` out of the handshake
//! result and the connection's events go over the socket.
//!
//! Routing stages events into the ring itself, on the writer thread right
//! after the commit, and publishes each ring once per commit group (one
//! memory fence and at most one futex wake-up per group, not per event):
//! no hand-off to the connection's writer task, whose wake-up alone costs
//! 25 to 40 µs across cores. The encoding (the binary codec's frame
//! payload: the ring has its own length prefix) therefore runs on the
//! writer thread, for ring connections only.
//!
//! The ring never blocks the broker: a full ring queues events in the
//! connection's publisher up to a bound (`EVENT_RING_OVERFLOW_EVENTS`
//! events, `EVENT_RING_OVERFLOW_BYTES` bytes), past which the oldest are dropped,
//! counted, and reported to the client by a lag record before the next
//! event (`a2a_ring::Publisher`). The connection's writer task moves that
//! backlog in as the client frees room ([`RingSlot::service`]), woken by
//! the client itself: the ring's reverse eventcount, watched for every
//! ring by a few `a2a_ring::SpaceWatcher` threads. A client that never
//! reads therefore costs nothing while it does not read (no timer, no
//! retry). An event larger than the ring goes over the socket instead.
//!
//! Segments go with their connection ([`RingSlot::close`]; dropping the
//! publisher removes the name), with the broker ([`remove_live`] at exit), and after a crash at
//! the next start ([`cleanup_stale`]).

use a2a_proto::binary::{encode_frame, index};
use a2a_proto::limits::{
    EVENT_RING_OVERFLOW_BYTES, EVENT_RING_OVERFLOW_EVENTS, MAX_EVENT_RINGS_TOTAL_BYTES,
    MAX_EVENT_RING_BYTES,
};
use a2a_proto::params::EventRingInfo;
use a2a_proto::types::Notification;
use a2a_ring::{
    OverflowBound, PublishError, Published, Publisher, Segment, SegmentError, SpaceWatch,
    SpaceWatcher,
};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

/// Waits for the consumers of every backlogged ring of this process.
static WATCHER: LazyLock<SpaceWatcher> = LazyLock::new(SpaceWatcher::new);

/// Names of the segments this process has created and not yet removed.
static LIVE: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Events staged into rings, the futex wake-ups the producers issued for
/// them, and the publishes (for the benchmarks: wake-up system calls per
/// event, events per publish). A value the rings' owner hands each slot
/// (the socket server: its connections' rings), so that two servers in
/// one process count apart.
#[derive(Debug, Default)]
pub struct RingStats {
    staged: AtomicU64,
    wakes: AtomicU64,
    publishes: AtomicU64,
}

impl RingStats {
    /// `(events staged, wake-ups, publishes)` so far.
    pub fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.staged.load(Ordering::Relaxed),
            self.wakes.load(Ordering::Relaxed),
            self.publishes.load(Ordering::Relaxed),
        )
    }
}

/// One connection's ring: empty until its handshake asks for one.
#[derive(Default)]
pub struct RingSlot {
    ring: Mutex<Option<EventRing>>,
    /// Signalled when a publish first leaves events queued behind a full
    /// ring, and when the client frees room in a ring that has a backlog
    /// (its watch fires): the connection's writer task then moves the
    /// backlog in ([`RingSlot::service`]).
    backlog: Arc<tokio::sync::Notify>,
    /// Set when the client corrupted the ring's indices and the ring was
    /// dropped: the writer task closes the connection with an error.
    failed: AtomicBool,
    /// Where its publishes are counted.
    stats: Arc<RingStats>,
}

/// The shared memory all rings of this broker may take together: at most
/// [`MAX_EVENT_RINGS_TOTAL_BYTES`], and never more than half of
/// `/dev/shm`'s size (read at each grant), so that the broker's clients
/// can never take all of it from the machine's other users. Each ring
/// counts its whole footprint (header and data area, in pages) while it
/// lives.
pub struct RingBudget;

/// Bytes of shared memory held by this process's live rings.
static RING_BYTES: AtomicU64 = AtomicU64::new(0);

impl RingBudget {
    /// The budget for a `/dev/shm` of `shm_total` bytes (`None`: unknown).
    pub fn limit_for(shm_total: Option<u64>) -> u64 {
        MAX_EVENT_RINGS_TOTAL_BYTES.min(shm_total.map_or(u64::MAX, |t| t / 2))
    }

    /// The budget now.
    pub fn limit() -> u64 {
        Self::limit_for(a2a_ring::shm_total_bytes())
    }

    /// Takes `cost` bytes of the budget, or `None` if that would pass it.
    fn reserve(cost: u64) -> Result<Reservation, Declined> {
        let limit = Self::limit();
        RING_BYTES
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(cost).filter(|&total| total <= limit)
            })
            .map(|_| Reservation(cost))
            .map_err(|used| Declined::Budget { cost, used, limit })
    }
}

/// A ring's share of the [`RingBudget`], given back when the ring goes.
struct Reservation(u64);

impl Drop for Reservation {
    fn drop(&mut self) {
        RING_BYTES.fetch_sub(self.0, Ordering::AcqRel);
    }
}

/// Why a ring was not granted (the connection's events then go over the
/// socket).
#[derive(Debug, thiserror::Error)]
pub enum Declined {
    /// The ring would take the broker's rings past [`RingBudget`].
    #[error("the rings' budget is spent ({used} of {limit} bytes in use, {cost} more asked)")]
    Budget { cost: u64, used: u64, limit: u64 },
    /// Shared memory is short (`/dev/shm` full, or another limit).
    #[error("{0}")]
    NoSpace(SegmentError),
    /// The segment could not be made for another reason.
    #[error("cannot create the segment: {0}")]
    Segment(SegmentError),
}

/// A granted ring and its publisher.
struct EventRing {
    publisher: Publisher<Segment>,
    info: EventRingInfo,
    /// Events staged since the last publish.
    staged: u64,
    /// The frame being encoded (kept: one allocation per connection).
    frame: Vec<u8>,
    /// Set while a backlog waits for the client to free room.
    watch: Option<SpaceWatch>,
    /// Its share of the budget (after the publisher in drop order: the
    /// segment is gone before the bytes are counted free).
    _reservation: Reservation,
}

/// Frame buffer capacity kept between events (a larger one, left by a
/// large event, is freed).
const FRAME_KEPT: usize = 64 * 1024;

/// Where [`RingSlot::stage`] put an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Staged {
    /// Into the ring (or its overflow queue), the first since the last
    /// publish: the ring must be published.
    First,
    /// Into the ring, behind others not yet published.
    More,
    /// Not staged: no ring, or the event must go over the socket (larger
    /// than the ring, or the ring is unusable).
    Socket,
}

impl EventRing {
    fn counted(&mut self, stats: &RingStats, f: impl FnOnce(&mut Publisher<Segment>)) {
        let before = self.publisher.producer().wake_count();
        f(&mut self.publisher);
        let wakes = self.publisher.producer().wake_count() - before;
        // Relaxed adds once per publish: counters only, nothing
        // synchronises through them.
        let staged = std::mem::take(&mut self.staged);
        stats.staged.fetch_add(staged, Ordering::Relaxed);
        stats.wakes.fetch_add(wakes, Ordering::Relaxed);
        stats.publishes.fetch_add(1, Ordering::Relaxed);
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
    /// An empty slot whose ring's publishes count into `stats`.
    pub fn counting_into(stats: Arc<RingStats>) -> RingSlot {
        RingSlot {
            stats,
            ..RingSlot::default()
        }
    }

    /// Grants a ring of about `bytes` (clamped to the ring's limits and
    /// `MAX_EVENT_RING_BYTES`), or the one already granted (a repeated
    /// handshake changes nothing). Declined when the ring would pass the
    /// [`RingBudget`] or shared memory cannot back it: the connection then
    /// gets its events on the socket.
    pub fn grant(&self, bytes: u64) -> Result<EventRingInfo, Declined> {
        let mut slot = self.ring.lock();
        if let Some(r) = slot.as_ref() {
            return Ok(r.info.clone());
        }
        let bytes = (bytes as usize).min(MAX_EVENT_RING_BYTES);
        let reservation = RingBudget::reserve(a2a_ring::footprint(a2a_ring::ring_capacity(bytes)))?;
        let (producer, name) = Segment::create(bytes).map_err(|e| match e {
            SegmentError::NoSpace { .. } => Declined::NoSpace(e),
            e => Declined::Segment(e),
        })?;
        let info = EventRingInfo {
            name: name.clone(),
            bytes: producer.capacity() as u64,
        };
        LIVE.lock().get_or_insert_with(HashSet::new).insert(name);
        *slot = Some(EventRing {
            publisher: Publisher::new(
                producer,
                OverflowBound {
                    max_records: EVENT_RING_OVERFLOW_EVENTS,
                    max_bytes: EVENT_RING_OVERFLOW_BYTES,
                },
            ),
            info: info.clone(),
            staged: 0,
            frame: Vec::new(),
            watch: None,
            _reservation: reservation,
        });
        Ok(info)
    }

    /// Stages one event (visible at the next [`RingSlot::publish`]).
    pub fn stage(&self, n: &Notification) -> Staged {
        let mut slot = self.ring.lock();
        let Some(r) = slot.as_mut() else {
            return Staged::Socket;
        };
        r.frame.clear();
        // Encoding into memory fails only past bincode's own limits; such
        // an event takes the socket's path, which bounds it
        // (docs/protocol.md §1 Framing).
        if encode_frame(&(index::NOTIFICATION, n), &mut r.frame).is_err() {
            return Staged::Socket;
        }
        // Past the frame's 4-byte length: the ring has its own.
        let staged = r.publisher.stage(&r.frame[4..]);
        if r.frame.capacity() > FRAME_KEPT {
            r.frame = Vec::new();
        }
        match staged {
            Ok(Published::Ring | Published::Queued { .. }) => {
                r.staged += 1;
                if r.staged == 1 {
                    Staged::First
                } else {
                    Staged::More
                }
            }
            Err(PublishError::TooLarge { .. }) => Staged::Socket,
            Err(PublishError::Corrupt) => {
                // Publish what was staged before dropping it: nothing else
                // will.
                r.counted(&self.stats, |p| p.commit());
                self.fail(&mut slot);
                Staged::Socket
            }
        }
    }

    /// The client wrote impossible indices into its ring: the ring goes,
    /// and the writer task closes the connection with an error (the events
    /// still queued for the ring cannot be delivered; never silently).
    fn fail(&self, slot: &mut Option<EventRing>) {
        if let Some(r) = slot.take() {
            tracing::warn!(ring = %r.info.name, "event ring dropped: the client corrupted its indices");
        }
        self.failed.store(true, Ordering::Release);
        self.backlog.notify_one();
    }

    /// Publishes what was staged: one fence, at most one wake-up; tells
    /// the writer task when events newly wait behind a full ring (once a
    /// watch is armed, the client's progress wakes it instead).
    pub fn publish(&self) {
        let mut slot = self.ring.lock();
        let Some(r) = slot.as_mut() else {
            return;
        };
        r.counted(&self.stats, |p| p.commit());
        if r.watch.is_none() && r.publisher.has_backlog() {
            // Stores a permit when the task is busy: never lost.
            self.backlog.notify_one();
        }
    }

    /// Events (or a lag record) wait behind a full ring?
    #[cfg(test)]
    fn has_backlog(&self) -> bool {
        self.ring
            .lock()
            .as_ref()
            .is_some_and(|r| r.publisher.has_backlog())
    }

    /// The writer task's turn, when [`RingSlot::backlog`] fires: moves the
    /// events queued behind a full ring in as far as it has room, and if
    /// some remain, asks the client to signal when it frees more (the
    /// watch then wakes the task again). Does nothing while such a watch
    /// is pending. Returns [`Service::Failed`] once the ring was dropped
    /// as corrupt: the connection must close.
    pub fn service(&self) -> Service {
        if self.failed.swap(false, Ordering::AcqRel) {
            return Service::Failed;
        }
        let mut slot = self.ring.lock();
        let Some(r) = slot.as_mut() else {
            return Service::Ok;
        };
        if r.watch.as_ref().is_some_and(|w| !w.fired()) {
            return Service::Ok;
        }
        // A client that frees room as fast as it is filled keeps this loop
        // going; past a few rounds, let the other connections run.
        for _ in 0..SERVICE_ROUNDS {
            r.watch = None;
            let mut flushed = Ok(0);
            r.counted(&self.stats, |p| flushed = p.flush());
            if flushed.is_err() {
                self.fail(&mut slot);
                self.failed.store(false, Ordering::Release);
                return Service::Failed;
            }
            if !r.publisher.has_backlog() {
                return Service::Ok;
            }
            let notify = self.backlog.clone();
            match r
                .publisher
                .watch_space(&WATCHER, move || notify.notify_one())
            {
                Some(w) => {
                    r.watch = Some(w);
                    return Service::Ok;
                }
                // The client freed room meanwhile: flush again.
                None => continue,
            }
        }
        self.backlog.notify_one();
        Service::Ok
    }

    /// Removes the ring with its connection: whatever still holds the
    /// outbox (a parked blocking send's responder, an agent not yet
    /// deregistered) must not keep the segment. Later events go to the
    /// (closed) outbox.
    pub fn close(&self) {
        let ring = self.ring.lock().take();
        drop(ring);
    }

    /// Resolves when the ring's backlog needs the writer task (see
    /// [`RingSlot::service`]).
    pub async fn backlog(&self) {
        self.backlog.notified().await
    }
}

/// Rounds of flush-and-arm one [`RingSlot::service`] call makes at most.
const SERVICE_ROUNDS: usize = 16;

/// What [`RingSlot::service`] asks of the writer task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// Nothing more (the backlog is in, or a watch waits for the client).
    Ok,
    /// The client corrupted the ring, which was dropped: close the
    /// connection with an error.
    Failed,
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

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_proto::types::LaggedParams;
    use std::os::unix::fs::FileExt;

    fn event(n: u64) -> Notification {
        Notification::Lagged(LaggedParams {
            recipient: "r".repeat(200),
            recipient_context_id: "c".into(),
            dropped: n,
        })
    }

    #[test]
    fn the_budget_is_half_of_dev_shm_and_at_most_the_constant() {
        assert_eq!(RingBudget::limit_for(Some(64 << 20)), 32 << 20);
        assert_eq!(
            RingBudget::limit_for(Some(64 << 30)),
            MAX_EVENT_RINGS_TOTAL_BYTES
        );
        assert_eq!(RingBudget::limit_for(None), MAX_EVENT_RINGS_TOTAL_BYTES);
    }

    /// Each slot counts its publishes into the stats value it was given:
    /// two owners (two socket servers in one process) count apart, where
    /// process-wide statics mixed them.
    #[test]
    fn publishes_count_into_the_owner_s_stats() {
        let (mine, other) = (
            Arc::new(RingStats::default()),
            Arc::new(RingStats::default()),
        );
        let slot = RingSlot::counting_into(mine.clone());
        let _quiet = RingSlot::counting_into(other.clone());
        slot.grant(4096).expect("a ring");
        for n in 0..3 {
            assert_ne!(slot.stage(&event(n)), Staged::Socket);
        }
        slot.publish();
        let (staged, _wakes, publishes) = mine.snapshot();
        assert_eq!((staged, publishes), (3, 1));
        assert_eq!(other.snapshot(), (0, 0, 0));
    }

    /// A backlog arms a watch and then waits: further services do nothing
    /// until the client frees room. A client that writes an impossible
    /// `tail` loses its ring, and the writer task is told to close the
    /// connection; later events take the socket.
    #[test]
    fn a_backlog_waits_for_the_client_and_a_corrupt_tail_drops_the_ring() {
        let slot = RingSlot::default();
        let info = slot.grant(4096).expect("a ring");
        for n in 0..50 {
            assert_ne!(slot.stage(&event(n)), Staged::Socket);
        }
        slot.publish();
        assert!(slot.has_backlog());
        assert_eq!(slot.service(), Service::Ok);
        assert!(slot.has_backlog(), "nothing read, nothing moved");
        assert!(slot
            .ring
            .lock()
            .as_ref()
            .is_some_and(|r| r.watch.as_ref().is_some_and(|w| !w.fired())));
        let seg = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/dev/shm{}", info.name))
            .unwrap();
        seg.write_all_at(&3u64.to_le_bytes(), 128).unwrap();
        assert_eq!(slot.stage(&event(99)), Staged::Socket);
        assert_eq!(slot.service(), Service::Failed);
        assert!(!slot.has_backlog());
        assert_eq!(slot.stage(&event(100)), Staged::Socket);
        assert_eq!(slot.service(), Service::Ok);
    }
}
