//! `Client::close_and_wait` has ended the connection's threads when it
//! returns, even while a callback on the reader thread still holds a handle
//! to the connection: what the C ABI's `a2a_client_free` promises. A plain
//! drop of the last handle joins them too, but here the last handle is the
//! callback's, dropped on the reader thread, which cannot join itself: the
//! threads would be left to end on their own (a C program exiting then
//! leaves them mid-way). One test in this binary: the connection's threads
//! are counted by name in /proc/self/task.

mod common;

use a2a_client::{agent_card, Delivery};
use std::sync::mpsc;
use std::time::Duration;

/// Threads of this process named as the client names its connection's.
fn client_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(Result::ok)
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|name| name.trim_end().starts_with("a2a-client-"))
        })
        .count()
}

#[test]
fn close_and_wait_ends_the_threads_while_a_callback_holds_a_handle() {
    let broker = common::Broker::start();
    let client = broker.connect();
    let agent = client
        .register("close-wait", agent_card("holder"), Delivery::Push)
        .expect("register");
    assert!(client_threads() >= 2, "a reader and a writer run");
    let (running, is_running) = mpsc::channel();
    let held = agent.clone();
    agent
        .list_agents_async(None)
        .expect("submit")
        .on_complete(move |_| {
            // On the reader thread, holding the connection through `held`,
            // while the test closes it.
            running.send(()).expect("the test waits");
            std::thread::sleep(Duration::from_millis(300));
            drop(held);
        });
    is_running
        .recv_timeout(common::TIMEOUT)
        .expect("the callback runs");
    drop(agent);
    client.close_and_wait();
    assert_eq!(
        client_threads(),
        0,
        "the connection's threads ended before close_and_wait returned"
    );
}
