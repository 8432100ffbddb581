//! One thread that runs callbacks at deadlines: `events.wait` timeouts and
//! blocking-send expiries. Callbacks must be short and must not block.
//!
//! Kept hand-written rather than pulling in a runtime's timer wheel: the
//! broker's deadlines are few (at most `A2A_MAX_PARKED_WAITS` per
//! connection), and what they need beyond a heap is cancellation (a wait
//! answered early leaves nothing queued) and an end (the thread exits when
//! the last handle is dropped), both a few lines over an ordered map.

use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

type Callback = Box<dyn FnOnce() + Send>;

/// Identifies a scheduled callback, to cancel it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimerKey(Instant, u64);

/// What the timer thread is doing, so that a new deadline wakes it only
/// when it must.
#[derive(Default, Clone, Copy)]
enum Sleep {
    /// Running callbacks or about to look at `due`: it will see any new
    /// deadline before it sleeps.
    #[default]
    Awake,
    /// Asleep until this instant (it may be a cancelled callback's).
    Until(Instant),
    /// Asleep with nothing due.
    Forever,
}

#[derive(Default)]
struct Inner {
    /// Ordered by deadline, then by scheduling order.
    due: BTreeMap<TimerKey, Callback>,
    seq: u64,
    /// Set when the last handle is dropped: the thread exits.
    stopped: bool,
    sleep: Sleep,
    /// Times the thread came back from waiting (the tests' measure).
    #[cfg(test)]
    wakeups: u64,
}

struct Shared {
    inner: Mutex<Inner>,
    cond: Condvar,
}

/// Stops the thread when the last [`Timer`] clone goes.
struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.inner.lock().stopped = true;
        self.0.cond.notify_one();
    }
}

/// A handle to the timer thread; cheap to clone.
#[derive(Clone)]
pub struct Timer {
    owner: Arc<Owner>,
}

impl Timer {
    /// Starts the timer thread. It exits once every handle is dropped
    /// (callbacks still due then are dropped without running).
    pub fn start() -> Timer {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner::default()),
            cond: Condvar::new(),
        });
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("a2a-timer".into())
            .spawn(move || run(&thread_shared))
            .expect("spawn timer thread");
        Timer {
            owner: Arc::new(Owner(shared)),
        }
    }

    /// Runs `f` on the timer thread at `at` (at once if `at` has passed).
    pub fn schedule(&self, at: Instant, f: impl FnOnce() + Send + 'static) -> TimerKey {
        let shared = &self.owner.0;
        let mut inner = shared.inner.lock();
        inner.seq += 1;
        let key = TimerKey(at, inner.seq);
        inner.due.insert(key, Box::new(f));
        // Woken only if it would sleep past `at`. Not when it sleeps until
        // an earlier instant, even one whose callback was cancelled: with
        // one blocking send at a time, each send's expiry goes into an
        // empty timer, and waking the thread for it cost a context switch
        // per send; the thread wakes at the stale instant instead (once
        // per expiry period) and sleeps again until this one.
        let wake = match inner.sleep {
            Sleep::Awake => false,
            Sleep::Until(t) => at < t,
            Sleep::Forever => true,
        };
        if wake {
            shared.cond.notify_one();
        }
        key
    }

    /// Drops a callback that has not run yet (no effect if it ran).
    pub fn cancel(&self, key: TimerKey) {
        self.owner.0.inner.lock().due.remove(&key);
    }

    /// Callbacks waiting to run.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.owner.0.inner.lock().due.len()
    }
}

