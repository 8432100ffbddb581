//! The producer side (the broker): writes records and publishes them, never
//! blocks, and issues a futex wake-up only when the consumer is parked.

use crate::layout::{encode_record_header, framed_len, KIND_EVENT, RECORD_HEADER_BYTES};
use crate::memory::RingMemory;
use crate::sync::{fence, Ordering};

/// Why a record was not pushed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// Not enough free space now; retry after the consumer has read (or queue
    /// it: see [`crate::Publisher`]).
    #[error("ring full")]
    Full,
    /// The record can never fit in this ring: send it another way (the
    /// socket).
    #[error("record of {len} bytes exceeds the ring's largest record ({max} bytes)")]
    TooLarge { len: usize, max: usize },
    /// The consumer's tail index is impossible (behind what it had already
    /// released, or ahead of the head): the ring can no longer be used.
    #[error("ring corrupt: consumer index out of range")]
    Corrupt,
}

/// The writing end of a ring. One per ring; not `Clone`.
pub struct Producer<M: RingMemory> {
    mem: M,
    /// Data-area size (a power of two), from local knowledge.
    capacity: u64,
    /// Where the next record goes: only this producer writes `head`.
    head: u64,
    /// The value last stored to the shared `head`: records in
    /// `published..head` are written but not yet visible.
    published: u64,
    /// The consumer's `tail` as last read. Re-read only when the cached value
    /// says the ring is too full, so a busy stream does not pull the
    /// consumer's cache line on every push.
    tail_cache: u64,
    /// FUTEX_WAKE system calls issued (the figure the benchmark reports).
    wakes: u64,
    /// The consumer's park ticket we last woke: a park is woken once, however
    /// many records are published before the consumer runs again.
    last_woken: u64,
    /// The last wait-for-room ticket stored in `waiting` (fresh per wait,
    /// so the consumer signals each wait once).
    space_ticket: u64,
}

impl<M: RingMemory> Producer<M> {
    /// The producer of a freshly initialised ring (head = tail = 0).
    pub(crate) fn new(mem: M) -> Self {
        let capacity = mem.capacity() as u64;
        Producer {
            mem,
            capacity,
            head: 0,
            published: 0,
            tail_cache: 0,
            wakes: 0,
            last_woken: 0,
            space_ticket: 0,
        }
    }

    /// Data-area bytes (what the handshake reports as `eventRing.bytes`).
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// The largest payload [`Producer::try_push`] accepts (an empty ring holds
    /// exactly one such record).
    pub fn max_record(&self) -> usize {
        self.capacity as usize - RECORD_HEADER_BYTES
    }

    /// FUTEX_WAKE system calls issued so far.
    pub fn wake_count(&self) -> u64 {
        self.wakes
    }

    /// Whether the consumer has announced a park that no publish has woken
    /// yet. Diagnostics and tests; the protocol does not depend on callers
    /// reading it.
    pub fn consumer_sleeping(&self) -> bool {
        // SYNC POINT (none): a snapshot for diagnostics, no data depends on it.
        let ticket = self.mem.header().sleeping.0.load(Ordering::Relaxed);
        ticket != 0 && ticket != self.last_woken
    }

    /// The memory the ring lives in (for a [`crate::Segment`], its name).
    pub fn memory(&self) -> &M {
        &self.mem
    }

    /// Writes one event record and publishes it, or fails at once: never
    /// blocks. `TooLarge` when `record.len() > max_record()`.
    pub fn try_push(&mut self, record: &[u8]) -> Result<(), PushError> {
        self.try_write(record)?;
        self.publish();
        Ok(())
    }

    /// Writes one event record without making it visible: a batch of
    /// writes followed by one [`Producer::publish`] pays the publication
    /// fence and the wake-up check once. On `Full`, whatever was written
    /// before is published first (the consumer can only free space it can
    /// see), so a writer that retries on `Full` always makes progress.
    #[inline]
    pub fn try_write(&mut self, record: &[u8]) -> Result<(), PushError> {
        self.write_kind(KIND_EVENT, record)
    }

    /// Makes every record written so far visible, and wakes the consumer if
    /// it is parked. A no-op when nothing is pending.
    pub fn publish(&mut self) {
        if self.published != self.head {
            self.published = self.head;
            self.store_head_and_wake();
        }
    }

