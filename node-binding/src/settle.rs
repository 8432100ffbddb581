//! Promises settled from the client's completions, without a libuv
//! thread-pool thread and without a threadsafe function per call.
//!
//! Each Node environment (thread) gets one [`Queue`] and one raw
//! threadsafe function. A call creates a raw promise on the JS thread and
//! hands its [`Ticket`] to the call's completion (`Pending::on_complete`,
//! which runs on the connection's reader thread). The completion pushes
//! the answer, already turned into a JSON string off the JS thread, onto
//! the queue; the first push after a drain wakes the JS thread once
//! (`napi_call_threadsafe_function`), and that wake settles every answer
//! queued by then. So 1,000 answers arriving together cost one wake-up,
//! as a socket read of 1,000 NDJSON lines would.
//!
//! Keep-alive: the threadsafe function is referenced while at least one
//! promise is outstanding (a pending call keeps the process alive, as a
//! pending socket read would) and unreferenced when none is, so an idle
//! process can exit. The count lives on the JS thread only.
//!
//! Architecture invariant: a ticket is settled exactly once. `settle`
//! consumes it; a ticket dropped unsettled (a panic on the way) settles
//! itself with an error, so no promise is left pending by a bug here.

use crate::error::Failure;
use crate::js;
use napi::bindgen_prelude::{PromiseRaw, ToNapiValue, Unknown};
use napi::{sys, Env};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr;
use std::rc::Rc;
use std::sync::Arc;

/// What a settled promise resolves with, prepared off the JS thread.
pub(crate) enum Payload {
    /// A JSON text, parsed by V8's `JSON.parse` on the JS thread (measured
    /// cheaper than building the same object through napi, see
    /// BENCHMARKS.md).
    Json(String),
    /// A string, as is (a compact event batch for `index.js` to decode).
    Text(String),
    /// `undefined`.
    Undefined,
    /// A value only the JS thread can make (a native class instance),
    /// made there by this function. The module that owns the class writes
    /// it, so this layer knows no class (no `settle` <-> `agent`
    /// or `broker` cycle).
    Native(MakeJs),
}

/// How a call's answer becomes its promise's value, on either connection.
#[derive(Clone, Copy)]
pub(crate) struct Shape {
    /// From the client's typed answer (the client's connection).
    pub(crate) typed:
        fn(a2a_client::proto::call::Outcome) -> Result<Payload, a2a_client::ClientError>,
    /// From the JSON result (the loop's calls connection): the value of
    /// this member of it, or the whole result (`None`).
    pub(crate) member: Option<&'static str>,
    /// The promise resolves with `undefined` (the result is `{ok: true}`).
    pub(crate) undefined: bool,
}

/// Makes a JS value on the JS thread (see [`Payload::Native`]).
pub(crate) type MakeJs = Box<dyn FnOnce(sys::napi_env) -> Result<sys::napi_value, Failure> + Send>;

/// One answer on its way to the JS thread.
struct Settle {
    deferred: sys::napi_deferred,
    result: Result<Payload, Failure>,
}

/// The queue between completions (any thread) and the JS thread.
pub(crate) struct Queue {
    st: Mutex<QState>,
}

struct QState {
    items: Vec<Settle>,
    /// A wake-up of the JS thread is on its way: later pushes ride on it.
    scheduled: bool,
    /// The environment is gone (its threadsafe function finalized):
    /// nothing can be settled any more.
    closed: bool,
    tsfn: sys::napi_threadsafe_function,
}

// SAFETY: the raw handles inside are only dereferenced on the JS thread
// (the deferreds, in `drain`) or passed to `napi_call_threadsafe_function`,
// which is documented as callable from any thread; the mutex orders the
// `closed` flag against the finalizer, so the function is never called
// after it was freed.
#[allow(unsafe_code)]
unsafe impl Send for QState {}

