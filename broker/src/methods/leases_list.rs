//! `a2a.leases.list` (ext, docs/protocol.md §11 Leases): the live leases
//! of the caller's context, in the order they were granted; with `path`,
//! only those that overlap it. Runs on the writer (the leases live in its
//! memory) and writes nothing.

use super::WriteMethod;
use crate::clock;
use crate::core::CoreError;
use crate::engine::{lease_view, Effects, WriteCtx};
use crate::reply::Reply;
use a2a_proto::lease_path::overlaps;
use a2a_proto::params::ListLeasesParams;

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = ListLeasesParams;
    const WRITES: bool = false;

    fn run(p: ListLeasesParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        let agent = cx.caller(p.token.as_deref())?;
        let leases = cx
            .caches
            .leases
            .in_context(&agent.context_id, clock::now_ms())
            .filter(|l| {
                p.path
                    .as_deref()
                    .is_none_or(|q| l.paths.iter().any(|held| overlaps(held, q)))
            })
            .map(lease_view)
            .collect();
        Ok(Effects::reply(Reply::Leases(leases)))
    }
}
