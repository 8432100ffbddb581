//! A connection's outbox: responses and notifications waiting for the
//! connection's writer, which serializes them in its own thread.
//!
//! Both kinds are bounded in count and in bytes (`super::weight`'s
//! estimate), so a client that stops reading costs the broker bounded
//! memory and never blocks the writer thread of the core:
//!
//! - events: past either bound the oldest queued events are dropped and
//!   counted, and the writer emits an `a2a.lagged` for their recipient
//!   before anything else it drains (one event larger than the byte bound
//!   still goes, alone);
//! - responses (where the outbox has a response bound: a socket's): past
//!   either bound the connection is cut off ([`Outbox::cut_off`]), its
//!   queue freed at once.
//!
//! The writer takes the queue a chunk at a time (about
//! [`DRAIN_CHUNK_BYTES`]), so what it holds while a write waits on a slow
//! reader is one chunk, not the whole queue.

use super::weight;
use crate::reply::Reply;
use a2a_proto::error::RpcError;
use a2a_proto::jsonrpc::Id;
use a2a_proto::limits::{OUTBOX_EVENT_BYTES, OUTBOX_RESPONSE_BYTES};
use a2a_proto::types::{LaggedParams, Notification};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;

/// Bytes of queued items the writer takes at once (at least one item):
/// about one coalesced write. What the writer holds while a write waits on
/// a slow reader is this, not the whole queue.
pub const DRAIN_CHUNK_BYTES: usize = 1 << 20;

/// One answer to a request.
#[derive(Debug)]
pub struct Response {
    pub id: Id,
    pub result: Result<Reply, RpcError>,
}

/// What a connection's writer writes.
#[derive(Debug)]
pub enum Outgoing {
    Response(Response),
    /// The responses of one batch, in the batch's order.
    Batch(Vec<Response>),
    Event(Arc<Notification>),
    /// The input could not be read (a bad binary frame); the connection
    /// closes after this is written.
    Fatal(RpcError),
}

/// A queued item and the bytes it counts for.
struct Queued {
    item: Outgoing,
    bytes: usize,
}

/// Which response bound a connection passed (for its log line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// More than the response count bound.
    Responses,
    /// More than the response byte bound.
    ResponseBytes,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Queued>,
    /// Events in `queue`, and their bytes.
    events: usize,
    event_bytes: usize,
    /// Responses (and batches, and fatal errors) in `queue`, and their bytes.
    responses: usize,
    response_bytes: usize,
    /// Closed because the client left too many responses unread.
    overflowed: Option<Overflow>,
    /// Dropped events not yet reported, per recipient.
    lagged: Vec<LaggedParams>,
    closed: bool,
    writer_waiting: bool,
}

/// The bounds of one outbox.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    events: usize,
    event_bytes: usize,
    /// Past these many unread responses, or bytes of them, the connection
    /// is closed (`None`: never; stdio's reader is the host itself).
    responses: Option<(usize, usize)>,
}

/// A connection's outbox.
pub struct Outbox {
    state: Mutex<State>,
    ready: Condvar,
    /// Wakes an async writer (socket connections).
    notify: tokio::sync::Notify,
    /// Wakes whoever waits for the connection to be cut off.
    cut: tokio::sync::Notify,
    bounds: Bounds,
    /// Where the connection's events go once its handshake was granted an
    /// event ring (`None`: a transport without rings).
    ring: Option<super::ring::RingSlot>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("bounds", &self.bounds)
            .finish()
    }
}

impl Outbox {
    /// An outbox holding at most `event_bound` undelivered events, and at
    /// most `OUTBOX_EVENT_BYTES` of them.
    pub fn new(event_bound: usize) -> Self {
        Self {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            notify: tokio::sync::Notify::new(),
            cut: tokio::sync::Notify::new(),
            bounds: Bounds {
                events: event_bound.max(1),
                event_bytes: OUTBOX_EVENT_BYTES,
                responses: None,
            },
            ring: None,
        }
    }

