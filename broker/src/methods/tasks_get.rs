//! `a2a.tasks.get` (docs/protocol.md §5 Methods): a task the caller is
//! party to, its history cut to `historyLength`.

use super::ReadMethod;
use crate::core::CoreError;
use crate::engine::Shared;
use crate::read_calls::ReadCtx;
use crate::reply::Reply;
use a2a_proto::params::GetParams;

pub(crate) struct Handler;

impl ReadMethod for Handler {
    type Params = GetParams;

    /// A task in the committed-task cache is read without SQLite.
    fn here(p: &GetParams, shared: &Shared) -> bool {
        shared.is_cached(&p.id)
    }

    fn run(p: GetParams, c: &mut ReadCtx<'_>) -> Result<Reply, CoreError> {
        let agent = c.agent(p.token.as_deref())?;
        let rec = c.party_task(&agent, &p.id)?;
        Ok(Reply::task(rec, p.history_length.map(|n| n as usize)))
    }
}
