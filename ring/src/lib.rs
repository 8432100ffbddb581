//! `a2a-ring`: the per-connection shared-memory event ring of docs/protocol.md
//! §1 (the event ring). One producer (the broker) writes length-prefixed event records; one
//! consumer (the client) reads them. The producer never blocks: a full ring
//! queues in memory up to a bound, then drops the oldest events and tells the
//! consumer how many with a lag record. An idle consumer parks on a futex and
//! the producer wakes it only when it is parked (an eventcount), so a busy
//! stream costs no system call per event.
//!
//! Modules:
//! - `layout`: the header and record format both processes agree on;
//! - `memory`: the [`RingMemory`] trait the ring logic is generic over, and
//!   [`LocalMemory`], the in-process implementation (tests, loom);
//! - `producer`: [`Producer`], `try_push` and the wake-up half of the
//!   eventcount;
//! - `consumer`: [`Consumer`], validated reads, `wait` (spin, then park);
//! - `publisher`: [`Publisher`], the bounded overflow queue and lag records;
//! - `segment`: [`Segment`], the ring in POSIX shared memory, and
//!   [`cleanup_stale`];
//! - `watch`: [`SpaceWatcher`], the producer's side of the reverse
//!   eventcount for many rings at once (the consumer signals when it frees
//!   room for a producer that waits; no timer);
//! - `futex`, `sync`: the raw futex calls and the atomics (loom's under
//!   `--cfg loom`).
//!
//! Model check: `RUSTFLAGS="--cfg loom" cargo test -p a2a-ring --release --test loom`.

mod consumer;
#[cfg(not(loom))]
mod futex;
mod layout;
mod memory;
mod producer;
mod publisher;
#[cfg(not(loom))]
mod segment;
mod sync;
#[cfg(not(loom))]
mod watch;

pub use consumer::{Consumer, Popped, Record, RingError, SpinPolicy};
pub use layout::{
    ring_capacity, Header, HeaderError, HEADER_BYTES, MAX_CAPACITY, MIN_CAPACITY,
    RECORD_HEADER_BYTES,
};
pub use memory::{LocalMemory, RingMemory};
pub use producer::{Producer, PushError};
pub use publisher::{OverflowBound, PublishError, Published, Publisher};
#[cfg(not(loom))]
pub use segment::{
    cleanup_stale, footprint, remove, shm_total_bytes, Segment, SegmentError, NAME_PREFIX,
};
#[cfg(not(loom))]
pub use watch::{SpaceWatch, SpaceWatcher, POLL_WITHOUT_WAITV};

use std::sync::Arc;

/// A ring between two threads of this process: `capacity` data bytes
/// (rounded up to a power of two, at least 8; not clamped like the
/// shared-memory one, so tests and models can use tiny rings).
pub fn local(capacity: usize) -> (Producer<Arc<LocalMemory>>, Consumer<Arc<LocalMemory>>) {
    let mem = LocalMemory::new(capacity);
    (Producer::new(mem.clone()), Consumer::new(mem))
}

#[cfg(all(test, not(loom)))]
mod tests;
