//! Live agents: peer ids, capability tokens, and where their events go.
//!
//! Tokens live in memory only (§4). A token is 48 hex digits: a 64-bit
//! lookup key followed by a 128-bit secret, both from the OS random source.
//! The key finds the agent; the secret is then compared in constant time, so
//! the time a lookup takes says nothing about how much of a guess was right.

use super::task::Party;
use super::CoreError;
use crate::delivery::{Endpoint, Outbox, PullQueue};
use a2a_proto::types::{AgentCard, AgentKind, Delivery};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Identifies one transport connection (its agents share its fate).
pub type ConnId = u64;

/// A live agent.
#[derive(Debug)]
pub struct Agent {
    /// Unique among live agents; the card's `name`.
    pub peer_id: String,
    /// The session it registered under.
    pub context_id: String,
    pub kind: AgentKind,
    /// The card as stamped by the broker.
    pub card: AgentCard,
    pub delivery: Delivery,
    /// The connection that registered it.
    pub conn: ConnId,
    /// Where its notifications go.
    pub endpoint: Endpoint,
    /// Successful sends charged to this registration (`A2A_MAX_SENDS_PER_RUN`).
    /// Changed only by the writer thread.
    pub sends: AtomicU32,
    /// Last notification sequence number given to this agent. Changed only
    /// by the writer thread, which routes every notification.
    pub seq: AtomicU64,
    key: u64,
    secret: [u8; 16],
}

impl Agent {
    /// This agent as a task party.
    pub fn party(&self) -> Party {
        Party {
            context_id: self.context_id.clone(),
            peer_id: self.peer_id.clone(),
        }
    }

    /// Is this agent the given party?
    pub fn is(&self, party: &Party) -> bool {
        self.peer_id == party.peer_id && self.context_id == party.context_id
    }

    /// Same registration (not merely the same name)?
    pub fn same(&self, other: &Agent) -> bool {
        self.key == other.key
    }

    /// The next sequence number for a notification to this agent.
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Sends charged so far.
    pub fn sends(&self) -> u32 {
        self.sends.load(Ordering::Relaxed)
    }
}

/// What a registration asks for.
pub struct Registration {
    pub context_id: String,
    pub card: AgentCard,
    pub delivery: Delivery,
    pub conn: ConnId,
    /// The connection's outbox (push agents' notifications go there).
    pub outbox: Arc<Outbox>,
}

/// The live agents, by token key and by peer id.
#[derive(Default)]
pub struct Registry {
    by_key: HashMap<u64, Arc<Agent>>,
    /// Sorted, so `a2a.agents.list` comes out ordered by name.
    by_peer: BTreeMap<String, Arc<Agent>>,
}

impl Registry {
    /// Registers an agent under the lowest free peer id for its requested
    /// name; returns it with its token.
    pub fn register(&mut self, reg: Registration) -> Result<(Arc<Agent>, String), CoreError> {
        let requested = reg.card.name.clone();
        if requested.is_empty() {
            return Err(CoreError::InvalidParams(
                "card.name must not be empty".into(),
            ));
        }
        if requested == "*" {
            return Err(CoreError::InvalidParams(
                "`*` is reserved for broadcast".into(),
            ));
        }
        let peer_id = self.free_name(&requested);
        let kind = reg.card.kind.unwrap_or_default();
        let mut card = reg.card;
        card.name = peer_id.clone();
        card.context_id = Some(reg.context_id.clone());
        card.kind = Some(kind);
        let (key, secret) = loop {
            let mut bytes = [0u8; 24];
            getrandom::fill(&mut bytes)
                .map_err(|e| CoreError::Internal(format!("random source: {e}")))?;
            let key = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
            if !self.by_key.contains_key(&key) {
                break (key, bytes[8..].try_into().expect("16 bytes"));
            }
        };
        let endpoint = match reg.delivery {
            Delivery::Push => Endpoint::Push(reg.outbox),
            Delivery::Pull => Endpoint::Pull(Arc::new(PullQueue::new(&peer_id, &reg.context_id))),
        };
        let agent = Arc::new(Agent {
            peer_id: peer_id.clone(),
            context_id: reg.context_id,
            kind,
            card,
            delivery: reg.delivery,
            conn: reg.conn,
            endpoint,
            sends: AtomicU32::new(0),
            seq: AtomicU64::new(0),
            key,
            secret,
        });
        self.by_key.insert(key, agent.clone());
        self.by_peer.insert(peer_id, agent.clone());
        Ok((agent.clone(), format_token(key, &secret)))
    }

    fn free_name(&self, requested: &str) -> String {
        if !self.by_peer.contains_key(requested) {
            return requested.to_owned();
        }
        (2u64..)
            .map(|n| format!("{requested}-{n}"))
            .find(|name| !self.by_peer.contains_key(name))
            .expect("some suffix is free")
    }

