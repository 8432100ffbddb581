//! Where callbacks run, and the bookkeeping that lets a2a_client_free
//! promise that none runs after it returns.
//!
//! A client is made in one of two dispatch modes:
//! - `A2A_DISPATCH_THREAD`: completion and event callbacks run on the
//!   connection's reader thread as answers arrive (hosts with threads);
//! - `A2A_DISPATCH_POLL`: they are queued, a readiness descriptor (an
//!   eventfd on Linux, a pipe elsewhere) becomes readable, and the host runs
//!   them on its own thread with a2a_client_poll (event-loop hosts).
//!
//! One mutex guards the queue and three counters: calls submitted whose
//! callback has not started (`outstanding`), callbacks running now
//! (`running`), and `closed`. a2a_client_free sets `closed` (no event
//! callback starts after that), closes the connection (every pending call
//! then completes, with A2A_STATUS_CLOSED if nothing else), and waits
//! until `outstanding` is 0 and no callback but its own callers' runs;
//! in poll mode it runs the queued completions itself while it waits.
//!
//! The descriptor is written only when the queue goes from empty to
//! non-empty and drained only when a2a_client_poll finds it empty, both
//! under the mutex, so a wake-up is never lost and a burst of answers costs
//! one write.

use crate::args::{bad_enum, c_enum};
use crate::status::{contain, FfiError};
use parking_lot::{Condvar, Mutex};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Where a client's callbacks run: one of the A2A_DISPATCH_ constants (an
/// integer, checked by a2a_client_new).
#[allow(non_camel_case_types)]
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct a2a_dispatch(pub i32);

impl a2a_dispatch {
    /// On the connection's reader thread, as answers and events arrive.
    pub const THREAD: a2a_dispatch = a2a_dispatch(0);
    /// Queued; run by a2a_client_poll on the host's thread, announced by
    /// the readiness descriptor (a2a_client_fd).
    pub const POLL: a2a_dispatch = a2a_dispatch(1);
}

c_enum!(a2a_dispatch {
    THREAD => "A2A_DISPATCH_THREAD",
    POLL => "A2A_DISPATCH_POLL",
});

/// A caller's `void *userdata`, carried to the thread that runs its
/// callback.
#[derive(Clone, Copy)]
pub(crate) struct UserData(pub(crate) *mut c_void);

// SAFETY: the pointer is never dereferenced here, only handed back to the
// caller's callback; the header documents on which thread each callback
// runs, and making the pointee safe to use there is the caller's part of
// the contract (as for any C callback API).
unsafe impl Send for UserData {}

impl UserData {
    /// The pointer (a method, so that closures capture the `Send` wrapper
    /// rather than its field).
    pub(crate) fn ptr(self) -> *mut c_void {
        self.0
    }
}

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Queued {
    job: Job,
    /// A call's completion (counted in `outstanding`, never skipped), or an
    /// event (dropped once the dispatcher is closed).
    completion: bool,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Queued>,
    /// The descriptor has been written since the queue was last empty.
    signaled: bool,
    outstanding: usize,
    running: usize,
    closed: bool,
}

/// One client's callback dispatcher (see the module doc).
pub(crate) struct Dispatcher {
    mode: a2a_dispatch,
    st: Mutex<State>,
    /// Wakes a2a_client_free waiting for callbacks to end.
    cv: Condvar,
    /// Poll mode: the readiness descriptor.
    ready: Option<Readiness>,
}