impl Queue {
    fn push(&self, s: Settle) {
        let mut st = self.st.lock();
        if st.closed {
            // The environment is gone: the promise cannot settle and its
            // deferred is freed with the environment.
            return;
        }
        st.items.push(s);
        if !st.scheduled {
            st.scheduled = true;
            // SAFETY: `tsfn` is live while `closed` is false (see QState).
            #[allow(unsafe_code)]
            let status = unsafe {
                sys::napi_call_threadsafe_function(
                    st.tsfn,
                    ptr::null_mut(),
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            };
            if status != sys::Status::napi_ok {
                st.closed = true;
            }
        }
    }
}

/// The JS-thread half: the environment's queue and its keep-alive count.
struct Local {
    env: sys::napi_env,
    queue: Arc<Queue>,
    /// Promises created and not yet settled (JS thread only).
    outstanding: std::cell::Cell<usize>,
}

thread_local! {
    static LOCAL: RefCell<Option<Rc<Local>>> = const { RefCell::new(None) };
}

/// The settlement half of one promise, sent to wherever the answer is
/// produced.
pub(crate) struct Ticket {
    deferred: sys::napi_deferred,
    queue: Arc<Queue>,
}

// SAFETY: the deferred travels back to the JS thread through the queue and
// is only used there.
#[allow(unsafe_code)]
unsafe impl Send for Ticket {}

impl Ticket {
    /// Settles the promise (from any thread).
    pub(crate) fn settle(self, result: Result<Payload, Failure>) {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped, so the queue is moved out once.
        #[allow(unsafe_code)]
        let queue = unsafe { ptr::read(&me.queue) };
        queue.push(Settle {
            deferred: me.deferred,
            result,
        });
    }

    /// Settles with the JSON rendering of a value, or the client error.
    pub(crate) fn settle_json<T: serde::Serialize>(self, r: Result<T, a2a_client::ClientError>) {
        self.settle(
            r.map_err(Failure::from)
                .and_then(|v| serde_json::to_string(&v).map_err(Failure::internal))
                .map(Payload::Json),
        )
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Only reached when a ticket was not settled (a panic unwound past
        // it): reject rather than leave the promise pending forever.
        let queue = self.queue.clone();
        queue.push(Settle {
            deferred: self.deferred,
            result: Err(Failure::internal("call abandoned inside the addon")),
        });
    }
}

macro_rules! check {
    ($e:expr) => {{
        #[allow(unsafe_code)]
        let status = unsafe { $e };
        if status != sys::Status::napi_ok {
            return Err(napi::Error::new(
                napi::Status::GenericFailure,
                format!("{} failed ({status})", stringify!($e)),
            ));
        }
    }};
}

fn local(env: sys::napi_env) -> napi::Result<Rc<Local>> {
    if let Some(l) = LOCAL.with(|l| l.borrow().clone()) {
        if l.env == env {
            return Ok(l);
        }
    }
    let queue = Arc::new(Queue {
        st: Mutex::new(QState {
            items: Vec::new(),
            scheduled: false,
            closed: false,
            tsfn: ptr::null_mut(),
        }),
    });
    let mut name = ptr::null_mut();
    check!(sys::napi_create_string_utf8(
        env,
        c"a2a-settle".as_ptr(),
        10,
        &mut name
    ));
    let ctx = Arc::into_raw(queue.clone()) as *mut c_void;
    let mut tsfn = ptr::null_mut();
    check!(sys::napi_create_threadsafe_function(
        env,
        ptr::null_mut(),
        ptr::null_mut(),
        name,
        0,
        1,
        ctx,
        Some(finalize),
        ctx,
        Some(drain),
        &mut tsfn,
    ));
    // Idle until a promise is outstanding.
    check!(sys::napi_unref_threadsafe_function(env, tsfn));
    queue.st.lock().tsfn = tsfn;

    let l = Rc::new(Local {
        env,
        queue,
        outstanding: std::cell::Cell::new(0),
    });
    LOCAL.with(|cell| *cell.borrow_mut() = Some(l.clone()));
    Ok(l)
}

/// Runs when the environment tears the threadsafe function down: nothing
/// may call it any more.
#[allow(unsafe_code)]
unsafe extern "C" fn finalize(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the `Arc<Queue>` leaked in `local`, released here once.
    let queue = unsafe { Arc::from_raw(data as *const Queue) };
    let mut st = queue.st.lock();
    st.closed = true;
    st.items.clear();
}

/// The JS-thread side of a wake-up: settles everything queued.
#[allow(unsafe_code)]
unsafe extern "C" fn drain(
    env: sys::napi_env,
    _js_cb: sys::napi_value,
    context: *mut c_void,
    _data: *mut c_void,
) {
    if env.is_null() {
        return;
    }
    // SAFETY: `context` is the queue kept alive until `finalize`, which
    // cannot run while this call is in progress.
    let queue = unsafe { &*(context as *const Queue) };
    let items = {
        let mut st = queue.st.lock();
        st.scheduled = false;
        std::mem::take(&mut st.items)
    };
    let n = items.len();
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let Ok(l) = local(env) else { return };
        for s in items {
            settle_now(env, s.deferred, s.result);
        }
        let left = l.outstanding.get().saturating_sub(n);
        l.outstanding.set(left);
        if left == 0 {
            // SAFETY: on the JS thread, with the environment's function.
            unsafe { sys::napi_unref_threadsafe_function(env, queue.st.lock().tsfn) };
        }
    }));
}

