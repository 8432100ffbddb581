//! Idempotency by `messageId` (docs/protocol.md §5, `a2a.message.send`; feature `idempotent-send`): when a
//! send is a retry of one already done, and when reusing a `messageId` is
//! refused. Pure rules; the send handler sequences them with its writes.
//!
//! - A creation is retried when the same requester sends the same
//!   `messageId` again to the same recipient (`to` omitted matches any one
//!   worker, `"*"` matches a broadcast): the retry answers with what the
//!   first one made and writes nothing.
//! - An append is retried when the same `messageId` is already on the task
//!   from the same sender in the same role.
//! - Either way, the same `messageId` with other parts, or (on a task) from
//!   another sender, is refused with `-32602`.

use super::task::{Party, TaskRecord};
use super::CoreError;
use a2a_proto::limits::CREATIONS_TRACKED;
use a2a_proto::types::{Message, Part, Role};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// The tasks an earlier creation made that a retry of it answers with, out
/// of `prior`: the tasks the requester created with this `messageId`.
/// `None` when the send is not a retry (a new creation).
pub fn creation_retry(
    prior: Vec<Arc<TaskRecord>>,
    msg: &Message,
) -> Result<Option<Vec<Arc<TaskRecord>>>, CoreError> {
    let to = msg.to.as_deref();
    let broadcast = to == Some("*");
    let mut same: Vec<Arc<TaskRecord>> = prior
        .into_iter()
        .filter(|rec| {
            if broadcast {
                rec.broadcast
            } else {
                !rec.broadcast && to.is_none_or(|t| rec.worker.peer_id == t)
            }
        })
        .collect();
    let Some(first) = same.first() else {
        return Ok(None);
    };
    if first.history.first().is_some_and(|m| m.parts != msg.parts) {
        return Err(different_parts(&msg.message_id));
    }
    if !broadcast {
        same.truncate(1);
    }
    Ok(Some(same))
}

/// Is this append a retry of one already on the task (`true`: answer with
/// the task, write nothing)? `sender` and `role` are the caller's.
pub fn append_retry(
    history: &[Arc<Message>],
    message_id: &str,
    parts: &[Part],
    sender: &str,
    role: Role,
) -> Result<bool, CoreError> {
    let Some(prev) = history.iter().find(|m| m.message_id == message_id) else {
        return Ok(false);
    };
    if prev.from.as_deref() != Some(sender) || prev.role != role {
        return Err(CoreError::InvalidParams(format!(
            "messageId `{message_id}` is already used on this task by another sender"
        )));
    }
    if prev.parts != parts {
        return Err(different_parts(message_id));
    }
    Ok(true)
}

fn different_parts(message_id: &str) -> CoreError {
    CoreError::InvalidParams(format!(
        "messageId `{message_id}` was already used with different parts"
    ))
}

/// Which tasks each requester created with which `messageId`, answered
/// from memory where that is exact: a party is tracked from the moment
/// the database showed it had created no task at all (one indexed lookup,
/// on its first creation in this run), and from then on every creation it
/// makes is recorded here, so memory knows all of them. A party not
/// tracked (it had tasks before, or was dropped to keep the bound below)
/// is looked up in SQLite as before. A party stops being tracked when it
/// leaves (deregistration, closed connection): a later agent of the same
/// name starts over with the lookup. Nothing here is durable, and nothing
/// needs to be: after a restart every party starts untracked.
///
/// Bounded: past [`CREATIONS_TRACKED`] task ids over all parties, the
/// parties tracked longest are dropped to the database lookup first (a
/// registration that spent its sends, which a client may keep alive while
/// it registers anew, creates nothing more).
#[derive(Default)]
pub struct Creations {
    /// `None`: checked, and the party had created tasks before (or was
    /// dropped to keep the bound): ask the database. Absent: not checked yet.
    by_party: HashMap<Party, Option<HashMap<String, Vec<String>>>>,
    /// Tracked parties, longest tracked first (entries of parties no
    /// longer tracked are skipped, and compacted away).
    order: VecDeque<Party>,
    /// Task ids recorded over all tracked parties.
    ids: usize,
}

/// Task ids a party's record holds.
fn ids_of(tracked: &HashMap<String, Vec<String>>) -> usize {
    tracked.values().map(Vec::len).sum()
}

/// What memory knows of a party's creations with one `messageId`.
#[derive(Debug, PartialEq, Eq)]
pub enum Known {
    /// The party was never checked: look it up, and check whether it had
    /// created anything at all ([`Creations::checked`]).
    Unchecked,
    /// Ask the database.
    Untracked,
    /// Exactly these tasks, oldest first (none: not a retry).
    Tracked(Vec<String>),
}

