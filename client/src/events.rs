//! One agent's events: a queue filled on the connection's reader thread
//! (a push agent's notifications; a pull agent's `a2a.events.wait` results
//! while its pump runs, see [`crate::Agent::set_event_handler`]), read by
//! [`crate::Agent::wait`] (blocking), [`crate::Agent::try_events`] (a
//! non-blocking drain) and [`crate::Events`] (a `futures_core::Stream`), or
//! handed to an [`crate::EventHandler`] instead.
//!
//! The queue knows no agent: the reader side (the demux, a pull agent's
//! pump) holds the queue and a weak [`Owner`] handle, which it upgrades
//! only to keep the agent alive while its handler runs; the handler comes
//! bound to its agent ([`QueueHandler`], made by `Agent::set_event_handler`).
//!
//! The handler protocol, per queue: whoever runs the handler (the reader
//! thread, or a thread that just installed it and found events queued)
//! holds the "running" mark and drains the queue in order until it is
//! empty, so events reach the handler one at a time and in arrival order.
//! - Events queued before a handler is installed are handed to it first,
//!   by [`crate::Agent::set_event_handler`] on the installing thread.
//! - While a handler is installed, `wait`, `try_events` and the stream see
//!   nothing: events go only to it.
//! - Installing (or removing) from another thread waits for a running
//!   call to return, so after `set_handler(None)` returns no call of the
//!   old handler runs. From inside the handler itself the swap takes effect
//!   when the running call returns (it cannot wait for itself).
//! - Queues are unbounded on purpose: the reader thread that fills them
//!   also delivers every response of the connection, so it must never block
//!   on an agent that is slow to read. The broker bounds what one
//!   connection is sent (it drops events past its outbox bound and says so
//!   with `a2a.lagged`).

use crate::Event;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::thread::ThreadId;
use std::time::Instant;

/// A handler as the queue runs it: already bound to its agent (see
/// [`crate::EventHandler`], which `Agent::set_event_handler` wraps).
pub(crate) type QueueHandler = Box<dyn FnMut(Event) + Send + 'static>;

/// What the reader side holds of a queue's agent: a weak handle, upgraded
/// only while the agent's handler runs (so the agent outlives that run,
/// and a gone agent's events are not handled).
pub(crate) type Owner = Weak<dyn Any + Send + Sync>;

#[derive(Default)]
struct QState {
    events: VecDeque<Event>,
    /// The installed handler; taken out by the runner while it runs.
    installed: Option<QueueHandler>,
    /// Bumped by every install: a runner whose handler was replaced during
    /// a call drops it instead of putting it back.
    generation: u64,
    /// The thread draining the queue into the handler, if any.
    running: Option<ThreadId>,
    /// Installers waiting for the runner to step aside.
    installers: usize,
    /// Tasks of `Events` streams to wake on the next event.
    wakers: Vec<Waker>,
    /// No event will arrive any more (the connection ended, the agent was
    /// deregistered or dropped).
    closed: bool,
}

/// One agent's queue (see the module doc).
#[derive(Default)]
pub(crate) struct EventQueue {
    st: Mutex<QState>,
    /// Wakes blocked `wait`s and installers waiting for the runner.
    cv: Condvar,
}

impl EventQueue {
    /// Adds an event (reader thread); runs the handler if one is installed
    /// and nobody is running it. `owner` is kept alive while the handler
    /// runs; if it is gone the event is dropped with the queue.
    pub(crate) fn deliver(&self, ev: Event, owner: &Owner) {
        let mut st = self.st.lock();
        if st.closed {
            return;
        }
        st.events.push_back(ev);
        if st.running.is_some() {
            // The runner drains it after its current call.
            return;
        }
        if st.installed.is_some() {
            let Some(owner) = owner.upgrade() else {
                return;
            };
            drop(st);
            self.run();
            // May drop the last handle of the agent and of its client:
            // after `run`, with no lock held.
            drop(owner);
            return;
        }
        self.wake(st);
    }

    /// Wakes whoever waits for queued events, releasing `st` first.
    fn wake(&self, mut st: MutexGuard<'_, QState>) {
        let wakers = std::mem::take(&mut st.wakers);
        drop(st);
        self.cv.notify_all();
        for w in wakers {
            w.wake();
        }
    }

