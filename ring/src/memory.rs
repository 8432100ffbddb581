//! Where a ring lives: the [`RingMemory`] trait the producer and consumer are
//! generic over, and [`LocalMemory`], the in-process implementation used by
//! tests, by loom (under `--cfg loom` its bytes and atomics are loom's, and
//! its futex is a mutex and condition variable), and by anything that wants a
//! ring between two threads. The shared-memory implementation is
//! [`crate::Segment`].

// The data area is raw memory shared by two parties; copying in and out of it
// is pointer work (see the SAFETY notes).
#![allow(unsafe_code)]

use crate::layout::Header;
use std::sync::Arc;
use std::time::Duration;

/// The memory a ring runs on: a header, a data area of `capacity()` bytes, and
/// a wait/wake pair on the header's epoch word.
///
/// Offsets passed to `write`/`read` are multiples of 8 and `offset + len <=
/// capacity()`: the ring logic guarantees it (it masks positions and splits
/// copies at the end of the area); implementations check it anyway and copy
/// nothing (or a clamped prefix) rather than go out of bounds.
pub trait RingMemory {
    /// The shared header.
    fn header(&self) -> &Header;
    /// Bytes in the data area: a power of two, known locally (never re-read
    /// from shared memory, which the other side may scribble on).
    fn capacity(&self) -> usize;
    /// Copies `src` into the data area at `offset`.
    fn write(&self, offset: usize, src: &[u8]);
    /// Copies `dst.len()` bytes of the data area at `offset` into `dst`.
    fn read(&self, offset: usize, dst: &mut [u8]);
    /// Blocks while the epoch word equals `expected` (at most `timeout`).
    fn wait(&self, expected: u32, timeout: Option<Duration>);
    /// Wakes the consumer blocked in `wait`, if any.
    fn wake(&self);
    /// Blocks while the `space` word equals `expected` (at most
    /// `timeout`): the producer waiting for the consumer to free room.
    fn wait_space(&self, expected: u32, timeout: Option<Duration>);
    /// Wakes the producer blocked in `wait_space`, if any.
    fn wake_space(&self);
}

impl<M: RingMemory + ?Sized> RingMemory for Arc<M> {
    fn header(&self) -> &Header {
        (**self).header()
    }
    fn capacity(&self) -> usize {
        (**self).capacity()
    }
    fn write(&self, offset: usize, src: &[u8]) {
        (**self).write(offset, src)
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        (**self).read(offset, dst)
    }
    fn wait(&self, expected: u32, timeout: Option<Duration>) {
        (**self).wait(expected, timeout)
    }
    fn wake(&self) {
        (**self).wake()
    }
    fn wait_space(&self, expected: u32, timeout: Option<Duration>) {
        (**self).wait_space(expected, timeout)
    }
    fn wake_space(&self) {
        (**self).wake_space()
    }
}

/// Clamps a copy of `len` bytes at `offset` to a data area of `capacity`
/// bytes: the number of bytes that may be copied.
fn clamp(offset: usize, len: usize, capacity: usize) -> usize {
    len.min(capacity.saturating_sub(offset))
}

/// A ring in this process's heap: a header and the data area in 8-byte cells.
pub struct LocalMemory {
    header: Header,
    #[cfg(not(loom))]
    data: Box<[core::cell::UnsafeCell<u64>]>,
    /// Under loom, one tracked cell per 8-byte word: loom then reports any
    /// access to a word that the protocol did not order (a torn record).
    #[cfg(loom)]
    data: Box<[loom::cell::UnsafeCell<[u8; 8]>]>,
    #[cfg(loom)]
    futex: (loom::sync::Mutex<()>, loom::sync::Condvar),
    capacity: usize,
}

// SAFETY: the cells are accessed by one producer and one consumer whose
// accesses to the same bytes are ordered by the head/tail protocol (the
// producer writes only bytes outside [tail, head), the consumer reads only
// bytes inside it), exactly as for the shared-memory segment. (Under loom
// that claim is what the model checks: its cells report any access the
// protocol leaves unordered.)
unsafe impl Sync for LocalMemory {}
unsafe impl Send for LocalMemory {}

