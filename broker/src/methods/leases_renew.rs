//! `a2a.leases.renew` (ext, docs/protocol.md §11 Leases): the holder moves
//! its live lease's end to `ttlSeconds` from now.

use super::WriteMethod;
use crate::clock;
use crate::core::CoreError;
use crate::engine::{lease_view, Effects, WriteCtx};
use crate::reply::Reply;
use crate::store::write;
use a2a_proto::params::RenewLeaseParams;

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = RenewLeaseParams;

    fn run(p: RenewLeaseParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        let agent = cx.caller(p.token.as_deref())?;
        let me = agent.party();
        let now = clock::now_ms();
        // Another context's lease is unknown here, as if it did not exist.
        let lease = cx
            .caches
            .leases
            .get(&p.lease_id)
            .filter(|l| l.holder.context_id == me.context_id && l.expires_at > now)
            .ok_or_else(|| CoreError::UnknownLease(p.lease_id.clone()))?;
        if lease.holder != me {
            return Err(CoreError::CrossContextDenied(
                "only the lease's holder may renew it",
            ));
        }
        let expires_at = now + p.ttl_seconds * 1000;
        write::renew_lease(cx.conn, &p.lease_id, &clock::format_ms(expires_at))?;
        cx.caches
            .leases
            .renew(&p.lease_id, expires_at, &mut cx.undo.leases);
        let lease = cx
            .caches
            .leases
            .get(&p.lease_id)
            .ok_or_else(|| CoreError::UnknownLease(p.lease_id.clone()))?;
        Ok(Effects::reply(Reply::Lease(lease_view(lease))))
    }
}