    /// This connection may be granted an event ring in its handshake (a
    /// local socket's), its publishes counted into `stats`.
    pub fn with_ring_slot(mut self, stats: Arc<super::ring::RingStats>) -> Self {
        self.ring = Some(super::ring::RingSlot::counting_into(stats));
        self
    }

    /// The connection's ring slot, if its transport has rings.
    pub fn ring(&self) -> Option<&super::ring::RingSlot> {
        self.ring.as_ref()
    }

    /// An outbox that closes its connection when more than `response_bound`
    /// responses, or more than `OUTBOX_RESPONSE_BYTES` of them, wait unread:
    /// a client that sends but never reads is cut off rather than allowed
    /// to grow the broker's memory without bound.
    pub fn with_response_bound(event_bound: usize, response_bound: usize) -> Self {
        Self::with_response_bounds(event_bound, response_bound, OUTBOX_RESPONSE_BYTES)
    }

    /// [`Outbox::with_response_bound`] with its byte bound given.
    pub fn with_response_bounds(
        event_bound: usize,
        response_bound: usize,
        response_bytes: usize,
    ) -> Self {
        let mut o = Self::new(event_bound);
        o.bounds.responses = Some((response_bound.max(1), response_bytes.max(1)));
        o
    }

    fn push(&self, item: Outgoing) {
        let bytes = weight::outgoing(&item);
        let mut st = self.state.lock();
        if st.closed {
            return;
        }
        if matches!(item, Outgoing::Event(_)) {
            st.events += 1;
            st.event_bytes += bytes;
            st.queue.push_back(Queued { item, bytes });
            // The newest event is never dropped: one larger than the byte
            // bound goes alone.
            while st.events > 1
                && (st.events > self.bounds.events || st.event_bytes > self.bounds.event_bytes)
            {
                Self::drop_oldest_event(&mut st);
            }
        } else {
            st.responses += 1;
            st.response_bytes += bytes;
            st.queue.push_back(Queued { item, bytes });
            if let Some((count, max_bytes)) = self.bounds.responses {
                let over = if st.responses > count {
                    Some(Overflow::Responses)
                } else if st.responses > 1 && st.response_bytes > max_bytes {
                    Some(Overflow::ResponseBytes)
                } else {
                    None
                };
                if over.is_some() {
                    Self::cut(&mut st, over);
                    drop(st);
                    self.ready.notify_all();
                    self.notify.notify_one();
                    self.cut.notify_one();
                    return;
                }
            }
        }
        // Wake the writer only when it sleeps: a busy writer drains anyway.
        if st.writer_waiting {
            st.writer_waiting = false;
            self.ready.notify_one();
        }
        drop(st);
        self.notify.notify_one();
    }

    /// Closes the outbox past a response bound: nothing queued will be
    /// written (the connection is cut off), so it is freed now rather
    /// than when the connection's tasks notice.
    fn cut(st: &mut State, why: Option<Overflow>) {
        st.overflowed = why;
        st.closed = true;
        st.queue = VecDeque::new();
        st.lagged = Vec::new();
        st.events = 0;
        st.event_bytes = 0;
        st.responses = 0;
        st.response_bytes = 0;
    }

    /// Moves the next chunk of what is queued into `out`, waiting
    /// (asynchronously) while there is nothing. Returns `false` once
    /// closed and empty.
    pub async fn drain_async(&self, out: &mut Vec<Outgoing>) -> bool {
        loop {
            {
                let mut st = self.state.lock();
                if !st.queue.is_empty() || !st.lagged.is_empty() {
                    Self::take(&mut st, out);
                    return true;
                }
                if st.closed {
                    return false;
                }
            }
            // A push between the check and here leaves a permit: no lost wake-up.
            self.notify.notified().await;
        }
    }

    /// Closed because the client left too many responses unread?
    pub fn overflowed(&self) -> bool {
        self.state.lock().overflowed.is_some()
    }

    /// Which response bound the client passed, if it did.
    pub fn overflow(&self) -> Option<Overflow> {
        self.state.lock().overflowed
    }

