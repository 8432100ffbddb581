//! The writer's side of leases (docs/protocol.md §11 Leases): ending a
//! lease (its row, then memory, then its watchers' events), the sweep of
//! expired leases at the start of every transaction, leases whose holder's
//! connection closed, the parked `waitSeconds` acquisitions, and the timer
//! tick that makes a transaction happen when the next lease expires.
//!
//! A parked acquisition is not held open on the writer: it waits here with
//! its (parked) responder, and when a lease of its context ends it is
//! queued again as an ordinary call, so a grant is a write like any other
//! (validated, stored, answered after its commit).

use super::context::Origin;
use super::effects::Routed;
use super::{Command, Engine, Op, Undo, WriteCtx};
use crate::clock;
use crate::core::lease::{LeaseRec, LeaseUndo, Leases, Millis};
use crate::core::ConnId;
use crate::core::CoreError;
use crate::delivery::timer::TimerKey;
use crate::delivery::Responder;
use crate::rpc_errors::to_rpc;
use crate::store::write;
use a2a_proto::call::Call;
use a2a_proto::params::{AcquireLeaseParams, Lease};
use a2a_proto::types::LeaseEnd;
use rusqlite::Connection;
use std::time::{Duration, Instant};

/// An acquisition that conflicts and may wait (`waitSeconds`): what the
/// writer needs to queue it again, and its answer if the wait runs out.
#[derive(Debug)]
pub(crate) struct LeaseWait {
    pub params: AcquireLeaseParams,
    pub from: Origin,
    pub deadline: Instant,
    pub context_id: String,
    /// The conflict it met (answered if the wait runs out first).
    pub error: CoreError,
}

/// A parked acquisition.
pub(super) struct LeaseWaiter {
    wait: LeaseWait,
    reply: Responder,
    expiry: TimerKey,
}

/// A lease as the wire shows it.
pub(crate) fn lease_view(l: &LeaseRec) -> Lease {
    Lease {
        id: l.id.clone(),
        paths: l.paths.clone(),
        holder: l.holder.peer_id.clone(),
        exclusive: l.exclusive,
        expires_at: clock::format_ms(l.expires_at),
        reason: l.reason.clone(),
    }
}

/// Ends a lease: its row first, then memory (noted in `undo` when given:
/// a lease whose holder's connection closed stays ended whatever happens),
/// then an event to each of its watchers. Returns its context, whose
/// waiters may now be granted, if the lease was live.
pub(super) fn end_lease(
    conn: &Connection,
    leases: &mut Leases,
    undo: Option<&mut Vec<LeaseUndo>>,
    id: &str,
    how: LeaseEnd,
    events: &mut Vec<Routed>,
) -> Result<Option<String>, CoreError> {
    write::end_lease(conn, id, &clock::now(), how)?;
    let Some(rec) = leases.remove(id, undo) else {
        return Ok(None);
    };
    let view = lease_view(&rec);
    for w in &rec.watchers {
        events.push(Routed::LeaseEnded {
            to: w.clone(),
            lease: view.clone(),
            reason: how,
        });
    }
    Ok(Some(rec.holder.context_id))
}

impl WriteCtx<'_> {
    /// Ends a lease inside this call (release, deregistration).
    pub(crate) fn end_lease(
        &mut self,
        id: &str,
        how: LeaseEnd,
        events: &mut Vec<Routed>,
    ) -> Result<(), CoreError> {
        let ended = end_lease(
            self.conn,
            &mut self.caches.leases,
            Some(&mut self.undo.leases),
            id,
            how,
            events,
        )?;
        self.undo.lease_contexts.extend(ended);
        Ok(())
    }
}

impl Engine {
    /// At the start of a transaction: ends every lease whose TTL has run
    /// out. A failed row stops the sweep (the next transaction tries again).
    pub(super) fn sweep_leases(&mut self, undo: &mut Undo, events: &mut Vec<Routed>) {
        let now: Millis = clock::now_ms();
        if self.caches.leases.next_expiry().is_none_or(|at| at > now) {
            return;
        }
        for id in self.caches.leases.expired(now) {
            match end_lease(
                &self.conn,
                &mut self.caches.leases,
                Some(&mut undo.leases),
                &id,
                LeaseEnd::Expired,
                events,
            ) {
                Ok(ended) => undo.lease_contexts.extend(ended),
                Err(e) => {
                    tracing::warn!(lease = %id, error = %e, "ending an expired lease failed");
                    return;
                }
            }
        }
    }