impl Creations {
    /// What memory knows of the tasks `party` created with `message_id`.
    pub fn lookup(&self, party: &Party, message_id: &str) -> Known {
        match self.by_party.get(party) {
            None => Known::Unchecked,
            Some(None) => Known::Untracked,
            Some(Some(t)) => Known::Tracked(t.get(message_id).cloned().unwrap_or_default()),
        }
    }

    /// Records the database's answer for an unchecked party: tracked from
    /// now on if it had created no task at all.
    pub fn checked(&mut self, party: Party, created_any: bool) {
        if self.by_party.contains_key(&party) {
            return;
        }
        if !created_any {
            self.order.push_back(party.clone());
            self.compact();
        }
        self.by_party
            .insert(party, (!created_any).then(HashMap::new));
    }

    /// Records tasks `party` just created with `message_id`; the length the
    /// entry had before (to undo), or `None` if the party is not tracked.
    pub fn record(&mut self, party: &Party, message_id: &str, ids: &[String]) -> Option<usize> {
        let tracked = self.by_party.get_mut(party)?.as_mut()?;
        let entry = tracked.entry(message_id.to_owned()).or_default();
        let before = entry.len();
        entry.extend(ids.iter().cloned());
        self.ids += ids.len();
        self.keep_bound();
        Some(before)
    }

    /// Drops the parties tracked longest to the database lookup until the
    /// records hold at most `CREATIONS_TRACKED` task ids.
    fn keep_bound(&mut self) {
        while self.ids > CREATIONS_TRACKED {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(slot) = self.by_party.get_mut(&oldest) {
                if let Some(tracked) = slot.take() {
                    self.ids -= ids_of(&tracked);
                }
            }
        }
    }

    /// Drops the order's entries of parties no longer tracked, once they
    /// outnumber the parties known.
    fn compact(&mut self) {
        if self.order.len() <= 2 * self.by_party.len() + 64 {
            return;
        }
        let by_party = &self.by_party;
        self.order
            .retain(|p| by_party.get(p).is_some_and(Option::is_some));
    }

    /// Undoes a [`Creations::record`] whose batch did not commit.
    pub fn unrecord(&mut self, party: &Party, message_id: &str, before: usize) {
        let Some(Some(tracked)) = self.by_party.get_mut(party) else {
            return;
        };
        if let Some(entry) = tracked.get_mut(message_id) {
            self.ids -= entry.len().saturating_sub(before);
            entry.truncate(before);
            if entry.is_empty() {
                tracked.remove(message_id);
            }
        }
    }

    /// The party left: forget it (a later agent of its name is checked anew).
    pub fn forget(&mut self, party: &Party) {
        if let Some(Some(tracked)) = self.by_party.remove(party) {
            self.ids -= ids_of(&tracked);
        }
        self.compact();
    }

