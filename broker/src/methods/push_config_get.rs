//! `a2a.tasks.pushNotificationConfig.get` (docs/protocol.md §5 Methods):
//! the task's config (one per task, whichever party set it), or null.

use super::ReadMethod;
use crate::core::CoreError;
use crate::engine::Shared;
use crate::read_calls::ReadCtx;
use crate::reply::Reply;
use a2a_proto::params::PushGetParams;

pub(crate) struct Handler;

impl ReadMethod for Handler {
    type Params = PushGetParams;

    /// A task in the committed-task cache is read without SQLite.
    fn here(p: &PushGetParams, shared: &Shared) -> bool {
        shared.is_cached(&p.task_id)
    }

    fn run(p: PushGetParams, c: &mut ReadCtx<'_>) -> Result<Reply, CoreError> {
        let agent = c.agent(p.token.as_deref())?;
        let rec = c.party_task(&agent, &p.task_id)?;
        Ok(Reply::Config(
            rec.push_configs.first().map(|(_, c)| c.clone()),
        ))
    }
}
