//! Leases (docs/protocol.md §11 Leases): who holds which paths in each
//! context, until when, and who is waiting to hear that a lease ended.
//! I/O free: time comes in as milliseconds since the epoch (the writer reads
//! the broker's clock, `crate::clock`; the property tests pass their own),
//! and the writer stores each change before it changes this state.
//!
//! Leases live in their holder's context: two leases conflict when they are
//! in one context, have different holders, one concrete path could match a
//! path of each (`a2a_proto::lease_path::overlaps`) and at least one is
//! exclusive. A holder's own leases never conflict with each other.
//!
//! The comparisons run on the writer, so each call ([`Leases::check`],
//! [`Leases::overlapping`]) has one budget of steps for all of them
//! (`A2A_MAX_LEASE_MATCH_STEPS`): past it the call is refused, and the
//! writer moves on to the next client. Each lease's paths are split once,
//! when it is granted, not at every comparison.

use super::task::Party;
use super::ConnId;
use super::CoreError;
use a2a_proto::check::CheckError;
use a2a_proto::lease_path::{OverBudget, Pattern, Work};
use a2a_proto::limits::{A2A_MAX_LEASES_PER_AGENT, A2A_MAX_LEASE_MATCH_STEPS};
use std::collections::{BTreeSet, HashMap};

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

/// A live lease.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseRec {
    pub id: String,
    pub holder: Party,
    /// The connection that registered the holder: the lease ends when it closes.
    pub conn: ConnId,
    /// Normalised (`lease_path::normalize`), without duplicates.
    pub paths: Vec<String>,
    pub exclusive: bool,
    pub reason: Option<String>,
    pub acquired_at: Millis,
    pub expires_at: Millis,
    /// Parties refused this lease's paths, or waiting for them: each is
    /// told once when the lease ends.
    pub watchers: Vec<Party>,
}

/// What an acquisition asks for (paths already normalised).
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub holder: &'a Party,
    pub paths: &'a [String],
    pub exclusive: bool,
}

/// Why an acquisition is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// A live lease of another holder overlaps: its id, holder and the
    /// paths of it that overlap the request.
    Conflict {
        lease_id: String,
        holder: String,
        paths: Vec<String>,
    },
    /// The holder holds `A2A_MAX_LEASES_PER_AGENT` live leases already.
    TooMany { held: usize },
    /// Comparing the paths with the context's leases would take more than
    /// `A2A_MAX_LEASE_MATCH_STEPS`.
    OverBudget(OverBudget),
}

/// A call whose comparisons ran out of budget is refused as a bound is
/// (`-32602` naming `A2A_MAX_LEASE_MATCH_STEPS`), having changed nothing.
impl From<OverBudget> for CoreError {
    fn from(e: OverBudget) -> CoreError {
        CoreError::Check(CheckError::OutOfBounds {
            reason: e.to_string(),
            limit: "A2A_MAX_LEASE_MATCH_STEPS",
            min: None,
            max: e.limit,
            actual: i64::try_from(e.spent).unwrap_or(i64::MAX),
        })
    }
}

/// A change to undo if the call or its batch fails.
#[derive(Debug)]
pub enum LeaseUndo {
    Added(String),
    Removed(Box<LeaseRec>),
    Renewed { id: String, expires_at: Millis },
}

/// A live lease and its paths split for comparing ([`Pattern`]), once.
#[derive(Debug)]
struct Live {
    rec: LeaseRec,
    patterns: Vec<Pattern>,
}

impl Live {
    fn new(rec: LeaseRec) -> Live {
        let patterns = rec.paths.iter().map(|p| Pattern::new(p)).collect();
        Live { rec, patterns }
    }

    /// This lease's paths that overlap one of `wanted`, in its order.
    fn overlaps<'a>(
        &'a self,
        wanted: &[Pattern],
        work: &mut Work,
    ) -> Result<Vec<&'a str>, OverBudget> {
        let mut hit = Vec::new();
        for (held, pattern) in self.rec.paths.iter().zip(&self.patterns) {
            for w in wanted {
                if pattern.overlaps(w, work)? {
                    hit.push(held.as_str());
                    break;
                }
            }
        }
        Ok(hit)
    }
}