    /// Drains the queue into the installed handler on this thread, unless
    /// another thread is already doing it.
    fn run(&self) {
        let me = std::thread::current().id();
        let mut st = self.st.lock();
        if st.running.is_some() {
            return;
        }
        let Some(mut handler) = st.installed.take() else {
            return;
        };
        st.running = Some(me);
        let mut generation = st.generation;
        loop {
            let next = if st.installers > 0 {
                // Someone waits to install: step aside (the queue keeps
                // what is left, for the new handler or for `wait`).
                None
            } else {
                st.events.pop_front()
            };
            let Some(ev) = next else {
                st.installed = Some(handler);
                st.running = None;
                drop(st);
                self.cv.notify_all();
                return;
            };
            drop(st);
            handler(ev);
            st = self.st.lock();
            if st.generation != generation {
                // Replaced from inside the call: continue with the new one,
                // or stop if it was removed.
                let old = std::mem::replace(
                    &mut handler,
                    match st.installed.take() {
                        Some(new) => new,
                        None => {
                            st.running = None;
                            drop(st);
                            // It may own handles whose drop closes things.
                            drop(handler);
                            let st = self.st.lock();
                            self.wake(st);
                            return;
                        }
                    },
                );
                generation = st.generation;
                drop(st);
                drop(old);
                st = self.st.lock();
            }
        }
    }

    /// Installs `handler` (or removes it, with `None`), then hands it the
    /// events already queued, on this thread. See the module doc for the
    /// guarantees.
    /// The caller holds the agent (so it lives while queued events run).
    pub(crate) fn set_handler(&self, handler: Option<QueueHandler>) {
        let me = std::thread::current().id();
        let mut st = self.st.lock();
        if st.running == Some(me) {
            // From inside the handler: the runner picks the swap up when
            // this call returns.
            let old = std::mem::replace(&mut st.installed, handler);
            st.generation += 1;
            drop(st);
            drop(old);
            return;
        }
        st.installers += 1;
        while st.running.is_some() {
            self.cv.wait(&mut st);
        }
        st.installers -= 1;
        let old = std::mem::replace(&mut st.installed, handler);
        st.generation += 1;
        let installed = st.installed.is_some();
        let queued = !st.events.is_empty();
        if installed {
            drop(st);
            drop(old);
            if queued {
                self.run();
            }
        } else {
            // Events queue again: whoever waits may find some.
            self.wake(st);
            drop(old);
        }
    }

    /// Takes up to `max` queued events into `out` (none while a handler is
    /// installed); returns how many.
    pub(crate) fn try_take(&self, out: &mut Vec<Event>, max: usize) -> usize {
        let mut st = self.st.lock();
        if st.installed.is_some() || st.running.is_some() {
            return 0;
        }
        let n = max.min(st.events.len());
        out.extend(st.events.drain(..n));
        n
    }

    /// Everything queued, blocking until something is or `deadline` passes.
    /// `Err(())` when the queue is closed and empty.
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> Result<Vec<Event>, ()> {
        let mut st = self.st.lock();
        loop {
            let handled = st.installed.is_some() || st.running.is_some();
            if !handled && !st.events.is_empty() {
                return Ok(st.events.drain(..).collect());
            }
            if st.closed {
                return Err(());
            }
            match deadline {
                Some(d) => {
                    if Instant::now() >= d || self.cv.wait_until(&mut st, d).timed_out() {
                        let handled = st.installed.is_some() || st.running.is_some();
                        if handled || st.events.is_empty() {
                            return Ok(Vec::new());
                        }
                    }
                }
                None => self.cv.wait(&mut st),
            }
        }
    }

    /// Is a handler installed (or running)?
    pub(crate) fn has_handler(&self) -> bool {
        let st = self.st.lock();
        st.installed.is_some() || st.running.is_some()
    }

    /// Is an event ready for `wait` right now (or the queue closed)?
    pub(crate) fn ready(&self) -> bool {
        let st = self.st.lock();
        st.closed || (st.installed.is_none() && st.running.is_none() && !st.events.is_empty())
    }

    /// No more events will come: wakes every waiter and drops the handler
    /// (outside the lock: it may own handles). Queued events stay readable.
    pub(crate) fn close(&self) {
        let mut st = self.st.lock();
        st.closed = true;
        let handler = if st.running.is_none() {
            st.installed.take()
        } else {
            None
        };
        self.wake(st);
        drop(handler);
    }

    /// The next event for a stream, or its end.
    pub(crate) fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let mut st = self.st.lock();
        let handled = st.installed.is_some() || st.running.is_some();
        if !handled {
            if let Some(ev) = st.events.pop_front() {
                return Poll::Ready(Some(ev));
            }
        }
        if st.closed && (handled || st.events.is_empty()) {
            return Poll::Ready(None);
        }
        if !st.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            st.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// Lets the demux hold queues without knowing their agents.
pub(crate) type SharedQueue = Arc<EventQueue>;