impl LocalMemory {
    /// An in-process ring memory of `capacity` data bytes, which must be a
    /// power of two and a multiple of 8 (use [`crate::ring_capacity`]).
    pub fn new(capacity: usize) -> Arc<Self> {
        let capacity = capacity.max(8).next_power_of_two();
        let words = capacity / 8;
        #[cfg(not(loom))]
        let data = (0..words)
            .map(|_| core::cell::UnsafeCell::new(0u64))
            .collect();
        #[cfg(loom)]
        let data = (0..words)
            .map(|_| loom::cell::UnsafeCell::new([0u8; 8]))
            .collect();
        Arc::new(LocalMemory {
            header: Header::new(capacity),
            data,
            #[cfg(loom)]
            futex: (loom::sync::Mutex::new(()), loom::sync::Condvar::new()),
            capacity,
        })
    }

    /// The header, for tests that corrupt it on purpose.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn header_for_test(&self) -> &Header {
        &self.header
    }
}

impl RingMemory for LocalMemory {
    fn header(&self) -> &Header {
        &self.header
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    #[cfg(not(loom))]
    fn write(&self, offset: usize, src: &[u8]) {
        let n = clamp(offset, src.len(), self.capacity);
        let base = self.data.as_ptr() as *mut u8;
        // SAFETY: `offset + n <= capacity` bytes of `data`, which the ring
        // protocol gives to the producer alone at this point (see `Sync`).
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), base.add(offset), n) }
    }

    #[cfg(not(loom))]
    fn read(&self, offset: usize, dst: &mut [u8]) {
        let n = clamp(offset, dst.len(), self.capacity);
        let base = self.data.as_ptr() as *const u8;
        // SAFETY: in bounds as above; these bytes are published and not yet
        // released, so the producer does not write them now.
        unsafe { core::ptr::copy_nonoverlapping(base.add(offset), dst.as_mut_ptr(), n) }
    }

    #[cfg(loom)]
    fn write(&self, offset: usize, src: &[u8]) {
        let n = clamp(offset, src.len(), self.capacity);
        for (i, chunk) in src[..n].chunks(8).enumerate() {
            let cell = &self.data[offset / 8 + i];
            // A partial last word keeps its other bytes (they are padding).
            cell.with_mut(|w| unsafe { (&mut *w)[..chunk.len()].copy_from_slice(chunk) });
        }
    }

    #[cfg(loom)]
    fn read(&self, offset: usize, dst: &mut [u8]) {
        let n = clamp(offset, dst.len(), self.capacity);
        for (i, chunk) in dst[..n].chunks_mut(8).enumerate() {
            let cell = &self.data[offset / 8 + i];
            let len = chunk.len();
            cell.with(|w| unsafe { chunk.copy_from_slice(&(&*w)[..len]) });
        }
    }

    #[cfg(not(loom))]
    fn wait(&self, expected: u32, timeout: Option<Duration>) {
        crate::futex::wait(&self.header.epoch.0, expected, timeout)
    }

    #[cfg(not(loom))]
    fn wake(&self) {
        crate::futex::wake(&self.header.epoch.0)
    }

    #[cfg(not(loom))]
    fn wait_space(&self, expected: u32, timeout: Option<Duration>) {
        crate::futex::wait(&self.header.space.0, expected, timeout)
    }

    #[cfg(not(loom))]
    fn wake_space(&self) {
        crate::futex::wake(&self.header.space.0)
    }

    /// The futex as loom can model it: the value check and the sleep happen
    /// under one lock, and the waker takes the same lock, which is the
    /// guarantee the kernel gives (it compares the word under the hash-bucket
    /// lock that FUTEX_WAKE also takes). Timeouts are not modelled.
    #[cfg(loom)]
    fn wait(&self, expected: u32, _timeout: Option<Duration>) {
        let guard = self.futex.0.lock().unwrap();
        if self.header.epoch.0.load(crate::sync::Ordering::SeqCst) != expected {
            return;
        }
        drop(self.futex.1.wait(guard).unwrap());
    }

    #[cfg(loom)]
    fn wake(&self) {
        let _guard = self.futex.0.lock().unwrap();
        self.futex.1.notify_all();
    }

    /// The producer's futex, modelled as the consumer's is (one mutex and
    /// condition variable serve both words: `notify_all` wakes whichever
    /// side waits, and each re-checks its own word).
    #[cfg(loom)]
    fn wait_space(&self, expected: u32, _timeout: Option<Duration>) {
        let guard = self.futex.0.lock().unwrap();
        if self.header.space.0.load(crate::sync::Ordering::SeqCst) != expected {
            return;
        }
        drop(self.futex.1.wait(guard).unwrap());
    }

    #[cfg(loom)]
    fn wake_space(&self) {
        let _guard = self.futex.0.lock().unwrap();
        self.futex.1.notify_all();
    }
}