thread_local! {
    /// The dispatchers whose callbacks are running on this thread (a
    /// stack: a callback may poll, and so nest), so that a2a_client_free
    /// called from a callback does not wait for itself.
    static RUNNING_HERE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

impl Dispatcher {
    /// A dispatcher for `mode` (the caller's `options->dispatch`, checked
    /// here).
    pub(crate) fn new(mode: a2a_dispatch) -> Result<Dispatcher, FfiError> {
        let ready = match mode {
            a2a_dispatch::THREAD => None,
            a2a_dispatch::POLL => Some(
                Readiness::new().map_err(|e| FfiError::Client(a2a_client::ClientError::Io(e)))?,
            ),
            _ => return Err(bad_enum(mode, "options->dispatch", |_| true)),
        };
        Ok(Dispatcher {
            mode,
            st: Mutex::new(State::default()),
            cv: Condvar::new(),
            ready,
        })
    }

    pub(crate) fn mode(&self) -> a2a_dispatch {
        self.mode
    }

    /// The readiness descriptor (poll mode).
    pub(crate) fn fd(&self) -> Option<RawFd> {
        self.ready.as_ref().map(|r| r.read.as_raw_fd())
    }

    fn key(&self) -> usize {
        self as *const Dispatcher as usize
    }

    /// Is one of this dispatcher's callbacks running on this thread?
    fn running_here(&self) -> bool {
        let key = self.key();
        RUNNING_HERE.with(|r| r.borrow().contains(&key))
    }

    /// A blocking call of this client is about to wait: refused with
    /// WOULD_DEADLOCK inside one of its callbacks in thread mode, as the
    /// header promises. The client itself refuses only on its socket
    /// reader thread, but a thread-mode callback also runs on the event
    /// ring's thread, on a registering thread (events queued before the
    /// callback was set) and on a submitting thread (an answer already
    /// there); whether a wait there returns would depend on which thread
    /// happened to run the callback. One rule for every callback is what C
    /// can rely on.
    pub(crate) fn may_block(&self) -> Result<(), FfiError> {
        if self.ready.is_none() && self.running_here() {
            return Err(FfiError::Client(a2a_client::ClientError::WouldDeadlock));
        }
        Ok(())
    }

    /// A call is about to be submitted: its completion is owed.
    pub(crate) fn begin_call(&self) {
        self.st.lock().outstanding += 1;
    }

    /// The submission failed: no completion will come.
    pub(crate) fn abort_call(&self) {
        let mut st = self.st.lock();
        st.outstanding -= 1;
        drop(st);
        self.cv.notify_all();
    }

    /// A call's answer is here (reader thread, or the submitting thread if
    /// it came first): run `job` now, or queue it for a2a_client_poll.
    pub(crate) fn complete(&self, job: Job) {
        self.deliver(Queued {
            job,
            completion: true,
        });
    }

    /// An event for a registered callback: run it now, or queue it; dropped
    /// once the client is being freed.
    pub(crate) fn event(&self, job: Job) {
        self.deliver(Queued {
            job,
            completion: false,
        });
    }

    fn deliver(&self, q: Queued) {
        match &self.ready {
            None => self.run(q),
            Some(ready) => {
                let mut st = self.st.lock();
                if st.closed && !q.completion {
                    return;
                }
                st.queue.push_back(q);
                if !st.signaled {
                    st.signaled = true;
                    ready.signal();
                }
                drop(st);
                // a2a_client_free may be waiting to run it.
                self.cv.notify_all();
            }
        }
    }

    /// Runs one job on this thread, counted in `running`.
    fn run(&self, q: Queued) {
        {
            let mut st = self.st.lock();
            if q.completion {
                st.outstanding -= 1;
            } else if st.closed {
                return;
            }
            st.running += 1;
        }
        self.run_started(q.job);
    }

    fn run_started(&self, job: Job) {
        let key = self.key();
        RUNNING_HERE.with(|r| r.borrow_mut().push(key));
        contain(job);
        RUNNING_HERE.with(|r| {
            r.borrow_mut().pop();
        });
        let mut st = self.st.lock();
        st.running -= 1;
        drop(st);
        self.cv.notify_all();
    }

    /// Takes the next queued job (poll mode), counting it as running; when
    /// the queue is empty, clears the descriptor.
    fn next(&self) -> Option<Job> {
        let mut st = self.st.lock();
        loop {
            let Some(q) = st.queue.pop_front() else {
                if st.signaled {
                    st.signaled = false;
                    if let Some(r) = &self.ready {
                        r.clear();
                    }
                }
                return None;
            };
            if q.completion {
                st.outstanding -= 1;
            } else if st.closed {
                continue;
            }
            st.running += 1;
            return Some(q.job);
        }
    }

    /// Runs up to `max` queued callbacks on this thread; returns how many.
    pub(crate) fn poll(&self, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some(job) = self.next() else { break };
            self.run_started(job);
            n += 1;
        }
        n
    }

    /// Ends dispatching (a2a_client_free, after the connection was closed
    /// so that every owed completion comes): returns once every owed
    /// completion has run and no callback runs, except on this thread's
    /// own stack. On the reader thread of a thread-mode client (free
    /// called from a callback) the owed completions can only run after
    /// the current callback returns, so it cannot wait for them.
    pub(crate) fn shut_down(&self, close_connection: impl FnOnce()) {
        {
            let mut st = self.st.lock();
            st.closed = true;
            st.queue.retain(|q| q.completion);
        }
        close_connection();
        let key = self.key();
        let mine = RUNNING_HERE.with(|r| r.borrow().iter().filter(|k| **k == key).count());
        loop {
            if self.ready.is_some() {
                self.poll(usize::MAX);
            }
            let mut st = self.st.lock();
            if st.outstanding == 0 && st.running == mine {
                return;
            }
            if self.ready.is_none() && mine > 0 {
                return;
            }
            if self.ready.is_some() && !st.queue.is_empty() {
                continue;
            }
            // Woken by every completion and every callback's end; the
            // reader thread fails every pending call promptly once the
            // connection is closed. The bound only re-checks the queue.
            self.cv
                .wait_for(&mut st, std::time::Duration::from_millis(50));
        }
    }
}

/// The readiness descriptor: an eventfd (Linux) or a non-blocking pipe.
struct Readiness {
    read: OwnedFd,
    /// The pipe's write end; `None` for an eventfd (one descriptor).
    write: Option<OwnedFd>,
}

