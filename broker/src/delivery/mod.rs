//! Where responses and notifications wait for their reader, typed (no JSON).
//!
//! - [`outbox`]: a connection's bounded queue of responses and events, and
//!   the [`Responder`] that answers one request (alone or inside a batch).
//! - [`pull`]: a pull agent's pending events and its blocked `events.wait` calls.
//! - [`timer`]: one thread that fires deadlines (wait timeouts, blocking sends).

pub mod outbox;
pub mod pull;
pub mod timer;

pub use outbox::{Outbox, Outgoing, Responder, Response};
pub use pull::PullQueue;
pub use timer::Timer;

use a2a_proto::types::Notification;
use std::sync::Arc;

/// Where a live agent's notifications go.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// Written to the connection that registered the agent.
    Push(Arc<Outbox>),
    /// Held until the agent calls `a2a.events.wait`.
    Pull(Arc<PullQueue>),
}

impl Endpoint {
    /// Hands a notification over; never blocks.
    pub fn deliver(&self, n: Notification) {
        match self {
            Endpoint::Push(outbox) => outbox.push_event(Arc::new(n)),
            Endpoint::Pull(queue) => queue.push(Arc::new(n)),
        }
    }
}
