//! Sends (create, follow-up, broadcast) and the calls on one task (status,
//! artifact, cancel, get, resubscribe), blocking and submitted.

use super::{a2a_reply_cb, a2a_task_cb};
use super::{agent_arg, reply_async, reply_blocking, task_async, task_blocking};
use crate::agent::a2a_agent;
use crate::args::{opt_str_arg, opt_u64, str_arg};
use crate::parts::{a2a_parts, parts_arg};
use crate::reply::{a2a_reply, ReplyData};
use crate::status::{a2a_status, guard, FfiError};
use crate::view::{a2a_state, a2a_task};
use a2a_client::{Agent, ClientError, Message, Pending, SendConfiguration, Task};
use std::ffi::{c_char, c_void};

/// Options of a send; a NULL pointer means the defaults.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_send_options {
    /// Answer only once the task is terminal or interrupted (or after the
    /// broker's default wait); the connection stays free meanwhile.
    pub blocking: bool,
    /// Return only the last N history entries (negative: all).
    pub history_length: i64,
}

/// # Safety
/// NULL or a readable options struct.
unsafe fn options(o: *const a2a_send_options) -> Option<SendConfiguration> {
    // SAFETY: forwarded from the caller.
    let o = unsafe { o.as_ref() }?;
    Some(SendConfiguration {
        blocking: o.blocking.then_some(true),
        history_length: opt_u64(o.history_length),
        push_notification_config: None,
    })
}

/// # Safety
/// NULL or a live builder.
unsafe fn opt_message(parts: *const a2a_parts, task_id: &str) -> Option<Message> {
    // SAFETY: forwarded from the caller.
    unsafe { parts.as_ref() }.map(|p| p.message(None, Some(task_id)))
}

/// The agent and the send of a2a_agent_send (both forms): the message made
/// of `parts`, to `to`.
///
/// # Safety
/// NULL or live handles, strings, structs.
unsafe fn send_args<'a>(
    agent: *const a2a_agent,
    to: *const c_char,
    parts: *const a2a_parts,
    opts: *const a2a_send_options,
) -> SendArgs<'a> {
    // SAFETY: forwarded from the caller.
    unsafe {
        let a = agent_arg(agent)?;
        let to = opt_str_arg(to, "to")?;
        let m = parts_arg(parts, "parts")?.message(to, None);
        Ok((a, m, options(opts)))
    }
}

/// The agent and the send of a2a_agent_send_followup (both forms): the
/// message made of `parts`, on the task `task_id`.
///
/// # Safety
/// NULL or live handles, strings, structs.
unsafe fn followup_args<'a>(
    agent: *const a2a_agent,
    task_id: *const c_char,
    parts: *const a2a_parts,
    opts: *const a2a_send_options,
) -> SendArgs<'a> {
    // SAFETY: forwarded from the caller.
    unsafe {
        let a = agent_arg(agent)?;
        let id = str_arg(task_id, "task_id")?;
        let m = parts_arg(parts, "parts")?.message(None, Some(id));
        Ok((a, m, options(opts)))
    }
}

/// A send's C arguments, read: the agent, the message, its options.
type SendArgs<'a> = Result<(&'a a2a_agent, Message, Option<SendConfiguration>), FfiError>;

/// a2a_agent_send and a2a_agent_send_followup are one send once their C
/// arguments are read (by `args`, inside the panic boundary): blocking...
fn send_blocking<'a>(out: *mut *mut a2a_task, args: impl FnOnce() -> SendArgs<'a>) -> a2a_status {
    guard(|| {
        let (a, m, cfg) = args()?;
        task_blocking(a.dispatcher(), out, || a.agent.send(m, cfg))
    })
}

/// ...and submitted.
fn send_async<'a>(
    cb: a2a_task_cb,
    userdata: *mut c_void,
    args: impl FnOnce() -> SendArgs<'a>,
) -> a2a_status {
    guard(|| {
        let (a, m, cfg) = args()?;
        task_async(a.dispatcher(), cb, userdata, || a.agent.send_async(m, cfg))
    })
}

