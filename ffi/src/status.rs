//! Status codes, the thread-local last error, and the panic boundary.
//!
//! Every exported function returns an [`a2a_status`] (or, for the few
//! accessors that cannot fail, a plain value) and runs its body through
//! [`guard`] / [`guard_value`], so a Rust panic never unwinds into C. The
//! statuses after `OK` map one to one onto the client's
//! [`ErrorKind`](a2a_client::ErrorKind); the last few are this layer's own
//! (a bad argument, nothing to take, a panic, and no broker listening: the
//! client's `Io` kind, told apart so that C need not read the message).
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

/// What a call returns: `A2A_STATUS_OK` (0), or why it failed; one of the
/// A2A_STATUS_ constants. An integer, not an enum, since C also passes it
/// in (a2a_status_name), where any value must be defined.
#[allow(non_camel_case_types)]
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct a2a_status(pub i32);

impl a2a_status {
    /// Success; the outputs were written.
    pub const OK: a2a_status = a2a_status(0);
    /// The broker answered with an error: see a2a_last_error_rpc_code()
    /// (JSON-RPC code; 1400 for A2A errors) and a2a_last_error_a2a_code().
    pub const RPC: a2a_status = a2a_status(1);
    /// Connecting to the socket, or the socket itself, failed.
    pub const IO: a2a_status = a2a_status(2);
    /// The connection is gone (closed by this side or the broker).
    pub const CLOSED: a2a_status = a2a_status(3);
    /// No answer within the call timeout.
    pub const TIMEOUT: a2a_status = a2a_status(4);
    /// The request exceeds the broker's frame limit; it was not sent.
    pub const FRAME_TOO_LARGE: a2a_status = a2a_status(5);
    /// The broker's answer, or a value, could not be used.
    pub const PROTOCOL: a2a_status = a2a_status(6);
    /// The agent was deregistered; its token is dead.
    pub const DEREGISTERED: a2a_status = a2a_status(7);
    /// A blocking call was made inside a callback of an
    /// A2A_DISPATCH_THREAD client (of the same client); use the _async
    /// form.
    pub const WOULD_DEADLOCK: a2a_status = a2a_status(8);
    /// A NULL where a value is required, a string that is not UTF-8, JSON
    /// that does not parse or has the wrong shape, an integer that is not
    /// one of its type's constants, or a call this client's dispatch mode
    /// does not offer.
    pub const INVALID_ARGUMENT: a2a_status = a2a_status(9);
    /// Nothing to take right now (a2a_agent_next_event, a2a_agent_wait_event).
    pub const EMPTY: a2a_status = a2a_status(10);
    /// A bug: the library panicked; the message says where.
    pub const PANIC: a2a_status = a2a_status(11);
    /// a2a_client_new: no broker listens at the socket (no socket file, or
    /// one a broker that is gone left); the message names the path and how
    /// to start one. A refinement of A2A_STATUS_IO, told apart from a
    /// secret that cannot be read (A2A_STATUS_IO) or is refused
    /// (A2A_STATUS_RPC).
    pub const NO_BROKER: a2a_status = a2a_status(12);
}

impl std::fmt::Debug for a2a_status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
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
    /// Another holder's live lease overlaps the paths asked for (ext);
    /// a2a_last_error_data() names it. After Other: the values above keep
    /// their numbers.
    LeaseConflict,
    /// No live lease of this agent's context has the id (ext).
    UnknownLease,
}

impl a2a_status {
    /// The status of a client error kind: one to one, exhaustive, so a new
    /// kind does not compile until it has a status.
    pub const fn from_kind(kind: ErrorKind) -> a2a_status {
        match kind {
            ErrorKind::Rpc => a2a_status::RPC,
            ErrorKind::Io => a2a_status::IO,
            ErrorKind::Closed => a2a_status::CLOSED,
            ErrorKind::Timeout => a2a_status::TIMEOUT,
            ErrorKind::FrameTooLarge => a2a_status::FRAME_TOO_LARGE,
            ErrorKind::Protocol => a2a_status::PROTOCOL,
            ErrorKind::Deregistered => a2a_status::DEREGISTERED,
            ErrorKind::WouldDeadlock => a2a_status::WOULD_DEADLOCK,
        }
    }

    /// Every status with its stable lower-case name (the client's
    /// `ErrorKind::as_str` for the kinds it shares), NUL-terminated for
    /// a2a_status_name.
    const NAMES: [(a2a_status, &'static str); 13] = [
        (a2a_status::OK, "ok\0"),
        (a2a_status::RPC, "rpc\0"),
        (a2a_status::IO, "io\0"),
        (a2a_status::CLOSED, "closed\0"),
        (a2a_status::TIMEOUT, "timeout\0"),
        (a2a_status::FRAME_TOO_LARGE, "frame_too_large\0"),
        (a2a_status::PROTOCOL, "protocol\0"),
        (a2a_status::DEREGISTERED, "deregistered\0"),
        (a2a_status::WOULD_DEADLOCK, "would_deadlock\0"),
        (a2a_status::INVALID_ARGUMENT, "invalid_argument\0"),
        (a2a_status::EMPTY, "empty\0"),
        (a2a_status::PANIC, "panic\0"),
        (a2a_status::NO_BROKER, "no_broker\0"),
    ];

    /// The name with its NUL; "unknown" for a value that is not a status.
    fn name_nul(self) -> &'static str {
        a2a_status::NAMES
            .iter()
            .find(|(s, _)| *s == self)
            .map_or("unknown\0", |(_, n)| n)
    }

