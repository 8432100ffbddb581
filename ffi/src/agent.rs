//! [`a2a_agent`]: a registered agent's handle, and its events: a callback
//! (run where the client's dispatch mode says) or a non-blocking /
//! bounded-wait drain.
//!
//! The callback registration lives in an [`EventSlot`] shared by every
//! clone of the handle. Its rule: a callback runs only while it is the
//! slot's current registration, one call at a time, and replacing or
//! removing it from another thread waits for a running call to return, so
//! after a2a_agent_set_event_cb(NULL) (or the last a2a_agent_free) returns,
//! it never runs again. From inside the callback itself the change takes
//! effect at once (it cannot wait for itself).

use crate::args::{handle, out_arg, write_out};
use crate::dispatch::{Dispatcher, UserData};
use crate::event::{a2a_event, EventBox};
use crate::status::{a2a_status, guard, guard_value, FfiError};
use crate::view::a2a_str;
use a2a_client::{Agent, Event};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

/// An event callback: `userdata` as registered, and the event, borrowed
/// for the duration of the call (copy what you keep).
///
/// Thread: the connection's reader thread, or its event ring's thread
/// when the ring was granted (A2A_DISPATCH_THREAD), or the thread calling
/// a2a_client_poll (A2A_DISPATCH_POLL); on registration, events queued
/// before it are handed to it on the registering thread (thread mode)
/// before a2a_agent_set_event_cb returns. One call at a time per agent, in
/// arrival order.
///
/// Reentrancy: it may call any _async function, a2a_agent_set_event_cb
/// (the change takes effect when it returns), a2a_agent_free and
/// a2a_client_poll, and a2a_client_free of its client. In thread mode a
/// blocking call of the same client fails there with
/// A2A_STATUS_WOULD_DEADLOCK, whichever of the threads above runs it; it
/// must not block for long, since the reader thread delivers every answer
/// of the connection.
#[allow(non_camel_case_types)]
pub type a2a_event_cb =
    Option<unsafe extern "C" fn(userdata: *mut c_void, event: *const a2a_event)>;

struct SlotState {
    cb: Option<(
        unsafe extern "C" fn(*mut c_void, *const a2a_event),
        UserData,
    )>,
    /// Bumped by every change: events captured for an older registration
    /// are dropped.
    generation: u64,
    /// The thread running the callback now.
    running: Option<ThreadId>,
}

/// An agent's callback registration (see the module doc).
pub(crate) struct EventSlot {
    st: Mutex<SlotState>,
    cv: Condvar,
}

impl EventSlot {
    fn new() -> EventSlot {
        EventSlot {
            st: Mutex::new(SlotState {
                cb: None,
                generation: 0,
                running: None,
            }),
            cv: Condvar::new(),
        }
    }

    /// Replaces the registration; returns its generation once no call of
    /// the old one runs on another thread.
    fn set(
        &self,
        cb: Option<(
            unsafe extern "C" fn(*mut c_void, *const a2a_event),
            UserData,
        )>,
    ) -> u64 {
        let me = std::thread::current().id();
        let mut st = self.st.lock();
        st.cb = cb;
        st.generation += 1;
        let generation = st.generation;
        while st.running.is_some() && st.running != Some(me) {
            self.cv.wait(&mut st);
        }
        generation
    }

    /// Hands `ev` to the registration of `generation`, if it is still the
    /// current one.
    fn dispatch(&self, generation: u64, ev: Event) {
        let me = std::thread::current().id();
        let mut st = self.st.lock();
        let (cb, ud) = loop {
            match st.cb {
                Some(cb) if st.generation == generation => {
                    if st.running.is_none() || st.running == Some(me) {
                        break cb;
                    }
                }
                _ => return,
            }
            self.cv.wait(&mut st);
        };
        let outer = st.running.replace(me);
        drop(st);
        let b = EventBox::new(ev);
        // SAFETY: `cb` is the caller's function, registered with this
        // `userdata`; the event view lives in `b` until after the call.
        unsafe { cb(ud.ptr(), b.view()) };
        drop(b);
        let mut st = self.st.lock();
        st.running = outer;
        drop(st);
        self.cv.notify_all();
    }
}

