//! The lease calls (docs/protocol.md, Leases): acquire, renew, release,
//! list; blocking and submitted. A lease comes back as an owned
//! [`a2a_lease`], a list as an owned [`a2a_lease_list`]; release answers
//! nothing. A conflict is A2A_STATUS_RPC with a2a_last_error_a2a_code()
//! A2A_ERROR_CODE_LEASE_CONFLICT; a2a_last_error_data() holds the broker's
//! `data` (`holder`, `leaseId`, `paths`) as JSON.

use super::{a2a_reply_cb, agent_arg, begin, reply_async};
use crate::agent::a2a_agent;
use crate::args::{opt_str_arg, out_arg, str_arg, write_out};
use crate::dispatch::{Dispatcher, UserData};
use crate::reply::ReplyData;
use crate::status::{a2a_status, guard, record, FfiError};
use crate::view::a2a_str;
use a2a_client::proto::params::Lease;
use a2a_client::{ClientError, Pending};
use std::ffi::{c_char, c_void};
use std::ptr;
use std::sync::Arc;

/// A lease, as the broker answered it. Owned (free with a2a_lease_free)
/// when it comes out of a blocking call; borrowed, for the duration of the
/// call, when handed to an a2a_lease_cb.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_lease {
    /// The lease's id (renew and release take it).
    pub id: a2a_str,
    /// The paths it covers, as asked (an array of `paths_len`).
    pub paths: *const a2a_str,
    pub paths_len: usize,
    /// The holder's name.
    pub holder: a2a_str,
    /// False for a shared lease.
    pub exclusive: bool,
    /// When it ends unless renewed or released: RFC 3339 UTC.
    pub expires_at: a2a_str,
    /// The reason given, or absent.
    pub reason: a2a_str,
}

/// The leases of a2a_agent_list_leases. Owned (free with
/// a2a_lease_list_free) from the blocking call, borrowed in a callback.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_lease_list {
    /// The leases (an array of `leases_len`; NULL when empty).
    pub leases: *const a2a_lease,
    pub leases_len: usize,
}

/// The completion callback of acquire and renew: `userdata`, the status,
/// and on A2A_STATUS_OK the lease (else NULL), borrowed for the duration of
/// the call. Thread and reentrancy: as a2a_task_cb.
#[allow(non_camel_case_types)]
pub type a2a_lease_cb = Option<
    unsafe extern "C" fn(userdata: *mut c_void, status: a2a_status, lease: *const a2a_lease),
>;

/// The completion callback of a2a_agent_list_leases_async: as
/// a2a_lease_cb, with the list.
#[allow(non_camel_case_types)]
pub type a2a_lease_list_cb = Option<
    unsafe extern "C" fn(userdata: *mut c_void, status: a2a_status, list: *const a2a_lease_list),
>;

/// Owns leases and the views C reads: the list view first (C's pointer to
/// a list is this box's), then the lease views, then what they borrow.
#[repr(C)]
struct LeasesBox {
    list: a2a_lease_list,
    views: Vec<a2a_lease>,
    paths: Vec<Vec<a2a_str>>,
    leases: Vec<Lease>,
}

impl LeasesBox {
    fn new(leases: Vec<Lease>) -> Box<LeasesBox> {
        let mut b = Box::new(LeasesBox {
            list: a2a_lease_list {
                leases: ptr::null(),
                leases_len: 0,
            },
            views: Vec::with_capacity(leases.len()),
            paths: Vec::with_capacity(leases.len()),
            leases,
        });
        let r = &mut *b;
        for l in &r.leases {
            r.paths
                .push(l.paths.iter().map(|p| a2a_str::of(p)).collect());
        }
        for (l, paths) in r.leases.iter().zip(&r.paths) {
            r.views.push(a2a_lease {
                id: a2a_str::of(&l.id),
                paths: if paths.is_empty() {
                    ptr::null()
                } else {
                    paths.as_ptr()
                },
                paths_len: paths.len(),
                holder: a2a_str::of(&l.holder),
                exclusive: l.exclusive,
                expires_at: a2a_str::of(&l.expires_at),
                reason: a2a_str::opt(l.reason.as_deref()),
            });
        }
        r.list = a2a_lease_list {
            leases: if r.views.is_empty() {
                ptr::null()
            } else {
                r.views.as_ptr()
            },
            leases_len: r.views.len(),
        };
        b
    }
}