impl Readiness {
    #[cfg(target_os = "linux")]
    fn new() -> std::io::Result<Readiness> {
        // SAFETY: eventfd(2) takes two integers and returns a new
        // descriptor or -1; nothing of ours is touched.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Readiness {
            // SAFETY: `fd` is a fresh descriptor that nothing else owns.
            read: unsafe { OwnedFd::from_raw_fd(fd) },
            write: None,
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn new() -> std::io::Result<Readiness> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe(2) writes two descriptors into the array we own.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both are fresh descriptors that nothing else owns.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        for fd in [&read, &write] {
            // SAFETY: fcntl(2) on a descriptor we own, with integer flags.
            unsafe {
                let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        Ok(Readiness {
            read,
            write: Some(write),
        })
    }

    /// Makes the descriptor readable.
    fn signal(&self) {
        let fd = self.write.as_ref().unwrap_or(&self.read).as_raw_fd();
        let one: u64 = 1;
        // A pipe takes one byte, an eventfd eight.
        let n = if self.write.is_some() { 1 } else { 8 };
        // SAFETY: writes `n <= 8` bytes from a local u64 to a descriptor we
        // own. A full pipe or a saturated eventfd (EAGAIN) is already
        // readable, which is all a signal must achieve.
        unsafe { libc::write(fd, (&one as *const u64).cast(), n) };
    }

    /// Makes the descriptor unreadable again.
    fn clear(&self) {
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: reads at most 64 bytes into a local buffer from a
            // non-blocking descriptor we own.
            let n =
                unsafe { libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            // An eventfd is emptied by one read; a pipe may hold more.
            if n <= 0 || self.write.is_none() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn readable(fd: RawFd) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own, no timeout.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    #[test]
    fn poll_mode_queues_signals_once_and_runs_each_job_once() {
        let d = Dispatcher::new(a2a_dispatch::POLL).unwrap();
        let fd = d.fd().unwrap();
        assert!(!readable(fd));
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            d.begin_call();
            let r = ran.clone();
            d.complete(Box::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            }));
        }
        assert!(readable(fd));
        assert_eq!(d.poll(2), 2);
        assert!(readable(fd), "one job is still queued");
        assert_eq!(d.poll(10), 1);
        assert!(!readable(fd));
        assert_eq!(ran.load(Ordering::SeqCst), 3);
        assert_eq!(d.st.lock().outstanding, 0);
    }

    #[test]
    fn shut_down_runs_owed_completions_and_drops_events() {
        let d = Dispatcher::new(a2a_dispatch::POLL).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        d.begin_call();
        let r = ran.clone();
        d.complete(Box::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        let r = ran.clone();
        d.event(Box::new(move || {
            r.fetch_add(100, Ordering::SeqCst);
        }));
        d.shut_down(|| {});
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        let r = ran.clone();
        d.event(Box::new(move || {
            r.fetch_add(100, Ordering::SeqCst);
        }));
        assert_eq!(d.poll(10), 0);
    }

    #[test]
    fn blocking_is_refused_inside_a_thread_mode_callback_of_the_same_client_only() {
        let d = Arc::new(Dispatcher::new(a2a_dispatch::THREAD).unwrap());
        let other = Arc::new(Dispatcher::new(a2a_dispatch::THREAD).unwrap());
        let poll = Arc::new(Dispatcher::new(a2a_dispatch::POLL).unwrap());
        assert!(d.may_block().is_ok(), "outside any callback");
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (d2, o2, p2, s2) = (d.clone(), other.clone(), poll.clone(), seen.clone());
        // An event delivered on this (any) thread runs its job here, as a
        // callback of `d`.
        d.event(Box::new(move || {
            s2.lock().extend([
                d2.may_block().is_err(),
                o2.may_block().is_ok(),
                p2.may_block().is_ok(),
            ]);
        }));
        assert_eq!(*seen.lock(), [true, true, true]);
        assert!(d.may_block().is_ok(), "after the callback");
        // Poll mode: the host's own thread runs callbacks and may block.
        let (p3, s3) = (poll.clone(), seen.clone());
        poll.event(Box::new(move || s3.lock().push(p3.may_block().is_ok())));
        assert_eq!(poll.poll(8), 1);
        assert_eq!(seen.lock().last(), Some(&true));
    }

    #[test]
    fn an_unknown_dispatch_mode_is_refused() {
        let e = Dispatcher::new(a2a_dispatch(7)).err().unwrap().to_string();
        assert!(e.contains("`options->dispatch` is 7;"), "{e}");
    }

    #[test]
    fn thread_mode_free_waits_for_a_completion_owed_by_another_thread() {
        let d = Arc::new(Dispatcher::new(a2a_dispatch::THREAD).unwrap());
        d.begin_call();
        let done = Arc::new(AtomicUsize::new(0));
        let (d2, done2) = (d.clone(), done.clone());
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            d2.complete(Box::new(move || {
                done2.store(1, Ordering::SeqCst);
            }));
        });
        d.shut_down(|| {});
        assert_eq!(done.load(Ordering::SeqCst), 1, "free returned first");
        t.join().unwrap();
    }
}