fn run(shared: &Shared) {
    let mut inner = shared.inner.lock();
    loop {
        if inner.stopped {
            return;
        }
        let now = Instant::now();
        match inner.due.first_key_value().map(|(k, _)| *k) {
            Some(key) if key.0 <= now => {
                let f = inner.due.remove(&key).expect("first key");
                drop(inner);
                // A panicking callback must not kill the timer for everyone.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
                inner = shared.inner.lock();
            }
            next => {
                match next {
                    Some(key) => {
                        inner.sleep = Sleep::Until(key.0);
                        shared.cond.wait_until(&mut inner, key.0);
                    }
                    None => {
                        inner.sleep = Sleep::Forever;
                        shared.cond.wait(&mut inner);
                    }
                }
                inner.sleep = Sleep::Awake;
                #[cfg(test)]
                {
                    inner.wakeups += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn fires_in_deadline_order() {
        let t = Timer::start();
        let (tx, rx) = crossbeam_channel::unbounded();
        let now = Instant::now();
        for (i, ms) in [(1, 30u64), (2, 10), (3, 20)] {
            let tx = tx.clone();
            t.schedule(now + Duration::from_millis(ms), move || tx.send(i).unwrap());
        }
        let got: Vec<i32> = (0..3)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        assert_eq!(got, [2, 3, 1]);
    }

    #[test]
    fn cancelled_callbacks_never_run_and_leave_nothing_queued() {
        let t = Timer::start();
        let (tx, rx) = crossbeam_channel::unbounded();
        let now = Instant::now();
        let a = t.schedule(now + Duration::from_secs(3600), || panic!("cancelled"));
        let b = t.schedule(now + Duration::from_secs(3600), || panic!("cancelled"));
        assert_eq!(t.pending(), 2);
        t.cancel(a);
        assert_eq!(t.pending(), 1);
        t.cancel(b);
        assert_eq!(t.pending(), 0);
        // Cancelling one that already ran changes nothing.
        let ran = t.schedule(now, move || tx.send(1).unwrap());
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 1);
        t.cancel(ran);
        assert_eq!(t.pending(), 0);
    }

    /// One blocking send in flight at a time: each schedules its expiry
    /// into an empty timer (the previous one was cancelled when its send
    /// was answered). A deadline later than the one the thread already
    /// sleeps until must not wake it: that was a context switch and two
    /// futex calls per blocking send.
    #[test]
    fn a_later_deadline_does_not_wake_the_thread() {
        let t = Timer::start();
        let base = Instant::now() + Duration::from_secs(3600);
        let first = t.schedule(base, || {});
        t.cancel(first);
        // Time for the thread to go to sleep until `base`.
        std::thread::sleep(Duration::from_millis(50));
        let before = t.owner.0.inner.lock().wakeups;
        for i in 1..=50u64 {
            let k = t.schedule(base + Duration::from_millis(i), || {});
            // Time for a woken thread to run (it would, before the fix).
            std::thread::sleep(Duration::from_millis(2));
            t.cancel(k);
        }
        let woke = t.owner.0.inner.lock().wakeups - before;
        assert!(woke <= 2, "woken {woke} times for 50 later deadlines");
        // An earlier deadline still wakes it, and runs on time.
        let (tx, rx) = crossbeam_channel::unbounded();
        t.schedule(Instant::now() + Duration::from_millis(20), move || {
            tx.send(()).unwrap()
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("an earlier deadline runs");
    }

    /// A deadline whose callback was cancelled wakes the thread once; it
    /// then sleeps until the next one, which still runs.
    #[test]
    fn after_a_cancelled_deadline_the_next_one_runs() {
        let t = Timer::start();
        let now = Instant::now();
        let gone = t.schedule(now + Duration::from_millis(20), || panic!("cancelled"));
        let (tx, rx) = crossbeam_channel::unbounded();
        t.schedule(now + Duration::from_millis(60), move || tx.send(2).unwrap());
        t.cancel(gone);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 2);
    }

    #[test]
    fn the_thread_ends_with_the_last_handle() {
        let t = Timer::start();
        let weak = Arc::downgrade(&t.owner.0);
        t.schedule(Instant::now() + Duration::from_secs(3600), || {});
        drop(t);
        let deadline = Instant::now() + Duration::from_secs(10);
        while weak.upgrade().is_some() {
            assert!(Instant::now() < deadline, "timer thread still running");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