/// Creates a task for the agent `to` (NULL: the caller's only peer) with
/// the message made of `parts`; the task goes to `*out`.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_send(
    agent: *const a2a_agent,
    to: *const c_char,
    parts: *const a2a_parts,
    opts: *const a2a_send_options,
    out: *mut *mut a2a_task,
) -> a2a_status {
    // SAFETY: NULL or live handles, strings, structs (header rule).
    send_blocking(out, || unsafe { send_args(agent, to, parts, opts) })
}

/// a2a_agent_send, submitted: `cb` gets the task. If this returns an
/// error, `cb` never runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_send_async(
    agent: *const a2a_agent,
    to: *const c_char,
    parts: *const a2a_parts,
    opts: *const a2a_send_options,
    cb: a2a_task_cb,
    userdata: *mut c_void,
) -> a2a_status {
    // SAFETY: NULL or live handles, strings, structs (header rule).
    send_async(cb, userdata, || unsafe {
        send_args(agent, to, parts, opts)
    })
}

/// Adds the message made of `parts` to the task `task_id` (a follow-up, a
/// reply; a requester's message resumes an interrupted task).
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_send_followup(
    agent: *const a2a_agent,
    task_id: *const c_char,
    parts: *const a2a_parts,
    opts: *const a2a_send_options,
    out: *mut *mut a2a_task,
) -> a2a_status {
    // SAFETY: NULL or live handles, strings, structs (header rule).
    send_blocking(out, || unsafe {
        followup_args(agent, task_id, parts, opts)
    })
}

/// a2a_agent_send_followup, submitted. If this returns an error, `cb`
/// never runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_send_followup_async(
    agent: *const a2a_agent,
    task_id: *const c_char,
    parts: *const a2a_parts,
    opts: *const a2a_send_options,
    cb: a2a_task_cb,
    userdata: *mut c_void,
) -> a2a_status {
    // SAFETY: NULL or live handles, strings, structs (header rule).
    send_async(cb, userdata, || unsafe {
        followup_args(agent, task_id, parts, opts)
    })
}

/// Sends the message made of `parts` to every peer the agent may address
/// (`to: "*"`): one task each, as a reply of kind A2A_REPLY_KIND_TASKS.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_broadcast(
    agent: *const a2a_agent,
    parts: *const a2a_parts,
    opts: *const a2a_send_options,
    out: *mut *mut a2a_reply,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and structs (header rule).
        let (a, p, cfg) = unsafe { (agent_arg(agent)?, parts_arg(parts, "parts")?, options(opts)) };
        let m = p.message(None, None);
        reply_blocking(a.dispatcher(), out, || {
            a.agent.broadcast(m, cfg).map(|t| ReplyData::Tasks(t, None))
        })
    })
}

/// a2a_agent_broadcast, submitted. If this returns an error, `cb` never
/// runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_broadcast_async(
    agent: *const a2a_agent,
    parts: *const a2a_parts,
    opts: *const a2a_send_options,
    cb: a2a_reply_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and structs (header rule).
        let (a, p, cfg) = unsafe { (agent_arg(agent)?, parts_arg(parts, "parts")?, options(opts)) };
        let m = p.message(None, None);
        reply_async(a.dispatcher(), cb, userdata, || {
            a.agent
                .broadcast_async(m, cfg)
                .map(|p| (p, |t| ReplyData::Tasks(t, None)))
        })
    })
}

/// # Safety
/// NULL or live builder / NUL-terminated string.
unsafe fn status_args<'a>(
    task_id: *const c_char,
    state: a2a_state,
    parts: *const a2a_parts,
) -> Result<(&'a str, a2a_client::State, Option<Message>), FfiError> {
    // SAFETY: forwarded from the caller.
    let id = unsafe { str_arg(task_id, "task_id") }?;
    let st = state.state_arg("state")?;
    // SAFETY: forwarded from the caller.
    Ok((id, st, unsafe { opt_message(parts, id) }))
}

