//! The producer as the broker uses it: never blocks, queues what the ring
//! cannot take yet, drops the oldest queued events past a bound, and writes a
//! lag marker with the exact count where the dropped events would have been.

use crate::layout::KIND_LAG;
use crate::memory::RingMemory;
use crate::producer::{Producer, PushError};
use std::collections::VecDeque;

/// The per-connection overflow queue's bound. An event is dropped (the
/// oldest first) as soon as keeping it would exceed either limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverflowBound {
    /// Events queued at most.
    pub max_records: usize,
    /// Payload bytes queued at most.
    pub max_bytes: usize,
}

impl Default for OverflowBound {
    /// 4096 events or 4 MiB, whichever comes first.
    fn default() -> Self {
        OverflowBound {
            max_records: 4096,
            max_bytes: 4 << 20,
        }
    }
}

/// Where a published event went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// Into the ring (visible to the consumer now).
    Ring,
    /// Into the overflow queue; `dropped` older events were dropped to make
    /// room (the consumer will read a lag marker for them).
    Queued { dropped: u64 },
}

/// Why an event was not published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    /// The event can never fit in this ring: send it over the socket.
    #[error("event of {len} bytes exceeds the ring's largest record ({max} bytes)")]
    TooLarge { len: usize, max: usize },
    /// The consumer corrupted the ring's indices: drop the ring.
    #[error("ring corrupt: consumer index out of range")]
    Corrupt,
}

/// A [`Producer`] with a bounded overflow queue.
///
/// Ordering: events reach the consumer in publish order, except that a run
/// of dropped events is replaced by one lag record
/// ([`crate::Popped::Lagged`]) carrying their count. The lag record is
/// written as soon as the ring has room for it (before any queued event).
pub struct Publisher<M: RingMemory> {
    producer: Producer<M>,
    /// Events the ring could not take yet, oldest first.
    queue: VecDeque<Box<[u8]>>,
    /// Payload bytes in `queue`.
    queued_bytes: usize,
    bound: OverflowBound,
    /// Events dropped since the last lag record was written.
    pending_lag: u64,
    /// Events dropped since creation.
    dropped: u64,
}

impl<M: RingMemory> Publisher<M> {
    /// Wraps a producer.
    pub fn new(producer: Producer<M>, bound: OverflowBound) -> Self {
        Publisher {
            producer,
            queue: VecDeque::new(),
            queued_bytes: 0,
            bound,
            pending_lag: 0,
            dropped: 0,
        }
    }

    /// Publishes one event: into the ring if nothing is waiting ahead of it
    /// and it fits, else into the queue (dropping the oldest queued events
    /// past the bound). Never blocks. Visible to the consumer at once.
    pub fn publish(&mut self, event: &[u8]) -> Result<Published, PublishError> {
        let outcome = self.stage(event);
        self.producer.publish();
        outcome
    }

    /// As [`Publisher::publish`], but what goes into the ring becomes
    /// visible only at the next [`Publisher::commit`] (or `publish`, or
    /// `flush`): a batch of events then pays one publication fence and at
    /// most one wake-up. Call `commit` at the end of every batch.
    pub fn stage(&mut self, event: &[u8]) -> Result<Published, PublishError> {
        if event.len() > self.producer.max_record() {
            return Err(PublishError::TooLarge {
                len: event.len(),
                max: self.producer.max_record(),
            });
        }
        self.fill()?;
        if self.queue.is_empty() && self.pending_lag == 0 {
            match self.producer.try_write(event) {
                Ok(()) => return Ok(Published::Ring),
                Err(PushError::Full) => {}
                Err(e) => return Err(map(e)),
            }
        }
        self.queue.push_back(event.into());
        self.queued_bytes += event.len();
        let mut dropped = 0;
        while self.queue.len() > self.bound.max_records || self.queued_bytes > self.bound.max_bytes
        {
            let Some(old) = self.queue.pop_front() else {
                break;
            };
            self.queued_bytes -= old.len();
            dropped += 1;
        }
        if dropped > 0 {
            self.pending_lag += dropped;
            self.dropped += dropped;
            self.producer.set_dropped(self.dropped);
            // The ring may have room for the marker even though it had none
            // for the event.
            self.fill()?;
        }
        Ok(Published::Queued { dropped })
    }

    /// Makes every staged event visible (wakes the consumer if parked).
    pub fn commit(&mut self) {
        self.producer.publish();
    }

    /// Moves queued events (and a pending lag record first) into the ring
    /// while it has room, and makes them visible. Returns how many events
    /// moved. Call it whenever convenient: before publishing, on a timer,
    /// when the socket is idle.
    pub fn flush(&mut self) -> Result<usize, PublishError> {
        let moved = self.fill();
        self.producer.publish();
        moved
    }

    /// Writes the pending lag record and queued events into the ring while
    /// it has room, without publishing them.
    fn fill(&mut self) -> Result<usize, PublishError> {
        let mut moved = 0;
        loop {
            if self.pending_lag > 0 {
                match self
                    .producer
                    .write_kind(KIND_LAG, &self.pending_lag.to_le_bytes())
                {
                    Ok(()) => self.pending_lag = 0,
                    Err(PushError::Full) => return Ok(moved),
                    Err(e) => return Err(map(e)),
                }
            }
            let Some(front) = self.queue.front() else {
                return Ok(moved);
            };
            match self.producer.try_write(front) {
                Ok(()) => {
                    self.queued_bytes -= front.len();
                    self.queue.pop_front();
                    moved += 1;
                }
                Err(PushError::Full) => return Ok(moved),
                Err(e) => return Err(map(e)),
            }
        }
    }

    /// Events waiting in the overflow queue.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Events dropped since creation.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Dropped events not yet reported by a lag record in the ring.
    pub fn pending_lag(&self) -> u64 {
        self.pending_lag
    }

    /// The underlying producer (capacity, wake-up count, memory).
    pub fn producer(&self) -> &Producer<M> {
        &self.producer
    }

    /// The underlying producer, to arm its wait for room
    /// ([`Producer::arm_space_signal`]) once a flush left a backlog.
    pub fn producer_mut(&mut self) -> &mut Producer<M> {
        &mut self.producer
    }

    /// Events or a lag record wait behind a full ring.
    pub fn has_backlog(&self) -> bool {
        !self.queue.is_empty() || self.pending_lag > 0
    }
}

fn map(e: PushError) -> PublishError {
    match e {
        PushError::TooLarge { len, max } => PublishError::TooLarge { len, max },
        // `Full` is handled by every caller before mapping; a corrupt index
        // is the only other outcome.
        PushError::Full | PushError::Corrupt => PublishError::Corrupt,
    }
}
