//! A pull agent's pending events (ext): at most `MAX_PULL_QUEUE`, and at
//! most `MAX_PULL_QUEUE_BYTES` of them (the oldest dropped past either, and
//! reported with `a2a.lagged`), held until
//! acknowledged with `afterSeq`, so a lost `events.wait` response loses no
//! event. Blocked waits are answered by the first event that arrives, or by
//! the timer.

use super::outbox::Responder;
use super::timer::{Timer, TimerKey};
use crate::reply::Reply;
use a2a_proto::error::RpcError;
use a2a_proto::limits::{MAX_PULL_QUEUE, MAX_PULL_QUEUE_BYTES};
use a2a_proto::types::{LaggedParams, Notification};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Default)]
struct State {
    events: VecDeque<Arc<Notification>>,
    /// The bytes each of `events` counts for (`super::weight`), in order.
    sizes: VecDeque<usize>,
    /// Their sum.
    bytes: usize,
    /// Dropped since the last wait that reported it.
    dropped: u64,
    /// Blocked waits, each with its timeout's timer entry (cancelled when
    /// the wait is answered early, so nothing stays queued until its deadline).
    waiters: Vec<(u64, Responder, TimerKey)>,
    next_waiter: u64,
    /// The timer the waits' timeouts are on (set by the first wait).
    timer: Option<Timer>,
    /// Set when the agent's token is invalidated.
    closed: Option<RpcError>,
}

impl State {
    /// Removes the oldest pending event.
    fn pop_front(&mut self) {
        self.events.pop_front();
        if let Some(size) = self.sizes.pop_front() {
            self.bytes -= size;
        }
    }
}

/// Bytes of events one `events.wait` answer may carry: the outgoing frame
/// bound less room for the envelope.
const EVENTS_REPLY_BUDGET: usize = a2a_proto::limits::A2A_MAX_OUT_FRAME_BYTES - 64 * 1024;

/// The size of a notification as a JSON line (an upper bound of its binary
/// frame, which carries the same strings without escapes or field names).
fn json_len(n: &Notification) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, n);
    c.0
}

/// The pending queue of one pull agent.
pub struct PullQueue {
    recipient: String,
    recipient_context_id: String,
    state: Mutex<State>,
    /// `MAX_PULL_QUEUE_BYTES` (a field so that a test can lower it).
    byte_bound: usize,
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
            byte_bound: MAX_PULL_QUEUE_BYTES,
        }
    }

    /// Adds an event (dropping the oldest past the bound) and answers any
    /// blocked waits.
    pub fn push(&self, n: Arc<Notification>) {
        let mut st = self.state.lock();
        if st.closed.is_some() {
            return;
        }
        let size = super::weight::event(&n);
        st.events.push_back(n);
        st.sizes.push_back(size);
        st.bytes += size;
        // The newest event is never dropped: one larger than the byte
        // bound is held alone.
        while st.events.len() > 1
            && (st.events.len() > MAX_PULL_QUEUE || st.bytes > self.byte_bound)
        {
            st.pop_front();
            st.dropped += 1;
        }
        if !st.waiters.is_empty() {
            let waiters = std::mem::take(&mut st.waiters);
            for (_, responder, key) in waiters {
                if let Some(t) = &st.timer {
                    t.cancel(key);
                }
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
        // The answer must fit one outgoing frame (docs/protocol.md §1
        // Framing): past the budget, the rest waits for the next
        // `events.wait` (nothing is dropped).
        let mut budget = EVENTS_REPLY_BUDGET;
        for n in &st.events {
            let size = json_len(n);
            if size > budget && !events.is_empty() {
                break;
            }
            budget = budget.saturating_sub(size);
            events.push(n.clone());
        }
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
                st.pop_front();
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
        let me = self.clone();
        // Scheduled under the lock: the callback takes it too, so it cannot
        // look for this waiter before it is in the list.
        let key = timer.schedule(Instant::now() + timeout, move || me.expire(id));
        st.waiters.push((id, responder, key));
        if st.timer.is_none() {
            st.timer = Some(timer.clone());
        }
    }

    fn expire(&self, id: u64) {
        let mut st = self.state.lock();
        if let Some(pos) = st.waiters.iter().position(|(w, _, _)| *w == id) {
            let (_, responder, _) = st.waiters.swap_remove(pos);
            let reply = self.snapshot(&mut st, true);
            responder.send(Ok(reply));
        }
    }

    /// The agent is gone: blocked and later waits get `err`.
    pub fn close(&self, err: RpcError) {
        let mut st = self.state.lock();
        let timer = st.timer.take();
        for (_, responder, key) in st.waiters.drain(..) {
            if let Some(t) = &timer {
                t.cancel(key);
            }
            responder.send(Err(err.clone()));
        }
        st.events = VecDeque::new();
        st.sizes = VecDeque::new();
        st.bytes = 0;
        st.closed = Some(err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::outbox::{Outbox, Outgoing};
    use a2a_proto::jsonrpc::Id;
    use a2a_proto::types::PushParams;

    /// An `a2a.events.wait` that does not park: answered at once with what
    /// is queued after `after`.
    fn ask_now(q: &Arc<PullQueue>, after: Option<u64>, o: &Arc<Outbox>, id: u64, timer: &Timer) {
        q.wait(
            after,
            Duration::ZERO,
            Responder::direct(o.clone(), Id::Uint(id)),
            timer,
        );
    }

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
        ask_now(&q, None, &o, 1, &timer);
        assert_eq!(seqs(&answer(&o)), [Some(1), Some(2), Some(3)]);
        ask_now(&q, Some(2), &o, 2, &timer);
        assert_eq!(seqs(&answer(&o)), [Some(3)]);
        for s in 4..=(MAX_PULL_QUEUE as u64 + 4) {
            q.push(event(s));
        }
        ask_now(&q, Some(3), &o, 3, &timer);
        let got = seqs(&answer(&o));
        assert_eq!(got[0], None, "lagged first");
        assert_eq!(got.len(), MAX_PULL_QUEUE + 1);
        assert_eq!(got[1], Some(5));
    }

    /// Past the byte bound the oldest events go, reported as lagged; the
    /// newest stays even alone over the bound.
    #[test]
    fn events_past_the_byte_bound_are_dropped_and_reported() {
        let timer = Timer::start();
        let o = Arc::new(Outbox::new(8));
        let mut q = PullQueue::new("a", "c");
        q.byte_bound = 3 * crate::delivery::weight::event(&event(1));
        let q = Arc::new(q);
        for s in 1..=10 {
            q.push(event(s));
        }
        ask_now(&q, None, &o, 1, &timer);
        let got = seqs(&answer(&o));
        assert_eq!(
            got,
            [None, Some(8), Some(9), Some(10)],
            "lagged, then the newest three"
        );
        let mut big = PullQueue::new("a", "c");
        big.byte_bound = 1;
        let big = Arc::new(big);
        big.push(event(1));
        big.wait(
            None,
            Duration::ZERO,
            Responder::direct(o.clone(), Id::Uint(2)),
            &timer,
        );
        assert_eq!(seqs(&answer(&o)), [Some(1)], "one event alone is held");
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
