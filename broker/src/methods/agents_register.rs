//! `a2a.agents.register` (docs/protocol.md §5 Methods): an agent joins a
//! context on the connection it registered from; its events go to that
//! connection's outbox (or its pull queue).

use super::WriteMethod;
use crate::agents::registry::Registration;
use crate::clock;
use crate::core::CoreError;
use crate::engine::{Effects, WriteCtx};
use crate::reply::Reply;
use crate::store::write;
use a2a_proto::params::{RegisterParams, RegisterResult};

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = RegisterParams;

    fn run(p: RegisterParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        if p.context_id.is_empty() {
            return Err(CoreError::InvalidParams(
                "contextId must not be empty".into(),
            ));
        }
        let (agent, token) = cx.shared.registry.write().register(Registration {
            context_id: p.context_id,
            card: p.card,
            delivery: p.delivery.unwrap_or_default(),
            conn: cx.from.conn,
            outbox: cx.from.outbox.clone(),
        })?;
        agent.set_hidden(p.hidden);
        // Not visible to anyone until the batch commits (`Engine::commit_registry`).
        cx.undo.registered.push(agent.clone());
        write::put_agent(cx.conn, &agent, &clock::now())?;
        Ok(Effects::reply(Reply::Registered(RegisterResult {
            agent_id: agent.peer_id.clone(),
            token,
            card: agent.card.clone(),
        })))
    }
}
