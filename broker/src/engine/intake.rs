//! The writer's intake: what is queued for it, one queue per connection,
//! and which of it goes into the next commit group.
//!
//! One queue for everything made the writer first come, first served: a
//! connection that pipelined a thousand calls, or a few 1 MiB payloads,
//! held every other connection's next call behind all of them. Here each
//! connection waits in its own queue and a group is filled round-robin,
//! so a connection's next call goes in the next group whatever the others
//! queued:
//!
//! - while more than one connection has calls queued, a connection puts at
//!   most `WRITER_SHARE_CALLS` of them in a group (a group's time is what
//!   every call in it waits for); a connection alone gets the whole group;
//! - a group holds at most `WRITER_GROUP_BYTES` of payload (the content
//!   bytes a call's pre-check counted, `Call::precheck`): a call that
//!   does not fit waits for a later group, and one larger than that goes
//!   in a group of its own, which alternates with groups of smaller calls
//!   while both wait (neither kind starves the other); while the writer
//!   owes smaller calls the time oversized groups took, their groups go
//!   first (`Engine::run` keeps that account).
//!
//! What stays as it was: one connection's calls run in the order it sent
//! them (its queue is FIFO, and a call that waits holds back the calls
//! behind it), a closed connection's end comes after the calls it queued,
//! and every call is still validated and written in the writer's order,
//! which is its commit order (docs/protocol.md §10). Only calls of
//! different connections, none of them answered yet, change places.

use super::Command;
use crate::core::ConnId;
use a2a_proto::limits::{WRITER_GROUP_BYTES, WRITER_SHARE_CALLS};
use crossbeam_channel::Sender;
use std::collections::{HashMap, VecDeque};

/// A command waiting in a connection's queue, with its payload bytes.
struct Queued {
    cmd: Command,
    weight: usize,
}

/// The commands queued for the writer and not yet in a group.
pub(super) struct Intake {
    queues: HashMap<ConnId, VecDeque<Queued>>,
    /// The connections with something queued, in the order they are
    /// served next (each exactly once).
    ring: VecDeque<ConnId>,
    /// Commands of no connection (expiries, the lease tick): cheap, and
    /// every group takes all of them.
    system: Vec<Command>,
    /// A shutdown asked for: it goes in the group that empties the queues.
    shutdown: Option<Sender<()>>,
    /// An oversized call waited through the last group: the next group is its.
    oversized_turn: bool,
    batch_max: usize,
    share: usize,
    group_bytes: usize,
}

impl Intake {
    pub(super) fn new(batch_max: usize) -> Intake {
        Intake::with_bounds(batch_max, WRITER_SHARE_CALLS, WRITER_GROUP_BYTES)
    }

    fn with_bounds(batch_max: usize, share: usize, group_bytes: usize) -> Intake {
        Intake {
            queues: HashMap::new(),
            ring: VecDeque::new(),
            system: Vec::new(),
            shutdown: None,
            oversized_turn: false,
            batch_max: batch_max.max(1),
            share: share.max(1),
            group_bytes,
        }
    }

    /// Nothing queued and no shutdown asked for: the writer may sleep.
    pub(super) fn is_idle(&self) -> bool {
        self.ring.is_empty() && self.system.is_empty() && self.shutdown.is_none()
    }

    /// A shutdown was asked for: what arrives after it is not taken.
    pub(super) fn stopping(&self) -> bool {
        self.shutdown.is_some()
    }

    /// Queues one command behind the others of its connection.
    pub(super) fn push(&mut self, cmd: Command) {
        let (conn, weight) = match &cmd {
            Command::Call { op, weight, .. } => (op.from.conn, *weight),
            Command::ConnectionClosed { conn, .. } => (*conn, 0),
            Command::Shutdown(_) => {
                let Command::Shutdown(done) = cmd else {
                    unreachable!()
                };
                self.shutdown = Some(done);
                return;
            }
            Command::BlockingExpired(_) | Command::LeaseWaitExpired(_) | Command::LeaseTick => {
                self.system.push(cmd);
                return;
            }
        };
        let q = self.queues.entry(conn).or_default();
        if q.is_empty() {
            self.ring.push_back(conn);
        }
        q.push_back(Queued { cmd, weight });
    }

    fn head_weight(&self, conn: ConnId) -> usize {
        self.queues[&conn].front().map_or(0, |q| q.weight)
    }

    /// Takes the head of `conn`'s queue; `true` if more is queued behind it.
    fn take(&mut self, conn: ConnId, group: &mut Vec<Command>) -> bool {
        let q = self.queues.get_mut(&conn).expect("a queued connection");
        let head = q.pop_front().expect("a queued command");
        group.push(head.cmd);
        if q.is_empty() {
            self.queues.remove(&conn);
            false
        } else {
            true
        }
    }