/// One lease, owned: its view first, so that C's pointer is the box's.
#[repr(C)]
struct LeaseBox {
    view: a2a_lease,
    inner: Box<LeasesBox>,
}

impl LeaseBox {
    fn new(lease: Lease) -> Box<LeaseBox> {
        let inner = LeasesBox::new(vec![lease]);
        Box::new(LeaseBox {
            view: inner.views[0],
            inner,
        })
    }
}

/// # Safety
/// `paths` is NULL or points to `len` pointers, each NULL or a
/// NUL-terminated string.
unsafe fn paths_arg(paths: *const *const c_char, len: usize) -> Result<Vec<String>, FfiError> {
    if paths.is_null() {
        return if len == 0 {
            Ok(Vec::new())
        } else {
            Err(FfiError::invalid("`paths` is NULL"))
        };
    }
    // SAFETY: the caller gives `len` readable pointers at `paths`.
    let items = unsafe { std::slice::from_raw_parts(paths, len) };
    items
        .iter()
        .enumerate()
        // SAFETY: each is NULL or a NUL-terminated string (header rule).
        .map(|(i, p)| unsafe { str_arg(*p, &format!("paths[{i}]")) }.map(str::to_owned))
        .collect()
}

/// An acquire's arguments, read and owned.
struct Request {
    paths: Vec<String>,
    ttl_seconds: u64,
    exclusive: bool,
    reason: Option<String>,
    wait_seconds: Option<u64>,
}

impl Request {
    fn paths(&self) -> Vec<&str> {
        self.paths.iter().map(String::as_str).collect()
    }
}

/// The two forms of acquire read their C arguments here.
///
/// # Safety
/// `agent` NULL or a live handle; `paths` as [`paths_arg`]; `reason` NULL
/// or a NUL-terminated string.
unsafe fn acquire_args<'a>(
    agent: *const a2a_agent,
    paths: *const *const c_char,
    paths_len: usize,
    ttl_seconds: u32,
    exclusive: bool,
    reason: *const c_char,
    wait_seconds: u32,
) -> Result<(&'a a2a_agent, Request), FfiError> {
    // SAFETY: forwarded from the caller.
    let agent = unsafe { agent_arg(agent) }?;
    let request = Request {
        // SAFETY: forwarded from the caller.
        paths: unsafe { paths_arg(paths, paths_len) }?,
        ttl_seconds: u64::from(ttl_seconds),
        exclusive,
        // SAFETY: forwarded from the caller.
        reason: unsafe { opt_str_arg(reason, "reason") }?.map(str::to_owned),
        wait_seconds: (wait_seconds > 0).then_some(u64::from(wait_seconds)),
    };
    Ok((agent, request))
}

fn lease_blocking(
    dispatcher: &Dispatcher,
    out: *mut *mut a2a_lease,
    call: impl FnOnce() -> Result<Lease, ClientError>,
) -> Result<(), FfiError> {
    out_arg(out, "out")?;
    dispatcher.may_block()?;
    let lease = call()?;
    // SAFETY: checked non-NULL above; the caller frees it with a2a_lease_free.
    unsafe { write_out(out, Box::into_raw(LeaseBox::new(lease)).cast()) };
    Ok(())
}

/// Submits a call answered by leases; `deliver` hands them to the caller's
/// callback (the first only, for acquire and renew).
fn leases_async<T: Send + 'static>(
    dispatcher: &Arc<Dispatcher>,
    userdata: *mut c_void,
    into: fn(T) -> Vec<Lease>,
    deliver: impl FnOnce(*mut c_void, a2a_status, Option<&LeasesBox>) + Send + 'static,
    submit: impl FnOnce() -> Result<Pending<T>, ClientError>,
) -> Result<(), FfiError> {
    let ud = UserData(userdata);
    let pending = begin(dispatcher, submit)?;
    let d = dispatcher.clone();
    pending.on_complete(move |result| {
        d.complete(Box::new(move || match result {
            Ok(v) => {
                let b = LeasesBox::new(into(v));
                deliver(ud.ptr(), a2a_status::OK, Some(&b));
            }
            Err(e) => {
                let status = record(&FfiError::Client(e));
                deliver(ud.ptr(), status, None);
            }
        }))
    });
    Ok(())
}