/// The worker moves the task `task_id` to `state`, with the message made
/// of `parts` (NULL: none).
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_set_status(
    agent: *const a2a_agent,
    task_id: *const c_char,
    state: a2a_state,
    parts: *const a2a_parts,
    out: *mut *mut a2a_task,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, (id, st, m)) = unsafe { (agent_arg(agent)?, status_args(task_id, state, parts)?) };
        task_blocking(a.dispatcher(), out, || a.agent.set_status(id, st, m))
    })
}

/// a2a_agent_set_status, submitted. If this returns an error, `cb` never
/// runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_set_status_async(
    agent: *const a2a_agent,
    task_id: *const c_char,
    state: a2a_state,
    parts: *const a2a_parts,
    cb: a2a_task_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, (id, st, m)) = unsafe { (agent_arg(agent)?, status_args(task_id, state, parts)?) };
        task_async(a.dispatcher(), cb, userdata, || {
            a.agent.set_status_async(id, st, m)
        })
    })
}

/// The arguments of a2a_agent_add_artifact (both forms): the agent, the
/// task id and the artifact made of `parts`.
///
/// # Safety
/// NULL or live handles, builder and strings.
unsafe fn artifact_args<'a>(
    agent: *const a2a_agent,
    task_id: *const c_char,
    artifact_id: *const c_char,
    name: *const c_char,
    parts: *const a2a_parts,
) -> Result<(&'a a2a_agent, &'a str, a2a_client::Artifact), FfiError> {
    // SAFETY: forwarded from the caller.
    unsafe {
        let p = parts_arg(parts, "parts")?;
        let art = p.artifact(
            str_arg(artifact_id, "artifact_id")?,
            opt_str_arg(name, "name")?,
        );
        Ok((agent_arg(agent)?, str_arg(task_id, "task_id")?, art))
    }
}

/// The worker adds to the task `task_id` the artifact `artifact_id` made of
/// `parts` (`name` may be NULL); with `append`, extends the artifact of that
/// id instead; `last_chunk` marks its end.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_add_artifact(
    agent: *const a2a_agent,
    task_id: *const c_char,
    artifact_id: *const c_char,
    name: *const c_char,
    parts: *const a2a_parts,
    append: bool,
    last_chunk: bool,
    out: *mut *mut a2a_task,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, id, art) = unsafe { artifact_args(agent, task_id, artifact_id, name, parts) }?;
        task_blocking(a.dispatcher(), out, || {
            a.agent.add_artifact(id, art, append, last_chunk)
        })
    })
}

/// a2a_agent_add_artifact, submitted. If this returns an error, `cb`
/// never runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_add_artifact_async(
    agent: *const a2a_agent,
    task_id: *const c_char,
    artifact_id: *const c_char,
    name: *const c_char,
    parts: *const a2a_parts,
    append: bool,
    last_chunk: bool,
    cb: a2a_task_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, id, art) = unsafe { artifact_args(agent, task_id, artifact_id, name, parts) }?;
        task_async(a.dispatcher(), cb, userdata, || {
            a.agent.add_artifact_async(id, art, append, last_chunk)
        })
    })
}

/// Either party cancels the task `task_id`, with the message made of
/// `parts` (NULL: none).
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_cancel(
    agent: *const a2a_agent,
    task_id: *const c_char,
    parts: *const a2a_parts,
    out: *mut *mut a2a_task,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, id) = unsafe { (agent_arg(agent)?, str_arg(task_id, "task_id")?) };
        // SAFETY: NULL or a live builder (header rule).
        let m = unsafe { opt_message(parts, id) };
        task_blocking(a.dispatcher(), out, || a.agent.cancel(id, m))
    })
}

