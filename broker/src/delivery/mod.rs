//! Where responses and notifications wait for their reader, typed (no JSON).
//!
//! - [`outbox`]: a connection's bounded queue of responses and events, and
//!   the [`Responder`] that answers one request (alone or inside a batch).
//! - [`pull`]: a pull agent's pending events and its blocked `events.wait` calls.
//! - [`ring`]: the shared-memory event ring a socket connection may ask
//!   for; routing stages its push agents' events there directly.
//! - [`timer`]: one thread that fires deadlines (wait timeouts, blocking sends).
//! - [`weight`]: the bytes a queued event or reply holds, for the queues'
//!   byte bounds.

pub mod outbox;
pub mod pull;
pub mod ring;
pub mod timer;
pub mod weight;

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
    /// Hands a notification over; never blocks. An event staged into a
    /// connection's ring becomes visible at `rings.publish()`.
    pub fn deliver(&self, n: Notification, rings: &mut RingPublishes) {
        match self {
            Endpoint::Push(outbox) => match outbox.ring().map(|r| r.stage(&n)) {
                Some(ring::Staged::First) => rings.0.push(outbox.clone()),
                Some(ring::Staged::More) => {}
                Some(ring::Staged::Socket) | None => outbox.push_event(Arc::new(n)),
            },
            Endpoint::Pull(queue) => queue.push(Arc::new(n)),
        }
    }
}

/// The connections whose rings one routing pass staged events into: each
/// is published once, at the end of the pass (one fence and at most one
/// wake-up per ring per commit group).
#[derive(Default)]
pub struct RingPublishes(Vec<Arc<Outbox>>);

impl RingPublishes {
    /// Makes every staged event visible to its consumer.
    pub fn publish(&mut self) {
        for outbox in self.0.drain(..) {
            if let Some(r) = outbox.ring() {
                r.publish();
            }
        }
    }
}

impl Drop for RingPublishes {
    /// Staged events are never left invisible.
    fn drop(&mut self) {
        self.publish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_proto::binary::{decode_server_payload, ServerFrame};
    use a2a_proto::types::LaggedParams;
    use a2a_ring::{Record, Segment};

    fn event(dropped: u64, pad: usize) -> Notification {
        Notification::Lagged(LaggedParams {
            recipient: "r".repeat(pad.max(1)),
            recipient_context_id: "c".into(),
            dropped,
        })
    }

    /// Routing's events reach a ring connection through its ring: invisible
    /// until the pass publishes, then all of them, in order; an event
    /// larger than the ring goes to the outbox (the socket) instead.
    #[test]
    fn a_routing_pass_publishes_each_ring_once_at_its_end() {
        let outbox = Arc::new(Outbox::new(16).with_ring_slot(Arc::default()));
        let info = outbox.ring().unwrap().grant(4096).expect("a ring");
        let mut consumer = Segment::open(&info.name, info.bytes as usize).unwrap();
        let endpoint = Endpoint::Push(outbox.clone());
        let mut rings = RingPublishes::default();
        for n in 1..=3 {
            endpoint.deliver(event(n, 1), &mut rings);
        }
        assert_eq!(rings.0.len(), 1, "one publish per ring, not per event");
        assert!(!consumer.is_ready().unwrap(), "visible before the publish");
        endpoint.deliver(event(9, 8192), &mut rings);
        rings.publish();
        let mut got = Vec::new();
        consumer
            .drain(usize::MAX, |rec| match rec {
                Record::Event(p) => match decode_server_payload::<ServerFrame>(p).unwrap() {
                    ServerFrame::Notification(Notification::Lagged(l)) => got.push(l.dropped),
                    other => panic!("{other:?}"),
                },
                Record::Lagged(n) => panic!("lagged {n}"),
            })
            .unwrap();
        assert_eq!(got, [1, 2, 3]);
        let mut out = Vec::new();
        outbox.drain_now(&mut out);
        assert!(
            matches!(&out[..], [Outgoing::Event(n)] if **n == event(9, 8192)),
            "{out:?}"
        );
    }

    /// Staged events are published even if the pass forgets to.
    #[test]
    fn dropping_a_routing_pass_publishes_it() {
        let outbox = Arc::new(Outbox::new(16).with_ring_slot(Arc::default()));
        let info = outbox.ring().unwrap().grant(4096).expect("a ring");
        let mut consumer = Segment::open(&info.name, info.bytes as usize).unwrap();
        let mut rings = RingPublishes::default();
        Endpoint::Push(outbox).deliver(event(1, 1), &mut rings);
        assert!(!consumer.is_ready().unwrap());
        drop(rings);
        assert!(consumer.is_ready().unwrap());
    }

    /// Without a granted ring, events queue in the outbox as before.
    #[test]
    fn a_connection_without_a_ring_gets_its_events_in_its_outbox() {
        for outbox in [
            Outbox::new(16),
            Outbox::new(16).with_ring_slot(Arc::default()),
        ] {
            let outbox = Arc::new(outbox);
            let mut rings = RingPublishes::default();
            Endpoint::Push(outbox.clone()).deliver(event(1, 1), &mut rings);
            assert!(rings.0.is_empty());
            let mut out = Vec::new();
            outbox.drain_now(&mut out);
            assert_eq!(out.len(), 1);
        }
    }
}
