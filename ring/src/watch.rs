//! Waiting for the consumers of many rings to free room, with no thread
//! and no timer per ring: the producer side of the reverse eventcount as a
//! process needs it when it holds many rings (the broker, one per
//! connection).
//!
//! A producer whose overflow queue could not go into its full ring arms the
//! consumer's signal ([`crate::Producer::arm_space_signal`]) and hands the
//! ring's `space` word to a [`SpaceWatcher`]. A watcher thread sleeps on up
//! to 127 such words at once with `futex_waitv` (Linux 5.16+), plus one
//! control word that wakes it when its list changes, and runs the ring's
//! `ready` callback when its consumer signals. A ring whose consumer never
//! reads costs nothing meanwhile: no wake-up, no system call.
//!
//! On a kernel without `futex_waitv` (or if a watcher thread cannot be
//! started, so that one thread holds more words than one call takes), a
//! watcher thread looks at its words every [`POLL_WITHOUT_WAITV`] instead:
//! one thread's timer for all its rings, never one per ring.

use crate::futex;
use crate::publisher::Publisher;
use crate::segment::{Segment, SpaceWord};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Rings one watcher thread waits on: `futex_waitv`'s bound less the
/// thread's control word.
const PER_THREAD: usize = futex::WAITV_MAX - 1;

/// How often a watcher thread looks at its words when it cannot sleep on
/// all of them (no `futex_waitv`, or more words than one call takes).
pub const POLL_WITHOUT_WAITV: Duration = Duration::from_millis(20);

/// Watcher threads' stacks: they only copy words and run short callbacks.
const STACK: usize = 64 * 1024;

/// Waits for consumers to free room in their rings, on a few threads for
/// any number of rings (see the module doc). Threads start as they are
/// needed and live as long as the watcher's process.
pub struct SpaceWatcher {
    workers: Mutex<Vec<Arc<Worker>>>,
    next_id: AtomicU64,
}

/// One watcher thread's state.
struct Worker {
    /// Bumped and woken whenever `entries` changes, so the thread rebuilds
    /// the set of words it sleeps on.
    control: AtomicU32,
    entries: Mutex<Vec<Entry>>,
}

/// One ring being watched.
struct Entry {
    id: u64,
    word: SpaceWord,
    /// The value the producer read before arming: the consumer's signal
    /// changes it.
    expected: u32,
    ready: Box<dyn FnOnce() + Send>,
    fired: Arc<AtomicBool>,
}

/// One ring's watch, from [`Publisher::watch_space`]: `ready` runs once,
/// on a watcher thread, when the consumer frees room. Dropping the watch
/// before that cancels it (and lets the segment's mapping go).
pub struct SpaceWatch {
    worker: Arc<Worker>,
    id: u64,
    fired: Arc<AtomicBool>,
}

impl SpaceWatch {
    /// Has the consumer signalled (and `ready` run or begun)?
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }
}

impl Drop for SpaceWatch {
    fn drop(&mut self) {
        let removed = {
            let mut entries = lock(&self.worker.entries);
            let before = entries.len();
            entries.retain(|e| e.id != self.id);
            entries.len() != before
        };
        if removed {
            self.worker.kick();
        }
    }
}

impl Default for SpaceWatcher {
    fn default() -> Self {
        Self::new()
    }
}

impl SpaceWatcher {
    /// A watcher with no thread yet.
    pub fn new() -> Self {
        SpaceWatcher {
            workers: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
        }
    }

    /// Watcher threads started so far (diagnostics, tests).
    pub fn threads(&self) -> usize {
        lock(&self.workers).len()
    }

    /// Runs `ready` on a watcher thread once `word` no longer holds
    /// `expected`.
    fn watch(&self, word: SpaceWord, expected: u32, ready: Box<dyn FnOnce() + Send>) -> SpaceWatch {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let fired = Arc::new(AtomicBool::new(false));
        let worker = self.worker_with_room();
        lock(&worker.entries).push(Entry {
            id,
            word,
            expected,
            ready,
            fired: fired.clone(),
        });
        worker.kick();
        SpaceWatch { worker, id, fired }
    }

