//! [`Pending`]: the handle of one submitted call, completed by the
//! connection's reader thread when the broker answers (or when the
//! connection dies). The same answer can be waited for with a timeout,
//! polled, handed to a callback, or `.await`ed: `Pending` is a `Future`
//! whose waker the reader thread wakes, so no async runtime is needed here.
//!
//! Architecture invariant: a slot is completed exactly once. The reader
//! thread removes the call from the connection's table before completing
//! it, and the table is emptied (each call failing with
//! [`ClientError::Closed`]) when the connection ends, so every submitted
//! call is answered exactly once whatever happens.

use crate::error::ClientError;
use a2a_proto::call::Outcome;
use parking_lot::{Condvar, Mutex};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// What a call's slot receives: the broker's typed result, or why there is
/// none.
pub(crate) type Answer = Result<Outcome, ClientError>;

/// A completion callback, as the slot keeps it (the typed conversion is
/// folded in).
type Callback = Box<dyn FnOnce(Answer) + Send + 'static>;

thread_local! {
    /// The id of the connection whose reader thread this is (0: none), so a
    /// blocking wait there fails instead of deadlocking.
    static READER_OF: Cell<u64> = const { Cell::new(0) };
}

/// Marks the calling thread as the reader of connection `conn_id`.
pub(crate) fn mark_reader_thread(conn_id: u64) {
    READER_OF.with(|r| r.set(conn_id));
}

/// Is the calling thread the reader thread of connection `conn_id`?
pub(crate) fn on_reader_thread(conn_id: u64) -> bool {
    READER_OF.with(|r| r.get() == conn_id)
}

enum State {
    /// No answer yet; whoever waits for it is recorded here.
    Waiting {
        waker: Option<Waker>,
        callback: Option<Callback>,
    },
    /// Answered, not yet taken.
    Ready(Answer),
    /// Taken (or handed to the callback).
    Taken,
}

/// One call's meeting point between its submitter and the reader thread.
pub(crate) struct Slot {
    state: Mutex<State>,
    /// Wakes threads blocked in [`Pending::wait`].
    cv: Condvar,
}

impl Slot {
    pub(crate) fn new() -> Arc<Slot> {
        Arc::new(Slot {
            state: Mutex::new(State::Waiting {
                waker: None,
                callback: None,
            }),
            cv: Condvar::new(),
        })
    }

    /// Delivers the answer; a second delivery is ignored. Runs the callback
    /// (if any) on the calling thread, after every lock is released.
    pub(crate) fn complete(&self, answer: Answer) {
        let mut st = self.state.lock();
        match std::mem::replace(&mut *st, State::Taken) {
            State::Waiting {
                callback: Some(cb), ..
            } => {
                drop(st);
                cb(answer);
            }
            State::Waiting {
                waker,
                callback: None,
            } => {
                *st = State::Ready(answer);
                drop(st);
                self.cv.notify_all();
                if let Some(w) = waker {
                    w.wake();
                }
            }
            done => *st = done,
        }
    }
}