    /// A stable lower-case name (the client's `ErrorKind::as_str` for the
    /// kinds it shares); "unknown" for a value that is not a status.
    pub fn name(self) -> &'static str {
        self.name_nul().trim_end_matches('\0')
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
            A2aErrorCode::LeaseConflict => a2a_error_code::LeaseConflict,
            A2aErrorCode::UnknownLease => a2a_error_code::UnknownLease,
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
    /// The broker's `data` object as JSON, or empty.
    data: String,
}

thread_local! {
    static LAST: RefCell<LastError> = const { RefCell::new(LastError {
        status: a2a_status::OK,
        message: String::new(),
        rpc_code: 0,
        a2a_code: a2a_error_code::None,
        data: String::new(),
    }) };
}

fn store(status: a2a_status, message: String, rpc_code: i64, a2a_code: a2a_error_code) {
    store_with_data(status, message, rpc_code, a2a_code, String::new());
}

fn store_with_data(
    status: a2a_status,
    message: String,
    rpc_code: i64,
    a2a_code: a2a_error_code,
    data: String,
) {
    LAST.with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            *l = LastError {
                status,
                message,
                rpc_code,
                a2a_code,
                data,
            };
        }
    });
}

/// Records `e` as this thread's last error and returns its status.
pub(crate) fn record(e: &FfiError) -> a2a_status {
    let data = match e {
        FfiError::Client(c) => c
            .rpc()
            .and_then(|r| r.data.as_ref())
            .map(|d| d.to_string())
            .unwrap_or_default(),
        _ => String::new(),
    };
    let (status, rpc, a2a) = match e {
        FfiError::Client(c) => {
            let rpc = c.rpc().map_or(0, |r| r.code);
            let a2a = match (c.a2a_code(), c.rpc().and_then(|r| r.a2a_code())) {
                (Some(code), _) => a2a_error_code::from_code(code),
                (None, Some(_)) => a2a_error_code::Other,
                (None, None) => a2a_error_code::None,
            };
            let status = match c {
                ClientError::NoBroker(_) => a2a_status::NO_BROKER,
                _ => a2a_status::from_kind(c.kind()),
            };
            (status, rpc, a2a)
        }
        FfiError::InvalidArgument(_) => (a2a_status::INVALID_ARGUMENT, 0, a2a_error_code::None),
        FfiError::Empty => (a2a_status::EMPTY, 0, a2a_error_code::None),
    };
    store_with_data(status, e.to_string(), rpc, a2a, data);
    status
}

fn record_panic(payload: Box<dyn Any + Send>) -> a2a_status {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    store(
        a2a_status::PANIC,
        format!("a2a-ffi panicked: {what}"),
        0,
        a2a_error_code::None,
    );
    // The payload may itself panic when dropped; contain that too.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
    a2a_status::PANIC
}

/// The panic boundary of a function returning a status: runs `f`, records
/// its error (or panic) as the last error.
pub(crate) fn guard(f: impl FnOnce() -> Result<(), FfiError>) -> a2a_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => a2a_status::OK,
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
/// Asking for the size first: with `len == 0` (`buf` may then be NULL)
/// nothing is copied, `*out_n` receives the size of the buffer the whole
/// message needs, its NUL included (the message's length + 1), and the
/// status is A2A_STATUS_OK. A NULL `out_n`, or a NULL `buf` with `len > 0`,
/// gives A2A_STATUS_INVALID_ARGUMENT (without touching the last error).
///
/// Threads: any; reads the calling thread's own last error.
#[no_mangle]
pub extern "C" fn a2a_last_error_message(
    buf: *mut c_char,
    len: usize,
    out_n: *mut usize,
) -> a2a_status {
    copy_last(buf, len, out_n, |l| &l.message)
}

/// Copies the string `field` picks from this thread's last error out as
/// a2a_last_error_message documents.
fn copy_last(
    buf: *mut c_char,
    len: usize,
    out_n: *mut usize,
    field: fn(&LastError) -> &String,
) -> a2a_status {
    // Not through `guard`: a failure here must not overwrite the error
    // being read.
    if out_n.is_null() || (buf.is_null() && len > 0) {
        return a2a_status::INVALID_ARGUMENT;
    }
    let written = catch_unwind(|| {
        LAST.with(|l| {
            let l = l.borrow();
            let s = field(&l);
            if len == 0 {
                return s.len() + 1;
            }
            let mut n = s.len().min(len - 1);
            while !s.is_char_boundary(n) {
                n -= 1;
            }
            // SAFETY: the caller gives `buf` with room for `len` bytes
            // (checked non-NULL above), `n + 1 <= len`, and the string is a
            // separate Rust allocation, so the ranges do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
            n
        })
    });
    match written {
        Ok(n) => {
            // SAFETY: `out_n` was checked non-NULL; the caller owns it.
            unsafe { *out_n = n };
            a2a_status::OK
        }
        Err(_) => a2a_status::PANIC,
    }
}

