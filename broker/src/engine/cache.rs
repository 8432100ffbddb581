//! The writer's cache of task records: bounded by count and by bytes,
//! open and terminal tasks alike, least recently used out first.
//!
//! SQLite is the source of truth; this is only a copy of what is hot. A
//! record missing here is loaded from the writer's own connection, which
//! also sees the writes of the open batch, so dropping a record is always
//! safe, even one the open batch changed: a reload gives the same record.
//! That is also how a refused call or a rolled-back batch is undone here
//! (`Engine::restore`): the records it touched are dropped, and the next
//! use reloads them as the database now holds them.
//!
//! Without this bound the writer held every open task in memory (measured:
//! 58 KB per open task of 15 KB text, and contexts are unbounded, so open
//! tasks are too). With it, the records held cost at most
//! [`TASK_CACHE_BYTES`] as [`TaskRecord::resident_bytes`] counts them,
//! plus one record in use beyond it, whatever the number of open tasks.
//!
//! Recency is kept in a queue of `(id, tick)` marks: each use pushes a mark
//! and bumps the record's tick, and a mark whose tick is no longer the
//! record's is stale and skipped. The queue is compacted when stale marks
//! outnumber live ones, so every operation is amortised O(1).

use crate::core::task::TaskRecord;
use a2a_proto::limits::{TASK_CACHE_BYTES, TASK_CACHE_TASKS};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

struct Slot {
    rec: Arc<TaskRecord>,
    /// `rec.resident_bytes()` when inserted.
    cost: usize,
    /// The tick of this record's newest mark in the queue.
    tick: u64,
}

/// Task records by id, bounded by count and bytes.
pub(super) struct TaskCache {
    map: HashMap<String, Slot>,
    order: VecDeque<(Arc<str>, u64)>,
    tick: u64,
    bytes: usize,
    max_tasks: usize,
    max_bytes: usize,
}

impl Default for TaskCache {
    fn default() -> Self {
        Self::with_bounds(TASK_CACHE_TASKS, TASK_CACHE_BYTES)
    }
}

impl TaskCache {
    pub fn with_bounds(max_tasks: usize, max_bytes: usize) -> Self {
        Self {
            map: HashMap::new(),
            order: VecDeque::new(),
            tick: 0,
            bytes: 0,
            max_tasks: max_tasks.max(1),
            max_bytes,
        }
    }

    /// The record, marked as just used.
    pub fn get(&mut self, id: &str) -> Option<Arc<TaskRecord>> {
        let slot = self.map.get_mut(id)?;
        self.tick += 1;
        slot.tick = self.tick;
        let rec = slot.rec.clone();
        self.order.push_back((Arc::from(id), self.tick));
        self.compact();
        Some(rec)
    }

    /// The record, without marking it used.
    pub fn peek(&self, id: &str) -> Option<&Arc<TaskRecord>> {
        self.map.get(id).map(|s| &s.rec)
    }

    /// Inserts or replaces a record, marked as just used.
    pub fn insert(&mut self, rec: Arc<TaskRecord>) {
        self.tick += 1;
        let cost = rec.resident_bytes();
        let id: Arc<str> = Arc::from(rec.id.as_str());
        let slot = Slot {
            rec,
            cost,
            tick: self.tick,
        };
        if let Some(old) = self.map.insert(id.to_string(), slot) {
            self.bytes -= old.cost;
        }
        self.bytes += cost;
        self.order.push_back((id, self.tick));
        self.compact();
    }

