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

/// Wakes every waiter blocked on `word` (a [`crate::SpaceWatcher`]'s
/// control word: its thread, whichever it is).
pub(crate) fn wake_all(word: &AtomicU32) {
    // SAFETY: as in `wake`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            core::ptr::null::<libc::timespec>(),
            core::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// The most words one `futex_waitv` call waits on (the kernel's
/// `FUTEX_WAITV_MAX`).
pub(crate) const WAITV_MAX: usize = 128;

/// `struct futex_waitv` of `<linux/futex.h>`.
#[repr(C)]
struct FutexWaitv {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

/// `FUTEX2_SIZE_U32`: a 32-bit futex word, shared (no `FUTEX2_PRIVATE`:
/// the words live in segments other processes map).
const FUTEX2_SIZE_U32: u32 = 0x02;

/// This kernel has no `futex_waitv` (before Linux 5.16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitvUnsupported;

/// Blocks while every `word` holds its `expected` value, until one of them
/// is woken, `timeout` passes, or a signal arrives (`futex_waitv`, Linux
/// 5.16+). Returns at once when a word already differs. Spurious returns
/// are fine: the caller re-checks every word.
///
/// The caller keeps every word alive (mapped) for the call's duration and
/// passes at most [`WAITV_MAX`] of them.
pub(crate) fn wait_any(
    words: &[(&AtomicU32, u32)],
    timeout: Option<Duration>,
) -> Result<(), WaitvUnsupported> {
    debug_assert!(words.len() <= WAITV_MAX);
    let waiters: Vec<FutexWaitv> = words
        .iter()
        .take(WAITV_MAX)
        .map(|(word, expected)| FutexWaitv {
            val: u64::from(*expected),
            uaddr: word.as_ptr() as u64,
            flags: FUTEX2_SIZE_U32,
            reserved: 0,
        })
        .collect();
    // futex_waitv takes an absolute CLOCK_MONOTONIC deadline.
    let deadline = timeout.map(|d| {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid out-parameter.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let nanos = now.tv_nsec as u64 + u64::from(d.subsec_nanos());
        libc::timespec {
            tv_sec: now
                .tv_sec
                .saturating_add(d.as_secs().min(i32::MAX as u64) as libc::time_t)
                .saturating_add((nanos / 1_000_000_000) as libc::time_t),
            tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
        }
    });
    let ts_ptr = deadline
        .as_ref()
        .map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `waiters` holds `waiters.len()` valid entries whose addresses
    // the caller keeps mapped; `ts_ptr` is null or points to `deadline`,
    // alive here. The kernel only reads both.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex_waitv,
            waiters.as_ptr(),
            waiters.len() as libc::c_uint,
            0u32,
            ts_ptr,
            libc::CLOCK_MONOTONIC,
        )
    };
    if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
        return Err(WaitvUnsupported);
    }
    Ok(())
}