    /// Parties known now (tracked or not).
    #[cfg(test)]
    pub fn known(&self) -> usize {
        self.by_party.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::task::fixture;
    use a2a_proto::types::State;

    /// A task of worker `worker` whose first message is `m0`.
    fn task(worker: &str, broadcast: bool) -> Arc<TaskRecord> {
        let mut rec = fixture::record(State::Submitted, 1);
        rec.worker.peer_id = worker.into();
        rec.broadcast = broadcast;
        Arc::new(rec)
    }

    /// The message `m0` of the fixture, addressed to `to`.
    fn send(to: Option<&str>) -> Message {
        let mut m = (*fixture::message("m0")).clone();
        m.to = to.map(Into::into);
        m
    }

    fn workers(r: Option<Vec<Arc<TaskRecord>>>) -> Option<Vec<String>> {
        r.map(|v| v.iter().map(|t| t.worker.peer_id.clone()).collect())
    }

    #[test]
    fn a_creation_retry_matches_its_recipient() {
        let prior = || vec![task("w1", false), task("w2", false)];
        let r = creation_retry(prior(), &send(Some("w2"))).unwrap();
        assert_eq!(workers(r), Some(vec!["w2".into()]));
        // `to` omitted: the first task the id made.
        let r = creation_retry(prior(), &send(None)).unwrap();
        assert_eq!(workers(r), Some(vec!["w1".into()]));
        // Another recipient: a new creation.
        assert!(creation_retry(prior(), &send(Some("w3")))
            .unwrap()
            .is_none());
        assert!(creation_retry(vec![], &send(None)).unwrap().is_none());
    }

    #[test]
    fn a_broadcast_retry_answers_every_task_of_the_broadcast() {
        let prior = vec![task("w1", true), task("w2", true), task("w3", false)];
        let r = creation_retry(prior.clone(), &send(Some("*"))).unwrap();
        assert_eq!(workers(r), Some(vec!["w1".into(), "w2".into()]));
        // A direct send does not match a broadcast's tasks.
        let r = creation_retry(prior, &send(Some("w1"))).unwrap();
        assert!(r.is_none());
    }

    #[test]
    fn a_creation_retry_with_other_parts_is_refused() {
        let mut m = send(Some("w1"));
        m.parts = vec![Part::text("something else")];
        let e = creation_retry(vec![task("w1", false)], &m).unwrap_err();
        assert_eq!(
            e,
            CoreError::InvalidParams("messageId `m0` was already used with different parts".into())
        );
    }

    #[test]
    fn an_append_retry_needs_the_same_sender_role_and_parts() {
        let rec = fixture::record(State::Working, 2);
        let parts = rec.history[1].parts.clone();
        let h = &rec.history;
        assert_eq!(append_retry(h, "m1", &parts, "a", Role::User), Ok(true));
        assert_eq!(append_retry(h, "new", &parts, "a", Role::User), Ok(false));
        let other_sender = append_retry(h, "m1", &parts, "b", Role::User).unwrap_err();
        assert!(
            other_sender.to_string().contains("another sender"),
            "{other_sender}"
        );
        assert!(append_retry(h, "m1", &parts, "a", Role::Agent).is_err());
        let other_parts = append_retry(h, "m1", &[Part::text("x")], "a", Role::User);
        assert_eq!(
            other_parts,
            Err(CoreError::InvalidParams(
                "messageId `m1` was already used with different parts".into()
            ))
        );
    }

    #[test]
    fn tracked_parties_answer_from_memory_and_undo() {
        let p = Party {
            context_id: "c".into(),
            peer_id: "a".into(),
        };
        let mut c = Creations::default();
        assert_eq!(c.lookup(&p, "m1"), Known::Unchecked);
        assert_eq!(c.record(&p, "m1", &["t1".into()]), None);
        c.checked(p.clone(), false);
        assert_eq!(c.lookup(&p, "m1"), Known::Tracked(vec![]));
        assert_eq!(c.record(&p, "m1", &["t1".into()]), Some(0));
        assert_eq!(c.record(&p, "m1", &["t2".into()]), Some(1));
        assert_eq!(
            c.lookup(&p, "m1"),
            Known::Tracked(vec!["t1".into(), "t2".into()])
        );
        c.unrecord(&p, "m1", 1);
        assert_eq!(c.lookup(&p, "m1"), Known::Tracked(vec!["t1".into()]));
        c.unrecord(&p, "m1", 0);
        assert_eq!(c.lookup(&p, "m1"), Known::Tracked(vec![]));
        c.forget(&p);
        assert_eq!(c.lookup(&p, "m1"), Known::Unchecked);
        // A party with earlier tasks is looked up in the database.
        c.checked(p.clone(), true);
        assert_eq!(c.lookup(&p, "m1"), Known::Untracked);
        assert_eq!(c.record(&p, "m1", &["t3".into()]), None);
        assert_eq!(c.known(), 1);
    }

    #[test]
    fn the_parties_tracked_longest_go_to_the_database_past_the_bound() {
        let party = |i: usize| Party {
            context_id: format!("c{i}"),
            peer_id: "a".into(),
        };
        let mut c = Creations::default();
        let per = 100;
        let parties = CREATIONS_TRACKED / per + 3;
        for i in 0..parties {
            c.checked(party(i), false);
            for m in 0..per {
                let ids = [format!("t{i}-{m}")];
                assert!(c.record(&party(i), &format!("m{m}"), &ids).is_some());
            }
            assert!(c.ids <= CREATIONS_TRACKED, "{} ids tracked", c.ids);
        }
        // The first parties were dropped to the lookup, the last are exact.
        assert_eq!(c.lookup(&party(0), "m0"), Known::Untracked);
        assert_eq!(
            c.lookup(&party(parties - 1), "m0"),
            Known::Tracked(vec![format!("t{}-0", parties - 1)])
        );
        // Leaving gives its ids back; the order does not pile up.
        let before = c.ids;
        c.forget(&party(parties - 1));
        assert_eq!(c.ids, before - per);
        for i in 0..10 * parties {
            c.checked(party(i + parties), false);
            c.forget(&party(i + parties));
        }
        assert!(c.order.len() <= 2 * c.known() + 64 + 1, "{}", c.order.len());
    }
}