    /// Drops a record (it is reloaded from SQLite when next used).
    pub fn remove(&mut self, id: &str) -> Option<Arc<TaskRecord>> {
        let slot = self.map.remove(id)?;
        self.bytes -= slot.cost;
        Some(slot.rec)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Bytes the cached records hold, as `TaskRecord::resident_bytes` counts.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn over(&self) -> bool {
        self.map.len() > self.max_tasks || self.bytes > self.max_bytes
    }

    /// Over twice a bound (the writer evicts within a batch then).
    pub fn far_over(&self) -> bool {
        self.map.len() > 2 * self.max_tasks || self.bytes > self.max_bytes.saturating_mul(2)
    }

    /// Drops least recently used records until the cache is within its
    /// bounds; returns their ids. A record `pinned` says is kept (a blocking
    /// send waits on it) and counts as used now. Each queue mark is looked
    /// at once at most, so a cache full of pinned records ends the loop.
    pub fn evict(&mut self, pinned: impl Fn(&str) -> bool) -> Vec<String> {
        let mut victims = Vec::new();
        let mut budget = self.order.len();
        while self.over() && budget > 0 {
            budget -= 1;
            let Some((id, tick)) = self.order.pop_front() else {
                break;
            };
            let live = self.map.get(&*id).is_some_and(|s| s.tick == tick);
            if !live {
                continue; // a stale mark: the record was used again, or is gone
            }
            if pinned(&id) {
                self.tick += 1;
                if let Some(s) = self.map.get_mut(&*id) {
                    s.tick = self.tick;
                }
                self.order.push_back((id, self.tick));
                continue;
            }
            self.remove(&id);
            victims.push(id.to_string());
        }
        victims
    }

    /// Drops stale marks once they outnumber the records.
    fn compact(&mut self) {
        if self.order.len() <= 2 * self.map.len() + 1024 {
            return;
        }
        let map = &self.map;
        self.order
            .retain(|(id, tick)| map.get(&**id).is_some_and(|s| s.tick == *tick));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::task::fixture;
    use a2a_proto::types::State;

    fn rec(id: &str, stored: u64) -> Arc<TaskRecord> {
        let mut r = fixture::record(State::Working, 1);
        r.id = id.into();
        r.stored_bytes = stored;
        Arc::new(r)
    }

    #[test]
    fn the_least_recently_used_go_first_open_or_not() {
        let mut c = TaskCache::with_bounds(3, usize::MAX);
        for id in ["a", "b", "c"] {
            c.insert(rec(id, 10));
        }
        assert!(c.get("a").is_some()); // a is now the most recent
        c.insert(rec("d", 10));
        assert_eq!(c.evict(|_| false), vec!["b".to_string()]);
        assert!(c.peek("a").is_some() && c.peek("b").is_none());
        // A pinned record is passed over (c, the oldest), and counts as used.
        c.insert(rec("e", 10));
        assert_eq!(c.evict(|id| id == "c"), vec!["a".to_string()]);
        c.insert(rec("f", 10));
        assert_eq!(c.evict(|_| false), vec!["d".to_string()]);
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn bytes_bound_the_cache_as_well_as_the_count() {
        let big = rec("big", 1 << 20).resident_bytes();
        let mut c = TaskCache::with_bounds(1000, 3 * big);
        for i in 0..10 {
            c.insert(rec(&format!("t{i}"), 1 << 20));
            c.evict(|_| false);
            assert!(c.bytes() <= 3 * big, "{} > {}", c.bytes(), 3 * big);
        }
        assert_eq!(c.len(), 3);
        // Replacing a record counts its new size, not both.
        c.insert(rec("t9", 1));
        assert!(c.bytes() < 3 * big);
        assert!(c.evict(|_| false).is_empty());
    }

    #[test]
    fn everything_pinned_ends_the_eviction() {
        let mut c = TaskCache::with_bounds(1, usize::MAX);
        c.insert(rec("a", 1));
        c.insert(rec("b", 1));
        assert!(c.evict(|_| true).is_empty());
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn stale_marks_do_not_pile_up() {
        let mut c = TaskCache::with_bounds(4, usize::MAX);
        c.insert(rec("a", 1));
        for _ in 0..100_000 {
            c.get("a");
        }
        assert!(c.order.len() <= 2 * c.len() + 1025, "{}", c.order.len());
    }
}
