//! `a2a.tasks.status` (docs/protocol.md §5 Methods): the worker moves its
//! task (§7 Task states), with a message to the requester if it has one.

use super::WriteMethod;
use crate::core::state::check_move;
use crate::core::CoreError;
use crate::engine::{check_status_message, stamp, worker_only, Effects, Move, WriteCtx};
use crate::reply::Reply;
use a2a_proto::params::StatusParams;
use a2a_proto::types::Role;

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = StatusParams;

    fn run(p: StatusParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        let agent = cx.caller(p.token.as_deref())?;
        let rec = cx.task(&p.id)?;
        worker_only(&rec, &agent, "only the task's worker may change its status")?;
        check_move(rec.state(), p.state)?;
        check_status_message(&rec, p.message.as_ref())?;
        let me = agent.party();
        let msg = p.message.map(|m| {
            stamp(
                m,
                &rec.id,
                &rec.context_id,
                Role::Agent,
                &me.peer_id,
                &rec.requester.peer_id,
            )
        });
        let mut effects = Effects::reply(Reply::Ok);
        let mv = Move {
            rec: &rec,
            state: p.state,
            message: msg,
            actor: &me,
        };
        let next = cx.transition(mv, &mut effects.events)?;
        effects.reply = Reply::task(next, None);
        Ok(effects)
    }
}
