//! `a2a.agents.register` and `a2a.agents.deregister`.

use super::super::effects::Effects;
use super::super::{Engine, Undo};
use super::{stamp, Move};
use crate::core::registry::{ConnId, Registration};
use crate::core::CoreError;
use crate::delivery::Outbox;
use crate::reply::Reply;
use crate::store::{read, write};
use crate::{clock, ids};
use a2a_proto::params::{RegisterParams, RegisterResult};
use a2a_proto::types::{Message, Part, Role, State};
use std::sync::Arc;

impl Engine {
    pub(in crate::engine) fn register(
        &mut self,
        conn: ConnId,
        outbox: Arc<Outbox>,
        p: RegisterParams,
        undo: &mut Undo,
    ) -> Result<Effects, CoreError> {
        if p.context_id.is_empty() {
            return Err(CoreError::InvalidParams(
                "contextId must not be empty".into(),
            ));
        }
        let (agent, token) = self.shared.registry.write().register(Registration {
            context_id: p.context_id,
            card: p.card,
            delivery: p.delivery.unwrap_or_default(),
            conn,
            outbox,
        })?;
        agent.set_hidden(p.hidden);
        // Not visible to anyone until the batch commits (`Engine::commit_registry`).
        undo.registered.push(agent.clone());
        write::put_agent(&self.conn, &agent, &clock::now())?;
        Ok(Effects::reply(Reply::Registered(RegisterResult {
            agent_id: agent.peer_id.clone(),
            token,
            card: agent.card.clone(),
        })))
    }

    /// The agent leaves: its token dies at once, the tasks it serves fail,
    /// the tasks it asked for are canceled, and each counterpart is told.
    pub(in crate::engine) fn deregister(
        &mut self,
        token: Option<&str>,
        undo: &mut Undo,
    ) -> Result<Effects, CoreError> {
        // Idempotent (§5): a token we do not know (already deregistered, or
        // never valid) is answered `{ok: true}`; only a missing one is an error.
        let agent = match self.caller(token) {
            Ok(a) => a,
            Err(CoreError::UnknownToken) => return Ok(Effects::reply(Reply::Ok)),
            Err(e) => return Err(e),
        };
        // Gone for the rest of this batch at once; for everyone else once
        // the batch commits (`Engine::commit_registry`), so a failed commit
        // leaves the agent as it was.
        agent.set_leaving(true);
        undo.leaving.push(agent.clone());
        let me = agent.party();
        let now = clock::now();
        write::mark_deregistered(&self.conn, &me, &now)?;
        let mut effects = Effects::reply(Reply::Ok);
        for (as_worker, state, role, verb) in [
            (true, State::Failed, Role::Agent, "failed"),
            (false, State::Canceled, Role::User, "canceled"),
        ] {
            for id in read::open_tasks_of(&self.conn, &me, as_worker)? {
                let rec = self.task(&id)?;
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
                self.transition(
                    Move {
                        rec: &rec,
                        state,
                        message: Some(note),
                        actor: &me,
                    },
                    &mut effects.events,
                    undo,
                )?;
            }
        }
        Ok(effects)
    }
}