/// What every clone of one agent handle shares.
pub(crate) struct AgentShared {
    dispatcher: Arc<Dispatcher>,
    slot: Arc<EventSlot>,
    /// Live `a2a_agent` handles: the last one's end ends the callback.
    handles: AtomicUsize,
    /// Events taken from the client by a2a_agent_wait_event beyond the
    /// first, handed out by the next calls.
    buffered: Mutex<VecDeque<Event>>,
}

/// A registered agent (opaque). Made by a2a_client_register (or taken
/// from a register reply with a2a_agent_clone); freed with a2a_agent_free.
/// It keeps its connection open until freed, unless the client is freed
/// first (then every call fails with A2A_STATUS_CLOSED).
#[allow(non_camel_case_types)]
pub struct a2a_agent {
    pub(crate) agent: Agent,
    shared: Arc<AgentShared>,
}

impl a2a_agent {
    pub(crate) fn new(agent: Agent, dispatcher: Arc<Dispatcher>) -> a2a_agent {
        a2a_agent {
            agent,
            shared: Arc::new(AgentShared {
                dispatcher,
                slot: Arc::new(EventSlot::new()),
                handles: AtomicUsize::new(1),
                buffered: Mutex::new(VecDeque::new()),
            }),
        }
    }

    pub(crate) fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.shared.dispatcher
    }

    fn set_callback(&self, cb: a2a_event_cb, userdata: *mut c_void) {
        match cb {
            None => {
                self.shared.slot.set(None);
                self.agent.set_event_handler(None);
            }
            Some(f) => {
                let generation = self.shared.slot.set(Some((f, UserData(userdata))));
                let slot = self.shared.slot.clone();
                let dispatcher = self.shared.dispatcher.clone();
                self.agent
                    .set_event_handler(Some(Box::new(move |_agent: &Agent, ev: Event| {
                        let slot = slot.clone();
                        dispatcher.event(Box::new(move || slot.dispatch(generation, ev)));
                    })));
            }
        }
    }
}

impl Clone for a2a_agent {
    fn clone(&self) -> a2a_agent {
        self.shared.handles.fetch_add(1, Ordering::AcqRel);
        a2a_agent {
            agent: self.agent.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl Drop for a2a_agent {
    fn drop(&mut self) {
        if self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last handle: its callback ends now.
            self.set_callback(None, std::ptr::null_mut());
        }
    }
}

/// Frees an agent handle. NULL is ignored. The agent stays registered at
/// the broker (until a2a_agent_deregister or the connection closes); when
/// the last handle of the agent is freed its event callback is removed,
/// and it has stopped running when this returns.
///
/// Threads: any, its own callbacks included.
#[no_mangle]
pub extern "C" fn a2a_agent_free(agent: *mut a2a_agent) {
    guard_value((), || {
        if !agent.is_null() {
            // SAFETY: a non-NULL agent given to free came from this library
            // as a `Box<a2a_agent>` (a2a_client_register, a2a_agent_clone)
            // and is freed once (the header's rule).
            drop(unsafe { Box::from_raw(agent) });
        }
    })
}

/// A second handle to the same agent (sharing its event callback), for
/// keeping an agent borrowed from a register reply or handing one to
/// another owner. Free each with a2a_agent_free.
///
/// Threads: any.
#[no_mangle]
pub extern "C" fn a2a_agent_clone(agent: *const a2a_agent, out: *mut *mut a2a_agent) -> a2a_status {
    guard(|| {
        // SAFETY: `agent` is NULL or a live handle (header rule).
        let a = unsafe { handle(agent, "agent") }?;
        out_arg(out, "out")?;
        // SAFETY: checked non-NULL just above.
        unsafe { write_out(out, Box::into_raw(Box::new(a.clone()))) };
        Ok(())
    })
}

fn agent_str(agent: *const a2a_agent, f: impl FnOnce(&Agent) -> &str) -> a2a_str {
    guard_value(a2a_str::NONE, || {
        // SAFETY: `agent` is NULL or a live handle (header rule); the
        // string borrowed lives as long as the handle.
        match unsafe { agent.as_ref() } {
            Some(a) => a2a_str::of(f(&a.agent)),
            None => a2a_str::NONE,
        }
    })
}

/// The agent's id (the peer id the broker gave it); borrowed from the
/// handle. Absent if `agent` is NULL.
///
/// Threads: any.
#[no_mangle]
pub extern "C" fn a2a_agent_id(agent: *const a2a_agent) -> a2a_str {
    agent_str(agent, Agent::id)
}

/// The agent's capability token (for a2a_client_call_json); borrowed from
/// the handle. Absent if `agent` is NULL.
///
/// Threads: any.
#[no_mangle]
pub extern "C" fn a2a_agent_token(agent: *const a2a_agent) -> a2a_str {
    agent_str(agent, Agent::token)
}

/// The context the agent registered in; borrowed from the handle.
///
/// Threads: any.
#[no_mangle]
pub extern "C" fn a2a_agent_context_id(agent: *const a2a_agent) -> a2a_str {
    agent_str(agent, Agent::context_id)
}

/// Sets (or with `cb == NULL` removes) the agent's event callback (see
/// a2a_event_cb). While one is set, events go only to it, and
/// a2a_agent_next_event finds nothing. When this returns, no call of the
/// previous callback is running on another thread, and none will start.
///
/// Threads: any, the callback itself included.
#[no_mangle]
pub extern "C" fn a2a_agent_set_event_cb(
    agent: *const a2a_agent,
    cb: a2a_event_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: `agent` is NULL or a live handle (header rule).
        let a = unsafe { handle(agent, "agent") }?;
        // In thread mode the events already queued run the new callback
        // here, before this returns, and it may free `agent` (the header
        // allows it): install through a handle of our own, so that what
        // this call runs on outlives the callback. If the caller's was the
        // last handle, dropping ours removes the callback, as its free
        // would have.
        let keep = a.clone();
        keep.set_callback(cb, userdata);
        drop(keep);
        Ok(())
    })
}

