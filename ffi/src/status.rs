//! Status codes, the thread-local last error, and the panic boundary.
//!
//! Every exported function returns an [`a2a_status`] (or, for the few
//! accessors that cannot fail, a plain value) and runs its body through
//! [`guard`] / [`guard_value`], so a Rust panic never unwinds into C. The
//! statuses after `OK` map one to one onto the client's
//! [`ErrorKind`](a2a_client::ErrorKind); the last few are this layer's own
//! (a bad argument, nothing to take, a panic).
//!
//! The last error is per thread (as `errno` and libgit2's `git_error_last`):
//! a failure stores its message and codes where the failing call ran, and a
//! later success does not clear them, so they are meaningful only right
//! after a call returned something other than `A2A_STATUS_OK`.

use a2a_client::{A2aErrorCode, ClientError, ErrorKind};
use std::any::Any;
use std::cell::RefCell;
use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a call returns: `A2A_STATUS_OK` (0), or why it failed.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum a2a_status {
    /// Success; the outputs were written.
    Ok = 0,
    /// The broker answered with an error: see a2a_last_error_rpc_code()
    /// (JSON-RPC code; 1400 for A2A errors) and a2a_last_error_a2a_code().
    Rpc = 1,
    /// Connecting to the socket, or the socket itself, failed.
    Io = 2,
    /// The connection is gone (closed by this side or the broker).
    Closed = 3,
    /// No answer within the call timeout.
    Timeout = 4,
    /// The request exceeds the broker's frame limit; it was not sent.
    FrameTooLarge = 5,
    /// The broker's answer, or a value, could not be used.
    Protocol = 6,
    /// The agent was deregistered; its token is dead.
    Deregistered = 7,
    /// A blocking call was made on the connection's reader thread (inside
    /// a callback of an A2A_DISPATCH_THREAD client); use the _async form.
    WouldDeadlock = 8,
    /// A NULL where a value is required, a string that is not UTF-8, JSON
    /// that does not parse or has the wrong shape, or a call this client's
    /// dispatch mode does not offer.
    InvalidArgument = 9,
    /// Nothing to take right now (a2a_agent_next_event, a2a_agent_wait_event).
    Empty = 10,
    /// A bug: the library panicked; the message says where.
    Panic = 11,
}

/// The A2A domain error of a failure with status A2A_STATUS_RPC (the
/// broker's `data.errorCode`); A2A_ERROR_CODE_NONE for anything else.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum a2a_error_code {
    None = 0,
    UnknownToken,
    UnknownAgent,
    UnknownTask,
    CrossContextDenied,
    InvalidTransition,
    TaskTerminal,
    SendCap,
    NoPeers,
    PayloadTooLarge,
    /// An A2A error code this library does not know (a newer broker's).
    Other,
}

impl a2a_status {
    /// The status of a client error kind: one to one, exhaustive, so a new
    /// kind does not compile until it has a status.
    pub const fn from_kind(kind: ErrorKind) -> a2a_status {
        match kind {
            ErrorKind::Rpc => a2a_status::Rpc,
            ErrorKind::Io => a2a_status::Io,
            ErrorKind::Closed => a2a_status::Closed,
            ErrorKind::Timeout => a2a_status::Timeout,
            ErrorKind::FrameTooLarge => a2a_status::FrameTooLarge,
            ErrorKind::Protocol => a2a_status::Protocol,
            ErrorKind::Deregistered => a2a_status::Deregistered,
            ErrorKind::WouldDeadlock => a2a_status::WouldDeadlock,
        }
    }

    /// A stable lower-case name (the client's `ErrorKind::as_str` for the
    /// kinds it shares).
    pub fn name(self) -> &'static str {
        match self {
            a2a_status::Ok => "ok",
            a2a_status::Rpc => "rpc",
            a2a_status::Io => "io",
            a2a_status::Closed => "closed",
            a2a_status::Timeout => "timeout",
            a2a_status::FrameTooLarge => "frame_too_large",
            a2a_status::Protocol => "protocol",
            a2a_status::Deregistered => "deregistered",
            a2a_status::WouldDeadlock => "would_deadlock",
            a2a_status::InvalidArgument => "invalid_argument",
            a2a_status::Empty => "empty",
            a2a_status::Panic => "panic",
        }
    }
}

