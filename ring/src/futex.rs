//! The two futex operations of the eventcount, as raw `SYS_futex` calls on a
//! *shared* (non-private) futex: the waiter and the waker are different
//! processes mapping the same page, so the kernel must key the futex on the
//! page, not on one process's address space (`FUTEX_PRIVATE_FLAG` would make
//! every cross-process wake-up a silent no-op).

// Each `unsafe` block below is one syscall with a pointer to a live,
// 4-byte-aligned `AtomicU32` that outlives the call.
#![allow(unsafe_code)]

use core::sync::atomic::AtomicU32;
use std::time::Duration;

/// Blocks while `*word == expected`, for at most `timeout` (forever on
/// `None`). Returns on a wake-up, a timeout, a signal, or at once when the
/// word no longer holds `expected` (the kernel compares under its own lock,
/// which is what makes the eventcount free of lost wake-ups). Spurious
/// returns are fine: every caller re-checks its condition.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid aligned u32 for the duration of the call;
    // FUTEX_WAIT only reads it. `ts_ptr` is null or points to `ts`, alive here.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
            core::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes at most one waiter blocked on `word` (there is one consumer).
pub(crate) fn wake(word: &AtomicU32) {
    // SAFETY: as in `wait`; FUTEX_WAKE does not dereference the word's value.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            1i32,
            core::ptr::null::<libc::timespec>(),
            core::ptr::null::<u32>(),
            0u32,
        );
    }
}
