//! `a2a.leases.release` (ext, docs/protocol.md §11 Leases): the holder
//! ends its lease; those that waited on it or were refused it are told
//! (`a2a.lease.released`). Idempotent for the holder: a lease that has
//! ended already (released, expired, ...) is answered `{ok: true}` too.

use super::WriteMethod;
use crate::core::CoreError;
use crate::engine::{Effects, WriteCtx};
use crate::reply::Reply;
use crate::store::read;
use a2a_proto::params::ReleaseLeaseParams;
use a2a_proto::types::LeaseEnd;

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = ReleaseLeaseParams;

    fn run(p: ReleaseLeaseParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        let agent = cx.caller(p.token.as_deref())?;
        let me = agent.party();
        let not_holder = || CoreError::CrossContextDenied("only the lease's holder may release it");
        // Another context's lease is unknown here, as if it did not exist.
        let unknown = || CoreError::UnknownLease(p.lease_id.clone());
        if let Some(h) = cx.caches.leases.get(&p.lease_id).map(|l| l.holder.clone()) {
            if h.context_id != me.context_id {
                return Err(unknown());
            }
            if h != me {
                return Err(not_holder());
            }
            let mut effects = Effects::reply(Reply::Ok);
            cx.end_lease(&p.lease_id, LeaseEnd::Released, &mut effects.events)?;
            return Ok(effects);
        }
        // Ended already: its record says who held it.
        match read::lease_holder(cx.conn, &p.lease_id)? {
            Some(h) if h == me => Ok(Effects::reply(Reply::Ok)),
            Some(h) if h.context_id == me.context_id => Err(not_holder()),
            _ => Err(unknown()),
        }
    }
}