impl a2a_error_code {
    fn from_code(code: A2aErrorCode) -> a2a_error_code {
        match code {
            A2aErrorCode::UnknownToken => a2a_error_code::UnknownToken,
            A2aErrorCode::UnknownAgent => a2a_error_code::UnknownAgent,
            A2aErrorCode::UnknownTask => a2a_error_code::UnknownTask,
            A2aErrorCode::CrossContextDenied => a2a_error_code::CrossContextDenied,
            A2aErrorCode::InvalidTransition => a2a_error_code::InvalidTransition,
            A2aErrorCode::TaskTerminal => a2a_error_code::TaskTerminal,
            A2aErrorCode::SendCap => a2a_error_code::SendCap,
            A2aErrorCode::NoPeers => a2a_error_code::NoPeers,
            A2aErrorCode::PayloadTooLarge => a2a_error_code::PayloadTooLarge,
        }
    }
}

/// A failure of this layer: the client's, or a bad argument, or nothing to
/// take.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FfiError {
    /// The client (or the broker through it) failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// An argument is NULL, not UTF-8, or not the JSON it should be.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Nothing is queued.
    #[error("nothing to take")]
    Empty,
}

impl FfiError {
    pub(crate) fn invalid(msg: impl Into<String>) -> FfiError {
        FfiError::InvalidArgument(msg.into())
    }
}

/// The details of the last failure on this thread.
struct LastError {
    status: a2a_status,
    message: String,
    rpc_code: i64,
    a2a_code: a2a_error_code,
}

thread_local! {
    static LAST: RefCell<LastError> = const { RefCell::new(LastError {
        status: a2a_status::Ok,
        message: String::new(),
        rpc_code: 0,
        a2a_code: a2a_error_code::None,
    }) };
}

fn store(status: a2a_status, message: String, rpc_code: i64, a2a_code: a2a_error_code) {
    LAST.with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            *l = LastError {
                status,
                message,
                rpc_code,
                a2a_code,
            };
        }
    });
}

/// Records `e` as this thread's last error and returns its status.
pub(crate) fn record(e: &FfiError) -> a2a_status {
    let (status, rpc, a2a) = match e {
        FfiError::Client(c) => {
            let rpc = c.rpc().map_or(0, |r| r.code);
            let a2a = match (c.a2a_code(), c.rpc().and_then(|r| r.a2a_code())) {
                (Some(code), _) => a2a_error_code::from_code(code),
                (None, Some(_)) => a2a_error_code::Other,
                (None, None) => a2a_error_code::None,
            };
            (a2a_status::from_kind(c.kind()), rpc, a2a)
        }
        FfiError::InvalidArgument(_) => (a2a_status::InvalidArgument, 0, a2a_error_code::None),
        FfiError::Empty => (a2a_status::Empty, 0, a2a_error_code::None),
    };
    store(status, e.to_string(), rpc, a2a);
    status
}

fn record_panic(payload: Box<dyn Any + Send>) -> a2a_status {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    store(
        a2a_status::Panic,
        format!("a2a-ffi panicked: {what}"),
        0,
        a2a_error_code::None,
    );
    // The payload may itself panic when dropped; contain that too.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
    a2a_status::Panic
}

/// The panic boundary of a function returning a status: runs `f`, records
/// its error (or panic) as the last error.
pub(crate) fn guard(f: impl FnOnce() -> Result<(), FfiError>) -> a2a_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => a2a_status::Ok,
        Ok(Err(e)) => record(&e),
        Err(p) => record_panic(p),
    }
}

/// The panic boundary of an accessor: `default` if `f` panics.
pub(crate) fn guard_value<T>(default: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(p) => {
            record_panic(p);
            default
        }
    }
}

/// Runs `f` (a caller's callback, or the code around one) so that a panic
/// of ours there is recorded instead of unwinding through a reader thread.
pub(crate) fn contain(f: impl FnOnce()) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        record_panic(p);
    }
}

/// Copies this thread's last error message into `buf` (at most `len - 1`
/// bytes, cut at a UTF-8 boundary, then a NUL) and writes the number of
/// bytes copied (without the NUL) to `*out_n`. The message is empty if no
/// call failed on this thread yet.
///
/// Threads: any; reads the calling thread's own last error.
#[no_mangle]
pub extern "C" fn a2a_last_error_message(
    buf: *mut c_char,
    len: usize,
    out_n: *mut usize,
) -> a2a_status {
    // Not through `guard`: a failure here must not overwrite the message
    // being read.
    if buf.is_null() || out_n.is_null() || len == 0 {
        return a2a_status::InvalidArgument;
    }
    let copied = catch_unwind(|| {
        LAST.with(|l| {
            let l = l.borrow();
            let mut n = l.message.len().min(len - 1);
            while !l.message.is_char_boundary(n) {
                n -= 1;
            }
            // SAFETY: the caller gives `buf` with room for `len` bytes
            // (checked non-NULL above), `n + 1 <= len`, and the message is a
            // separate Rust allocation, so the ranges do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(l.message.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
            n
        })
    });
    match copied {
        Ok(n) => {
            // SAFETY: `out_n` was checked non-NULL; the caller owns it.
            unsafe { *out_n = n };
            a2a_status::Ok
        }
        Err(_) => a2a_status::Panic,
    }
}

