//! The Rust client's windowed read loop: the `async-256` mode of
//! `benches/client_async.rs` and the Rust baseline of the C ABI's window
//! in `ffi/benches/ffi.rs`, one loop so that both measure the same thing.

use a2a_client::{Agent, Pending, Task};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// `n` `a2a.tasks.get` of `task` (last message only) with up to `window`
/// submitted and unanswered, each answer awaited at most `timeout`; the
/// time they took. Waits for the oldest, takes every answer already there
/// behind it, then refills the window in one burst (which the writer
/// coalesces).
pub fn get_task_window(
    agent: &Agent,
    task: &str,
    n: u64,
    window: usize,
    timeout: Duration,
) -> Duration {
    let start = Instant::now();
    let mut q: VecDeque<Pending<Task>> = VecDeque::with_capacity(window);
    let mut sent = 0;
    while sent < n || !q.is_empty() {
        while sent < n && q.len() < window {
            q.push_back(agent.get_task_async(task, Some(1)).expect("submit"));
            sent += 1;
        }
        if let Some(p) = q.pop_front() {
            p.wait(timeout).expect("tasks.get");
        }
        while q.front().is_some_and(Pending::is_ready) {
            if let Some(p) = q.pop_front() {
                p.wait(timeout).expect("tasks.get");
            }
        }
    }
    start.elapsed()
}
