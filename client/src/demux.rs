//! Demultiplexing of notifications: one connection carries the events of
//! every push agent registered on it, and each agent gets its own queue
//! ([`EventQueue`]), chosen by the notification's `recipient` and
//! `recipientContextId`.
//!
//! A route holds its agent's queue and a weak handle of the agent
//! ([`Owner`]), never the agent itself: the demux belongs to the
//! connection, which the agent keeps open, so a strong handle here would
//! keep both alive forever. An agent whose every handle is gone detaches itself; its
//! later events are unclaimed.
//!
//! Events whose recipient has no queue yet (a registration made through
//! `call_json`, or an event racing the `register` response) are kept in a
//! small bounded "unclaimed" list; `attach` hands them to the agent's queue
//! when it is created, atomically with creating it, so none is lost or
//! reordered.

use crate::events::{EventQueue, Owner, SharedQueue};
use crate::Event;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Unclaimed events kept before the oldest are dropped.
pub(crate) const UNCLAIMED_BOUND: usize = 1024;

/// One agent's queue, as the reader sees it.
struct Route {
    /// The agent's context: with the peer id, the full recipient identity.
    context_id: String,
    queue: SharedQueue,
    owner: Owner,
}

#[derive(Default)]
struct State {
    /// Keyed by peer id, which the broker keeps unique among live agents.
    routes: HashMap<String, Route>,
    unclaimed: VecDeque<Event>,
    /// Set when the connection is gone: no queue is fed again.
    closed: bool,
}

/// The per-agent queues of one connection.
#[derive(Default)]
pub(crate) struct Demux {
    state: Mutex<State>,
}

impl Demux {
    /// Routes one notification from the reader thread. The queue (and any
    /// handler it runs) is fed outside the demux's lock, so a handler may
    /// register or drop agents.
    pub(crate) fn deliver(&self, ev: Event) {
        let target = {
            let mut st = self.state.lock();
            let (peer, ctx) = ev.recipient();
            match st.routes.get(peer) {
                Some(route) if route.context_id == ctx => {
                    (route.queue.clone(), route.owner.clone())
                }
                _ => return keep_unclaimed(&mut st, ev),
            }
        };
        target.0.deliver(ev, &target.1);
    }

    /// The shared-memory ring dropped `dropped` events of this connection
    /// (docs/protocol.md §1 Framing, the event ring): every agent routed here gets an `a2a.lagged`,
    /// since the ring does not say whose they were.
    pub(crate) fn lagged_all(&self, dropped: u64) {
        let recipients: Vec<(String, String)> = {
            let st = self.state.lock();
            st.routes
                .iter()
                .map(|(peer, r)| (peer.clone(), r.context_id.clone()))
                .collect()
        };
        for (recipient, recipient_context_id) in recipients {
            self.deliver(a2a_proto::types::Notification::Lagged(
                a2a_proto::types::LaggedParams {
                    recipient,
                    recipient_context_id,
                    dropped,
                },
            ));
        }
    }

    /// Creates the queue of agent `peer` in `context_id`, seeded with the
    /// unclaimed events addressed to it, and routes its events there from
    /// now on. On a closed connection the queue is born closed.
    pub(crate) fn attach(&self, peer: &str, context_id: &str, queue: &SharedQueue, owner: Owner) {
        let mut st = self.state.lock();
        let mut rest = VecDeque::with_capacity(st.unclaimed.len());
        let mut mine = Vec::new();
        for ev in st.unclaimed.drain(..) {
            if ev.recipient() == (peer, context_id) {
                mine.push(ev);
            } else {
                rest.push_back(ev);
            }
        }
        st.unclaimed = rest;
        // The queue is new: no handler yet, so these only queue.
        for ev in mine {
            queue.deliver(ev, &owner);
        }
        if st.closed {
            queue.close();
        } else {
            st.routes.insert(
                peer.to_owned(),
                Route {
                    context_id: context_id.to_owned(),
                    queue: queue.clone(),
                    owner,
                },
            );
        }
    }