    fn is_oversized(&self, conn: ConnId) -> bool {
        self.head_weight(conn) > self.group_bytes
    }

    /// Is a call over the group's byte bound next in some connection's queue?
    pub(super) fn oversized_waiting(&self) -> bool {
        self.ring.iter().any(|&c| self.is_oversized(c))
    }

    /// Is a call within the group's byte bound next in some connection's queue?
    pub(super) fn fitting_waiting(&self) -> bool {
        self.ring.iter().any(|&c| !self.is_oversized(c))
    }

    /// The next commit group (see [`Intake::group`]), oversized calls taking
    /// their turn.
    #[cfg(test)]
    fn next_group(&mut self) -> Vec<Command> {
        self.group(false).0
    }

    /// The next commit group: every system command, then calls chosen as
    /// the module says; the shutdown last once nothing else is queued.
    /// `fitting_first`: calls within the byte bound go first even when an
    /// oversized one has waited (the writer owes them time, see
    /// `Engine::run`). Also says whether the group is an oversized call's.
    pub(super) fn group(&mut self, fitting_first: bool) -> (Vec<Command>, bool) {
        let mut group: Vec<Command> = std::mem::take(&mut self.system);
        let any_oversized = self.oversized_waiting();
        let any_fitting = self.fitting_waiting();
        let oversized_turn = self.oversized_turn && !fitting_first;
        let alone = any_oversized && (oversized_turn || !any_fitting);
        if alone {
            // One oversized call, alone: the first connection in turn whose next call is one.
            let at = self
                .ring
                .iter()
                .position(|&c| self.is_oversized(c))
                .expect("an oversized call");
            let conn = self.ring.remove(at).expect("in the ring");
            if self.take(conn, &mut group) {
                self.ring.push_back(conn);
            }
            self.oversized_turn = false;
        } else {
            self.fill(&mut group);
            self.oversized_turn = self.oversized_waiting();
        }
        if self.ring.is_empty() {
            if let Some(done) = self.shutdown.take() {
                group.push(Command::Shutdown(done));
            }
        }
        (group, alone)
    }

