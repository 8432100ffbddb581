//! `a2a.tasks.cancel` (docs/protocol.md §5 Methods): either party ends
//! the task as canceled, with a message to the other if it has one.

use super::WriteMethod;
use crate::core::state::check_move;
use crate::core::CoreError;
use crate::engine::{check_status_message, party_role, stamp, Effects, Move, WriteCtx};
use crate::reply::Reply;
use a2a_proto::params::CancelParams;
use a2a_proto::types::State;

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = CancelParams;

    fn run(p: CancelParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        let agent = cx.caller(p.token.as_deref())?;
        let rec = cx.task(&p.id)?;
        let role = party_role(&rec, &agent)?;
        check_move(rec.state(), State::Canceled)?;
        check_status_message(&rec, p.message.as_ref())?;
        let me = agent.party();
        let to = rec.counterpart(&me).peer_id.clone();
        let msg = p
            .message
            .map(|m| stamp(m, &rec.id, &rec.context_id, role, &me.peer_id, &to));
        let mut effects = Effects::reply(Reply::Ok);
        let mv = Move {
            rec: &rec,
            state: State::Canceled,
            message: msg,
            actor: &me,
        };
        let next = cx.transition(mv, &mut effects.events)?;
        effects.reply = Reply::task(next, None);
        Ok(effects)
    }
}
