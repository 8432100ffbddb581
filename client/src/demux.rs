//! Demultiplexing of notifications: one connection carries the events of
//! every push agent registered on it, and each agent gets its own queue,
//! chosen by the notification's `recipient` and `recipientContextId`.
//!
//! Queues are unbounded on purpose: the reader thread that fills them also
//! delivers every response of the connection, so it must never block on an
//! agent that is slow to call `wait`. The broker already bounds what one
//! connection can be sent (it drops events past its outbox bound and says so
//! with `a2a.lagged`), so memory here is bounded by that in practice.
//!
//! Events whose recipient has no queue yet (a registration made through
//! `call_json`, or an event racing the `register` response) are kept in a
//! small bounded "unclaimed" list; `attach` hands them to the agent's queue
//! when it is created, atomically with creating it, so none is lost or
//! reordered.

use crate::Event;
use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};

/// Unclaimed events kept before the oldest are dropped.
pub(crate) const UNCLAIMED_BOUND: usize = 1024;

/// One agent's queue, as the reader sees it.
struct Route {
    /// The agent's context: with the peer id, the full recipient identity.
    context_id: String,
    tx: Sender<Event>,
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
    /// Routes one notification from the reader thread; never blocks.
    pub(crate) fn deliver(&self, ev: Event) {
        let mut st = self.state.lock();
        let (peer, ctx) = ev.recipient();
        if let Some(route) = st.routes.get(peer) {
            if route.context_id == ctx {
                let peer = peer.to_owned();
                match route.tx.send(ev) {
                    Ok(()) => return,
                    // Every handle of that agent is gone: nobody will read
                    // its queue again, so stop filling it.
                    Err(crossbeam_channel::SendError(ev)) => {
                        st.routes.remove(&peer);
                        return keep_unclaimed(&mut st, ev);
                    }
                }
            }
        }
        keep_unclaimed(&mut st, ev);
    }

    /// Creates the queue of agent `peer` in `context_id`, seeded with the
    /// unclaimed events addressed to it. On a closed connection the queue
    /// is born disconnected, so waiting on it fails at once.
    pub(crate) fn attach(&self, peer: &str, context_id: &str) -> Receiver<Event> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut st = self.state.lock();
        let mut rest = VecDeque::with_capacity(st.unclaimed.len());
        for ev in st.unclaimed.drain(..) {
            if ev.recipient() == (peer, context_id) {
                let _ = tx.send(ev);
            } else {
                rest.push_back(ev);
            }
        }
        st.unclaimed = rest;
        if !st.closed {
            st.routes.insert(
                peer.to_owned(),
                Route {
                    context_id: context_id.to_owned(),
                    tx,
                },
            );
        }
        rx
    }

    /// Removes an agent's queue (after deregistration); events already in
    /// it stay readable, then the queue reports disconnection.
    pub(crate) fn detach(&self, peer: &str, context_id: &str) {
        let mut st = self.state.lock();
        if st
            .routes
            .get(peer)
            .is_some_and(|r| r.context_id == context_id)
        {
            st.routes.remove(peer);
        }
    }

    /// Takes the unclaimed events.
    pub(crate) fn take_unclaimed(&self) -> Vec<Event> {
        self.state.lock().unclaimed.drain(..).collect()
    }

    /// The connection is gone: drop every sender, so each blocked `wait`
    /// returns.
    pub(crate) fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        st.routes.clear();
    }
}

fn keep_unclaimed(st: &mut State, ev: Event) {
    if st.unclaimed.len() == UNCLAIMED_BOUND {
        st.unclaimed.pop_front();
    }
    st.unclaimed.push_back(ev);
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

    #[test]
    fn routes_by_peer_and_context() {
        let d = Demux::default();
        let a = d.attach("a", "c1");
        let b = d.attach("b", "c2");
        d.deliver(ev("a", "c1", 1));
        d.deliver(ev("b", "c2", 2));
        d.deliver(ev("a", "other", 3));
        assert_eq!(a.try_iter().collect::<Vec<_>>(), vec![ev("a", "c1", 1)]);
        assert_eq!(b.try_iter().collect::<Vec<_>>(), vec![ev("b", "c2", 2)]);
        assert_eq!(d.take_unclaimed(), vec![ev("a", "other", 3)]);
    }

    #[test]
    fn early_events_are_claimed_in_order() {
        let d = Demux::default();
        d.deliver(ev("a", "c", 1));
        d.deliver(ev("x", "c", 9));
        d.deliver(ev("a", "c", 2));
        let a = d.attach("a", "c");
        d.deliver(ev("a", "c", 3));
        let got: Vec<_> = a.try_iter().collect();
        assert_eq!(got, vec![ev("a", "c", 1), ev("a", "c", 2), ev("a", "c", 3)]);
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
    fn close_and_detach_disconnect_queues() {
        let d = Demux::default();
        let a = d.attach("a", "c");
        d.deliver(ev("a", "c", 1));
        d.detach("a", "c");
        assert_eq!(a.recv().unwrap(), ev("a", "c", 1));
        assert!(a.recv().is_err());
        let b = d.attach("b", "c");
        d.close();
        assert!(b.recv().is_err());
        let late = d.attach("l", "c");
        assert!(late.recv().is_err());
    }

    #[test]
    fn dropped_receiver_stops_the_route() {
        let d = Demux::default();
        drop(d.attach("a", "c"));
        d.deliver(ev("a", "c", 1));
        assert_eq!(d.take_unclaimed(), vec![ev("a", "c", 1)]);
        assert!(d.state.lock().routes.is_empty());
    }
}
