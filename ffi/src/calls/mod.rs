//! The agent's typed calls, each in two forms: blocking (`a2a_agent_x`,
//! the result in an out parameter) and submitted (`a2a_agent_x_async`, the
//! result handed to a callback where the client's dispatch mode says).
//! This module holds the two completion callback types and the helpers
//! every call goes through; [`tasks`] has the calls answered by one task,
//! [`leases`] the lease calls, [`lists`] the others.
//!
//! Submitted calls wrap the client's non-blocking layer (`*_async` and
//! `Pending::on_complete`), never its blocking one: the submitting thread
//! returns as soon as the request is queued to the connection's writer.

pub mod leases;
pub mod lists;
pub mod tasks;

use crate::agent::a2a_agent;
use crate::args::{handle, out_arg, write_out};
use crate::dispatch::{Dispatcher, UserData};
use crate::reply::{a2a_reply, ReplyBox, ReplyData};
use crate::status::{a2a_status, record, FfiError};
use crate::view::{a2a_task, TaskBox};
use a2a_client::{ClientError, Pending, Task};
use std::ffi::c_void;
use std::sync::Arc;

/// The completion callback of a call answered by one task: `userdata` as
/// given, the call's status, and on A2A_STATUS_OK the task (else NULL; the
/// last error of the running thread then holds the details). The task is
/// borrowed for the duration of the call: copy what you keep.
///
/// Thread: the connection's reader thread (A2A_DISPATCH_THREAD; or the
/// submitting thread, before the submit returns, if the answer was already
/// there), or the thread calling a2a_client_poll (A2A_DISPATCH_POLL).
/// Runs exactly once per successful submission, also when the connection
/// closes (then with A2A_STATUS_CLOSED), and before a2a_client_free
/// returns.
///
/// Reentrancy: it may submit calls (_async), free handles (its agent's,
/// its client's) and owned values, and in poll mode call a2a_client_poll.
/// In thread mode a blocking call of the same client fails there with
/// A2A_STATUS_WOULD_DEADLOCK, whichever thread runs it; it must not block
/// for long, since the reader thread delivers every answer of the
/// connection.
#[allow(non_camel_case_types)]
pub type a2a_task_cb =
    Option<unsafe extern "C" fn(userdata: *mut c_void, status: a2a_status, task: *const a2a_task)>;

/// The completion callback of a call answered otherwise (see a2a_reply):
/// `userdata`, the status, and on A2A_STATUS_OK the reply (else NULL),
/// borrowed for the duration of the call. Thread and reentrancy: as
/// a2a_task_cb.
#[allow(non_camel_case_types)]
pub type a2a_reply_cb = Option<
    unsafe extern "C" fn(userdata: *mut c_void, status: a2a_status, reply: *const a2a_reply),
>;

/// Borrows the agent argument.
///
/// # Safety
/// `agent` is NULL or a live handle.
pub(crate) unsafe fn agent_arg<'a>(agent: *const a2a_agent) -> Result<&'a a2a_agent, FfiError> {
    // SAFETY: forwarded from the caller.
    unsafe { handle(agent, "agent") }
}

/// A blocking call answered by a task: the task goes to `*out`. Refused
/// inside a thread-mode callback of the same client (see
/// `Dispatcher::may_block`).
pub(crate) fn task_blocking(
    dispatcher: &Dispatcher,
    out: *mut *mut a2a_task,
    call: impl FnOnce() -> Result<Task, ClientError>,
) -> Result<(), FfiError> {
    out_arg(out, "out")?;
    dispatcher.may_block()?;
    let task = call()?;
    // SAFETY: checked non-NULL above; the caller frees it with a2a_task_free.
    unsafe { write_out(out, TaskBox::into_raw(TaskBox::new(task))) };
    Ok(())
}

/// A blocking call answered by a reply: the reply goes to `*out`. Refused
/// as [`task_blocking`] is.
pub(crate) fn reply_blocking(
    dispatcher: &Dispatcher,
    out: *mut *mut a2a_reply,
    call: impl FnOnce() -> Result<ReplyData, ClientError>,
) -> Result<(), FfiError> {
    out_arg(out, "out")?;
    dispatcher.may_block()?;
    let data = call()?;
    // SAFETY: checked non-NULL above; the caller frees it with a2a_reply_free.
    unsafe { write_out(out, ReplyBox::into_raw(ReplyBox::new(data))) };
    Ok(())
}

/// Runs `submit` as a call the dispatcher counts until its completion has
/// run; a submission that fails is uncounted at once (it owes no callback).
pub(crate) fn begin<P>(
    dispatcher: &Dispatcher,
    submit: impl FnOnce() -> Result<P, ClientError>,
) -> Result<P, FfiError> {
    dispatcher.begin_call();
    submit().map_err(|e| {
        dispatcher.abort_call();
        e.into()
    })
}

/// Submits a call answered by a task; its completion runs `cb` through the
/// dispatcher. A submission that fails leaves nothing owed (`cb` never
/// runs).
pub(crate) fn task_async(
    dispatcher: &Arc<Dispatcher>,
    cb: a2a_task_cb,
    userdata: *mut c_void,
    submit: impl FnOnce() -> Result<Pending<Task>, ClientError>,
) -> Result<(), FfiError> {
    let cb = cb.ok_or_else(|| FfiError::invalid("`cb` is NULL"))?;
    let ud = UserData(userdata);
    let pending = begin(dispatcher, submit)?;
    let d = dispatcher.clone();
    pending.on_complete(move |result| {
        d.complete(Box::new(move || match result {
            Ok(task) => {
                let b = TaskBox::new(task);
                // SAFETY: the caller's callback with its userdata; the task
                // view lives in `b` until after the call.
                unsafe { cb(ud.ptr(), a2a_status::OK, b.view()) };
            }
            Err(e) => {
                let status = record(&FfiError::Client(e));
                // SAFETY: the caller's callback with its userdata; NULL
                // task on failure, as documented.
                unsafe { cb(ud.ptr(), status, std::ptr::null()) };
            }
        }))
    });
    Ok(())
}

/// Submits a call answered by a reply: `submit` returns the pending answer
/// and how to turn it into the reply's data.
pub(crate) fn reply_async<T, F>(
    dispatcher: &Arc<Dispatcher>,
    cb: a2a_reply_cb,
    userdata: *mut c_void,
    submit: impl FnOnce() -> Result<(Pending<T>, F), ClientError>,
) -> Result<(), FfiError>
where
    T: Send + 'static,
    F: FnOnce(T) -> ReplyData + Send + 'static,
{
    let cb = cb.ok_or_else(|| FfiError::invalid("`cb` is NULL"))?;
    let ud = UserData(userdata);
    let (pending, convert) = begin(dispatcher, submit)?;
    let d = dispatcher.clone();
    pending.on_complete(move |result| {
        d.complete(Box::new(move || match result {
            Ok(v) => {
                let b = ReplyBox::new(convert(v));
                // SAFETY: the caller's callback with its userdata; the reply
                // view lives in `b` until after the call.
                unsafe { cb(ud.ptr(), a2a_status::OK, b.view()) };
            }
            Err(e) => {
                let status = record(&FfiError::Client(e));
                // SAFETY: the caller's callback; NULL reply on failure.
                unsafe { cb(ud.ptr(), status, std::ptr::null()) };
            }
        }))
    });
    Ok(())
}
