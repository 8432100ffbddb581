//! The calls answered by an a2a_reply: list agents, list tasks, push
//! config set/get, deregister; blocking and submitted.

use super::{a2a_reply_cb, agent_arg, reply_async, reply_blocking};
use crate::agent::a2a_agent;
use crate::args::{bad_enum, c_enum, opt_str_arg, str_arg};
use crate::reply::{a2a_reply, ReplyData};
use crate::status::{a2a_status, guard, FfiError};
use crate::view::a2a_state;
use a2a_client::{ListRole, PushConfig, TaskListResult, TaskQuery};
use std::ffi::{c_char, c_void};

/// Which of its tasks a2a_agent_list_tasks returns: one of the
/// A2A_LIST_ROLE_ constants (an integer, checked on entry).
#[allow(non_camel_case_types)]
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct a2a_list_role(pub i32);

impl a2a_list_role {
    /// Tasks it serves or requested.
    pub const ANY: a2a_list_role = a2a_list_role(0);
    /// Tasks it serves.
    pub const WORKER: a2a_list_role = a2a_list_role(1);
    /// Tasks it requested.
    pub const REQUESTER: a2a_list_role = a2a_list_role(2);
}

c_enum!(a2a_list_role {
    ANY => "A2A_LIST_ROLE_ANY",
    WORKER => "A2A_LIST_ROLE_WORKER",
    REQUESTER => "A2A_LIST_ROLE_REQUESTER",
});

fn tasks_reply(r: TaskListResult) -> ReplyData {
    ReplyData::Tasks(r.tasks, r.next_cursor)
}

/// # Safety
/// NULL or a NUL-terminated string.
unsafe fn query(
    role: a2a_list_role,
    state: a2a_state,
    limit: u32,
    cursor: *const c_char,
) -> Result<TaskQuery, FfiError> {
    Ok(TaskQuery {
        role: match role {
            a2a_list_role::ANY => ListRole::Any,
            a2a_list_role::WORKER => ListRole::Worker,
            a2a_list_role::REQUESTER => ListRole::Requester,
            _ => return Err(bad_enum(role, "role", |_| true)),
        },
        state: state.filter_arg("state")?,
        limit: (limit > 0).then_some(u64::from(limit)),
        // SAFETY: forwarded from the caller.
        cursor: unsafe { opt_str_arg(cursor, "cursor") }?.map(str::to_owned),
    })
}

/// The cards of the agents this one may address (itself excluded, sorted
/// by name), only those with a skill of id or tag `skill` if not NULL; a
/// reply of kind A2A_REPLY_KIND_AGENTS.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_list_agents(
    agent: *const a2a_agent,
    skill: *const c_char,
    out: *mut *mut a2a_reply,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, skill) = unsafe { (agent_arg(agent)?, opt_str_arg(skill, "skill")?) };
        reply_blocking(a.dispatcher(), out, || {
            a.agent.list_agents(skill).map(ReplyData::Agents)
        })
    })
}

/// a2a_agent_list_agents, submitted. If this returns an error, `cb` never
/// runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_list_agents_async(
    agent: *const a2a_agent,
    skill: *const c_char,
    cb: a2a_reply_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, skill) = unsafe { (agent_arg(agent)?, opt_str_arg(skill, "skill")?) };
        reply_async(a.dispatcher(), cb, userdata, || {
            a.agent
                .list_agents_async(skill)
                .map(|p| (p, ReplyData::Agents))
        })
    })
}

/// One page of this agent's tasks, newest first: `role` says which,
/// `state` filters (A2A_STATE_UNSET: any), `limit` is the page size (0: the
/// broker's default), `cursor` the previous reply's `next_cursor` (NULL:
/// the first page). A reply of kind A2A_REPLY_KIND_TASKS.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_list_tasks(
    agent: *const a2a_agent,
    role: a2a_list_role,
    state: a2a_state,
    limit: u32,
    cursor: *const c_char,
    out: *mut *mut a2a_reply,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, q) = unsafe { (agent_arg(agent)?, query(role, state, limit, cursor)?) };
        reply_blocking(a.dispatcher(), out, || {
            a.agent.list_tasks(q).map(tasks_reply)
        })
    })
}

/// a2a_agent_list_tasks, submitted. If this returns an error, `cb` never
/// runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_list_tasks_async(
    agent: *const a2a_agent,
    role: a2a_list_role,
    state: a2a_state,
    limit: u32,
    cursor: *const c_char,
    cb: a2a_reply_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, q) = unsafe { (agent_arg(agent)?, query(role, state, limit, cursor)?) };
        reply_async(a.dispatcher(), cb, userdata, || {
            a.agent.list_tasks_async(q).map(|p| (p, tasks_reply))
        })
    })
}

