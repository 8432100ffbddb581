//! `a2a.tasks.resubscribe` (docs/protocol.md §5 Methods): replays the log
//! after `afterVersion` (if given), then the current status, to the caller
//! itself. Writes nothing, but runs on the writer so that its events are
//! ordered with the task's others.

use super::WriteMethod;
use crate::core::CoreError;
use crate::engine::{current_status_event, party_role, Effects, Routed, WriteCtx};
use crate::reply::Reply;
use crate::store::read;
use a2a_proto::params::ResubscribeParams;

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = ResubscribeParams;
    const WRITES: bool = false;

    fn run(p: ResubscribeParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        let agent = cx.caller(p.token.as_deref())?;
        let rec = cx.task(&p.id)?;
        party_role(&rec, &agent)?;
        let me = agent.party();
        let mut effects = Effects::reply(Reply::Ok);
        if let Some(after) = p.after_version {
            for (version, event) in read::log_after(cx.conn, &rec, after)? {
                effects.events.push(Routed::Task {
                    to: me.clone(),
                    context_id: rec.context_id.clone(),
                    version,
                    event,
                });
            }
        }
        effects.events.push(current_status_event(&rec, me));
        effects.reply = Reply::task(rec, None);
        Ok(effects)
    }
}