    /// The agent a token belongs to.
    pub fn resolve(&self, token: Option<&str>) -> Result<Arc<Agent>, CoreError> {
        let (key, secret) = token.and_then(parse_token).ok_or(CoreError::UnknownToken)?;
        let agent = self.by_key.get(&key).ok_or(CoreError::UnknownToken)?;
        if bool::from(agent.secret.ct_eq(&secret)) {
            Ok(agent.clone())
        } else {
            Err(CoreError::UnknownToken)
        }
    }

    /// Invalidates an agent's token and frees its peer id.
    pub fn remove(&mut self, agent: &Agent) -> Option<Arc<Agent>> {
        let removed = self.by_key.remove(&agent.key)?;
        self.by_peer.remove(&agent.peer_id);
        Some(removed)
    }

    /// Removes every agent a connection registered.
    pub fn remove_connection(&mut self, conn: ConnId) -> Vec<Arc<Agent>> {
        let gone: Vec<Arc<Agent>> = self
            .by_key
            .values()
            .filter(|a| a.conn == conn)
            .cloned()
            .collect();
        for a in &gone {
            self.remove(a);
        }
        gone
    }

    /// The live agent that is this party, if any.
    pub fn live_party(&self, party: &Party) -> Option<Arc<Agent>> {
        self.by_peer
            .get(&party.peer_id)
            .filter(|a| a.context_id == party.context_id)
            .cloned()
    }

    /// The live agent with this peer id.
    pub fn by_peer(&self, peer_id: &str) -> Option<&Arc<Agent>> {
        self.by_peer.get(peer_id)
    }

    /// Every live agent, sorted by peer id.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Agent>> {
        self.by_peer.values()
    }

    /// Live agents.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// No live agents?
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

fn format_token(key: u64, secret: &[u8; 16]) -> String {
    let mut s = format!("{key:016x}");
    for b in secret {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn parse_token(token: &str) -> Option<(u64, [u8; 16])> {
    if token.len() != 48 || !token.is_ascii() {
        return None;
    }
    let key = u64::from_str_radix(&token[..16], 16).ok()?;
    let mut secret = [0u8; 16];
    for (i, b) in secret.iter_mut().enumerate() {
        *b = u8::from_str_radix(&token[16 + 2 * i..18 + 2 * i], 16).ok()?;
    }
    Some((key, secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn card(name: &str, kind: Option<AgentKind>) -> AgentCard {
        serde_json::from_value(serde_json::json!({"name": name, "kind": kind})).unwrap()
    }

    fn reg(r: &mut Registry, ctx: &str, name: &str) -> (Arc<Agent>, String) {
        r.register(Registration {
            context_id: ctx.into(),
            card: card(name, None),
            delivery: Delivery::Push,
            conn: 1,
            outbox: Arc::new(Outbox::new(16)),
        })
        .unwrap()
    }

    #[test]
    fn peer_ids_take_the_lowest_free_suffix() {
        let mut r = Registry::default();
        let (a, _) = reg(&mut r, "c", "w");
        let (b, _) = reg(&mut r, "c", "w");
        let (c, _) = reg(&mut r, "d", "w");
        assert_eq!(
            (a.peer_id.as_str(), b.peer_id.as_str(), c.peer_id.as_str()),
            ("w", "w-2", "w-3")
        );
        r.remove(&b);
        let (d, _) = reg(&mut r, "c", "w");
        assert_eq!(d.peer_id, "w-2");
        assert_eq!(d.card.name, "w-2");
        assert_eq!(d.card.context_id.as_deref(), Some("c"));
        assert_eq!(d.card.kind, Some(AgentKind::Subagent));
    }

    #[test]
    fn tokens_resolve_only_exactly() {
        let mut r = Registry::default();
        let (a, tok) = reg(&mut r, "c", "w");
        assert!(r.resolve(Some(&tok)).unwrap().same(&a));
        let mut wrong = tok.clone();
        let last = if wrong.ends_with('0') { "1" } else { "0" };
        wrong.replace_range(47.., last);
        assert_eq!(
            r.resolve(Some(&wrong)).unwrap_err(),
            CoreError::UnknownToken
        );
        assert_eq!(
            r.resolve(Some("short")).unwrap_err(),
            CoreError::UnknownToken
        );
        assert_eq!(r.resolve(None).unwrap_err(), CoreError::UnknownToken);
        r.remove(&a);
        assert_eq!(r.resolve(Some(&tok)).unwrap_err(), CoreError::UnknownToken);
        assert!(r.is_empty());
    }

    #[test]
    fn connection_close_removes_its_agents_only() {
        let mut r = Registry::default();
        reg(&mut r, "c", "a");
        let (b, _) = r
            .register(Registration {
                context_id: "c".into(),
                card: card("b", None),
                delivery: Delivery::Push,
                conn: 2,
                outbox: Arc::new(Outbox::new(16)),
            })
            .unwrap();
        let gone = r.remove_connection(1);
        assert_eq!(gone.len(), 1);
        assert_eq!(r.len(), 1);
        assert!(r.live_party(&b.party()).is_some());
    }
}