/// Turns the broker's untyped result into what a method returns.
pub(crate) enum Convert<T> {
    /// A plain function: no allocation per call.
    Fn(fn(Outcome) -> Result<T, ClientError>),
    /// A conversion that needs context (e.g. `register` makes an `Agent`).
    Boxed(Box<dyn FnOnce(Outcome) -> Result<T, ClientError> + Send + 'static>),
}

impl<T> Convert<T> {
    fn apply(self, answer: Answer) -> Result<T, ClientError> {
        let outcome = answer?;
        match self {
            Convert::Fn(f) => f(outcome),
            Convert::Boxed(f) => f(outcome),
        }
    }
}

/// The answer-to-be of one submitted call (an `_async` method).
///
/// - [`Pending::wait`] blocks the calling thread, at most a timeout;
/// - [`Pending::try_take`] never blocks;
/// - [`Pending::on_complete`] hands the answer to a callback;
/// - `.await` (it is a [`Future`]) from any executor.
///
/// Threads: `Send + Unpin` (the answer is produced on the connection's
/// reader thread and moved to whoever takes it); one owner at a time. Lifetime:
/// independent of the [`crate::Client`] it came from; if the connection
/// closes first, the answer is [`ClientError::Closed`]. Dropping a
/// `Pending` does not cancel the call: the broker still performs it, and
/// its answer is discarded.
#[must_use = "the call is sent either way; drop the Pending to ignore its answer"]
pub struct Pending<T> {
    slot: Arc<Slot>,
    /// `None` once the answer was taken through `try_take` or `poll`.
    convert: Option<Convert<T>>,
    /// The connection whose reader completes this, for the deadlock check.
    conn_id: u64,
}

impl<T> std::fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &*self.slot.state.lock() {
            State::Waiting { .. } => "waiting",
            State::Ready(_) => "ready",
            State::Taken => "taken",
        };
        f.debug_struct("Pending").field("state", &state).finish()
    }
}

fn already_taken() -> ClientError {
    ClientError::Protocol("the answer of this call was already taken".into())
}

impl<T> Pending<T> {
    pub(crate) fn new(slot: Arc<Slot>, convert: Convert<T>, conn_id: u64) -> Pending<T> {
        Pending {
            slot,
            convert: Some(convert),
            conn_id,
        }
    }

    /// Blocks until the answer arrives, at most `timeout`. A timeout
    /// ([`ClientError::Timeout`]) abandons the answer; the call may still
    /// take effect at the broker.
    ///
    /// Called on the connection's own reader thread (an event handler or an
    /// `on_complete` callback) before the answer is there, it fails at once
    /// with [`ClientError::WouldDeadlock`]: that thread is the one that would
    /// deliver the answer.
    pub fn wait(mut self, timeout: Duration) -> Result<T, ClientError> {
        let deadline = Instant::now().checked_add(timeout);
        let mut st = self.slot.state.lock();
        loop {
            match std::mem::replace(&mut *st, State::Taken) {
                State::Ready(answer) => {
                    drop(st);
                    return match self.convert.take() {
                        Some(c) => c.apply(answer),
                        None => Err(already_taken()),
                    };
                }
                State::Taken => return Err(already_taken()),
                waiting => *st = waiting,
            }
            if on_reader_thread(self.conn_id) {
                return Err(ClientError::WouldDeadlock);
            }
            match deadline {
                Some(d) => {
                    if self.slot.cv.wait_until(&mut st, d).timed_out()
                        && matches!(*st, State::Waiting { .. })
                    {
                        return Err(ClientError::Timeout(timeout));
                    }
                }
                None => self.slot.cv.wait(&mut st),
            }
        }
    }

    /// The answer if it is there, without blocking: `None` until it
    /// arrives, and again after it was taken.
    pub fn try_take(&mut self) -> Option<Result<T, ClientError>> {
        let mut st = self.slot.state.lock();
        if !matches!(*st, State::Ready(_)) {
            return None;
        }
        let State::Ready(answer) = std::mem::replace(&mut *st, State::Taken) else {
            return None;
        };
        drop(st);
        Some(match self.convert.take() {
            Some(c) => c.apply(answer),
            None => Err(already_taken()),
        })
    }

    /// Hands the answer to `f`: on the connection's reader thread when it
    /// arrives (or on the thread that closes the connection's reader, when
    /// it dies), or at once on the calling thread if it is already there.
    /// `f` runs exactly once (with an error if the answer was already taken
    /// by `try_take`). It must not block for long: the reader thread
    /// delivers every answer and event of the connection.
    pub fn on_complete(mut self, f: impl FnOnce(Result<T, ClientError>) + Send + 'static)
    where
        T: 'static,
    {
        let Some(convert) = self.convert.take() else {
            return f(Err(already_taken()));
        };
        let mut st = self.slot.state.lock();
        match std::mem::replace(&mut *st, State::Taken) {
            State::Ready(answer) => {
                drop(st);
                f(convert.apply(answer));
            }
            State::Taken => {
                drop(st);
                f(Err(already_taken()));
            }
            State::Waiting { waker, .. } => {
                *st = State::Waiting {
                    waker,
                    callback: Some(Box::new(move |answer| f(convert.apply(answer)))),
                };
            }
        }
    }

    /// Has the answer arrived (and not been taken)?
    pub fn is_ready(&self) -> bool {
        matches!(*self.slot.state.lock(), State::Ready(_))
    }
}

impl<T> Future for Pending<T> {
    type Output = Result<T, ClientError>;