    /// A worker with fewer than [`PER_THREAD`] entries, started if none
    /// has room (or the least loaded one if no thread can be started: it
    /// then polls, see the module doc).
    fn worker_with_room(&self) -> Arc<Worker> {
        let mut workers = lock(&self.workers);
        if let Some(w) = workers.iter().find(|w| lock(&w.entries).len() < PER_THREAD) {
            return w.clone();
        }
        let worker = Arc::new(Worker {
            control: AtomicU32::new(0),
            entries: Mutex::new(Vec::new()),
        });
        let runner = worker.clone();
        let started = std::thread::Builder::new()
            .name("a2a-ring-watch".into())
            .stack_size(STACK)
            .spawn(move || runner.run());
        match started {
            Ok(_) => {
                workers.push(worker.clone());
                worker
            }
            Err(_) => match workers.iter().min_by_key(|w| lock(&w.entries).len()) {
                Some(w) => w.clone(),
                // Not even one thread: this worker is never run, so its
                // entries never fire. Keep it anyway so the caller's
                // backlog still moves on its next publish.
                None => worker,
            },
        }
    }
}

impl Worker {
    /// Tells the thread its list changed.
    fn kick(&self) {
        // SYNC POINT: Release pairs with the thread's Acquire load of
        // `control` in `run`: a thread that reads the new value also sees
        // the list change made before it (it takes the list's lock anyway).
        self.control.fetch_add(1, Ordering::Release);
        futex::wake_all(&self.control);
    }

    /// The thread: fire what moved, then sleep on the rest and the control
    /// word.
    fn run(&self) {
        let mut waitv = true;
        loop {
            // SYNC POINT: Acquire, see `kick`. Read before the list: a
            // change after this read changes the word the wait compares.
            let control = self.control.load(Ordering::Acquire);
            let (fired, words) = {
                let mut entries = lock(&self.entries);
                let mut fired = Vec::new();
                let mut i = 0;
                while i < entries.len() {
                    // SYNC POINT: Acquire pairs with the consumer's Release
                    // bump of `space` (consumer.rs, `release`).
                    if entries[i].word.word().load(Ordering::Acquire) != entries[i].expected {
                        fired.push(entries.swap_remove(i));
                    } else {
                        i += 1;
                    }
                }
                let words: Vec<(SpaceWord, u32)> = entries
                    .iter()
                    .map(|e| (e.word.clone(), e.expected))
                    .collect();
                (fired, words)
            };
            for e in fired {
                e.fired.store(true, Ordering::Release);
                (e.ready)();
            }
            if words.is_empty() {
                futex::wait(&self.control, control, None);
                continue;
            }
            let mut list: Vec<(&AtomicU32, u32)> = Vec::with_capacity(words.len() + 1);
            list.push((&self.control, control));
            list.extend(words.iter().map(|(w, x)| (w.word(), *x)));
            if waitv && list.len() <= futex::WAITV_MAX {
                // `words` keeps every mapping alive across the wait.
                if futex::wait_any(&list, None).is_ok() {
                    continue;
                }
                waitv = false;
            }
            futex::wait(&self.control, control, Some(POLL_WITHOUT_WAITV));
        }
    }
}

impl Publisher<Segment> {
    /// After a [`Publisher::flush`] that left events queued behind a full
    /// ring: asks the consumer to signal when it frees room, and has
    /// `watcher` run `ready` (on its thread) when it does. `None` when the
    /// consumer already freed room: flush again now. Keep the watch while
    /// waiting; dropping it cancels.
    pub fn watch_space(
        &mut self,
        watcher: &SpaceWatcher,
        ready: impl FnOnce() + Send + 'static,
    ) -> Option<SpaceWatch> {
        let producer = self.producer_mut();
        let expected = producer.arm_space_signal()?;
        let word = producer.memory().space_word();
        Some(watcher.watch(word, expected, Box::new(ready)))
    }
}

/// A poisoned lock only means a `ready` callback panicked on a watcher
/// thread; the lists themselves are always consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