    /// Resolves once the connection is cut off for leaving too many
    /// responses unread (at once if it already was): its reader and writer
    /// may both be waiting on a client that does nothing.
    pub async fn cut_off(&self) {
        loop {
            if self.overflowed() {
                return;
            }
            self.cut.notified().await;
        }
    }

    /// Queues a fatal error; the connection closes once it is written.
    pub fn push_fatal(&self, e: RpcError) {
        self.push(Outgoing::Fatal(e));
        self.close();
    }

    fn drop_oldest_event(st: &mut State) {
        let Some(pos) = st
            .queue
            .iter()
            .position(|q| matches!(q.item, Outgoing::Event(_)))
        else {
            return;
        };
        let Some(Queued {
            item: Outgoing::Event(n),
            bytes,
        }) = st.queue.remove(pos)
        else {
            return;
        };
        st.events -= 1;
        st.event_bytes -= bytes;
        let (recipient, ctx) = n.recipient();
        match st
            .lagged
            .iter_mut()
            .find(|l| l.recipient == recipient && l.recipient_context_id == ctx)
        {
            Some(l) => l.dropped += 1,
            None => st.lagged.push(LaggedParams {
                recipient: recipient.to_owned(),
                recipient_context_id: ctx.to_owned(),
                dropped: 1,
            }),
        }
    }

    /// Queues a response.
    pub fn push_response(&self, r: Response) {
        self.push(Outgoing::Response(r));
    }

    /// Queues an event, dropping the oldest queued events past the bounds.
    pub fn push_event(&self, n: Arc<Notification>) {
        self.push(Outgoing::Event(n));
    }

    /// Moves the next chunk of what is queued into `out`, blocking while
    /// there is nothing. Returns `false` once the outbox is closed and empty.
    pub fn drain_blocking(&self, out: &mut Vec<Outgoing>) -> bool {
        self.drain_until(out, None)
    }

    fn drain_until(&self, out: &mut Vec<Outgoing>, deadline: Option<std::time::Instant>) -> bool {
        let mut st = self.state.lock();
        loop {
            if !st.queue.is_empty() || !st.lagged.is_empty() {
                Self::take(&mut st, out);
                return true;
            }
            if st.closed {
                return false;
            }
            st.writer_waiting = true;
            match deadline {
                None => self.ready.wait(&mut st),
                Some(d) => {
                    if self.ready.wait_until(&mut st, d).timed_out() {
                        return false;
                    }
                }
            }
        }
    }

    /// Moves the next chunk of what is queued into `out` without blocking.
    pub fn drain_now(&self, out: &mut Vec<Outgoing>) {
        Self::take(&mut self.state.lock(), out);
    }

    /// Lag reports first, then queued items up to [`DRAIN_CHUNK_BYTES`]
    /// (at least one).
    fn take(st: &mut State, out: &mut Vec<Outgoing>) {
        for l in st.lagged.drain(..) {
            out.push(Outgoing::Event(Arc::new(Notification::Lagged(l))));
        }
        let mut taken = 0usize;
        while taken < DRAIN_CHUNK_BYTES {
            let Some(Queued { item, bytes }) = st.queue.pop_front() else {
                break;
            };
            taken = taken.saturating_add(bytes);
            if matches!(item, Outgoing::Event(_)) {
                st.events -= 1;
                st.event_bytes -= bytes;
            } else {
                st.responses -= 1;
                st.response_bytes -= bytes;
            }
            out.push(item);
        }
        if st.queue.is_empty() && st.queue.capacity() > 1024 {
            // A burst's queue is not kept for the connection's life.
            st.queue = VecDeque::new();
        }
    }

    /// Stops accepting items; the writer drains what is left and stops.
    pub fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        self.ready.notify_all();
        drop(st);
        self.notify.notify_one();
    }

    /// Closed?
    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }
}

/// Collects the responses of one batch and releases them together.
pub struct BatchCollector {
    outbox: Arc<Outbox>,
    slots: Mutex<(Vec<Option<Response>>, usize)>,
}

impl BatchCollector {
    /// A batch with `n` requests that expect a response.
    pub fn new(outbox: Arc<Outbox>, n: usize) -> Arc<Self> {
        Arc::new(Self {
            outbox,
            slots: Mutex::new(((0..n).map(|_| None).collect(), n)),
        })
    }

