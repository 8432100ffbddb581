//! The consumer side (the client): reads records, validating everything it
//! reads from shared memory, and parks on the eventcount when the ring is
//! empty, after an optional spin whose window adapts to the stream.

use crate::layout::{decode_record_header, framed_len, KIND_EVENT, KIND_LAG, RECORD_HEADER_BYTES};
use crate::memory::RingMemory;
use crate::sync::{fence, Ordering};
use std::time::{Duration, Instant};

/// The ring's contents cannot be trusted any more (the other process wrote
/// something no correct producer writes). Permanent: once returned, every
/// later call returns it too; the connection should drop the ring.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The head index is behind the tail, more than a ring ahead, or not a
    /// multiple of 8.
    #[error("ring corrupt: producer index out of range")]
    BadIndex,
    /// A record header has nonzero reserved bytes, an unknown kind, or a
    /// length that runs past the published bytes.
    #[error("ring corrupt: bad record header")]
    BadRecord,
}

/// What [`Consumer::try_pop`] took off the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Popped {
    /// An event; its payload is in the caller's buffer.
    Event,
    /// The producer dropped this many events here (before the next record).
    /// The broker's `a2a.lagged` notification, carried as a record kind so it
    /// can never be confused with an event's bytes.
    Lagged(u64),
}

/// One record handed to a [`Consumer::drain`] callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// An event's payload (a private copy: the producer cannot change it).
    Event(&'a [u8]),
    /// The producer dropped this many events just before the next record.
    Lagged(u64),
}

/// The consumer's spin-before-park policy. The window adapts to the gaps
/// between records, judged by how long each wait that ended in a park
/// lasted (spin plus park): under `active_gap` (the record came soon after
/// the spin gave up) doubles the window, up to `max`; a longer one
/// (records further apart than any spin we allow: spinning would only burn
/// the core) halves it; a park of `idle_after` or more turns spinning off,
/// so an idle consumer costs no CPU. A spin that catches a record keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinPolicy {
    /// The longest spin before parking; `Duration::ZERO` never spins.
    pub max: Duration,
    /// A spin and park shorter than this together mean the stream is
    /// active: the window doubles. It includes the wake-up's own latency
    /// (25-60 µs cross-core on the VMs we measure on), so it sits above
    /// `max` by about one wake-up.
    pub active_gap: Duration,
    /// A park at least this long means the stream went idle.
    pub idle_after: Duration,
    /// Yield the core once after a park that a record ended sooner than
    /// this (see `wait`); `Duration::ZERO` never yields.
    pub yield_after_wake: Duration,
}

impl SpinPolicy {
    /// Never spin: park as soon as the ring is empty.
    pub const OFF: SpinPolicy = SpinPolicy {
        max: Duration::ZERO,
        active_gap: Duration::ZERO,
        idle_after: Duration::ZERO,
        yield_after_wake: Duration::ZERO,
    };
}

impl Default for SpinPolicy {
    /// A 60 µs window (about what a cross-core futex wake-up costs on the
    /// 2-vCPU machines we measure on, 25-60 µs: spinning longer than a
    /// wake-up would cost saves nothing), records under 100 µs apart for an
    /// active stream (so spinning stops when they come further apart than
    /// the window can catch), 1 ms of silence to call a stream idle, and a
    /// yield after a park shorter than 50 µs.
    fn default() -> Self {
        SpinPolicy {
            max: Duration::from_micros(60),
            active_gap: Duration::from_micros(100),
            idle_after: Duration::from_millis(1),
            yield_after_wake: Duration::from_micros(50),
        }
    }
}

/// A drain hands the space it has read back to the producer at least every
/// this many parts of the ring (and a waiting producer is signalled then):
/// a store and a fence per quarter of a ring, nothing per record, and the
/// producer never waits for more than a quarter of a ring to be read.
const RELEASE_PARTS: u64 = 4;

/// The reading end of a ring. One per ring; not `Clone`.
pub struct Consumer<M: RingMemory> {
    mem: M,
    /// Data-area size (a power of two), from local knowledge.
    capacity: u64,
    /// Our copy of the shared `tail`: only this consumer writes it.
    tail: u64,
    /// Records up to here have been read but not yet released to the
    /// producer (a batch releases once).
    read: u64,
    /// The producer's `head` as last read and validated.
    head_cache: u64,
    /// Set once the ring is found corrupt.
    poisoned: Option<RingError>,
    policy: SpinPolicy,
    /// The current spin window (between zero and `policy.max`).
    window: Duration,
    /// Scratch space for `drain` (a record may be split across the end).
    scratch: Vec<u8>,
    /// The last park ticket published in `sleeping`.
    ticket: u64,
    /// The producer's wait-for-room ticket we last signalled: each wait
    /// is signalled once, however many releases follow.
    last_signalled: u64,
    /// Signals sent to a producer waiting for room (futex wake-ups).
    space_wakes: u64,
}