/// Copies the broker's `data` object of this thread's last failure, as
/// JSON, into `buf`, as a2a_last_error_message copies the message (the
/// same size query with `len == 0`). Empty when the failure carried none
/// (not a broker error, or an error without data). A lease conflict's has
/// `holder`, `leaseId` and `paths`; a refused bound's, `limit`.
///
/// Threads: any; reads the calling thread's own last error.
#[no_mangle]
pub extern "C" fn a2a_last_error_data(
    buf: *mut c_char,
    len: usize,
    out_n: *mut usize,
) -> a2a_status {
    copy_last(buf, len, out_n, |l| &l.data)
}

/// The status of this thread's last failure (A2A_STATUS_OK if none yet).
///
/// Threads: any; reads the calling thread's own last error.
#[no_mangle]
pub extern "C" fn a2a_last_error_status() -> a2a_status {
    LAST.with(|l| l.try_borrow().map_or(a2a_status::PANIC, |l| l.status))
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

/// A static, NUL-terminated, lower-case name of `status` (e.g. "closed");
/// "unknown" for a value that is not one of the A2A_STATUS_ constants.
///
/// Threads: any.
#[no_mangle]
pub extern "C" fn a2a_status_name(status: a2a_status) -> *const c_char {
    status.name_nul().as_ptr().cast()
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
            assert_ne!(s, a2a_status::OK);
            assert_eq!(s.name(), kind.as_str());
            // SAFETY: a2a_status_name returns a static NUL-terminated string.
            let c = unsafe { CStr::from_ptr(a2a_status_name(s)) };
            assert_eq!(c.to_str().unwrap(), kind.as_str());
        }
    }

    #[test]
    fn last_error_is_copied_out_cut_at_a_char_boundary() {
        store(a2a_status::IO, "ééé".into(), 0, a2a_error_code::None);
        let mut buf = [0x55 as c_char; 4];
        let mut n = 99usize;
        assert_eq!(
            a2a_last_error_message(buf.as_mut_ptr(), buf.len(), &mut n),
            a2a_status::OK
        );
        // 3 bytes of room: one 2-byte char fits, the next does not.
        assert_eq!(n, 2);
        assert_eq!(buf[2], 0);
        assert_eq!(a2a_last_error_status(), a2a_status::IO);
        assert_eq!(
            a2a_last_error_message(std::ptr::null_mut(), 4, &mut n),
            a2a_status::INVALID_ARGUMENT
        );
        assert_eq!(
            a2a_last_error_message(buf.as_mut_ptr(), 4, std::ptr::null_mut()),
            a2a_status::INVALID_ARGUMENT
        );
    }

    #[test]
    fn the_size_of_the_last_error_can_be_asked_first() {
        store(a2a_status::IO, "ééé".into(), 0, a2a_error_code::None);
        let mut n = 99usize;
        assert_eq!(
            a2a_last_error_message(std::ptr::null_mut(), 0, &mut n),
            a2a_status::OK
        );
        assert_eq!(n, 7, "6 bytes of message and the NUL");
        // A buffer of that size takes the whole message.
        let mut buf = vec![0x55 as c_char; n];
        let mut m = 0usize;
        assert_eq!(
            a2a_last_error_message(buf.as_mut_ptr(), buf.len(), &mut m),
            a2a_status::OK
        );
        assert_eq!(m, 6);
        // SAFETY: NUL-terminated by a2a_last_error_message.
        let got = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert_eq!(got, "ééé");
        // The query does not disturb the error it reports.
        assert_eq!(a2a_last_error_status(), a2a_status::IO);
    }

    #[test]
    fn a_status_that_is_not_one_is_named_unknown() {
        for bad in [-1, 13, 99, i32::MIN] {
            // SAFETY: a2a_status_name returns a static NUL-terminated string.
            let c = unsafe { CStr::from_ptr(a2a_status_name(a2a_status(bad))) };
            assert_eq!(c.to_str().unwrap(), "unknown");
        }
        // SAFETY: as above.
        let c = unsafe { CStr::from_ptr(a2a_status_name(a2a_status::EMPTY)) };
        assert_eq!(c.to_str().unwrap(), "empty");
    }

    #[test]
    fn a_panic_becomes_a_status_with_its_message() {
        let st = guard(|| panic!("boom"));
        assert_eq!(st, a2a_status::PANIC);
        let mut buf = [0 as c_char; 64];
        let mut n = 0;
        a2a_last_error_message(buf.as_mut_ptr(), buf.len(), &mut n);
        // SAFETY: the buffer was NUL-terminated by a2a_last_error_message.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert!(msg.contains("boom"), "{msg}");
        assert_eq!(guard_value(7, || panic!("again")), 7);
    }
}
