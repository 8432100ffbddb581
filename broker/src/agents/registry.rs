//! Live agents: peer ids, capability tokens, and where their events go.
//!
//! Tokens live in memory only (§4). A token is 48 hex digits: a 64-bit
//! lookup key followed by a 128-bit secret, both from the OS random source.
//! The key finds the agent; the secret is then compared in constant time, so
//! the time a lookup takes says nothing about how much of a guess was right.

use crate::core::task::Party;
use crate::core::{ConnId, CoreError};
use crate::delivery::{Endpoint, Outbox, PullQueue};
use a2a_proto::types::{AgentCard, AgentKind, Delivery};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use subtle::ConstantTimeEq;

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
    /// Set once the registration has committed. Until then the agent holds
    /// its peer id (so the writer hands that name to nobody else) but is
    /// invisible: not listed, not addressable, its token unknown.
    committed: AtomicBool,
    /// Set by a deregistration in a batch not yet committed: the writer
    /// treats the agent as gone, while readers still see it until the
    /// commit (a failed commit clears the flag).
    leaving: AtomicBool,
    /// Registered `hidden` (ext): left out of discovery (see
    /// `addressing::addressable`). Set before the registration commits.
    hidden: AtomicBool,
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

    /// Same registration (not merely the same name)?
    pub fn same(&self, other: &Agent) -> bool {
        self.key == other.key
    }

    /// The next sequence number for a notification to this agent.
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Left out of discovery (registered `hidden`)?
    pub fn hidden(&self) -> bool {
        self.hidden.load(Ordering::Relaxed)
    }

    /// Marks the agent hidden (before its registration commits).
    pub fn set_hidden(&self, hidden: bool) {
        self.hidden.store(hidden, Ordering::Relaxed);
    }

    /// Sends charged so far.
    pub fn sends(&self) -> u32 {
        self.sends.load(Ordering::Relaxed)
    }

    /// Registered and committed: visible to everyone.
    pub fn is_committed(&self) -> bool {
        self.committed.load(Ordering::Acquire)
    }

    /// The writer marks the registration committed (after its `COMMIT`).
    pub fn mark_committed(&self) {
        self.committed.store(true, Ordering::Release);
    }

    /// Deregistered in the writer's open batch?
    pub fn is_leaving(&self) -> bool {
        self.leaving.load(Ordering::Acquire)
    }

    /// The writer marks (or, after a failed commit, unmarks) a deregistration.
    pub fn set_leaving(&self, leaving: bool) {
        self.leaving.store(leaving, Ordering::Release);
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

/// The live agents, by token key, by peer id and by connection.
#[derive(Default)]
pub struct Registry {
    by_key: HashMap<u64, Arc<Agent>>,
    /// Sorted, so `a2a.agents.list` comes out ordered by name.
    by_peer: BTreeMap<String, Arc<Agent>>,
    /// Token keys of each connection's agents (a close removes them without a scan).
    by_conn: HashMap<ConnId, Vec<u64>>,
    /// Numeric suffixes in use, per base name, so that the lowest free
    /// `name-N` is found in O(log n), not by probing `name-2`, `name-3`, …
    suffixes: HashMap<String, Suffixes>,
}

/// The `base-N` peer ids of one base name: every N below `next` that is
/// free is in `free`; every N at or above `next` that is in use (a client
/// may ask for `w-7` by name) is in `ahead`. The lowest free suffix is then
/// `free`'s first, else `next` after skipping `ahead`, amortised O(log n).
#[derive(Debug)]
struct Suffixes {
    next: u64,
    free: std::collections::BTreeSet<u64>,
    ahead: std::collections::BTreeSet<u64>,
}

impl Default for Suffixes {
    fn default() -> Self {
        Self {
            next: FIRST_SUFFIX,
            free: Default::default(),
            ahead: Default::default(),
        }
    }
}

/// The first suffix handed out: the second agent named `w` is `w-2`.
const FIRST_SUFFIX: u64 = 2;

impl Suffixes {
    fn used(&mut self, n: u64) {
        if n < self.next {
            self.free.remove(&n);
        } else {
            self.ahead.insert(n);
        }
    }

    fn freed(&mut self, n: u64) {
        if n < self.next {
            self.free.insert(n);
        } else {
            self.ahead.remove(&n);
        }
    }

    /// The lowest suffix not in use (it becomes used when its name is inserted).
    fn lowest_free(&mut self) -> u64 {
        if let Some(&n) = self.free.first() {
            return n;
        }
        while self.ahead.remove(&self.next) {
            self.next += 1;
        }
        let n = self.next;
        self.next += 1;
        self.free.insert(n);
        n
    }

    /// Nothing in use: the entry can go.
    fn is_idle(&self) -> bool {
        self.ahead.is_empty() && self.free.len() as u64 == self.next - FIRST_SUFFIX
    }
}

/// `w-12` as (`w`, 12); only the canonical spelling (no sign, no leading
/// zero) of a suffix the allocator could have given.
fn split_suffix(peer_id: &str) -> Option<(&str, u64)> {
    let (base, digits) = peer_id.rsplit_once('-')?;
    if base.is_empty() || digits.is_empty() || digits.starts_with('0') || digits.len() > 19 {
        return None;
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (n >= FIRST_SUFFIX).then_some((base, n))
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
            committed: AtomicBool::new(false),
            leaving: AtomicBool::new(false),
            hidden: AtomicBool::new(false),
            key,
            secret,
        });
        self.by_key.insert(key, agent.clone());
        if let Some((base, n)) = split_suffix(&peer_id) {
            self.suffixes.entry(base.to_owned()).or_default().used(n);
        }
        self.by_peer.insert(peer_id, agent.clone());
        self.by_conn.entry(agent.conn).or_default().push(key);
        Ok((agent.clone(), format_token(key, &secret)))
    }

    /// The requested name if no agent holds it, else the lowest free `name-N`.
    fn free_name(&mut self, requested: &str) -> String {
        if !self.by_peer.contains_key(requested) {
            return requested.to_owned();
        }
        let n = self
            .suffixes
            .entry(requested.to_owned())
            .or_default()
            .lowest_free();
        format!("{requested}-{n}")
    }

    /// The committed agent a token belongs to (what readers may act for).
    pub fn resolve(&self, token: Option<&str>) -> Result<Arc<Agent>, CoreError> {
        let token = token
            .filter(|t| !t.is_empty())
            .ok_or(CoreError::MissingToken)?;
        let (key, secret) = parse_token(token).ok_or(CoreError::UnknownToken)?;
        let agent = self.by_key.get(&key).ok_or(CoreError::UnknownToken)?;
        if bool::from(agent.secret.ct_eq(&secret)) && agent.is_committed() {
            Ok(agent.clone())
        } else {
            Err(CoreError::UnknownToken)
        }
    }

    /// The agent a token belongs to as the writer sees it: committed and
    /// not deregistered earlier in the open batch.
    pub fn resolve_for_write(&self, token: Option<&str>) -> Result<Arc<Agent>, CoreError> {
        let agent = self.resolve(token)?;
        if agent.is_leaving() {
            return Err(CoreError::UnknownToken);
        }
        Ok(agent)
    }

    /// Invalidates an agent's token and frees its peer id.
    pub fn remove(&mut self, agent: &Agent) -> Option<Arc<Agent>> {
        let removed = self.by_key.remove(&agent.key)?;
        self.by_peer.remove(&agent.peer_id);
        if let Some((base, n)) = split_suffix(&agent.peer_id) {
            if let Some(s) = self.suffixes.get_mut(base) {
                s.freed(n);
                if s.is_idle() {
                    self.suffixes.remove(base);
                }
            }
        }
        if let Some(keys) = self.by_conn.get_mut(&agent.conn) {
            keys.retain(|k| *k != agent.key);
            if keys.is_empty() {
                self.by_conn.remove(&agent.conn);
            }
        }
        Some(removed)
    }

    /// Removes every agent a connection registered.
    pub fn remove_connection(&mut self, conn: ConnId) -> Vec<Arc<Agent>> {
        let keys = self.by_conn.remove(&conn).unwrap_or_default();
        let gone: Vec<Arc<Agent>> = keys
            .iter()
            .filter_map(|k| self.by_key.get(k).cloned())
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
            .filter(|a| a.context_id == party.context_id && a.is_committed())
            .cloned()
    }

    /// The live, committed agent with this peer id.
    pub fn by_peer(&self, peer_id: &str) -> Option<&Arc<Agent>> {
        self.by_peer.get(peer_id).filter(|a| a.is_committed())
    }

    /// Every live, committed agent, sorted by peer id.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Agent>> {
        self.by_peer.values().filter(|a| a.is_committed())
    }

    /// Live agents.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// No live agents?
    #[cfg(test)]
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

