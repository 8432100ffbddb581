//! The shared-memory event ring (PROTOCOL.md §1.3), producer side: a local
//! socket connection that asks for one in its handshake gets a segment
//! (owner-only, named in the handshake result), and from then on the
//! notifications of its push agents go there instead of on the socket;
//! requests and responses stay on the socket.
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
//! connection's publisher up to a bound, past which the oldest are dropped,
//! counted, and reported to the client by a lag record before the next
//! event (`a2a_ring::Publisher`). The connection's writer task moves that
//! backlog in as the client frees room ([`RingSlot::backlog`]). An event
//! larger than the ring goes over the socket instead.
//!
//! Segments go with their connection ([`RingSlot::close`]; dropping the
//! publisher removes the name), with the broker ([`remove_live`] at exit), and after a crash at
//! the next start ([`cleanup_stale`]).

use a2a_proto::binary::{encode_frame, index};
use a2a_proto::limits::MAX_EVENT_RING_BYTES;
use a2a_proto::params::EventRingInfo;
use a2a_proto::types::Notification;
use a2a_ring::{OverflowBound, Published, Publisher, Segment};
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
    /// Signalled when a publish leaves events queued behind a full ring:
    /// the connection's writer task then retries until they are in.
    backlog: tokio::sync::Notify,
}

/// A granted ring and its publisher.
struct EventRing {
    publisher: Publisher<Segment>,
    info: EventRingInfo,
    /// Events staged since the last publish.
    staged: u64,
    /// The frame being encoded (kept: one allocation per connection).
    frame: Vec<u8>,
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
    fn counted(&mut self, f: impl FnOnce(&mut Publisher<Segment>)) {
        let before = self.publisher.producer().wake_count();
        f(&mut self.publisher);
        let wakes = self.publisher.producer().wake_count() - before;
        // Relaxed adds once per publish: counters only, nothing
        // synchronises through them.
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
            info: info.clone(),
            staged: 0,
            frame: Vec::new(),
        });
        Some(info)
    }

    /// Stages one event (visible at the next [`RingSlot::publish`]).
    pub fn stage(&self, n: &Notification) -> Staged {
        let mut slot = self.ring.lock();
        let Some(r) = slot.as_mut() else {
            return Staged::Socket;
        };
        r.frame.clear();
        // Encoding into memory fails only past bincode's own limits; such
        // an event takes the socket's path, which bounds it (§1.1).
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
            Err(_) => Staged::Socket,
        }
    }

    /// Publishes what was staged: one fence, at most one wake-up; tells
    /// the writer task when events wait behind a full ring.
    pub fn publish(&self) {
        let mut slot = self.ring.lock();
        let Some(r) = slot.as_mut() else {
            return;
        };
        r.counted(|p| p.commit());
        if r.publisher.queued() > 0 || r.publisher.pending_lag() > 0 {
            // Stores a permit when the task is busy: never lost.
            self.backlog.notify_one();
        }
    }

    /// Events (or a lag record) wait behind a full ring?
    pub fn has_backlog(&self) -> bool {
        self.ring
            .lock()
            .as_ref()
            .is_some_and(|r| r.publisher.queued() > 0 || r.publisher.pending_lag() > 0)
    }

    /// Moves events queued behind a full ring in, as room allows.
    pub fn flush(&self) {
        if let Some(r) = self.ring.lock().as_mut() {
            r.counted(|p| {
                let _ = p.flush();
            });
        }
    }

    /// Removes the ring with its connection: whatever still holds the
    /// outbox (a parked blocking send's responder, an agent not yet
    /// deregistered) must not keep the segment. Later events go to the
    /// (closed) outbox.
    pub fn close(&self) {
        let ring = self.ring.lock().take();
        drop(ring);
    }

    /// Resolves when a publish left a backlog (see [`RingSlot::flush`]).
    pub async fn backlog(&self) {
        self.backlog.notified().await
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
