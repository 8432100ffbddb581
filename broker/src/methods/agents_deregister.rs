//! `a2a.agents.deregister` (docs/protocol.md §5 Methods): the agent
//! leaves: its token dies at once, the tasks it serves fail, the tasks it
//! asked for are canceled, and each counterpart is told; its leases end.

use super::WriteMethod;
use crate::core::CoreError;
use crate::engine::{stamp, Effects, Move, WriteCtx};
use crate::reply::Reply;
use crate::store::{read, write};
use crate::{clock, ids};
use a2a_proto::params::TokenParams;
use a2a_proto::types::{LeaseEnd, Message, Part, Role, State};

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = TokenParams;

    fn run(p: TokenParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        // Idempotent (§5): a token we do not know (already deregistered, or
        // never valid) is answered `{ok: true}`; only a missing one is an error.
        let agent = match cx.caller(p.token.as_deref()) {
            Ok(a) => a,
            Err(CoreError::UnknownToken) => return Ok(Effects::reply(Reply::Ok)),
            Err(e) => return Err(e),
        };
        // Gone for the rest of this batch at once; for everyone else once
        // the batch commits (`Engine::commit_registry`), so a failed commit
        // leaves the agent as it was.
        agent.set_leaving(true);
        cx.undo.leaving.push(agent.clone());
        let me = agent.party();
        let now = clock::now();
        write::mark_deregistered(cx.conn, &me, &now)?;
        let mut effects = Effects::reply(Reply::Ok);
        for (as_worker, state, role, verb) in [
            (true, State::Failed, Role::Agent, "failed"),
            (false, State::Canceled, Role::User, "canceled"),
        ] {
            for id in read::open_tasks_of(cx.conn, &me, as_worker)? {
                let rec = cx.task(&id)?;
                if rec.state().is_terminal() {
                    continue;
                }
                let text = format!(
                    "agent {} deregistered; task {verb} by the broker",
                    me.peer_id
                );
                let note = Message {
                    role,
                    parts: vec![Part::text(text)],
                    message_id: format!("broker-{}", ids::uuid()),
                    task_id: None,
                    context_id: None,
                    from: None,
                    to: None,
                    metadata: None,
                };
                let note = stamp(
                    note,
                    &rec.id,
                    &rec.context_id,
                    role,
                    &me.peer_id,
                    &rec.counterpart(&me).peer_id,
                );
                // A terminal move: past the history or size bound, the
                // note rides on the status only (`Engine::transition`).
                cx.transition(
                    Move {
                        rec: &rec,
                        state,
                        message: Some(note),
                        actor: &me,
                    },
                    &mut effects.events,
                )?;
            }
        }
        // Its leases end with it; those waiting on them are told.
        for id in cx.caches.leases.held_by(&me) {
            cx.end_lease(&id, LeaseEnd::Deregistered, &mut effects.events)?;
        }
        Ok(effects)
    }
}