/// a2a_agent_cancel, submitted. If this returns an error, `cb` never runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_cancel_async(
    agent: *const a2a_agent,
    task_id: *const c_char,
    parts: *const a2a_parts,
    cb: a2a_task_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, id) = unsafe { (agent_arg(agent)?, str_arg(task_id, "task_id")?) };
        // SAFETY: NULL or a live builder (header rule).
        let m = unsafe { opt_message(parts, id) };
        task_async(a.dispatcher(), cb, userdata, || a.agent.cancel_async(id, m))
    })
}

/// A call on the task `task_id` that takes nothing else from C (get,
/// resubscribe): its C arguments read once, blocking...
///
/// # Safety
/// `agent` NULL or a live handle; `task_id` NULL or a NUL-terminated string.
unsafe fn on_task_blocking(
    agent: *const a2a_agent,
    task_id: *const c_char,
    out: *mut *mut a2a_task,
    call: impl FnOnce(&Agent, &str) -> Result<Task, ClientError>,
) -> a2a_status {
    guard(|| {
        // SAFETY: forwarded from the caller.
        let (a, id) = unsafe { (agent_arg(agent)?, str_arg(task_id, "task_id")?) };
        task_blocking(a.dispatcher(), out, || call(&a.agent, id))
    })
}

/// ...and submitted.
///
/// # Safety
/// As [`on_task_blocking`].
unsafe fn on_task_async(
    agent: *const a2a_agent,
    task_id: *const c_char,
    cb: a2a_task_cb,
    userdata: *mut c_void,
    submit: impl FnOnce(&Agent, &str) -> Result<Pending<Task>, ClientError>,
) -> a2a_status {
    guard(|| {
        // SAFETY: forwarded from the caller.
        let (a, id) = unsafe { (agent_arg(agent)?, str_arg(task_id, "task_id")?) };
        task_async(a.dispatcher(), cb, userdata, || submit(&a.agent, id))
    })
}

/// Reads the task `task_id`, with only its last `history_length` messages
/// (negative: all).
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_get_task(
    agent: *const a2a_agent,
    task_id: *const c_char,
    history_length: i64,
    out: *mut *mut a2a_task,
) -> a2a_status {
    // SAFETY: NULL or live handles and strings (header rule).
    unsafe {
        on_task_blocking(agent, task_id, out, |a, id| {
            a.get_task(id, opt_u64(history_length))
        })
    }
}

/// a2a_agent_get_task, submitted. If this returns an error, `cb` never
/// runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_get_task_async(
    agent: *const a2a_agent,
    task_id: *const c_char,
    history_length: i64,
    cb: a2a_task_cb,
    userdata: *mut c_void,
) -> a2a_status {
    // SAFETY: NULL or live handles and strings (header rule).
    unsafe {
        on_task_async(agent, task_id, cb, userdata, |a, id| {
            a.get_task_async(id, opt_u64(history_length))
        })
    }
}

/// Re-emits the task's status to this agent as an event, after replaying
/// its events with a version above `after_version` (negative: no replay);
/// the events arrive before the answer.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_resubscribe(
    agent: *const a2a_agent,
    task_id: *const c_char,
    after_version: i64,
    out: *mut *mut a2a_task,
) -> a2a_status {
    // SAFETY: NULL or live handles and strings (header rule).
    unsafe {
        on_task_blocking(agent, task_id, out, |a, id| {
            a.resubscribe(id, opt_u64(after_version))
        })
    }
}

/// a2a_agent_resubscribe, submitted. If this returns an error, `cb` never
/// runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_resubscribe_async(
    agent: *const a2a_agent,
    task_id: *const c_char,
    after_version: i64,
    cb: a2a_task_cb,
    userdata: *mut c_void,
) -> a2a_status {
    // SAFETY: NULL or live handles and strings (header rule).
    unsafe {
        on_task_async(agent, task_id, cb, userdata, |a, id| {
            a.resubscribe_async(id, opt_u64(after_version))
        })
    }
}
