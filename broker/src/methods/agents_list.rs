//! `a2a.agents.list` (docs/protocol.md §5 Methods): the cards the caller
//! may address, itself excluded, sorted by name; with `skill`, only cards
//! with a skill of that id or tag. Answered from the registry.

use super::ReadMethod;
use crate::agents::addressing::addressable;
use crate::core::CoreError;
use crate::engine::Shared;
use crate::read_calls::ReadCtx;
use crate::reply::Reply;
use a2a_proto::params::ListAgentsParams;

pub(crate) struct Handler;

impl ReadMethod for Handler {
    type Params = ListAgentsParams;

    fn here(_: &ListAgentsParams, _: &Shared) -> bool {
        true
    }

    fn run(p: ListAgentsParams, c: &mut ReadCtx<'_>) -> Result<Reply, CoreError> {
        let agent = c.agent(p.token.as_deref())?;
        let reg = c.shared.registry.read();
        let cards = addressable(&reg, &agent)
            .filter(|a| {
                p.skill.as_deref().is_none_or(|want| {
                    a.card
                        .skills
                        .iter()
                        .any(|s| s.id == want || s.tags.iter().any(|t| t == want))
                })
            })
            .map(|a| a.card.clone())
            .collect();
        Ok(Reply::Agents(cards))
    }
}