    /// Round-robin, one call per connection per pass, within the group's
    /// bounds. A connection's turn ends at its share or at a call that does
    /// not fit the bytes left (the calls behind it wait with it); the
    /// connections not reached keep their place at the front for the next group.
    fn fill(&mut self, group: &mut Vec<Command>) {
        let quota = if self.ring.len() > 1 {
            self.share
        } else {
            self.batch_max
        };
        let mut taken: HashMap<ConnId, usize> = HashMap::new();
        let mut bytes = 0usize;
        let mut calls = 0usize;
        let mut turn = std::mem::take(&mut self.ring);
        let mut served = VecDeque::new();
        while let Some(conn) = turn.pop_front() {
            if calls == self.batch_max {
                turn.push_front(conn);
                break;
            }
            let w = self.head_weight(conn);
            let n = taken.entry(conn).or_default();
            if *n >= quota || bytes + w > self.group_bytes {
                served.push_back(conn);
                continue;
            }
            *n += 1;
            bytes += w;
            calls += 1;
            if self.take(conn, group) {
                turn.push_back(conn);
            }
        }
        turn.extend(served);
        self.ring = turn;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::{Outbox, Responder};
    use crate::engine::{Op, Origin};
    use a2a_proto::call::Call;
    use a2a_proto::params::TokenParams;
    use std::sync::Arc;

    /// A call of connection `conn`, told apart by its token, of `weight` payload bytes.
    fn call(conn: ConnId, tag: &str, weight: usize) -> Command {
        let op = Op {
            call: Call::Deregister(TokenParams {
                token: Some(tag.into()),
            }),
            from: Origin {
                conn,
                outbox: Arc::new(Outbox::new(16)),
            },
            resume: None,
        };
        Command::Call {
            op: Box::new(op),
            reply: Responder::discard(),
            weight,
        }
    }

    fn tags(group: &[Command]) -> Vec<String> {
        group
            .iter()
            .map(|c| match c {
                Command::Call { op, .. } => match &op.call {
                    Call::Deregister(p) => p.token.clone().unwrap(),
                    _ => unreachable!(),
                },
                Command::ConnectionClosed { conn, .. } => format!("closed{conn}"),
                Command::Shutdown(_) => "shutdown".into(),
                _ => "system".into(),
            })
            .collect()
    }

    #[test]
    fn a_flooding_connection_takes_its_share_and_the_others_go_in_the_next_group() {
        let mut i = Intake::with_bounds(256, 8, 1 << 20);
        for k in 0..1000 {
            i.push(call(1, &format!("a{k}"), 10));
        }
        i.push(call(2, "b0", 10));
        i.push(call(2, "b1", 10));
        let g = tags(&i.next_group());
        assert_eq!(g.len(), 10, "{g:?}");
        assert_eq!(g[..4], ["a0", "b0", "a1", "b1"]);
        assert!(g.iter().filter(|t| t.starts_with('a')).count() == 8);
        // Alone again, the flooder gets whole groups, in its own order.
        let g = tags(&i.next_group());
        assert_eq!(g.len(), 256);
        assert_eq!(g[0], "a8");
        assert_eq!(g[255], "a263");
    }

    #[test]
    fn large_payloads_wait_for_a_group_of_their_own_and_alternate_with_small_calls() {
        let mut i = Intake::with_bounds(256, 8, 1 << 19);
        for k in 0..4 {
            i.push(call(1, &format!("big{k}"), 1 << 20));
        }
        i.push(call(2, "small0", 100));
        i.push(call(3, "mid0", 300 << 10));
        i.push(call(3, "mid1", 300 << 10));
        // Small calls first: the 1 MiB calls never go ahead of them; of two
        // 300 KiB calls only one fits, the other holds back its connection.
        assert_eq!(tags(&i.next_group()), ["small0", "mid0"]);
        // A large call waited: its group, alone.
        assert_eq!(tags(&i.next_group()), ["big0"]);
        assert_eq!(tags(&i.next_group()), ["mid1"]);
        i.push(call(2, "small1", 100));
        assert_eq!(tags(&i.next_group()), ["big1"]);
        assert_eq!(tags(&i.next_group()), ["small1"]);
        assert_eq!(tags(&i.next_group()), ["big2"]);
        assert_eq!(tags(&i.next_group()), ["big3"]);
        assert!(i.is_idle());
    }

    #[test]
    fn smaller_calls_owed_time_go_before_an_oversized_call_that_waited() {
        let mut i = Intake::with_bounds(256, 8, 1 << 19);
        i.push(call(1, "big0", 1 << 20));
        i.push(call(1, "big1", 1 << 20));
        i.push(call(2, "small0", 100));
        assert_eq!(tags(&i.next_group()), ["small0"]);
        i.push(call(2, "small1", 100));
        // The oversized call's turn, unless the smaller ones are owed time.
        let (g, alone) = i.group(true);
        assert_eq!((tags(&g), alone), (vec!["small1".to_owned()], false));
        let (g, alone) = i.group(true);
        assert_eq!((tags(&g), alone), (vec!["big0".to_owned()], true));
        assert!(i.oversized_waiting() && !i.fitting_waiting());
    }

    #[test]
    fn a_connections_calls_keep_their_order_and_its_close_comes_after_them() {
        let mut i = Intake::with_bounds(4, 2, 1 << 20);
        for k in 0..5 {
            i.push(call(1, &format!("a{k}"), 10));
        }
        let (done, _rx) = crossbeam_channel::bounded(1);
        i.push(Command::ConnectionClosed { conn: 1, done });
        i.push(call(2, "b0", 10));
        i.push(Command::LeaseTick);
        let (stop, _srx) = crossbeam_channel::bounded(1);
        i.push(Command::Shutdown(stop));
        let mut all = Vec::new();
        while !i.is_idle() {
            let g = tags(&i.next_group());
            let calls = g.iter().filter(|t| *t != "system" && *t != "shutdown");
            assert!(calls.count() <= 4, "{g:?}");
            all.extend(g);
        }
        assert_eq!(all[0], "system");
        let a: Vec<_> = all.iter().filter(|t| t.starts_with('a')).collect();
        assert_eq!(a, ["a0", "a1", "a2", "a3", "a4"]);
        let closed = all.iter().position(|t| t == "closed1").unwrap();
        let last_a = all.iter().position(|t| t == "a4").unwrap();
        assert!(closed > last_a, "{all:?}");
        assert_eq!(all.last().unwrap(), "shutdown");
    }

    #[test]
    fn many_connections_are_served_in_turn_when_the_group_is_too_small_for_all() {
        let mut i = Intake::with_bounds(4, 8, 1 << 20);
        for conn in 0..10u64 {
            i.push(call(conn, &format!("c{conn}"), 10));
            i.push(call(conn, &format!("d{conn}"), 10));
        }
        let mut firsts = Vec::new();
        for _ in 0..3 {
            firsts.extend(tags(&i.next_group()));
        }
        // Twelve calls in three groups of four: ten connections' first
        // calls before any connection's second.
        assert_eq!(firsts.len(), 12);
        assert!(
            firsts[..10].iter().all(|t| t.starts_with('c')),
            "{firsts:?}"
        );
    }
}