/// Every live lease, by id, by context (in acquisition order) and by expiry.
#[derive(Debug, Default)]
pub struct Leases {
    by_id: HashMap<String, Live>,
    by_context: HashMap<String, Vec<String>>,
    by_expiry: BTreeSet<(Millis, String)>,
}

/// The budget of one call's comparisons.
fn call_budget() -> Work {
    Work::new(A2A_MAX_LEASE_MATCH_STEPS)
}

impl Leases {
    pub fn get(&self, id: &str) -> Option<&LeaseRec> {
        self.by_id.get(id).map(|l| &l.rec)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The leases of a context that have not expired at `now`, in
    /// acquisition order.
    pub fn in_context(&self, context_id: &str, now: Millis) -> impl Iterator<Item = &LeaseRec> {
        self.live_in(context_id, now).map(|l| &l.rec)
    }

    fn live_in(&self, context_id: &str, now: Millis) -> impl Iterator<Item = &Live> {
        self.by_context
            .get(context_id)
            .into_iter()
            .flatten()
            .filter_map(|id| self.by_id.get(id))
            .filter(move |l| l.rec.expires_at > now)
    }

    /// The leases of a context live at `now`, in acquisition order, that
    /// overlap `path` (a normalised pattern). Within one call's budget.
    pub fn overlapping(
        &self,
        context_id: &str,
        path: &str,
        now: Millis,
    ) -> Result<Vec<&LeaseRec>, OverBudget> {
        let wanted = [Pattern::new(path)];
        let mut work = call_budget();
        let mut found = Vec::new();
        for l in self.live_in(context_id, now) {
            if !l.overlaps(&wanted, &mut work)?.is_empty() {
                found.push(&l.rec);
            }
        }
        Ok(found)
    }

    /// May `req` be granted at `now`? Leases that have expired but not yet
    /// been ended count as gone.
    pub fn check(&self, req: &Request<'_>, now: Millis) -> Result<(), Refusal> {
        let ctx = &req.holder.context_id;
        let wanted: Vec<Pattern> = req.paths.iter().map(|p| Pattern::new(p)).collect();
        let mut work = call_budget();
        for l in self.live_in(ctx, now) {
            if l.rec.holder == *req.holder || (!l.rec.exclusive && !req.exclusive) {
                continue;
            }
            let hit = l
                .overlaps(&wanted, &mut work)
                .map_err(Refusal::OverBudget)?;
            if !hit.is_empty() {
                return Err(Refusal::Conflict {
                    lease_id: l.rec.id.clone(),
                    holder: l.rec.holder.peer_id.clone(),
                    paths: hit.into_iter().map(str::to_owned).collect(),
                });
            }
        }
        let held = self
            .in_context(ctx, now)
            .filter(|l| l.holder == *req.holder)
            .count();
        if held >= A2A_MAX_LEASES_PER_AGENT {
            return Err(Refusal::TooMany { held });
        }
        Ok(())
    }

    /// Adds a granted lease (after [`Leases::check`] and its row).
    pub fn insert(&mut self, rec: LeaseRec, undo: &mut Vec<LeaseUndo>) {
        self.by_context
            .entry(rec.holder.context_id.clone())
            .or_default()
            .push(rec.id.clone());
        self.by_expiry.insert((rec.expires_at, rec.id.clone()));
        undo.push(LeaseUndo::Added(rec.id.clone()));
        self.by_id.insert(rec.id.clone(), Live::new(rec));
    }

    /// Moves a lease's expiry.
    pub fn renew(&mut self, id: &str, expires_at: Millis, undo: &mut Vec<LeaseUndo>) {
        if let Some(old) = self.set_expiry(id, expires_at) {
            undo.push(LeaseUndo::Renewed {
                id: id.to_owned(),
                expires_at: old,
            });
        }
    }

    fn set_expiry(&mut self, id: &str, expires_at: Millis) -> Option<Millis> {
        let l = &mut self.by_id.get_mut(id)?.rec;
        let old = std::mem::replace(&mut l.expires_at, expires_at);
        self.by_expiry.remove(&(old, id.to_owned()));
        self.by_expiry.insert((expires_at, id.to_owned()));
        Some(old)
    }

    /// Ends a lease: it is gone from every index. `undo` is `None` for an
    /// end that must stand whatever happens to the batch (its holder's
    /// connection closed).
    pub fn remove(&mut self, id: &str, undo: Option<&mut Vec<LeaseUndo>>) -> Option<LeaseRec> {
        let rec = self.by_id.remove(id)?.rec;
        self.by_expiry.remove(&(rec.expires_at, rec.id.clone()));
        if let Some(ids) = self.by_context.get_mut(&rec.holder.context_id) {
            ids.retain(|i| i != id);
            if ids.is_empty() {
                self.by_context.remove(&rec.holder.context_id);
            }
        }
        if let Some(undo) = undo {
            undo.push(LeaseUndo::Removed(Box::new(rec.clone())));
        }
        Some(rec)
    }

    /// Puts back what a failed call or batch changed, newest first. A
    /// lease ended in the batch is put back only if `holder_live` says its
    /// holder (party and connection) is still there: a connection that
    /// closed during the batch stays closed whatever the batch does, and
    /// its leases must not come back without a holder.
    pub fn undo(&mut self, changes: Vec<LeaseUndo>, holder_live: impl Fn(&LeaseRec) -> bool) {
        for c in changes.into_iter().rev() {
            match c {
                LeaseUndo::Added(id) => {
                    self.remove(&id, None);
                }
                LeaseUndo::Removed(rec) if !holder_live(&rec) => {}
                LeaseUndo::Removed(rec) => {
                    let ids = self
                        .by_context
                        .entry(rec.holder.context_id.clone())
                        .or_default();
                    // Back in acquisition order.
                    let at = ids
                        .iter()
                        .position(|i| {
                            self.by_id
                                .get(i)
                                .is_some_and(|l| l.rec.acquired_at > rec.acquired_at)
                        })
                        .unwrap_or(ids.len());
                    ids.insert(at, rec.id.clone());
                    self.by_expiry.insert((rec.expires_at, rec.id.clone()));
                    self.by_id.insert(rec.id.clone(), Live::new(*rec));
                }
                LeaseUndo::Renewed { id, expires_at } => {
                    self.set_expiry(&id, expires_at);
                }
            }
        }
    }

    /// Notes a party that was refused (or waits for) a lease: it is told
    /// when the lease ends. Not undone: a refusal is answered whatever the
    /// batch does.
    pub fn watch(&mut self, id: &str, party: &Party) {
        if let Some(l) = self.by_id.get_mut(id).map(|l| &mut l.rec) {
            if !l.watchers.contains(party) && l.holder != *party {
                l.watchers.push(party.clone());
            }
        }
    }

    /// Leases whose TTL has run out at `now`, soonest first.
    pub fn expired(&self, now: Millis) -> Vec<String> {
        self.by_expiry
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, id)| id.clone())
            .collect()
    }

    /// The earliest expiry of a live lease.
    pub fn next_expiry(&self) -> Option<Millis> {
        self.by_expiry.first().map(|(at, _)| *at)
    }

    /// The leases a party holds.
    pub fn held_by(&self, holder: &Party) -> Vec<String> {
        self.by_context
            .get(&holder.context_id)
            .into_iter()
            .flatten()
            .filter(|id| self.by_id.get(*id).is_some_and(|l| l.rec.holder == *holder))
            .cloned()
            .collect()
    }

    /// The leases held by agents of a connection.
    pub fn held_on(&self, conn: ConnId) -> Vec<String> {
        let mut ids: Vec<(Millis, String)> = self
            .by_id
            .values()
            .map(|l| &l.rec)
            .filter(|l| l.conn == conn)
            .map(|l| (l.acquired_at, l.id.clone()))
            .collect();
        ids.sort();
        ids.into_iter().map(|(_, id)| id).collect()
    }

    /// Does any agent of this connection hold a lease?
    pub fn any_on(&self, conn: ConnId) -> bool {
        self.by_id.values().any(|l| l.rec.conn == conn)
    }

    /// Every live lease (for the property tests' invariants).
    #[cfg(test)]
    pub fn all(&self) -> impl Iterator<Item = &LeaseRec> {
        self.by_id.values().map(|l| &l.rec)
    }
}