/// Submits acquire or renew: `cb` gets the one lease.
fn lease_async(
    dispatcher: &Arc<Dispatcher>,
    cb: a2a_lease_cb,
    userdata: *mut c_void,
    submit: impl FnOnce() -> Result<Pending<Lease>, ClientError>,
) -> Result<(), FfiError> {
    let cb = cb.ok_or_else(|| FfiError::invalid("`cb` is NULL"))?;
    leases_async(
        dispatcher,
        userdata,
        |l| vec![l],
        move |ud, status, b| {
            let view = b.map_or(ptr::null(), |b| b.views.as_ptr());
            // SAFETY: the caller's callback with its userdata; the view
            // lives in the box until after the call; NULL on failure.
            unsafe { cb(ud, status, view) };
        },
        submit,
    )
}

/// Leases `paths` (`paths_len` NUL-terminated strings: relative,
/// `/`-separated; a trailing `/` covers a directory, `*` and `**` match)
/// for `ttl_seconds`, exclusive or shared, with an optional `reason`
/// (NULL: none). `wait_seconds` > 0 parks the call up to that long while a
/// conflicting lease lives (0: answer at once). The lease goes to `*out`
/// (free with a2a_lease_free). A conflict is A2A_STATUS_RPC with
/// A2A_ERROR_CODE_LEASE_CONFLICT; a2a_last_error_data() names the holder.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_acquire_lease(
    agent: *const a2a_agent,
    paths: *const *const c_char,
    paths_len: usize,
    ttl_seconds: u32,
    exclusive: bool,
    reason: *const c_char,
    wait_seconds: u32,
    out: *mut *mut a2a_lease,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, r) = unsafe {
            acquire_args(
                agent,
                paths,
                paths_len,
                ttl_seconds,
                exclusive,
                reason,
                wait_seconds,
            )
        }?;
        lease_blocking(a.dispatcher(), out, || {
            a.agent.acquire_lease(
                &r.paths(),
                r.ttl_seconds,
                r.exclusive,
                r.reason.as_deref(),
                r.wait_seconds,
            )
        })
    })
}

/// a2a_agent_acquire_lease, submitted. If this returns an error, `cb`
/// never runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_acquire_lease_async(
    agent: *const a2a_agent,
    paths: *const *const c_char,
    paths_len: usize,
    ttl_seconds: u32,
    exclusive: bool,
    reason: *const c_char,
    wait_seconds: u32,
    cb: a2a_lease_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, r) = unsafe {
            acquire_args(
                agent,
                paths,
                paths_len,
                ttl_seconds,
                exclusive,
                reason,
                wait_seconds,
            )
        }?;
        lease_async(a.dispatcher(), cb, userdata, || {
            a.agent.acquire_lease_async(
                &r.paths(),
                r.ttl_seconds,
                r.exclusive,
                r.reason.as_deref(),
                r.wait_seconds,
            )
        })
    })
}

/// Renews the lease `lease_id` (this agent's) for `ttl_seconds` from now;
/// the renewed lease goes to `*out`.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_renew_lease(
    agent: *const a2a_agent,
    lease_id: *const c_char,
    ttl_seconds: u32,
    out: *mut *mut a2a_lease,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, id) = unsafe { (agent_arg(agent)?, str_arg(lease_id, "lease_id")?) };
        lease_blocking(a.dispatcher(), out, || {
            a.agent.renew_lease(id, u64::from(ttl_seconds))
        })
    })
}