impl<M: RingMemory> Consumer<M> {
    /// The consumer of a ring whose header has been validated.
    pub(crate) fn new(mem: M) -> Self {
        let capacity = mem.capacity() as u64;
        // SYNC POINT (none): `tail` is the consumer's own word; opening a
        // segment that another reader used starts where it stopped (0 on a
        // fresh one). A misaligned value poisons the consumer below.
        let tail = mem.header().tail.0.load(Ordering::Relaxed);
        // Under loom the spin is off: a timed busy loop is not something the
        // model checker can explore, and parking is the protocol under test.
        let policy = if cfg!(loom) {
            SpinPolicy::OFF
        } else {
            SpinPolicy::default()
        };
        Consumer {
            mem,
            capacity,
            tail,
            read: tail,
            head_cache: tail,
            poisoned: (tail % 8 != 0).then_some(RingError::BadIndex),
            policy,
            window: policy.max,
            scratch: Vec::new(),
            ticket: 0,
            last_signalled: 0,
            space_wakes: 0,
        }
    }

    /// Replaces the spin policy (the window restarts at `policy.max`).
    pub fn set_spin_policy(&mut self, policy: SpinPolicy) {
        self.policy = policy;
        self.window = policy.max;
    }

    /// Data-area bytes.
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// The dropped total the producer last reported (informational: written
    /// by the other process, so never used for anything but display).
    pub fn producer_dropped(&self) -> u64 {
        // SYNC POINT (none): diagnostics, Relaxed on both sides.
        self.mem.header().dropped.0.load(Ordering::Relaxed)
    }

    /// Futex wake-ups sent to a producer waiting for room so far.
    pub fn space_wake_count(&self) -> u64 {
        self.space_wakes
    }

    /// The memory the ring lives in.
    pub fn memory(&self) -> &M {
        &self.mem
    }

    /// Takes one record: `Ok(None)` when the ring is empty. An event's
    /// payload replaces the contents of `buf`.
    pub fn try_pop(&mut self, buf: &mut Vec<u8>) -> Result<Option<Popped>, RingError> {
        let popped = self.read_one(buf)?;
        self.release();
        Ok(popped)
    }