    /// Removes an agent's route (after deregistration, or when its last
    /// handle is dropped) if it still leads to `queue`.
    pub(crate) fn detach(&self, peer: &str, context_id: &str, queue: &EventQueue) {
        let mut st = self.state.lock();
        if st
            .routes
            .get(peer)
            .is_some_and(|r| r.context_id == context_id && std::ptr::eq(&*r.queue, queue))
        {
            st.routes.remove(peer);
        }
    }

    /// Takes the unclaimed events.
    pub(crate) fn take_unclaimed(&self) -> Vec<Event> {
        self.state.lock().unclaimed.drain(..).collect()
    }

    /// The connection is gone: every queue closes (waiters return, streams
    /// end, handlers are dropped).
    pub(crate) fn close(&self) {
        let routes = {
            let mut st = self.state.lock();
            st.closed = true;
            std::mem::take(&mut st.routes)
        };
        for (_, r) in routes {
            r.queue.close();
        }
    }
}

fn keep_unclaimed(st: &mut State, ev: Event) {
    if st.unclaimed.len() == UNCLAIMED_BOUND {
        st.unclaimed.pop_front();
    }
    st.unclaimed.push_back(ev);
}

/// A new, empty queue for an agent.
pub(crate) fn new_queue() -> SharedQueue {
    Arc::new(EventQueue::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_proto::types::{LaggedParams, Notification};

    fn ev(peer: &str, ctx: &str, dropped: u64) -> Event {
        Notification::Lagged(LaggedParams {
            recipient: peer.into(),
            recipient_context_id: ctx.into(),
            dropped,
        })
    }

    fn no_owner() -> Owner {
        std::sync::Weak::<()>::new()
    }

    fn take(q: &EventQueue) -> Vec<Event> {
        let mut v = Vec::new();
        q.try_take(&mut v, usize::MAX);
        v
    }

    #[test]
    fn routes_by_peer_and_context() {
        let d = Demux::default();
        let (a, b) = (new_queue(), new_queue());
        d.attach("a", "c1", &a, no_owner());
        d.attach("b", "c2", &b, no_owner());
        d.deliver(ev("a", "c1", 1));
        d.deliver(ev("b", "c2", 2));
        d.deliver(ev("a", "other", 3));
        assert_eq!(take(&a), vec![ev("a", "c1", 1)]);
        assert_eq!(take(&b), vec![ev("b", "c2", 2)]);
        assert_eq!(d.take_unclaimed(), vec![ev("a", "other", 3)]);
    }

    #[test]
    fn early_events_are_claimed_in_order() {
        let d = Demux::default();
        d.deliver(ev("a", "c", 1));
        d.deliver(ev("x", "c", 9));
        d.deliver(ev("a", "c", 2));
        let a = new_queue();
        d.attach("a", "c", &a, no_owner());
        d.deliver(ev("a", "c", 3));
        assert_eq!(
            take(&a),
            vec![ev("a", "c", 1), ev("a", "c", 2), ev("a", "c", 3)]
        );
        assert_eq!(d.take_unclaimed(), vec![ev("x", "c", 9)]);
    }

    #[test]
    fn unclaimed_is_bounded_oldest_first() {
        let d = Demux::default();
        for i in 0..(UNCLAIMED_BOUND as u64 + 5) {
            d.deliver(ev("x", "c", i));
        }
        let kept = d.take_unclaimed();
        assert_eq!(kept.len(), UNCLAIMED_BOUND);
        assert_eq!(kept[0], ev("x", "c", 5));
    }

    #[test]
    fn close_and_detach_end_queues() {
        let d = Demux::default();
        let a = new_queue();
        d.attach("a", "c", &a, no_owner());
        d.deliver(ev("a", "c", 1));
        d.detach("a", "c", &a);
        d.deliver(ev("a", "c", 2));
        assert_eq!(take(&a), vec![ev("a", "c", 1)]);
        assert_eq!(d.take_unclaimed(), vec![ev("a", "c", 2)]);
        let b = new_queue();
        d.attach("b", "c", &b, no_owner());
        d.close();
        assert!(b.wait(None).is_err());
        let late = new_queue();
        d.attach("l", "c", &late, no_owner());
        assert!(late.wait(None).is_err());
    }
}
