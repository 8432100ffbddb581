//! Who may address whom, and whom a message without a usable `to` goes to (§4, §5).

use super::registry::{Agent, Registry};
use crate::core::CoreError;
use std::sync::Arc;

/// Kinds never mix, and nobody addresses itself.
pub fn may_address(caller: &Agent, target: &Agent) -> bool {
    caller.kind == target.kind && !caller.same(target)
}

/// The live agents the caller may discover and address, sorted by peer id
/// (`a2a.agents.list`, `to: "*"`, an omitted `to`): hidden ones are left
/// out; they stay addressable by exact peer id.
pub fn addressable<'r>(
    reg: &'r Registry,
    caller: &'r Agent,
) -> impl Iterator<Item = &'r Arc<Agent>> {
    reg.all()
        .filter(move |a| !a.hidden() && may_address(caller, a))
}

/// Resolves the workers of a new task from `message.to`.
///
/// - `"*"`: every addressable peer (none: `A2A_NO_PEERS`);
/// - a name: that agent, if the caller may address it;
/// - omitted: the only addressable peer in the caller's context, else the
///   only one on the host; none: `A2A_NO_PEERS`; several: ambiguous.
pub fn resolve_workers(
    reg: &Registry,
    caller: &Agent,
    to: Option<&str>,
) -> Result<Vec<Arc<Agent>>, CoreError> {
    match to {
        Some("*") => {
            let all: Vec<_> = addressable(reg, caller).cloned().collect();
            if all.is_empty() {
                Err(CoreError::NoPeers)
            } else {
                Ok(all)
            }
        }
        Some(name) => match reg.by_peer(name) {
            Some(a) if may_address(caller, a) => Ok(vec![a.clone()]),
            _ => Err(CoreError::UnknownAgent(name.to_owned())),
        },
        None => {
            let local: Vec<_> = addressable(reg, caller)
                .filter(|a| a.context_id == caller.context_id)
                .collect();
            let pick = |c: Vec<&Arc<Agent>>| match c.len() {
                1 => Ok(vec![c[0].clone()]),
                _ => Err(CoreError::AmbiguousRecipient(
                    c.iter().map(|a| a.peer_id.clone()).collect(),
                )),
            };
            if !local.is_empty() {
                return pick(local);
            }
            let host: Vec<_> = addressable(reg, caller).collect();
            if host.is_empty() {
                return Err(CoreError::NoPeers);
            }
            pick(host)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::registry::Registration;
    use crate::delivery::Outbox;
    use a2a_proto::types::{AgentCard, AgentKind, Delivery};

    fn add(r: &mut Registry, ctx: &str, name: &str, kind: AgentKind) -> Arc<Agent> {
        let card: AgentCard =
            serde_json::from_value(serde_json::json!({"name": name, "kind": kind})).unwrap();
        let a = r
            .register(Registration {
                context_id: ctx.into(),
                card,
                delivery: Delivery::Push,
                conn: 1,
                outbox: Arc::new(Outbox::new(4)),
            })
            .unwrap()
            .0;
        a.mark_committed();
        a
    }

    fn names(v: Result<Vec<Arc<Agent>>, CoreError>) -> Vec<String> {
        v.unwrap().iter().map(|a| a.peer_id.clone()).collect()
    }

    #[test]
    fn omitted_to_prefers_the_own_context() {
        let mut r = Registry::default();
        let me = add(&mut r, "c1", "me", AgentKind::Subagent);
        assert_eq!(
            resolve_workers(&r, &me, None).unwrap_err(),
            CoreError::NoPeers
        );
        add(&mut r, "c2", "far", AgentKind::Subagent);
        assert_eq!(names(resolve_workers(&r, &me, None)), ["far"]);
        add(&mut r, "c1", "near", AgentKind::Subagent);
        assert_eq!(names(resolve_workers(&r, &me, None)), ["near"]);
        add(&mut r, "c1", "near2", AgentKind::Subagent);
        assert_eq!(
            resolve_workers(&r, &me, None).unwrap_err(),
            CoreError::AmbiguousRecipient(vec!["near".into(), "near2".into()])
        );
    }

    #[test]
    fn kinds_never_mix() {
        let mut r = Registry::default();
        let sub = add(&mut r, "c", "sub", AgentKind::Subagent);
        let parent = add(&mut r, "c", "boss", AgentKind::Parent);
        assert_eq!(
            resolve_workers(&r, &sub, Some("boss")).unwrap_err(),
            CoreError::UnknownAgent("boss".into())
        );
        assert_eq!(
            resolve_workers(&r, &parent, Some("*")).unwrap_err(),
            CoreError::NoPeers
        );
        assert_eq!(
            resolve_workers(&r, &sub, Some("sub")).unwrap_err(),
            CoreError::UnknownAgent("sub".into())
        );
        add(&mut r, "d", "sub2", AgentKind::Subagent);
        add(&mut r, "e", "sub3", AgentKind::Subagent);
        assert_eq!(
            names(resolve_workers(&r, &sub, Some("*"))),
            ["sub2", "sub3"]
        );
    }
}
