//! One thread that runs callbacks at deadlines: `events.wait` timeouts and
//! blocking-send expiries. Callbacks must be short and must not block.

use parking_lot::{Condvar, Mutex};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Instant;

type Callback = Box<dyn FnOnce() + Send>;

struct Entry {
    at: Instant,
    seq: u64,
    f: Callback,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

#[derive(Default)]
struct Inner {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

/// A handle to the timer thread; cheap to clone.
#[derive(Clone)]
pub struct Timer {
    shared: Arc<(Mutex<Inner>, Condvar)>,
}

impl Timer {
    /// Starts the timer thread. It lives as long as the process.
    pub fn start() -> Timer {
        let shared = Arc::new((Mutex::new(Inner::default()), Condvar::new()));
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("a2a-timer".into())
            .spawn(move || run(&thread_shared))
            .expect("spawn timer thread");
        Timer { shared }
    }

    /// Runs `f` on the timer thread at `at` (at once if `at` has passed).
    pub fn schedule(&self, at: Instant, f: impl FnOnce() + Send + 'static) {
        let (lock, cond) = &*self.shared;
        let mut inner = lock.lock();
        inner.seq += 1;
        let seq = inner.seq;
        let earliest = inner.heap.peek().is_none_or(|Reverse(e)| at < e.at);
        inner.heap.push(Reverse(Entry {
            at,
            seq,
            f: Box::new(f),
        }));
        if earliest {
            cond.notify_one();
        }
    }
}

fn run(shared: &(Mutex<Inner>, Condvar)) {
    let (lock, cond) = shared;
    let mut inner = lock.lock();
    loop {
        let now = Instant::now();
        match inner.heap.peek() {
            Some(Reverse(e)) if e.at <= now => {
                let Reverse(e) = inner.heap.pop().expect("peeked");
                drop(inner);
                // A panicking callback must not kill the timer for everyone.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(e.f));
                inner = lock.lock();
            }
            Some(Reverse(e)) => {
                let at = e.at;
                cond.wait_until(&mut inner, at);
            }
            None => cond.wait(&mut inner),
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
}