    fn fill(&self, index: usize, r: Response) {
        let mut slots = self.slots.lock();
        if slots.0[index].is_none() {
            slots.0[index] = Some(r);
            slots.1 -= 1;
        }
        if slots.1 == 0 {
            let all: Vec<Response> = slots.0.drain(..).flatten().collect();
            drop(slots);
            self.outbox.push(Outgoing::Batch(all));
        }
    }
}

enum Target {
    Direct(Arc<Outbox>),
    Batch(Arc<BatchCollector>, usize),
    /// A client notification: executed, never answered.
    Discard,
}

/// Answers one request exactly once. Dropped unanswered (a bug, or a
/// panic), it answers `-32603` so that no request is left hanging.
pub struct Responder {
    inner: Option<(Target, Id)>,
    /// Held while the request is parked (a wait, a blocking send): counts
    /// against the connection's `A2A_MAX_PARKED_WAITS` until answered.
    _parked: Option<Parked>,
}

/// One parked request of a connection; the count drops when it is answered.
pub struct Parked(Arc<std::sync::atomic::AtomicUsize>);

impl Parked {
    /// Takes one of `max` parking places on `count`, or `None` if all are taken.
    pub fn take(count: &Arc<std::sync::atomic::AtomicUsize>, max: usize) -> Option<Parked> {
        use std::sync::atomic::Ordering::AcqRel;
        count
            .fetch_update(AcqRel, std::sync::atomic::Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Parked(count.clone()))
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Responder")
    }
}

impl Responder {
    /// Answers on the connection directly.
    pub fn direct(outbox: Arc<Outbox>, id: Id) -> Self {
        Self {
            inner: Some((Target::Direct(outbox), id)),
            _parked: None,
        }
    }

    /// Answers into slot `index` of a batch.
    pub fn in_batch(batch: Arc<BatchCollector>, index: usize, id: Id) -> Self {
        Self {
            inner: Some((Target::Batch(batch, index), id)),
            _parked: None,
        }
    }

    /// For a notification: the call runs, its answer goes nowhere.
    pub fn discard() -> Self {
        Self {
            inner: Some((Target::Discard, Id::Null)),
            _parked: None,
        }
    }

    /// This responder holds a parking place until it answers.
    pub fn parked(mut self, p: Parked) -> Self {
        self._parked = Some(p);
        self
    }

    /// Sends the answer.
    pub fn send(mut self, result: Result<Reply, RpcError>) {
        self.finish(result);
    }