/// a2a_agent_renew_lease, submitted. If this returns an error, `cb` never
/// runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_renew_lease_async(
    agent: *const a2a_agent,
    lease_id: *const c_char,
    ttl_seconds: u32,
    cb: a2a_lease_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, id) = unsafe { (agent_arg(agent)?, str_arg(lease_id, "lease_id")?) };
        lease_async(a.dispatcher(), cb, userdata, || {
            a.agent.renew_lease_async(id, u64::from(ttl_seconds))
        })
    })
}

/// Releases the lease `lease_id` (only its holder may; releasing it again
/// is OK). Agents that waited on it or were refused are told by an event.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_release_lease(
    agent: *const a2a_agent,
    lease_id: *const c_char,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, id) = unsafe { (agent_arg(agent)?, str_arg(lease_id, "lease_id")?) };
        a.dispatcher().may_block()?;
        a.agent.release_lease(id)?;
        Ok(())
    })
}

/// a2a_agent_release_lease, submitted: `cb` gets a reply of kind
/// A2A_REPLY_KIND_NONE. If this returns an error, `cb` never runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_release_lease_async(
    agent: *const a2a_agent,
    lease_id: *const c_char,
    cb: a2a_reply_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, id) = unsafe { (agent_arg(agent)?, str_arg(lease_id, "lease_id")?) };
        reply_async(a.dispatcher(), cb, userdata, || {
            a.agent
                .release_lease_async(id)
                .map(|p| (p, |()| ReplyData::None))
        })
    })
}

/// The leases live in this agent's context, those overlapping `path` only
/// if not NULL; the list goes to `*out` (free with a2a_lease_list_free).
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_list_leases(
    agent: *const a2a_agent,
    path: *const c_char,
    out: *mut *mut a2a_lease_list,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, path) = unsafe { (agent_arg(agent)?, opt_str_arg(path, "path")?) };
        out_arg(out, "out")?;
        a.dispatcher().may_block()?;
        let leases = a.agent.list_leases(path)?;
        // SAFETY: checked non-NULL above; the caller frees it with
        // a2a_lease_list_free.
        unsafe { write_out(out, Box::into_raw(LeasesBox::new(leases)).cast()) };
        Ok(())
    })
}

/// a2a_agent_list_leases, submitted. If this returns an error, `cb` never
/// runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_list_leases_async(
    agent: *const a2a_agent,
    path: *const c_char,
    cb: a2a_lease_list_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, path) = unsafe { (agent_arg(agent)?, opt_str_arg(path, "path")?) };
        let cb = cb.ok_or_else(|| FfiError::invalid("`cb` is NULL"))?;
        leases_async(
            a.dispatcher(),
            userdata,
            |v| v,
            move |ud, status, b| {
                let view = b.map_or(ptr::null(), |b| &b.list as *const a2a_lease_list);
                // SAFETY: the caller's callback with its userdata; the list
                // lives in the box until after the call; NULL on failure.
                unsafe { cb(ud, status, view) };
            },
            || a.agent.list_leases_async(path),
        )
    })
}

/// Frees a lease received through an out parameter. NULL is ignored. Never
/// pass a lease borrowed from a callback or a list.
///
/// Threads: any; the lease must not be in use by another thread.
#[no_mangle]
pub extern "C" fn a2a_lease_free(lease: *mut a2a_lease) {
    crate::status::guard_value((), || {
        if !lease.is_null() {
            // SAFETY: a lease given to free came from `lease_blocking`
            // (the header's rule); its view is the first field of the
            // `repr(C)` box, so the pointer is the box's.
            drop(unsafe { Box::from_raw(lease.cast::<LeaseBox>()) });
        }
    })
}

/// Frees a list received through an out parameter. NULL is ignored.
///
/// Threads: any; the list must not be in use by another thread.
#[no_mangle]
pub extern "C" fn a2a_lease_list_free(list: *mut a2a_lease_list) {
    crate::status::guard_value((), || {
        if !list.is_null() {
            // SAFETY: a list given to free came from a2a_agent_list_leases
            // (the header's rule); its view is the first field of the
            // `repr(C)` box.
            drop(unsafe { Box::from_raw(list.cast::<LeasesBox>()) });
        }
    })
}
