//! The calls waiting for an answer on one connection, by id.

use crate::error::CloseReason;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// The calls of one connection waiting for their answers, each with what
/// the driver keeps for it (`W`: a slot, a oneshot sender, a promise),
/// and whether any more may wait.
///
/// Invariant the drivers build on: once closed, nothing is registered
/// again, and [`Calls::close`] hands back every waiter still here, so each
/// call is answered (or failed) exactly once.
#[derive(Debug)]
pub struct Calls<W> {
    waiting: HashMap<u64, W, BuildHasherDefault<IdHasher>>,
    next_id: u64,
    closed: Option<CloseReason>,
}

impl<W> Default for Calls<W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<W> Calls<W> {
    pub fn new() -> Self {
        Calls {
            waiting: HashMap::default(),
            next_id: 1,
            closed: None,
        }
    }

    /// A fresh request id (unique on this connection, which is all
    /// matching needs). For drivers that number calls outside the table's
    /// lock, any unique ids do: [`Calls::insert`] takes them as given.
    pub fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Registers the call `id`; on a closed connection it is refused with
    /// the reason it closed, and `waiter` comes back with it.
    pub fn insert(&mut self, id: u64, waiter: W) -> Result<(), (CloseReason, W)> {
        if let Some(reason) = &self.closed {
            return Err((reason.clone(), waiter));
        }
        self.waiting.insert(id, waiter);
        Ok(())
    }

    /// The waiter of call `id`, removed: an answer completes it once. An id
    /// that waits for nothing (never given out, or answered already) gives
    /// `None`.
    pub fn take(&mut self, id: u64) -> Option<W> {
        self.waiting.remove(&id)
    }

    /// Calls waiting.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Why the connection ended, if it has.
    pub fn closed(&self) -> Option<&CloseReason> {
        self.closed.as_ref()
    }

    /// Records why the connection ends (the first reason wins) and refuses
    /// new calls from now on, leaving the waiting ones for whoever finishes
    /// the connection (a driver that fails its calls on one thread only).
    pub fn mark_closed(&mut self, reason: CloseReason) {
        if self.closed.is_none() {
            self.closed = Some(reason);
        }
    }

    /// Records why the connection ends (the first reason wins) and hands
    /// back every call still waiting, for the driver to fail with the
    /// reason in force ([`Calls::closed`]).
    pub fn close(&mut self, reason: CloseReason) -> Vec<(u64, W)> {
        if self.closed.is_none() {
            self.closed = Some(reason);
        }
        self.waiting.drain().collect()
    }
}

/// Hashes a call id. Ids are the connection's own numbers (the driver
/// chooses them, never the broker), so spreading their bits is all a hash
/// needs, and SipHash's guard against chosen keys only costs: the Node
/// addon's calls connection, which inserts and takes one per call on the
/// JS thread, measured its main-thread CPU per call 8 % higher with the
/// default hasher than with its own table (median of 5 paired runs), and
/// level with it with this one.
#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