    fn finish(&mut self, result: Result<Reply, RpcError>) {
        if let Some((target, id)) = self.inner.take() {
            let r = Response { id, result };
            match target {
                Target::Direct(outbox) => outbox.push_response(r),
                Target::Batch(batch, index) => batch.fill(index, r),
                Target::Discard => {}
            }
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if self.inner.is_some() {
            self.finish(Err(crate::rpc_errors::dropped_request()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_proto::types::LaggedParams;

    fn event(recipient: &str, n: u64) -> Arc<Notification> {
        Arc::new(Notification::Lagged(LaggedParams {
            recipient: recipient.into(),
            recipient_context_id: "c".into(),
            dropped: n,
        }))
    }

    #[test]
    fn events_past_the_bound_are_dropped_oldest_first_and_reported() {
        let o = Outbox::new(2);
        o.push_event(event("a", 1));
        o.push_response(Response {
            id: Id::Uint(1),
            result: Ok(Reply::Ok),
        });
        o.push_event(event("a", 2));
        o.push_event(event("a", 3));
        let mut out = Vec::new();
        assert!(o.drain_blocking(&mut out));
        assert_eq!(out.len(), 4);
        match &out[0] {
            Outgoing::Event(n) => assert_eq!(
                **n,
                Notification::Lagged(LaggedParams {
                    recipient: "a".into(),
                    recipient_context_id: "c".into(),
                    dropped: 1
                })
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(out[1], Outgoing::Response(_)));
    }

    fn lagged_count(out: &[Outgoing]) -> u64 {
        out.iter()
            .filter_map(|o| match o {
                Outgoing::Event(n) => match &**n {
                    Notification::Lagged(l) if l.recipient == "r" => Some(l.dropped),
                    _ => None,
                },
                _ => None,
            })
            .sum()
    }

    /// Past the byte bound the oldest events go, reported; the newest
    /// stays even when it alone is over the bound.
    #[test]
    fn events_past_the_byte_bound_are_dropped_oldest_first() {
        let mut o = Outbox::new(1000);
        let one = weight::event(&event("r", 0));
        o.bounds.event_bytes = 3 * one;
        for _ in 0..10 {
            o.push_event(event("r", 0));
        }
        let st = o.state.lock();
        assert_eq!(st.events, 3);
        assert!(st.event_bytes <= 3 * one + 16);
        drop(st);
        let mut out = Vec::new();
        o.drain_now(&mut out);
        assert_eq!(lagged_count(&out), 7, "{out:?}");
        o.push_event(event(&"x".repeat(10 * one), 1));
        let st = o.state.lock();
        assert_eq!(st.events, 1, "the large event alone");
    }

    /// Past the response byte bound the connection is cut off and its
    /// queue freed; one response over the bound alone is not.
    #[test]
    fn responses_past_the_byte_bound_cut_the_connection_off() {
        let ok = || Response {
            id: Id::Uint(1),
            result: Ok(Reply::Ok),
        };
        let one = weight::outgoing(&Outgoing::Response(ok()));
        let o = Outbox::with_response_bounds(8, 1000, 2 * one);
        o.push_response(ok());
        o.push_response(ok());
        assert!(!o.overflowed());
        o.push_response(ok());
        assert_eq!(o.overflow(), Some(Overflow::ResponseBytes));
        assert!(o.is_closed());
        assert!(o.state.lock().queue.is_empty(), "freed at once");
        let big = Outbox::with_response_bounds(8, 1000, 1);
        big.push_response(ok());
        assert!(!big.overflowed(), "one response alone never cuts off");
        let counted = Outbox::with_response_bounds(8, 2, usize::MAX);
        for _ in 0..3 {
            counted.push_response(ok());
        }
        assert_eq!(counted.overflow(), Some(Overflow::Responses));
    }

    /// The writer takes about a chunk at a time, never the whole queue.
    #[test]
    fn the_writer_takes_a_chunk_at_a_time() {
        let o = Outbox::new(1000);
        let big = "x".repeat(DRAIN_CHUNK_BYTES / 4);
        for n in 0..20 {
            o.push_event(event(&big, n));
        }
        let mut out = Vec::new();
        o.drain_now(&mut out);
        assert_eq!(out.len(), 4, "about one chunk");
        let mut total = out.len();
        while !o.state.lock().queue.is_empty() {
            out.clear();
            o.drain_now(&mut out);
            total += out.len();
        }
        assert_eq!(total, 20);
        let st = o.state.lock();
        assert_eq!((st.events, st.event_bytes), (0, 0));
    }

    #[test]
    fn batches_release_in_order_when_complete() {
        let o = Arc::new(Outbox::new(4));
        let b = BatchCollector::new(o.clone(), 2);
        Responder::in_batch(b.clone(), 1, Id::Uint(2)).send(Ok(Reply::Ok));
        let mut out = Vec::new();
        o.drain_now(&mut out);
        assert!(out.is_empty());
        drop(Responder::in_batch(b, 0, Id::Uint(1)));
        o.drain_now(&mut out);
        match &out[..] {
            [Outgoing::Batch(rs)] => {
                assert_eq!(rs[0].id, Id::Uint(1));
                assert!(rs[0].result.is_err(), "a dropped responder answers -32603");
                assert_eq!(rs[1].id, Id::Uint(2));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn closed_outbox_ends_the_writer() {
        let o = Outbox::new(1);
        o.close();
        o.push_response(Response {
            id: Id::Null,
            result: Ok(Reply::Ok),
        });
        assert!(!o.drain_blocking(&mut Vec::new()));
    }
}
