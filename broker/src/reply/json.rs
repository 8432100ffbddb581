//! Replies as JSON (the NDJSON codec): serde `Serialize` for [`Reply`] and
//! [`TaskView`], borrowed from the shared task records. A task version's
//! rendering is kept and reused by later reads of the same view.

use super::{Reply, TaskView};
use crate::core::artifact::StoredArtifact;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use std::sync::Arc;

/// Renderings larger than this are not kept (a task holding big files is
/// serialized afresh rather than held twice in memory).
const MAX_KEPT_RENDERING: usize = 64 * 1024;

impl Serialize for TaskView {
    /// Serializes the task, reusing this version's kept JSON when the same
    /// view was rendered before.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        use serde_json::value::RawValue;
        let slot = &self.rec.render;
        if let Some(kept) = slot
            .get(self.history_length)
            .and_then(|r| r.downcast::<Box<RawValue>>().ok())
        {
            return kept.serialize(s);
        }
        let text = serde_json::to_string(&Fields(self)).map_err(S::Error::custom)?;
        if text.len() > MAX_KEPT_RENDERING {
            return Fields(self).serialize(s);
        }
        let raw = RawValue::from_string(text).map_err(S::Error::custom)?;
        let raw = Arc::new(raw);
        slot.put(self.history_length, raw.clone());
        raw.serialize(s)
    }
}

/// An artifact on the wire: its pieces merged as they are written
/// (`core::artifact`), never copied into one value first.
impl Serialize for StoredArtifact {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Parts<'a>(&'a StoredArtifact);
        impl Serialize for Parts<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.parts())
            }
        }
        let mut st = s.serialize_struct("Artifact", 5)?;
        st.serialize_field("artifactId", self.id())?;
        if let Some(n) = self.name() {
            st.serialize_field("name", n)?;
        }
        if let Some(d) = self.description() {
            st.serialize_field("description", d)?;
        }
        st.serialize_field("parts", &Parts(self))?;
        if let Some(m) = self.metadata() {
            st.serialize_field("metadata", m)?;
        }
        st.end()
    }
}

/// The task's fields, serialized one by one.
struct Fields<'a>(&'a TaskView);

impl Serialize for Fields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let view = self.0;
        let r = &*view.rec;
        let mut st = s.serialize_struct("Task", 9)?;
        st.serialize_field("kind", "task")?;
        st.serialize_field("id", &r.id)?;
        st.serialize_field("contextId", &r.context_id)?;
        st.serialize_field("status", &r.status)?;
        st.serialize_field("history", view.history())?;
        st.serialize_field("artifacts", &r.artifacts)?;
        st.serialize_field("agentName", &r.worker.peer_id)?;
        st.serialize_field("requesterName", &r.requester.peer_id)?;
        st.serialize_field("version", &r.version)?;
        st.end()
    }
}

impl Serialize for Reply {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Reply::Handshake(h) => h.serialize(s),
            Reply::Registered(r) => r.serialize(s),
            Reply::Ok => {
                let mut st = s.serialize_struct("Ok", 1)?;
                st.serialize_field("ok", &true)?;
                st.end()
            }
            Reply::Agents(agents) => {
                let mut st = s.serialize_struct("Agents", 1)?;
                st.serialize_field("agents", agents)?;
                st.end()
            }
            Reply::Task(t) => {
                let mut st = s.serialize_struct("TaskResult", 1)?;
                st.serialize_field("task", t)?;
                st.end()
            }
            Reply::Tasks(ts) => {
                let mut st = s.serialize_struct("TasksResult", 1)?;
                st.serialize_field("tasks", ts)?;
                st.end()
            }
            Reply::TaskList { tasks, next_cursor } => {
                let n = if next_cursor.is_some() { 2 } else { 1 };
                let mut st = s.serialize_struct("TaskList", n)?;
                st.serialize_field("tasks", tasks)?;
                if let Some(c) = next_cursor {
                    st.serialize_field("nextCursor", c)?;
                }
                st.end()
            }
            Reply::Config(c) => {
                let mut st = s.serialize_struct("Config", 1)?;
                st.serialize_field("config", c)?;
                st.end()
            }
            Reply::Events { events, timed_out } => {
                let mut st = s.serialize_struct("Events", 2)?;
                st.serialize_field("events", events)?;
                st.serialize_field("timedOut", timed_out)?;
                st.end()
            }
            Reply::Lease(l) => {
                let mut st = s.serialize_struct("LeaseResult", 1)?;
                st.serialize_field("lease", l)?;
                st.end()
            }
            Reply::Leases(ls) => {
                let mut st = s.serialize_struct("LeasesResult", 1)?;
                st.serialize_field("leases", ls)?;
                st.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::task::fixture;
    use crate::reply::TaskView;
    use a2a_proto::types::State;

    #[test]
    fn kept_renderings_match_fresh_ones_per_history_length() {
        let rec = Arc::new(fixture::record(State::Working, 3));
        let view = |hl| TaskView {
            rec: rec.clone(),
            history_length: hl,
        };
        let fresh = |hl| serde_json::to_string(&Fields(&view(hl))).unwrap();
        for hl in [Some(1), Some(1), None, Some(0), Some(1)] {
            assert_eq!(serde_json::to_string(&view(hl)).unwrap(), fresh(hl));
        }
        let v: serde_json::Value = serde_json::to_value(view(Some(1))).unwrap();
        assert_eq!(v["history"].as_array().unwrap().len(), 1);
        assert_eq!(v["history"][0]["messageId"], "m2");
        // The next version starts without the old rendering.
        let mut next = (*rec).clone();
        next.version += 1;
        assert!(next.render.get(Some(1)).is_none());
        let v: serde_json::Value = serde_json::to_value(TaskView {
            rec: Arc::new(next),
            history_length: Some(1),
        })
        .unwrap();
        assert_eq!(v["version"], 4);
    }
}