/// Settles `deferred` with `result`, here and now (JS thread only; each
/// deferred once). Also how the loop's calls connection settles its
/// promises, in its poll callback.
pub(crate) fn settle_now(
    env: sys::napi_env,
    deferred: sys::napi_deferred,
    result: Result<Payload, Failure>,
) {
    settle_value(env, deferred, result.and_then(|p| to_js(env, p)));
}

#[allow(unsafe_code)]
fn to_js(env: sys::napi_env, p: Payload) -> Result<sys::napi_value, Failure> {
    match p {
        Payload::Json(s) => Ok(js::parse_json(env, &s)?),
        // SAFETY: on the JS thread.
        Payload::Text(s) => {
            unsafe { String::to_napi_value(env, s) }.map_err(|e| Failure::internal(e.reason))
        }
        Payload::Undefined => {
            let mut u = ptr::null_mut();
            // SAFETY: on the JS thread.
            unsafe { sys::napi_get_undefined(env, &mut u) };
            Ok(u)
        }
        Payload::Native(make) => make(env),
    }
}

/// `undefined` (JS thread only).
#[allow(unsafe_code)]
pub(crate) fn undefined(env: sys::napi_env) -> Result<sys::napi_value, Failure> {
    let mut u = ptr::null_mut();
    // SAFETY: on the JS thread.
    unsafe { sys::napi_get_undefined(env, &mut u) };
    Ok(u)
}

/// Settles `deferred` with a JS value already made (or rejects), here and
/// now (JS thread only; each deferred once).
#[allow(unsafe_code)]
pub(crate) fn settle_value(
    env: sys::napi_env,
    deferred: sys::napi_deferred,
    value: Result<sys::napi_value, Failure>,
) {
    // SAFETY: on the JS thread; each deferred is settled once.
    unsafe {
        match value {
            Ok(v) => sys::napi_resolve_deferred(env, deferred, v),
            Err(f) => {
                let e = f.error_value(env);
                sys::napi_reject_deferred(env, deferred, e)
            }
        };
    }
}

/// A new promise without a ticket: its deferred, for a settler on the JS
/// thread that keeps the process alive by its own means (the loop's calls
/// connection: its poll handle is referenced while calls are pending).
/// JS thread only.
pub(crate) fn raw_promise<'env>(
    env: &'env Env,
) -> napi::Result<(sys::napi_deferred, PromiseRaw<'env, Unknown<'env>>)> {
    let raw = env.raw();
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    check!(sys::napi_create_promise(raw, &mut deferred, &mut promise));
    Ok((deferred, PromiseRaw::new(raw, promise)))
}

/// A new promise and the ticket that settles it. JS thread only.
pub(crate) fn promise<'env>(
    env: &'env Env,
) -> napi::Result<(Ticket, PromiseRaw<'env, Unknown<'env>>)> {
    let raw = env.raw();
    let l = local(raw)?;
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    check!(sys::napi_create_promise(raw, &mut deferred, &mut promise));
    let n = l.outstanding.get();
    if n == 0 {
        let tsfn = l.queue.st.lock().tsfn;
        check!(sys::napi_ref_threadsafe_function(raw, tsfn));
    }
    l.outstanding.set(n + 1);
    Ok((
        Ticket {
            deferred,
            queue: l.queue.clone(),
        },
        PromiseRaw::new(raw, promise),
    ))
}
