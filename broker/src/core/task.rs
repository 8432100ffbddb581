//! The in-memory record of one task, as the writer keeps it and readers see
//! it after commit.
//!
//! Records are immutable once shared (`Arc<TaskRecord>`): the writer clones,
//! changes and republishes, so a reader never sees a half-applied call.

use super::artifact::StoredArtifact;
use a2a_proto::types::{Message, PushConfig, Role, State, TaskStatus};
use std::any::Any;
use std::sync::Arc;

type Rendering = Arc<dyn Any + Send + Sync>;

/// Where whoever renders a record for the wire may keep that rendering of
/// this version (the JSON writer keeps the serialized task, so a task read
/// a thousand times is serialized once). Opaque to the core. A record is
/// cloned only to make its next version, so a clone starts empty.
#[derive(Default)]
pub struct RenderSlot(parking_lot::Mutex<Option<(Option<usize>, Rendering)>>);

impl RenderSlot {
    /// The rendering kept for this history length, if any.
    pub fn get(&self, history_length: Option<usize>) -> Option<Rendering> {
        match &*self.0.lock() {
            Some((k, r)) if *k == history_length => Some(r.clone()),
            _ => None,
        }
    }

    /// Keeps a rendering (replacing one for another history length).
    pub fn put(&self, history_length: Option<usize>, r: Rendering) {
        *self.0.lock() = Some((history_length, r));
    }
}

impl Clone for RenderSlot {
    fn clone(&self) -> Self {
        RenderSlot::default()
    }
}

impl std::fmt::Debug for RenderSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RenderSlot")
    }
}

/// The largest rendering a [`RenderSlot`] is given to keep (the JSON
/// writer serializes larger tasks afresh each time instead).
pub const KEPT_RENDERING_MAX: usize = 64 * 1024;

/// What a record costs besides its content: its ids, parties, times,
/// status, and the allocations that hold them.
const RECORD_OVERHEAD_BYTES: usize = 1024;

/// One side of a task: an agent identified by the context it registered
/// under and its peer id. The same pair after a re-registration is the same party.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Party {
    pub context_id: String,
    pub peer_id: String,
}

/// A task with everything a reader or the writer needs.
#[derive(Debug, Clone)]
pub struct TaskRecord {
    pub id: String,
    /// The requester's context (the task's `contextId`).
    pub context_id: String,
    pub requester: Party,
    pub worker: Party,
    pub status: TaskStatus,
    pub history: Vec<Arc<Message>>,
    pub artifacts: Vec<StoredArtifact>,
    /// Serialized bytes of the stored messages and artifacts (`A2A_MAX_TASK_BYTES`).
    pub stored_bytes: u64,
    /// Starts at 1; +1 per change (so it also counts the task log's entries).
    pub version: u64,
    /// The `messageId` of the message that created the task (idempotency key).
    pub create_message_id: String,
    /// Created by a `to: "*"` broadcast.
    pub broadcast: bool,
    /// The push config (one per task, §5), with the party that set it.
    pub push_configs: Vec<(Party, PushConfig)>,
    pub created_at: String,
    pub updated_at: String,
    /// The wire rendering of this version, kept by the transport.
    pub render: RenderSlot,
}

impl TaskRecord {
    /// The state the task is in.
    pub fn state(&self) -> State {
        self.status.state
    }

    /// The caller's role on the task, if it is a party.
    pub fn role_of(&self, party: &Party) -> Option<Role> {
        if *party == self.requester {
            Some(Role::User)
        } else if *party == self.worker {
            Some(Role::Agent)
        } else {
            None
        }
    }

    /// About the memory this record holds while cached, for the caches'
    /// byte bound: its messages and artifacts (`stored_bytes`, their
    /// serialized size, close to their decoded one), the rendering the
    /// JSON writer may keep in `render` (the task's JSON: its content and
    /// the status message again, kept only up to [`KEPT_RENDERING_MAX`]),
    /// and a fixed part for the ids, parties, times and allocations.
    pub fn resident_bytes(&self) -> usize {
        let content = usize::try_from(self.stored_bytes).unwrap_or(usize::MAX);
        let rendering = content.saturating_mul(2).min(KEPT_RENDERING_MAX);
        content
            .saturating_add(rendering)
            .saturating_add(RECORD_OVERHEAD_BYTES)
    }

    /// The other party.
    pub fn counterpart(&self, party: &Party) -> &Party {
        if *party == self.requester {
            &self.worker
        } else {
            &self.requester
        }
    }
}

/// A record and its messages for unit tests elsewhere in the crate: task
/// `t`, requester `a` in context `c`, worker `b` in context `d`.
#[cfg(test)]
pub(crate) mod fixture {
    use super::*;

    /// A stamped text message with this id.
    pub fn message(id: &str) -> Arc<Message> {
        Arc::new(Message {
            role: Role::User,
            parts: vec![a2a_proto::types::Part::text(id)],
            message_id: id.into(),
            task_id: Some("t".into()),
            context_id: Some("c".into()),
            from: Some("a".into()),
            to: Some("b".into()),
            metadata: None,
        })
    }

    /// A task in `state` whose history holds messages `m0`, `m1`, ….
    pub fn record(state: State, history: usize) -> TaskRecord {
        let party = |c: &str, p: &str| Party {
            context_id: c.into(),
            peer_id: p.into(),
        };
        TaskRecord {
            id: "t".into(),
            context_id: "c".into(),
            requester: party("c", "a"),
            worker: party("d", "b"),
            status: TaskStatus {
                state,
                message: None,
                timestamp: "now".into(),
            },
            history: (0..history).map(|i| message(&format!("m{i}"))).collect(),
            artifacts: vec![],
            stored_bytes: 0,
            version: history.max(1) as u64,
            create_message_id: "m0".into(),
            broadcast: false,
            push_configs: vec![],
            created_at: "c".into(),
            updated_at: "u".into(),
            render: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn party(c: &str, p: &str) -> Party {
        Party {
            context_id: c.into(),
            peer_id: p.into(),
        }
    }

    #[test]
    fn roles_and_counterparts() {
        let mut rec = fixture::record(State::Submitted, 0);
        rec.context_id = "c1".into();
        rec.requester = party("c1", "a");
        rec.worker = party("c2", "b");
        assert_eq!(rec.role_of(&party("c1", "a")), Some(Role::User));
        assert_eq!(rec.role_of(&party("c2", "b")), Some(Role::Agent));
        // Same peer id under another context is a stranger.
        assert_eq!(rec.role_of(&party("c9", "a")), None);
        assert_eq!(rec.counterpart(&party("c1", "a")), &party("c2", "b"));
        assert_eq!(rec.counterpart(&party("c2", "b")), &party("c1", "a"));
    }
}