/// Takes the oldest queued event of this agent without blocking: writes it
/// to `*out` (free it with a2a_event_free) and returns A2A_STATUS_OK, or
/// returns A2A_STATUS_EMPTY. Always EMPTY while an event callback is set.
/// A pull agent's events are fetched only while a callback is set or
/// during a2a_agent_wait_event.
///
/// Threads: any.
#[no_mangle]
pub extern "C" fn a2a_agent_next_event(
    agent: *const a2a_agent,
    out: *mut *mut a2a_event,
) -> a2a_status {
    guard(|| {
        // SAFETY: `agent` is NULL or a live handle (header rule).
        let a = unsafe { handle(agent, "agent") }?;
        out_arg(out, "out")?;
        let ev = match a.shared.buffered.lock().pop_front() {
            Some(ev) => ev,
            None => {
                let mut v = Vec::with_capacity(1);
                a.agent.try_events(&mut v, 1);
                v.pop().ok_or(FfiError::Empty)?
            }
        };
        // SAFETY: checked non-NULL above.
        unsafe { write_out(out, EventBox::into_raw(EventBox::new(ev))) };
        Ok(())
    })
}

/// Like a2a_agent_next_event, but blocks up to `timeout_ms` for an event
/// (A2A_STATUS_EMPTY when none came). Fails with A2A_STATUS_CLOSED once
/// the connection is gone and nothing is queued, A2A_STATUS_DEREGISTERED
/// after deregistration.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK (use a2a_agent_next_event there).
#[no_mangle]
pub extern "C" fn a2a_agent_wait_event(
    agent: *const a2a_agent,
    timeout_ms: u32,
    out: *mut *mut a2a_event,
) -> a2a_status {
    guard(|| {
        // SAFETY: `agent` is NULL or a live handle (header rule).
        let a = unsafe { handle(agent, "agent") }?;
        out_arg(out, "out")?;
        a.dispatcher().may_block()?;
        let queued = a.shared.buffered.lock().pop_front();
        let ev = match queued {
            Some(ev) => ev,
            None => {
                let mut evs = a
                    .agent
                    .wait(Duration::from_millis(u64::from(timeout_ms)))?
                    .into_iter();
                let first = evs.next().ok_or(FfiError::Empty)?;
                a.shared.buffered.lock().extend(evs);
                first
            }
        };
        // SAFETY: checked non-NULL above.
        unsafe { write_out(out, EventBox::into_raw(EventBox::new(ev))) };
        Ok(())
    })
}
