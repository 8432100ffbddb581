//! Makes many open tasks on a running broker, as their memory was measured:
//! each created by a `message.send` carrying about 15 KB of text, none ever
//! answered. Shared by `tests/memory.rs` and `examples/open_tasks_rss.rs`.
//!
//! The contract's bounds shape the load: at most 128 open tasks per
//! requester context (`A2A_MAX_TASKS_PER_CONTEXT`) and 200 sends per
//! registration (`A2A_MAX_SENDS_PER_RUN`), so every 128 tasks come from a
//! fresh requester in a fresh context, all sent at once (pipelined on one
//! connection, binary frames). One worker, in a context of its own,
//! receives them all and drops its events as they come (so the broker's
//! outbox never holds them).

#![allow(dead_code)] // the example and the test use different parts

use a2a_client::proto::limits::A2A_MAX_TASKS_PER_CONTEXT;
use a2a_client::{agent_card, message_to, Agent, Client, Delivery};
use std::path::Path;
use std::time::Duration;

/// The text each task is created with: 15,000 characters (the measured 15 KB;
/// under `A2A_MAX_TEXT_CHARS`).
pub const TEXT_CHARS: usize = 15_000;

/// Longest wait for one batch of sends.
const WAIT: Duration = Duration::from_secs(120);

/// A connection making open tasks, and how many it made.
pub struct OpenTasks {
    client: Client,
    worker: Agent,
    text: String,
    /// Open tasks made so far.
    pub made: usize,
    contexts: usize,
    /// Requesters stay alive (a deregistration would cancel their tasks).
    requesters: Vec<Agent>,
}

impl OpenTasks {
    /// Connects and registers the worker.
    pub fn connect(socket: &Path, secret: &str) -> OpenTasks {
        let client = Client::connect(socket, secret).expect("connect to the broker");
        let worker = client
            .register("open-tasks-worker", agent_card("worker"), Delivery::Push)
            .expect("register the worker");
        worker.set_event_handler(Some(Box::new(|_, _| {})));
        // Varied text, so no layer below can make it cheaper than it is.
        let text = (0..TEXT_CHARS)
            .map(|i| char::from(b'a' + (i * 7 % 26) as u8))
            .collect();
        OpenTasks {
            client,
            worker,
            text,
            made: 0,
            contexts: 0,
            requesters: Vec::new(),
        }
    }

    /// Makes open tasks until `total` exist.
    pub fn fill(&mut self, total: usize) {
        while self.made < total {
            let n = (total - self.made).min(A2A_MAX_TASKS_PER_CONTEXT);
            let ctx = format!("open-tasks-{}", self.contexts);
            self.contexts += 1;
            let req = self
                .client
                .register(&ctx, agent_card("requester"), Delivery::Push)
                .expect("register a requester");
            let pending: Vec<_> = (0..n)
                .map(|_| {
                    req.send_async(message_to(self.worker.id(), &self.text), None)
                        .expect("submit a send")
                })
                .collect();
            for p in pending {
                let task = p.wait(WAIT).expect("a send answered");
                assert!(!task.status.state.is_terminal(), "{:?}", task.status.state);
            }
            self.made += n;
            self.requesters.push(req);
        }
    }

    /// The client, for further calls.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The worker every task was sent to.
    pub fn worker(&self) -> &Agent {
        &self.worker
    }

    /// The text every task was created with.
    pub fn text(&self) -> &str {
        &self.text
    }
}