/// The status of this thread's last failure (A2A_STATUS_OK if none yet).
///
/// Threads: any; reads the calling thread's own last error.
#[no_mangle]
pub extern "C" fn a2a_last_error_status() -> a2a_status {
    LAST.with(|l| l.try_borrow().map_or(a2a_status::Panic, |l| l.status))
}

/// The JSON-RPC error code of this thread's last failure, if the broker
/// answered with an error (1400 for A2A domain errors, -32600.. for
/// JSON-RPC ones); 0 otherwise.
///
/// Threads: any; reads the calling thread's own last error.
#[no_mangle]
pub extern "C" fn a2a_last_error_rpc_code() -> i64 {
    LAST.with(|l| l.try_borrow().map_or(0, |l| l.rpc_code))
}

/// The A2A domain error of this thread's last failure (the broker's
/// `data.errorCode`), or A2A_ERROR_CODE_NONE.
///
/// Threads: any; reads the calling thread's own last error.
#[no_mangle]
pub extern "C" fn a2a_last_error_a2a_code() -> a2a_error_code {
    LAST.with(|l| l.try_borrow().map_or(a2a_error_code::None, |l| l.a2a_code))
}

/// A static, NUL-terminated, lower-case name of `status` (e.g. "closed").
///
/// Threads: any.
#[no_mangle]
pub extern "C" fn a2a_status_name(status: a2a_status) -> *const c_char {
    // Built from the same names, NUL-terminated at compile time.
    macro_rules! z {
        ($($s:ident => $n:literal),* $(,)?) => {
            match status { $(a2a_status::$s => concat!($n, "\0"),)* }
        };
    }
    let s: &'static str = z!(
        Ok => "ok", Rpc => "rpc", Io => "io", Closed => "closed", Timeout => "timeout",
        FrameTooLarge => "frame_too_large", Protocol => "protocol",
        Deregistered => "deregistered", WouldDeadlock => "would_deadlock",
        InvalidArgument => "invalid_argument", Empty => "empty", Panic => "panic",
    );
    s.as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::ffi::CStr;

    #[test]
    fn every_error_kind_has_its_own_status_of_the_same_name() {
        let mut seen = HashSet::new();
        for kind in ErrorKind::ALL {
            let s = a2a_status::from_kind(kind);
            assert!(seen.insert(s), "{kind:?} shares a status");
            assert_ne!(s, a2a_status::Ok);
            assert_eq!(s.name(), kind.as_str());
            // SAFETY: a2a_status_name returns a static NUL-terminated string.
            let c = unsafe { CStr::from_ptr(a2a_status_name(s)) };
            assert_eq!(c.to_str().unwrap(), kind.as_str());
        }
    }

    #[test]
    fn last_error_is_copied_out_cut_at_a_char_boundary() {
        store(a2a_status::Io, "ééé".into(), 0, a2a_error_code::None);
        let mut buf = [0x55 as c_char; 4];
        let mut n = 99usize;
        assert_eq!(
            a2a_last_error_message(buf.as_mut_ptr(), buf.len(), &mut n),
            a2a_status::Ok
        );
        // 3 bytes of room: one 2-byte char fits, the next does not.
        assert_eq!(n, 2);
        assert_eq!(buf[2], 0);
        assert_eq!(a2a_last_error_status(), a2a_status::Io);
        assert_eq!(
            a2a_last_error_message(std::ptr::null_mut(), 4, &mut n),
            a2a_status::InvalidArgument
        );
    }

    #[test]
    fn a_panic_becomes_a_status_with_its_message() {
        let st = guard(|| panic!("boom"));
        assert_eq!(st, a2a_status::Panic);
        let mut buf = [0 as c_char; 64];
        let mut n = 0;
        a2a_last_error_message(buf.as_mut_ptr(), buf.len(), &mut n);
        // SAFETY: the buffer was NUL-terminated by a2a_last_error_message.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert!(msg.contains("boom"), "{msg}");
        assert_eq!(guard_value(7, || panic!("again")), 7);
    }
}