    /// A connection closed: the leases its agents held end (their tokens
    /// died), and its parked acquisitions are answered. Not undone if the
    /// batch fails: the holder is gone either way (the row then says
    /// `restart` after the next start instead of `disconnected`).
    pub(super) fn leases_of_closed(
        &mut self,
        conn: ConnId,
        in_tx: bool,
        undo: &mut Undo,
        events: &mut Vec<Routed>,
    ) {
        for id in self.caches.leases.held_on(conn) {
            let ended = if in_tx {
                end_lease(
                    &self.conn,
                    &mut self.caches.leases,
                    None,
                    &id,
                    LeaseEnd::Disconnected,
                    events,
                )
            } else {
                Err(CoreError::Internal("no transaction".into()))
            };
            match ended {
                Ok(ctx) => undo.lease_contexts.extend(ctx),
                Err(e) => {
                    tracing::warn!(lease = %id, error = %e, "recording a closed connection's lease failed");
                    if let Some(rec) = self.caches.leases.remove(&id, None) {
                        undo.lease_contexts.push(rec.holder.context_id);
                    }
                }
            }
        }
        let gone: Vec<u64> = self
            .lease_waiters
            .iter()
            .filter(|(_, w)| w.wait.from.conn == conn)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.finish_lease_waiter(id, Err(CoreError::UnknownToken));
        }
    }

    /// Parks a conflicting acquisition until a lease of its context ends
    /// or its wait runs out.
    pub(super) fn park_lease_wait(&mut self, wait: LeaseWait, reply: Responder) {
        self.next_waiter += 1;
        let id = self.next_waiter;
        let tx = self.tx.clone();
        let expiry = self.shared.timer.schedule(wait.deadline, move || {
            let _ = tx.send(Command::LeaseWaitExpired(id));
        });
        self.lease_waiters.insert(
            id,
            LeaseWaiter {
                wait,
                reply,
                expiry,
            },
        );
    }

    /// After a commit: the parked acquisitions of each context where a
    /// lease ended are queued again, oldest first, as ordinary calls.
    pub(super) fn wake_lease_waiters(&mut self, contexts: &[String]) {
        if contexts.is_empty() || self.lease_waiters.is_empty() {
            return;
        }
        let mut ready: Vec<u64> = self
            .lease_waiters
            .iter()
            .filter(|(_, w)| contexts.contains(&w.wait.context_id))
            .map(|(id, _)| *id)
            .collect();
        ready.sort_unstable();
        for id in ready {
            let Some(w) = self.lease_waiters.remove(&id) else {
                continue;
            };
            self.shared.timer.cancel(w.expiry);
            let op = Op {
                call: Call::LeaseAcquire(w.wait.params),
                from: w.wait.from,
                resume: Some(w.wait.deadline),
            };
            let _ = self.tx.send(Command::Call {
                op: Box::new(op),
                reply: w.reply,
                weight: 0,
            });
        }
    }

    /// Answers a parked acquisition (its wait ran out: the conflict it
    /// met; its connection closed: that), if it is still parked.
    pub(super) fn finish_lease_waiter(&mut self, id: u64, result: Result<(), CoreError>) {
        let Some(w) = self.lease_waiters.remove(&id) else {
            return;
        };
        self.shared.timer.cancel(w.expiry);
        let err = match result {
            Ok(()) => w.wait.error,
            Err(e) => e,
        };
        w.reply.send(Err(to_rpc(err)));
    }

    /// Makes sure a tick reaches the writer when the next lease expires
    /// (its sweep runs at the start of the tick's transaction).
    pub(super) fn schedule_lease_tick(&mut self) {
        let Some(next) = self.caches.leases.next_expiry() else {
            return;
        };
        if let Some((at, key)) = self.lease_tick {
            if at <= next {
                return;
            }
            self.shared.timer.cancel(key);
        }
        let delay = (next - clock::now_ms()).max(0) as u64;
        let tx = self.tx.clone();
        let key =
            self.shared
                .timer
                .schedule(Instant::now() + Duration::from_millis(delay), move || {
                    let _ = tx.send(Command::LeaseTick);
                });
        self.lease_tick = Some((next, key));
    }
}
