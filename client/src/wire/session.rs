//! The wire core whole, for a driver that owns its connection from one
//! thread (an event loop, a test harness): calls go in, bytes go out;
//! bytes come in, answers and events come out.

use super::{Calls, Codec, Framer, WireError};
use crate::error::{ClientError, CloseReason};
use a2a_proto::call::Call;

/// What [`Session::poll`] yields: one frame the broker sent, read, and
/// the waiter of the call it answers (`None` for an event, or an answer to
/// no waiting call: an id never given out or answered twice).
#[derive(Debug)]
pub struct Polled<'a, C: Codec, W> {
    pub waiter: Option<W>,
    pub inbound: C::Inbound<'a>,
}

/// One connection's protocol state, sans I/O: the requests to write
/// ([`Session::out`]), the frames read so far, the calls waiting.
///
/// A driver's loop: [`Session::call`] for each call; write
/// [`Session::out`] to the socket and [`Session::sent`] what it took; read
/// into [`Session::read_buf`] and [`Session::filled`] (or
/// [`Session::feed`]); then [`Session::poll`] until it yields nothing. On
/// an error from `poll`, or when the socket ends, [`Session::close`]
/// returns the calls left to fail.
pub struct Session<C: Codec, W> {
    framer: Framer<C>,
    calls: Calls<W>,
    out: Vec<u8>,
}

impl<C: Codec, W> Default for Session<C, W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Codec, W> Session<C, W> {
    /// A new connection: its preamble is the first thing to write.
    pub fn new() -> Self {
        Self::with_framer(Framer::new())
    }

    /// A new connection whose incoming frames are bounded by `framer`.
    pub fn with_framer(framer: Framer<C>) -> Self {
        Session {
            framer,
            calls: Calls::new(),
            out: C::PREAMBLE.to_vec(),
        }
    }

    /// Encodes `call` for writing and registers `waiter` for its answer;
    /// returns the call's id. A call the codec refuses (too large) or a
    /// closed session changes nothing.
    pub fn call(&mut self, call: &Call, waiter: W) -> Result<u64, ClientError> {
        if let Some(reason) = self.calls.closed() {
            return Err(ClientError::Closed(reason.clone()));
        }
        let id = self.calls.next_id();
        C::encode_request(id, call, &mut self.out)?;
        self.calls
            .insert(id, waiter)
            .map_err(|(reason, _)| ClientError::Closed(reason))?;
        Ok(id)
    }

    /// Registers `waiter` under a fresh id for a request the driver
    /// encodes itself (e.g. [`super::Ndjson::encode_raw`] into
    /// [`Session::out_mut`]: a method this crate's `Call` does not have, a
    /// hand-made line); returns the id.
    pub fn reserve(&mut self, waiter: W) -> Result<u64, ClientError> {
        let id = self.calls.next_id();
        self.calls
            .insert(id, waiter)
            .map_err(|(reason, _)| ClientError::Closed(reason))?;
        Ok(id)
    }

    /// The bytes waiting to be written, to append to.
    pub fn out_mut(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Bytes waiting to be written.
    pub fn out(&self) -> &[u8] {
        &self.out
    }

    /// The socket took the first `n` bytes of [`Session::out`].
    pub fn sent(&mut self, n: usize) {
        self.out.drain(..n.min(self.out.len()));
    }

    /// Takes every byte waiting to be written (a driver that writes from
    /// its own buffer).
    pub fn take_out(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// See [`Framer::read_buf`].
    pub fn read_buf(&mut self, at_least: usize) -> &mut [u8] {
        self.framer.read_buf(at_least)
    }

    /// See [`Framer::filled`].
    pub fn filled(&mut self, n: usize) {
        self.framer.filled(n)
    }

    /// Copies bytes read elsewhere in.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.framer.feed(bytes)
    }

    /// The next frame the broker sent, read and matched to its call; `None`
    /// until more bytes arrive. An error means the connection cannot go
    /// on: close it with [`WireError::close_reason`].
    pub fn poll(&mut self) -> Result<Option<Polled<'_, C, W>>, WireError> {
        let Some(frame) = self.framer.next_frame()? else {
            return Ok(None);
        };
        let inbound = C::decode(frame)?;
        let waiter = C::answer_id(&inbound).and_then(|id| self.calls.take(id));
        Ok(Some(Polled { waiter, inbound }))
    }

    /// The calls waiting.
    pub fn calls(&self) -> &Calls<W> {
        &self.calls
    }

    /// Forgets call `id` (its caller gave up); its answer, if it comes, is
    /// polled with no waiter.
    pub fn forget(&mut self, id: u64) -> Option<W> {
        self.calls.take(id)
    }

    /// Ends the connection: the first reason wins, later calls are refused,
    /// nothing is left to write, and the calls still waiting come back to
    /// be failed.
    pub fn close(&mut self, reason: CloseReason) -> Vec<(u64, W)> {
        self.out.clear();
        self.calls.close(reason)
    }

    /// Why the session closed, if it has.
    pub fn closed(&self) -> Option<&CloseReason> {
        self.calls.closed()
    }
}
