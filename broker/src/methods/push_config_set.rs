//! `a2a.tasks.pushNotificationConfig.set` (docs/protocol.md §5 Methods):
//! either party sets the task's push config (one per task, the last set wins).

use super::WriteMethod;
use crate::core::CoreError;
use crate::engine::{party_role, Effects, WriteCtx};
use crate::reply::Reply;
use a2a_proto::params::PushSetParams;

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = PushSetParams;

    fn run(p: PushSetParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        let agent = cx.caller(p.token.as_deref())?;
        let rec = cx.task(&p.task_id)?;
        party_role(&rec, &agent)?;
        if p.config.id.is_empty() {
            return Err(CoreError::InvalidParams(
                "config.id must not be empty".into(),
            ));
        }
        cx.set_push_config(&rec, &agent.party(), p.config.clone())?;
        Ok(Effects::reply(Reply::Config(Some(p.config))))
    }
}