/// Do two leases conflict (one context, different holders, an overlapping
/// path, one exclusive)? What [`Leases::check`] refuses, stated on its own
/// (the property tests' invariant).
#[cfg(test)]
pub fn conflict(a: &LeaseRec, b: &LeaseRec) -> bool {
    use a2a_proto::lease_path::overlaps;
    a.holder.context_id == b.holder.context_id
        && a.holder != b.holder
        && (a.exclusive || b.exclusive)
        && a.paths
            .iter()
            .any(|p| b.paths.iter().any(|q| overlaps(p, q)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_proto::limits::{A2A_MAX_LEASE_PATHS, A2A_MAX_LEASE_PATH_BYTES};

    fn party(ctx: &str, peer: &str) -> Party {
        Party {
            context_id: ctx.into(),
            peer_id: peer.into(),
        }
    }

    fn rec(id: &str, holder: &Party, paths: &[&str], exclusive: bool, at: Millis) -> LeaseRec {
        LeaseRec {
            id: id.into(),
            holder: holder.clone(),
            conn: 1,
            paths: paths.iter().map(|p| p.to_string()).collect(),
            exclusive,
            reason: None,
            acquired_at: at,
            expires_at: at + 1000,
            watchers: vec![],
        }
    }

    #[test]
    fn conflicts_need_one_context_other_holders_an_overlap_and_one_exclusive() {
        let (a, b) = (party("c", "a"), party("c", "b"));
        let mut ls = Leases::default();
        let mut undo = vec![];
        ls.insert(rec("1", &a, &["src/**"], true, 0), &mut undo);
        let paths = vec!["src/lib.rs".to_string()];
        let req = |h, exclusive| Request {
            holder: h,
            paths: &paths,
            exclusive,
        };
        assert!(matches!(
            ls.check(&req(&b, false), 10),
            Err(Refusal::Conflict { ref lease_id, ref holder, ref paths })
                if lease_id == "1" && holder == "a" && paths == &["src/**"]
        ));
        assert_eq!(ls.check(&req(&a, true), 10), Ok(()), "own lease");
        let stranger = party("other", "b");
        assert_eq!(ls.check(&req(&stranger, true), 10), Ok(()), "other context");
        assert_eq!(ls.check(&req(&b, true), 1000), Ok(()), "expired");
        ls.undo(undo, |_| true);
        assert!(ls.is_empty() && ls.by_context.is_empty() && ls.by_expiry.is_empty());
    }

    #[test]
    fn undo_restores_order_and_expiry() {
        let a = party("c", "a");
        let mut ls = Leases::default();
        let mut undo = vec![];
        for (i, id) in ["1", "2", "3"].iter().enumerate() {
            ls.insert(rec(id, &a, &["x"], true, i as Millis), &mut undo);
        }
        let mut undo = vec![];
        ls.renew("3", 99_999, &mut undo);
        ls.remove("2", Some(&mut undo));
        ls.undo(undo, |_| true);
        let order: Vec<&str> = ls.in_context("c", 0).map(|l| l.id.as_str()).collect();
        assert_eq!(order, ["1", "2", "3"]);
        assert_eq!(ls.get("3").unwrap().expires_at, 1002);
        assert_eq!(ls.next_expiry(), Some(1000));
        assert_eq!(ls.expired(1001), ["1", "2"]);
    }

    /// `A2A_MAX_LEASES_PER_AGENT` leases of `A2A_MAX_LEASE_PATHS` paths
    /// (`path(lease, index)`), held shared by `eve` in context `c`.
    fn held_at_the_bounds(path: impl Fn(usize, usize) -> String) -> Leases {
        let eve = party("c", "eve");
        let mut ls = Leases::default();
        for i in 0..A2A_MAX_LEASES_PER_AGENT {
            let paths: Vec<String> = (0..A2A_MAX_LEASE_PATHS).map(|j| path(i, j)).collect();
            assert!(paths.iter().all(|p| p.len() <= A2A_MAX_LEASE_PATH_BYTES));
            let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
            let mut l = rec(&format!("l{i:02}"), &eve, &refs, false, 0);
            l.expires_at = Millis::MAX;
            ls.insert(l, &mut vec![]);
        }
        ls
    }

    /// Globs of 500 stars at every bound: 64 x 64 held against 64 asked,
    /// each pair compared exactly (their heads and tails), all of them
    /// within one call's budget; a later path that overlaps is found.
    #[test]
    fn globs_at_the_bounds_are_compared_exactly_within_the_budget() {
        let ls = held_at_the_bounds(|i, j| format!("{}x{i}y{j}", "a*".repeat(505)));
        let mallory = party("c", "mallory");
        let far: Vec<String> = (0..A2A_MAX_LEASE_PATHS)
            .map(|k| format!("{}{k}", "b*".repeat(505)))
            .collect();
        let req = |paths| Request {
            holder: &mallory,
            paths,
            exclusive: true,
        };
        assert_eq!(ls.check(&req(&far), 1), Ok(()));
        let mut near = far.clone();
        near[63] = "a*x63y63".into();
        let last = format!("{}x63y63", "a*".repeat(505));
        assert_eq!(
            ls.check(&req(&near), 1),
            Err(Refusal::Conflict {
                lease_id: "l63".into(),
                holder: "eve".into(),
                paths: vec![last.clone()]
            })
        );
        let listed = ls.overlapping("c", "*x63y63", 1).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, "l63");
        assert!(ls.overlapping("c", &far[0], 1).unwrap().is_empty());
    }

    /// Paths of 500 one-byte segments against a `**` run of 300 sought
    /// along each: past the budget, the call is refused (and changes
    /// nothing: `check` and `overlapping` only read).
    #[test]
    fn a_call_past_the_budget_is_refused() {
        let ls = held_at_the_bounds(|i, j| format!("{}x{i}y{j}", "a/".repeat(505)));
        let mallory = party("c", "mallory");
        let runs = vec![format!("**/{}b/**", "a/".repeat(300))];
        let req = Request {
            holder: &mallory,
            paths: &runs,
            exclusive: true,
        };
        let Err(Refusal::OverBudget(e)) = ls.check(&req, 1) else {
            panic!("within budget")
        };
        assert_eq!(e.limit, A2A_MAX_LEASE_MATCH_STEPS);
        assert!(e.spent > e.limit);
        let e = ls.overlapping("c", &runs[0], 1).unwrap_err();
        assert_eq!(e.limit, A2A_MAX_LEASE_MATCH_STEPS);
        match CoreError::from(e) {
            CoreError::Check(CheckError::OutOfBounds { limit, max, .. }) => {
                assert_eq!((limit, max), ("A2A_MAX_LEASE_MATCH_STEPS", e.limit))
            }
            other => panic!("{other:?}"),
        }
        // The same holder's own leases are not compared at all.
        let eve = party("c", "eve");
        let own = Request {
            holder: &eve,
            paths: &runs,
            exclusive: true,
        };
        assert_eq!(ls.check(&own, 1), Err(Refusal::TooMany { held: 64 }));
    }

    /// Random interleavings of acquire, renew, release, expiry (time
    /// passing, then the sweep a new transaction starts with),
    /// deregistration, re-registration and connection death, grouped into
    /// batches that commit or roll back, run against [`Leases`] the way the
    /// writer does (`methods/leases_*.rs`, `engine/leases.rs`).
    mod interleavings {
        use super::*;
        use proptest::prelude::*;

        /// Patterns that overlap in every way: a directory, files in it,
        /// a glob, `**` at either end.
        const POOL: [&str; 6] = ["src/**", "src/a.rs", "src/*.rs", "docs/x", "**/x", "b/**/c"];

        #[derive(Debug, Clone)]
        enum Op {
            Acquire {
                agent: usize,
                paths: Vec<usize>,
                exclusive: bool,
                ttl: Millis,
            },
            Renew {
                agent: usize,
                pick: usize,
                ttl: Millis,
            },
            Release {
                agent: usize,
                pick: usize,
            },
            Advance(Millis),
            Deregister(usize),
            Register(usize),
            /// Closes one of the connections agents are registered on.
            CloseConn(usize),
            EndBatch {
                commit: bool,
            },
        }

        fn op() -> impl Strategy<Value = Op> {
            let agent = 0..AGENTS;
            prop_oneof![
                4 => (agent.clone(), prop::collection::vec(0..POOL.len(), 1..3), any::<bool>(), 1..5_000i64)
                    .prop_map(|(agent, paths, exclusive, ttl)| Op::Acquire { agent, paths, exclusive, ttl }),
                1 => (agent.clone(), any::<usize>(), 1..5_000i64)
                    .prop_map(|(agent, pick, ttl)| Op::Renew { agent, pick, ttl }),
                2 => (agent.clone(), any::<usize>()).prop_map(|(agent, pick)| Op::Release { agent, pick }),
                2 => (0..3_000i64).prop_map(Op::Advance),
                1 => agent.clone().prop_map(Op::Deregister),
                1 => agent.clone().prop_map(Op::Register),
                1 => any::<usize>().prop_map(Op::CloseConn),
                2 => any::<bool>().prop_map(|commit| Op::EndBatch { commit }),
            ]
        }

        /// Three agents share a context, one is alone in another; two
        /// connections carry them.
        const AGENTS: usize = 4;

        struct World {
            leases: Leases,
            now: Millis,
            parties: Vec<Party>,
            /// Each agent's connection while it is registered.
            conn: Vec<Option<ConnId>>,
            /// Connections closed so far.
            closed: Vec<ConnId>,
            next_conn: ConnId,
            next_id: u64,
            /// The open batch: lease changes, and registrations to undo.
            undo: Vec<LeaseUndo>,
            reg_undo: Vec<(usize, Option<ConnId>)>,
        }

        impl World {
            fn new() -> World {
                let ctx = ["c0", "c0", "c1", "c0"];
                World {
                    leases: Leases::default(),
                    now: 1_000_000,
                    parties: (0..AGENTS)
                        .map(|i| Party {
                            context_id: ctx[i].into(),
                            peer_id: format!("a{i}"),
                        })
                        .collect(),
                    conn: vec![Some(1), Some(1), Some(2), Some(2)],
                    closed: Vec::new(),
                    next_conn: 3,
                    next_id: 0,
                    undo: Vec::new(),
                    reg_undo: Vec::new(),
                }
            }

            /// The live leases `agent` holds, sorted (for a stable pick).
            fn held(&self, agent: usize) -> Vec<String> {
                let mut ids = self.leases.held_by(&self.parties[agent]);
                ids.sort();
                ids
            }

            fn set_conn(&mut self, agent: usize, conn: Option<ConnId>) {
                self.reg_undo.push((agent, self.conn[agent]));
                self.conn[agent] = conn;
            }

            fn apply(&mut self, op: Op) {
                match op {
                    Op::Acquire {
                        agent,
                        paths,
                        exclusive,
                        ttl,
                    } => {
                        let Some(conn) = self.conn[agent] else { return };
                        let paths: Vec<String> =
                            paths.iter().map(|i| POOL[*i].to_string()).collect();
                        let holder = self.parties[agent].clone();
                        let req = Request {
                            holder: &holder,
                            paths: &paths,
                            exclusive,
                        };
                        match self.leases.check(&req, self.now) {
                            Ok(()) => {
                                self.next_id += 1;
                                let rec = LeaseRec {
                                    id: format!("l{:04}", self.next_id),
                                    holder: holder.clone(),
                                    conn,
                                    paths,
                                    exclusive,
                                    reason: None,
                                    acquired_at: self.now,
                                    expires_at: self.now + ttl,
                                    watchers: Vec::new(),
                                };
                                self.leases.insert(rec, &mut self.undo);
                            }
                            Err(Refusal::Conflict { lease_id, .. }) => {
                                self.leases.watch(&lease_id, &holder);
                            }
                            Err(Refusal::TooMany { .. }) => {}
                            Err(Refusal::OverBudget(e)) => {
                                panic!("a few short paths ran out of budget: {e}")
                            }
                        }
                    }
                    Op::Renew { agent, pick, ttl } => {
                        let ids = self.held(agent);
                        if self.conn[agent].is_none() || ids.is_empty() {
                            return;
                        }
                        let id = &ids[pick % ids.len()];
                        if self.leases.get(id).is_some_and(|l| l.expires_at > self.now) {
                            self.leases.renew(id, self.now + ttl, &mut self.undo);
                        }
                    }
                    Op::Release { agent, pick } => {
                        let ids = self.held(agent);
                        if self.conn[agent].is_none() || ids.is_empty() {
                            return;
                        }
                        self.leases
                            .remove(&ids[pick % ids.len()], Some(&mut self.undo));
                    }
                    Op::Advance(ms) => self.now += ms,
                    Op::Deregister(agent) => {
                        if self.conn[agent].is_none() {
                            return;
                        }
                        for id in self.leases.held_by(&self.parties[agent]) {
                            self.leases.remove(&id, Some(&mut self.undo));
                        }
                        self.set_conn(agent, None);
                    }
                    Op::Register(agent) => {
                        if self.conn[agent].is_some() {
                            return;
                        }
                        self.next_conn += 1;
                        let c = self.next_conn;
                        self.set_conn(agent, Some(c));
                    }
                    Op::CloseConn(pick) => {
                        // Every agent registered on it dies, for good (not
                        // undone with the batch).
                        let mut open: Vec<ConnId> = self.conn.iter().flatten().copied().collect();
                        open.sort_unstable();
                        open.dedup();
                        if open.is_empty() {
                            return;
                        }
                        let c = open[pick % open.len()];
                        for id in self.leases.held_on(c) {
                            self.leases.remove(&id, None);
                        }
                        for a in 0..AGENTS {
                            if self.conn[a] == Some(c) {
                                self.conn[a] = None;
                            }
                        }
                        self.closed.push(c);
                    }
                    Op::EndBatch { commit } => {
                        let undo = std::mem::take(&mut self.undo);
                        let regs = std::mem::take(&mut self.reg_undo);
                        if !commit {
                            // A registration on a closed connection does
                            // not come back.
                            for (agent, before) in regs.into_iter().rev() {
                                self.conn[agent] = before.filter(|c| !self.closed.contains(c));
                            }
                            let conn = self.conn.clone();
                            let parties = self.parties.clone();
                            self.leases.undo(undo, |l| {
                                (0..AGENTS)
                                    .any(|a| parties[a] == l.holder && conn[a] == Some(l.conn))
                            });
                        }
                        // The next transaction starts with the sweep.
                        for id in self.leases.expired(self.now) {
                            self.leases.remove(&id, Some(&mut self.undo));
                        }
                    }
                }
            }

            fn check(&self) -> Result<(), TestCaseError> {
                let live: Vec<&LeaseRec> = self
                    .leases
                    .all()
                    .filter(|l| l.expires_at > self.now)
                    .collect();
                for (i, a) in live.iter().enumerate() {
                    for b in &live[i + 1..] {
                        prop_assert!(!conflict(a, b), "both live: {a:?} and {b:?}");
                    }
                }
                for l in self.leases.all() {
                    let holder = (0..AGENTS).find(|a| self.parties[*a] == l.holder);
                    prop_assert!(
                        holder.is_some_and(|a| self.conn[a] == Some(l.conn)),
                        "{} is held by {} (connection {}), which is gone",
                        l.id,
                        l.holder.peer_id,
                        l.conn
                    );
                }
                Ok(())
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]
            #[test]
            fn conflicting_leases_are_never_both_live_and_every_lease_has_a_live_holder(
                ops in prop::collection::vec(op(), 1..80)
            ) {
                let mut w = World::new();
                for op in ops {
                    w.apply(op);
                    w.check()?;
                }
            }
        }
    }
}
