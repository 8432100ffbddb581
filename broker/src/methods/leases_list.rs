//! `a2a.leases.list` (ext, docs/protocol.md §11 Leases): the live leases
//! of the caller's context, in the order they were granted; with `path`,
//! only those that overlap it. Runs on the writer (the leases live in its
//! memory) and writes nothing; the comparisons are within one call's budget
//! (`A2A_MAX_LEASE_MATCH_STEPS`, `core::lease`).

use super::WriteMethod;
use crate::clock;
use crate::core::CoreError;
use crate::engine::{lease_view, Effects, WriteCtx};
use crate::reply::Reply;
use a2a_proto::params::ListLeasesParams;

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = ListLeasesParams;
    const WRITES: bool = false;

    fn run(p: ListLeasesParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        let agent = cx.caller(p.token.as_deref())?;
        let (leases, now) = (&cx.caches.leases, clock::now_ms());
        let listed = match p.path.as_deref() {
            None => leases
                .in_context(&agent.context_id, now)
                .map(lease_view)
                .collect(),
            Some(q) => leases
                .overlapping(&agent.context_id, q, now)?
                .into_iter()
                .map(lease_view)
                .collect(),
        };
        Ok(Effects::reply(Reply::Leases(listed)))
    }
}
