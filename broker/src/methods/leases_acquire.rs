//! `a2a.leases.acquire` (ext, docs/protocol.md §11 Leases): a lease on
//! paths in the caller's context, or the conflict that refuses it; with
//! `waitSeconds` a conflict parks the call until a lease of the context
//! ends (then it is queued again, `engine::leases`) or the wait runs out.
//! Its comparisons with the context's leases are within one call's budget
//! (`A2A_MAX_LEASE_MATCH_STEPS`, `core::lease`); past it the call is refused.

use super::WriteMethod;
use crate::clock;
use crate::core::lease::{LeaseRec, Refusal, Request};
use crate::core::CoreError;
use crate::engine::{lease_view, Effects, LeaseWait, WriteCtx};
use crate::reply::Reply;
use crate::{ids, store::write};
use a2a_proto::limits::A2A_MAX_LEASES_PER_AGENT;
use a2a_proto::params::AcquireLeaseParams;
use std::time::{Duration, Instant};

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = AcquireLeaseParams;

    /// A call that may wait holds one of its connection's parking places.
    fn parks(p: &AcquireLeaseParams) -> bool {
        p.wait_seconds.is_some_and(|w| w > 0)
    }

    fn run(p: AcquireLeaseParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        let agent = cx.caller(p.token.as_deref())?;
        let me = agent.party();
        let now = clock::now_ms();
        let req = Request {
            holder: &me,
            paths: &p.paths,
            exclusive: p.exclusive,
        };
        match cx.caches.leases.check(&req, now) {
            Ok(()) => {}
            Err(Refusal::OverBudget(e)) => return Err(e.into()),
            Err(Refusal::TooMany { held }) => {
                return Err(CoreError::SendCap {
                    limit: "A2A_MAX_LEASES_PER_AGENT",
                    max: A2A_MAX_LEASES_PER_AGENT as u64,
                    actual: held as u64 + 1,
                })
            }
            Err(Refusal::Conflict {
                lease_id,
                holder,
                paths,
            }) => {
                // Told when that lease ends, whether it waits or not.
                cx.caches.leases.watch(&lease_id, &me);
                let error = CoreError::LeaseConflict {
                    lease_id,
                    holder,
                    paths,
                };
                let deadline = cx.resume.or_else(|| {
                    p.wait_seconds
                        .filter(|w| *w > 0)
                        .map(|w| Instant::now() + Duration::from_secs(w as u64))
                });
                return match deadline {
                    Some(deadline) if deadline > Instant::now() => {
                        let mut effects = Effects::reply(Reply::Ok);
                        effects.lease_wait = Some(Box::new(LeaseWait {
                            params: p,
                            from: cx.from.clone(),
                            deadline,
                            context_id: me.context_id,
                            error,
                        }));
                        // Answered when granted, or when the wait runs
                        // out (`engine::leases`); this reply is not sent.
                        Ok(effects)
                    }
                    _ => Err(error),
                };
            }
        }
        let rec = LeaseRec {
            id: ids::uuid(),
            holder: me,
            conn: agent.conn,
            paths: p.paths,
            exclusive: p.exclusive,
            reason: p.reason,
            acquired_at: now,
            expires_at: now + p.ttl_seconds * 1000,
            watchers: Vec::new(),
        };
        write::insert_lease(
            cx.conn,
            &rec,
            &clock::format_ms(rec.acquired_at),
            &clock::format_ms(rec.expires_at),
        )?;
        let view = lease_view(&rec);
        cx.caches.leases.insert(rec, &mut cx.undo.leases);
        Ok(Effects::reply(Reply::Lease(view)))
    }
}