/// The arguments of a2a_agent_set_push_config (both forms): the agent, the
/// task id and the config.
///
/// # Safety
/// NULL or a live handle and NUL-terminated strings.
unsafe fn push_config_args<'a>(
    agent: *const a2a_agent,
    task_id: *const c_char,
    config_id: *const c_char,
    url: *const c_char,
    token: *const c_char,
) -> Result<(&'a a2a_agent, &'a str, PushConfig), FfiError> {
    // SAFETY: forwarded from the caller.
    unsafe {
        let a = agent_arg(agent)?;
        let id = str_arg(task_id, "task_id")?;
        let config = PushConfig {
            id: str_arg(config_id, "config_id")?.to_owned(),
            url: opt_str_arg(url, "url")?.map(str::to_owned),
            token: opt_str_arg(token, "token")?.map(str::to_owned),
        };
        Ok((a, id, config))
    }
}

/// Sets the push config of the task `task_id` (`url` and `token` may be
/// NULL): when a call moves the task to a terminal state, the caller's
/// counterpart gets an A2A_EVENT_KIND_PUSH event carrying `token`. A reply
/// of kind A2A_REPLY_KIND_PUSH_CONFIG.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_set_push_config(
    agent: *const a2a_agent,
    task_id: *const c_char,
    config_id: *const c_char,
    url: *const c_char,
    token: *const c_char,
    out: *mut *mut a2a_reply,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, id, c) = unsafe { push_config_args(agent, task_id, config_id, url, token) }?;
        reply_blocking(a.dispatcher(), out, || {
            a.agent.set_push_config(id, c).map(ReplyData::PushConfig)
        })
    })
}

/// a2a_agent_set_push_config, submitted. If this returns an error, `cb`
/// never runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_set_push_config_async(
    agent: *const a2a_agent,
    task_id: *const c_char,
    config_id: *const c_char,
    url: *const c_char,
    token: *const c_char,
    cb: a2a_reply_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, id, c) = unsafe { push_config_args(agent, task_id, config_id, url, token) }?;
        reply_async(a.dispatcher(), cb, userdata, || {
            a.agent
                .set_push_config_async(id, c)
                .map(|p| (p, ReplyData::PushConfig))
        })
    })
}

/// The push config of the task `task_id`: a reply of kind
/// A2A_REPLY_KIND_PUSH_CONFIG whose `push_config` is NULL when none is set.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_get_push_config(
    agent: *const a2a_agent,
    task_id: *const c_char,
    out: *mut *mut a2a_reply,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, id) = unsafe { (agent_arg(agent)?, str_arg(task_id, "task_id")?) };
        reply_blocking(a.dispatcher(), out, || {
            a.agent.push_config(id).map(ReplyData::PushConfig)
        })
    })
}

/// a2a_agent_get_push_config, submitted. If this returns an error, `cb`
/// never runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_get_push_config_async(
    agent: *const a2a_agent,
    task_id: *const c_char,
    cb: a2a_reply_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and strings (header rule).
        let (a, id) = unsafe { (agent_arg(agent)?, str_arg(task_id, "task_id")?) };
        reply_async(a.dispatcher(), cb, userdata, || {
            a.agent
                .push_config_async(id)
                .map(|p| (p, ReplyData::PushConfig))
        })
    })
}

/// Deregisters the agent: its token dies at once, the broker fails the
/// tasks it serves and cancels those it requested. Later calls of the
/// handle fail with A2A_STATUS_DEREGISTERED; events already queued stay
/// readable. The handle must still be freed.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_agent_deregister(agent: *const a2a_agent) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or a live handle (header rule).
        let a = unsafe { agent_arg(agent) }?;
        a.dispatcher().may_block()?;
        a.agent.deregister()?;
        Ok(())
    })
}

/// a2a_agent_deregister, submitted: `cb` gets a reply of kind
/// A2A_REPLY_KIND_NONE. If this returns an error, `cb` never runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_deregister_async(
    agent: *const a2a_agent,
    cb: a2a_reply_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or a live handle (header rule).
        let a = unsafe { agent_arg(agent) }?;
        reply_async(a.dispatcher(), cb, userdata, || {
            a.agent
                .deregister_async()
                .map(|p| (p, |()| ReplyData::None))
        })
    })
}
