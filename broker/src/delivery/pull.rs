//! A pull agent's pending events (ext): at most `MAX_PULL_QUEUE`, held until
//! acknowledged with `afterSeq`, so a lost `events.wait` response loses no
//! event. Blocked waits are answered by the first event that arrives, or by
//! the timer.

use super::outbox::Responder;
use super::timer::Timer;
use crate::reply::Reply;
use a2a_proto::error::RpcError;
use a2a_proto::limits::MAX_PULL_QUEUE;
use a2a_proto::types::{LaggedParams, Notification};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Default)]
struct State {
    events: VecDeque<Arc<Notification>>,
    /// Dropped since the last wait that reported it.
    dropped: u64,
    waiters: Vec<(u64, Responder)>,
    next_waiter: u64,
    /// Set when the agent's token is invalidated.
    closed: Option<RpcError>,
}

/// The pending queue of one pull agent.
pub struct PullQueue {
    recipient: String,
    recipient_context_id: String,
    state: Mutex<State>,
}

impl std::fmt::Debug for PullQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullQueue")
            .field("recipient", &self.recipient)
            .finish()
    }
}

impl PullQueue {
    /// The queue of the agent `recipient` in context `ctx`.
    pub fn new(recipient: &str, ctx: &str) -> Self {
        Self {
            recipient: recipient.to_owned(),
            recipient_context_id: ctx.to_owned(),
            state: Mutex::new(State::default()),
        }
    }

    /// Adds an event (dropping the oldest past the bound) and answers any
    /// blocked waits.
    pub fn push(&self, n: Arc<Notification>) {
        let mut st = self.state.lock();
        if st.closed.is_some() {
            return;
        }
        st.events.push_back(n);
        while st.events.len() > MAX_PULL_QUEUE {
            st.events.pop_front();
            st.dropped += 1;
        }
        if !st.waiters.is_empty() {
            let waiters = std::mem::take(&mut st.waiters);
            for (_, responder) in waiters {
                let reply = self.snapshot(&mut st, false);
                responder.send(Ok(reply));
            }
        }
    }

    /// What a wait returns now: a lag report first (once), then every
    /// unacknowledged event.
    fn snapshot(&self, st: &mut State, timed_out: bool) -> Reply {
        let mut events = Vec::with_capacity(st.events.len() + 1);
        if st.dropped > 0 {
            events.push(Arc::new(Notification::Lagged(LaggedParams {
                recipient: self.recipient.clone(),
                recipient_context_id: self.recipient_context_id.clone(),
                dropped: st.dropped,
            })));
            st.dropped = 0;
        }
        events.extend(st.events.iter().cloned());
        Reply::Events { events, timed_out }
    }

    /// `a2a.events.wait`: acknowledges `after_seq`, then answers at once if
    /// anything is pending or `timeout` is zero, else when an event arrives
    /// or the timeout passes.
    pub fn wait(
        self: &Arc<Self>,
        after_seq: Option<u64>,
        timeout: Duration,
        responder: Responder,
        timer: &Timer,
    ) {
        let mut st = self.state.lock();
        if let Some(err) = &st.closed {
            responder.send(Err(err.clone()));
            return;
        }
        if let Some(acked) = after_seq {
            while st
                .events
                .front()
                .is_some_and(|n| n.seq().is_none_or(|s| s <= acked))
            {
                st.events.pop_front();
            }
        }
        if !st.events.is_empty() || st.dropped > 0 {
            let reply = self.snapshot(&mut st, false);
            responder.send(Ok(reply));
            return;
        }
        if timeout.is_zero() {
            responder.send(Ok(Reply::Events {
                events: vec![],
                timed_out: true,
            }));
            return;
        }
        st.next_waiter += 1;
        let id = st.next_waiter;
        st.waiters.push((id, responder));
        drop(st);
        let me = self.clone();
        timer.schedule(Instant::now() + timeout, move || me.expire(id));
    }

    fn expire(&self, id: u64) {
        let mut st = self.state.lock();
        if let Some(pos) = st.waiters.iter().position(|(w, _)| *w == id) {
            let (_, responder) = st.waiters.swap_remove(pos);
            let reply = self.snapshot(&mut st, true);
            responder.send(Ok(reply));
        }
    }

    /// The agent is gone: blocked and later waits get `err`.
    pub fn close(&self, err: RpcError) {
        let mut st = self.state.lock();
        for (_, responder) in st.waiters.drain(..) {
            responder.send(Err(err.clone()));
        }
        st.events.clear();
        st.closed = Some(err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::outbox::{Outbox, Outgoing};
    use a2a_proto::jsonrpc::Id;
    use a2a_proto::types::PushParams;

    fn event(seq: u64) -> Arc<Notification> {
        Arc::new(Notification::Push(PushParams {
            recipient: "a".into(),
            recipient_context_id: "c".into(),
            context_id: "c".into(),
            seq,
            task_id: "t".into(),
            token: None,
            status: a2a_proto::types::TaskStatus {
                state: a2a_proto::types::State::Completed,
                message: None,
                timestamp: String::new(),
            },
        }))
    }

    fn answer(o: &Outbox) -> Reply {
        let mut out = Vec::new();
        o.drain_now(&mut out);
        match out.pop() {
            Some(Outgoing::Response(r)) => r.result.unwrap(),
            other => panic!("{other:?}"),
        }
    }

    fn seqs(r: &Reply) -> Vec<Option<u64>> {
        match r {
            Reply::Events { events, .. } => events.iter().map(|e| e.seq()).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unacknowledged_events_come_back_and_overflow_is_reported() {
        let timer = Timer::start();
        let o = Arc::new(Outbox::new(8));
        let q = Arc::new(PullQueue::new("a", "c"));
        for s in 1..=3 {
            q.push(event(s));
        }
        q.wait(
            None,
            Duration::ZERO,
            Responder::direct(o.clone(), Id::Uint(1)),
            &timer,
        );
        assert_eq!(seqs(&answer(&o)), [Some(1), Some(2), Some(3)]);
        q.wait(
            Some(2),
            Duration::ZERO,
            Responder::direct(o.clone(), Id::Uint(2)),
            &timer,
        );
        assert_eq!(seqs(&answer(&o)), [Some(3)]);
        for s in 4..=(MAX_PULL_QUEUE as u64 + 4) {
            q.push(event(s));
        }
        q.wait(
            Some(3),
            Duration::ZERO,
            Responder::direct(o.clone(), Id::Uint(3)),
            &timer,
        );
        let got = seqs(&answer(&o));
        assert_eq!(got[0], None, "lagged first");
        assert_eq!(got.len(), MAX_PULL_QUEUE + 1);
        assert_eq!(got[1], Some(5));
    }

    #[test]
    fn a_blocked_wait_is_answered_by_the_next_event() {
        let timer = Timer::start();
        let o = Arc::new(Outbox::new(8));
        let q = Arc::new(PullQueue::new("a", "c"));
        q.wait(
            None,
            Duration::from_secs(60),
            Responder::direct(o.clone(), Id::Uint(1)),
            &timer,
        );
        let mut out = Vec::new();
        o.drain_now(&mut out);
        assert!(out.is_empty());
        q.push(event(1));
        assert_eq!(seqs(&answer(&o)), [Some(1)]);
    }
}