    /// Takes up to `max` records, handing each to `f`. Their space goes
    /// back to the producer every `RELEASE_PARTS`th of the ring read,
    /// whenever the drain catches up with the head it last saw, and at the
    /// end. Returns how many were taken.
    pub fn drain(&mut self, max: usize, mut f: impl FnMut(Record<'_>)) -> Result<usize, RingError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let release_every = self.capacity / RELEASE_PARTS;
        let mut n = 0;
        let result = loop {
            if n == max {
                break Ok(n);
            }
            let popped = match self.read_one(&mut scratch) {
                Ok(Some(popped)) => popped,
                Ok(None) => break Ok(n),
                Err(e) => break Err(e),
            };
            // Not only when caught up: a drain that found the ring full
            // would otherwise hold all of it until its last record, while
            // a producer whose reader keeps pace (`f` hands each record on
            // at once) queues as many events again behind it, and its
            // overflow queue passes its bound and drops events that a
            // reader keeping up should never lose (the `ring_events`
            // bench's cross-core 4 KiB row). The record is copied out
            // already: its space can go back before `f` runs.
            if self.read - self.tail >= release_every {
                self.release();
            }
            match popped {
                Popped::Event => f(Record::Event(&scratch)),
                Popped::Lagged(k) => f(Record::Lagged(k)),
            }
            n += 1;
        };
        self.release();
        self.scratch = scratch;
        result
    }

    /// Whether a record is ready to read.
    pub fn is_ready(&mut self) -> Result<bool, RingError> {
        if let Some(e) = &self.poisoned {
            return Err(e.clone());
        }
        if self.read != self.head_cache {
            return Ok(true);
        }
        self.refresh_head()?;
        Ok(self.read != self.head_cache)
    }

    /// Blocks until a record is ready (`Ok(true)`) or `timeout` passes
    /// (`Ok(false)`; `None` waits forever). Spins first within the current
    /// window, then parks on the eventcount.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<bool, RingError> {
        if self.is_ready()? {
            return Ok(true);
        }
        let start = Instant::now();
        let deadline = timeout.and_then(|t| start.checked_add(t));
        if !self.window.is_zero() {
            let spin_until = start + self.window.min(timeout.unwrap_or(Duration::MAX));
            if self.spin(spin_until)? {
                return Ok(true);
            }
        }
        loop {
            let remaining = match deadline {
                None => None,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(r) if !r.is_zero() => Some(r),
                    _ => return Ok(false),
                },
            };
            let parked_at = Instant::now();
            let ready = self.park(remaining)?;
            let parked = parked_at.elapsed();
            self.adapt_after_park(parked);
            if ready {
                return Ok(true);
            }
            if self.is_ready()? {
                if parked < self.policy.yield_after_wake {
                    // Woken within microseconds of parking: the producer is
                    // streaming, most likely on our own core, and the kernel
                    // ran us at once, preempting it after one record.
                    // Yielding lets it finish its burst first, so that one
                    // wake-up serves many records (same core, 2-vCPU VM: 8x
                    // fewer wake-ups for 512 B records). After a longer
                    // sleep (sparse events) we do not yield: that would only
                    // add a context switch to the event's latency.
                    std::thread::yield_now();
                }
                return Ok(true);
            }
        }
    }

    /// Spins on `head` until `until`; true when a record arrived.
    fn spin(&mut self, until: Instant) -> Result<bool, RingError> {
        loop {
            for _ in 0..64 {
                if self.is_ready()? {
                    return Ok(true);
                }
                core::hint::spin_loop();
            }
            if Instant::now() >= until {
                return Ok(false);
            }
        }
    }

    /// Resizes the spin window after a park that lasted `parked`.
    fn adapt_after_park(&mut self, parked: Duration) {
        self.window = next_window(&self.policy, self.window, parked);
    }

    /// The eventcount's consumer half: read the epoch, publish a park
    /// ticket, re-check, sleep on the epoch. Returns true when the re-check found a record.
    fn park(&mut self, timeout: Option<Duration>) -> Result<bool, RingError> {
        let header = self.mem.header();
        // SYNC POINT: Acquire pairs with the producer's Release `fetch_add`
        // of `epoch` (producer.rs, `store_head_and_wake`). Read *before* the ticket is
        // published: the producer bumps the epoch only after seeing the
        // ticket, so any bump that answers this park changes the epoch from
        // the value read here, and the futex wait below returns at once or
        // is woken.
        let epoch = header.epoch.0.load(Ordering::Acquire);
        // A fresh ticket per park (u64: never repeats), so the producer can
        // tell a new park from one it has already woken.
        self.ticket += 1;
        // SYNC POINT: the store-fence-load half of the Dekker pair with the
        // producer's `store head; fence(SeqCst); load sleeping` (producer.rs,
        // `store_head_and_wake`): after this store and fence, either the producer sees
        // the ticket and wakes us, or our load of `head` below sees its
        // record.
        header.sleeping.0.store(self.ticket, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        // SYNC POINT: Acquire pairs with the producer's Release store of
        // `head`: the record bytes are visible. Ordered after the ticket
        // store by the fence above.
        let head = header.head.0.load(Ordering::Acquire);
        if head != self.read {
            // SYNC POINT (none): withdrawing the ticket needs no order; a
            // producer that still sees it wakes a consumer that is awake,
            // which costs one spare system call and nothing else.
            header.sleeping.0.store(0, Ordering::Relaxed);
            self.validate_head(head)?;
            return Ok(true);
        }
        self.mem.wait(epoch, timeout);
        // SYNC POINT (none): woken, timed out or interrupted; the producer
        // may already have cleared it. The next park sets it again, fenced.
        header.sleeping.0.store(0, Ordering::Relaxed);
        Ok(false)
    }

    /// Loads and validates the producer's head.
    fn refresh_head(&mut self) -> Result<(), RingError> {
        // SYNC POINT: Acquire pairs with the producer's Release store of
        // `head` in `store_head_and_wake`: the bytes of every record before
        // it are visible.
        let head = self.mem.header().head.0.load(Ordering::Acquire);
        self.validate_head(head)
    }

    fn validate_head(&mut self, head: u64) -> Result<(), RingError> {
        let avail = head.wrapping_sub(self.read);
        let used = head.wrapping_sub(self.tail);
        if used > self.capacity || avail > used || head % 8 != 0 {
            return Err(self.poison(RingError::BadIndex));
        }
        self.head_cache = head;
        Ok(())
    }

    fn poison(&mut self, e: RingError) -> RingError {
        self.poisoned = Some(e.clone());
        e
    }

    /// Reads the next record without releasing it.
    #[inline]
    fn read_one(&mut self, buf: &mut Vec<u8>) -> Result<Option<Popped>, RingError> {
        if let Some(e) = &self.poisoned {
            return Err(e.clone());
        }
        if self.read == self.head_cache {
            // Caught up with the last snapshot of `head`: hand the space back
            // before taking a new one, so that a long drain overlaps with the
            // producer instead of holding the whole ring until it returns.
            self.release();
            self.refresh_head()?;
            if self.read == self.head_cache {
                return Ok(None);
            }
        }
        // Both indices are multiples of 8 and differ, so at least one record
        // header's worth of bytes is published.
        let avail = self.head_cache - self.read;
        let mask = self.capacity - 1;
        let at = (self.read & mask) as usize;
        let mut raw = [0u8; RECORD_HEADER_BYTES];
        self.mem.read(at, &mut raw);
        let Some((len, kind)) = decode_record_header(raw) else {
            return Err(self.poison(RingError::BadRecord));
        };
        let framed = match framed_len(len as usize) {
            Some(f) if f as u64 <= avail => f as u64,
            _ => return Err(self.poison(RingError::BadRecord)),
        };
        let len = len as usize;
        let popped = match kind {
            KIND_EVENT => {
                // No `clear` first: the copy below overwrites every byte, so
                // only growth needs initialising.
                buf.resize(len, 0);
                self.read_payload(at, buf);
                Popped::Event
            }
            KIND_LAG if len == 8 => {
                let mut n = [0u8; 8];
                self.read_payload(at, &mut n);
                Popped::Lagged(u64::from_le_bytes(n))
            }
            _ => return Err(self.poison(RingError::BadRecord)),
        };
        self.read += framed;
        Ok(Some(popped))
    }

    /// Copies a payload that starts after the record header at `at`,
    /// continuing at offset 0 if it reaches the end of the data area.
    #[inline]
    fn read_payload(&self, at: usize, dst: &mut [u8]) {
        let body = (at + RECORD_HEADER_BYTES) & (self.capacity as usize - 1);
        let first = dst.len().min(self.capacity as usize - body);
        let (a, b) = dst.split_at_mut(first);
        self.mem.read(body, a);
        if !b.is_empty() {
            self.mem.read(0, b);
        }
    }

    /// Hands the bytes read so far back to the producer, and tells it so
    /// if it is waiting for room (the reverse eventcount).
    fn release(&mut self) {
        if self.read != self.tail {
            self.tail = self.read;
            let header = self.mem.header();
            // SYNC POINT: Release pairs with the producer's Acquire load of
            // `tail` (producer.rs, `write_kind` and `arm_space_signal`): our
            // copies out of the released bytes happen before it overwrites
            // them.
            header.tail.0.store(self.tail, Ordering::Release);
            // SYNC POINT: the store-fence-load half of the Dekker pair with
            // the producer's `store waiting; fence(SeqCst); load tail`
            // (producer.rs, `arm_space_signal`): either we see its ticket
            // here, or it sees the tail stored above and does not wait.
            // One fence per release, and a release covers up to a quarter
            // of the ring (`drain`), not a record; the signal itself (a
            // read-modify-write and a system call) only when a producer
            // waits.
            fence(Ordering::SeqCst);
            let ticket = header.waiting.0.load(Ordering::Relaxed);
            if ticket != 0 && ticket != self.last_signalled {
                self.last_signalled = ticket;
                // SYNC POINT: Release pairs with the producer's Acquire load
                // of `space` in `arm_space_signal`, made before its ticket
                // was published, so this bump changes the value its futex
                // wait compares with.
                header.space.0.fetch_add(1, Ordering::Release);
                self.mem.wake_space();
                self.space_wakes += 1;
            }
        }
    }
}

/// The spin window after a spin of `window` that missed and a park that
/// lasted `parked` (see [`SpinPolicy`]).
pub(crate) fn next_window(policy: &SpinPolicy, window: Duration, parked: Duration) -> Duration {
    if policy.max.is_zero() {
        return Duration::ZERO;
    }
    if parked >= policy.idle_after {
        // Idle: spinning costs CPU and catches nothing.
        Duration::ZERO
    } else if window + parked < policy.active_gap {
        // The record came soon after we gave up (the park includes the
        // wake-up's own latency): a longer spin would likely have caught
        // it without a system call on either side.
        (window * 2).max(Duration::from_micros(1)).min(policy.max)
    } else {
        // Events come, but further apart than any spin we allow: the
        // spin only burns CPU (and, on a shared core, delays the
        // producer and makes the scheduler slower to run us).
        let half = window / 2;
        if half < Duration::from_micros(1) {
            Duration::ZERO
        } else {
            half
        }
    }
}