    /// Ready with the answer once the reader thread delivered it; polling
    /// again after that yields an error rather than panicking.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut st = this.slot.state.lock();
        match &mut *st {
            State::Ready(_) => {
                let State::Ready(answer) = std::mem::replace(&mut *st, State::Taken) else {
                    return Poll::Ready(Err(already_taken()));
                };
                drop(st);
                Poll::Ready(match this.convert.take() {
                    Some(c) => c.apply(answer),
                    None => Err(already_taken()),
                })
            }
            State::Taken => Poll::Ready(Err(already_taken())),
            State::Waiting { waker, .. } => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_proto::params::OkResult;

    fn ok(o: Outcome) -> Result<bool, ClientError> {
        match o {
            Outcome::Ok(r) => Ok(r.ok),
            _ => Err(ClientError::Protocol("not ok".into())),
        }
    }

    fn pending() -> (Arc<Slot>, Pending<bool>) {
        let slot = Slot::new();
        (slot.clone(), Pending::new(slot, Convert::Fn(ok), u64::MAX))
    }

    #[test]
    fn pending_and_events_can_move_between_threads_and_tasks() {
        fn send_unpin<T: Send + Unpin>() {}
        send_unpin::<Pending<a2a_proto::types::Task>>();
        send_unpin::<Pending<crate::Agent>>();
        send_unpin::<crate::Events>();
    }

    #[test]
    fn try_take_sees_the_answer_once() {
        let (slot, mut p) = pending();
        assert!(p.try_take().is_none());
        slot.complete(Ok(Outcome::Ok(OkResult { ok: true })));
        // A second completion is ignored.
        slot.complete(Ok(Outcome::Ok(OkResult { ok: false })));
        assert!(p.is_ready());
        assert!(matches!(p.try_take(), Some(Ok(true))));
        assert!(p.try_take().is_none());
        assert!(matches!(
            p.wait(Duration::ZERO),
            Err(ClientError::Protocol(_))
        ));
    }

    #[test]
    fn wait_times_out_then_a_late_answer_is_harmless() {
        let (slot, p) = pending();
        assert!(matches!(
            p.wait(Duration::from_millis(5)),
            Err(ClientError::Timeout(_))
        ));
        slot.complete(Ok(Outcome::Ok(OkResult { ok: true })));
    }

    #[test]
    fn on_complete_runs_once_now_or_later() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (slot, p) = pending();
        let t = tx.clone();
        p.on_complete(move |r| t.send(r.ok()).unwrap());
        assert!(rx.try_recv().is_err());
        slot.complete(Ok(Outcome::Ok(OkResult { ok: true })));
        assert_eq!(rx.try_recv().unwrap(), Some(true));
        let (slot, p) = pending();
        slot.complete(Err(ClientError::WouldDeadlock));
        p.on_complete(move |r| tx.send(r.ok()).unwrap());
        assert_eq!(rx.try_recv().unwrap(), None);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_wait_on_the_reader_thread_fails_instead_of_blocking() {
        let slot = Slot::new();
        let p: Pending<bool> = Pending::new(slot, Convert::Fn(ok), 77);
        let r = std::thread::spawn(move || {
            mark_reader_thread(77);
            p.wait(Duration::from_secs(60))
        })
        .join()
        .unwrap();
        assert!(matches!(r, Err(ClientError::WouldDeadlock)));
    }
}