    /// The producer half of the reverse eventcount: asks the consumer to
    /// signal (bump the `space` word and wake it) the next time it frees
    /// room, so that a producer with a backlog can sleep instead of
    /// retrying on a timer. Returns the `space` value to wait on (with
    /// [`Producer::wait_for_space`], or a [`crate::SpaceWatcher`]), or
    /// `None` when the consumer has freed room since this producer last
    /// looked: write again now.
    ///
    /// Call it after a write failed with `Full` (which refreshed the
    /// producer's view of the consumer's `tail`). A consumer that never
    /// reads is never signalled for, and costs nothing meanwhile.
    pub fn arm_space_signal(&mut self) -> Option<u32> {
        let header = self.mem.header();
        // SYNC POINT: Acquire pairs with the consumer's Release `fetch_add`
        // of `space` (consumer.rs, `release`). Read *before* the ticket is
        // published: the consumer bumps only after seeing the ticket, so a
        // bump that answers this wait changes `space` from the value read
        // here, and the futex wait returns at once or is woken.
        let epoch = header.space.0.load(Ordering::Acquire);
        self.space_ticket += 1;
        // SYNC POINT: the store-fence-load half of a Dekker pair with the
        // consumer's `store tail; fence(SeqCst); load waiting` (consumer.rs,
        // `release`): either the consumer sees this ticket and signals, or
        // our load of `tail` below sees the room it freed.
        header.waiting.0.store(self.space_ticket, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        // SYNC POINT: Acquire pairs with the consumer's Release store of
        // `tail`, as in `write_kind` (the next write re-reads and validates
        // it; here only a change matters).
        let tail = header.tail.0.load(Ordering::Acquire);
        if tail != self.tail_cache {
            // SYNC POINT (none): withdrawing needs no order; a consumer that
            // still sees the ticket signals once for nothing.
            header.waiting.0.store(0, Ordering::Relaxed);
            return None;
        }
        Some(epoch)
    }

    /// Blocks this thread until the consumer frees room (or `timeout`
    /// passes): [`Producer::arm_space_signal`], then a futex wait on the
    /// `space` word. Spurious returns are possible; the caller writes
    /// again either way. For a producer with a thread to spare (tests, the
    /// model checker); the broker waits for many rings at once with a
    /// [`crate::SpaceWatcher`].
    pub fn wait_for_space(&mut self, timeout: Option<std::time::Duration>) {
        if let Some(epoch) = self.arm_space_signal() {
            self.mem.wait_space(epoch, timeout);
            // SYNC POINT (none): as in the consumer's `park`, the next wait
            // publishes a fresh ticket, fenced.
            self.mem.header().waiting.0.store(0, Ordering::Relaxed);
        }
    }

    /// Whether records have been written and not yet published.
    pub fn has_unpublished(&self) -> bool {
        self.published != self.head
    }

    /// Records the overflow queue's dropped total in the header (diagnostics
    /// for the consumer side; never trusted there).
    pub(crate) fn set_dropped(&self, total: u64) {
        // SYNC POINT (none): an informational counter, read Relaxed.
        self.mem.header().dropped.0.store(total, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn write_kind(&mut self, kind: u8, payload: &[u8]) -> Result<(), PushError> {
        let too_large = PushError::TooLarge {
            len: payload.len(),
            max: self.max_record(),
        };
        let framed = match framed_len(payload.len()) {
            Some(f) if f as u64 <= self.capacity => f as u64,
            _ => return Err(too_large),
        };
        if self.capacity - self.head.wrapping_sub(self.tail_cache) < framed {
            // SYNC POINT: Acquire pairs with the consumer's Release store of
            // `tail` (consumer.rs, `release`): its reads of the bytes it
            // released happen before our writes over them.
            let tail = self.mem.header().tail.0.load(Ordering::Acquire);
            let used = self.head.wrapping_sub(tail);
            if used > self.capacity || tail % 8 != 0 || tail < self.tail_cache {
                return Err(PushError::Corrupt);
            }
            self.tail_cache = tail;
            if self.capacity - used < framed {
                self.publish();
                return Err(PushError::Full);
            }
        }
        let mask = self.capacity - 1;
        let at = (self.head & mask) as usize;
        // The header never straddles the end: `at` and the capacity are
        // multiples of 8.
        self.mem
            .write(at, &encode_record_header(payload.len() as u32, kind));
        let body = (at + RECORD_HEADER_BYTES) & mask as usize;
        let first = payload.len().min(self.capacity as usize - body);
        self.mem.write(body, &payload[..first]);
        if first < payload.len() {
            // The split copy: the rest of the payload continues at offset 0.
            self.mem.write(0, &payload[first..]);
        }
        self.head += framed;
        Ok(())
    }

    /// Stores `head` and wakes a parked consumer.
    fn store_head_and_wake(&mut self) {
        let header = self.mem.header();
        // SYNC POINT: Release pairs with the consumer's Acquire loads of
        // `head` (consumer.rs, `refresh_head` and `park`): the record bytes
        // written above are visible to a consumer that sees this head.
        header.head.0.store(self.head, Ordering::Release);
        // SYNC POINT: the store-fence-load half of a Dekker pair with the
        // consumer's `sleeping = ticket; fence(SeqCst); load head` in `park`.
        // Of "we store head, then load sleeping" and "it stores sleeping,
        // then loads head", with a SeqCst fence between each store and load,
        // at least one load sees the other's store: either we see its ticket
        // and wake it, or it sees this record and does not sleep. (Fences,
        // not SeqCst accesses: loom models the fence form.) On x86 this is
        // one `mfence` per publish.
        fence(Ordering::SeqCst);
        // A plain load of a word only the consumer writes, and only when it
        // parks: in a busy stream the line stays shared and unchanged, so the
        // steady state costs no read-modify-write and no system call. (An
        // earlier version let the producer clear the flag with a swap; loom
        // found a lost wake-up in it: the swap could consume the
        // announcement of a *later* park before that park read the epoch.)
        let ticket = header.sleeping.0.load(Ordering::Relaxed);
        if ticket != 0 && ticket != self.last_woken {
            self.last_woken = ticket;
            // SYNC POINT: Release pairs with the consumer's Acquire load of
            // `epoch` in `park`, which it reads *before* publishing its
            // ticket. That load cannot see this bump (we bump only after
            // seeing the ticket stored after it), so the futex wait's value
            // comparison fails or this wake finds it asleep; and when an
            // earlier publish already woke this ticket, that bump, too, came
            // after the consumer's epoch read, so its wait returns at once.
            // The consumer never sleeps on `head` itself: the epoch changes
            // only here, after a publish.
            header.epoch.0.fetch_add(1, Ordering::Release);
            self.mem.wake();
            self.wakes += 1;
        }
    }
}