/// Reads a token as [`format_token`] writes it, and only so: 48 lower-case
/// hex digits. Another spelling (upper case, a sign `from_str_radix` would
/// take) is another, invalid token (§4).
fn parse_token(token: &str) -> Option<(u64, [u8; 16])> {
    if token.len() != 48
        || !token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
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
        let (a, t) = r
            .register(Registration {
                context_id: ctx.into(),
                card: card(name, None),
                delivery: Delivery::Push,
                conn: 1,
                outbox: Arc::new(Outbox::new(16)),
            })
            .unwrap();
        a.mark_committed();
        (a, t)
    }

    #[test]
    fn suffixes_skip_names_taken_literally_and_reuse_the_lowest() {
        let mut r = Registry::default();
        let (_, _) = reg(&mut r, "c", "w");
        reg(&mut r, "c", "w-3"); // asked for literally
        let names: Vec<String> = (0..4)
            .map(|_| reg(&mut r, "c", "w").0.peer_id.clone())
            .collect();
        assert_eq!(names, ["w-2", "w-4", "w-5", "w-6"]);
        let w4 = r.by_peer("w-4").unwrap().clone();
        let w3 = r.by_peer("w-3").unwrap().clone();
        r.remove(&w4);
        r.remove(&w3);
        assert_eq!(reg(&mut r, "c", "w").0.peer_id, "w-3");
        assert_eq!(reg(&mut r, "c", "w").0.peer_id, "w-4");
        assert_eq!(reg(&mut r, "c", "w").0.peer_id, "w-7");
        // Not suffixes: no sign, no leading zero, not below 2.
        for n in ["w-02", "w-1", "w-+5", "-5", "w-"] {
            assert_eq!(split_suffix(n), None, "{n}");
        }
        assert_eq!(split_suffix("a-b-12"), Some(("a-b", 12)));
    }

    #[test]
    fn suffix_bookkeeping_goes_when_the_names_go() {
        let mut r = Registry::default();
        let agents: Vec<_> = (0..50).map(|_| reg(&mut r, "c", "w").0).collect();
        for a in &agents {
            r.remove(a);
        }
        assert!(r.is_empty());
        assert!(r.suffixes.is_empty());
        assert!(r.by_conn.is_empty());
    }

    #[test]
    fn uncommitted_and_leaving_agents() {
        let mut r = Registry::default();
        let (a, tok) = r
            .register(Registration {
                context_id: "c".into(),
                card: card("w", None),
                delivery: Delivery::Push,
                conn: 1,
                outbox: Arc::new(Outbox::new(16)),
            })
            .unwrap();
        assert_eq!(r.resolve(Some(&tok)).unwrap_err(), CoreError::UnknownToken);
        assert!(r.by_peer("w").is_none() && r.all().next().is_none());
        // Its name is held all the same.
        assert_eq!(reg(&mut r, "c", "w").0.peer_id, "w-2");
        a.mark_committed();
        assert!(r.resolve(Some(&tok)).is_ok());
        a.set_leaving(true);
        assert!(
            r.resolve(Some(&tok)).is_ok(),
            "readers see it until the commit"
        );
        assert_eq!(
            r.resolve_for_write(Some(&tok)).unwrap_err(),
            CoreError::UnknownToken
        );
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
        assert_eq!(r.resolve(None).unwrap_err(), CoreError::MissingToken);
        assert_eq!(r.resolve(Some("")).unwrap_err(), CoreError::MissingToken);
        assert_eq!(
            r.resolve(Some(&tok.to_uppercase())).unwrap_err(),
            CoreError::UnknownToken
        );
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
        b.mark_committed();
        let gone = r.remove_connection(1);
        assert_eq!(gone.len(), 1);
        assert_eq!(r.len(), 1);
        assert!(r.live_party(&b.party()).is_some());
    }
}
