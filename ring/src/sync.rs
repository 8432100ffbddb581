//! The atomics the ring logic is written against: `core`'s in a normal build,
//! loom's under `--cfg loom`, so that the same producer/consumer code is what
//! the model checker explores (iceoryx2's `concurrency-sync` pattern).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// A value alone on its own cache line, so that the producer-written and the
/// consumer-written words never share a line (false sharing would turn every
/// publish into a cross-core invalidation of the other side's hot word).
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Line<T>(pub(crate) T);
