//! Replies as bincode (the binary codec, docs/protocol.md §1 Framing), encoded
//! straight from the broker's shared task records with the exact bytes
//! `ServerFrame::Response { result: Ok(Outcome::..) }` would have, so a
//! response costs no copy of the task. Variant numbers come from
//! `a2a_proto`'s tables (`OutcomeKind`, `binary::index`); a unit test holds
//! the two encodings equal against an owned conversion kept there as the
//! reference.

use super::{Reply, TaskView};
use crate::core::artifact::StoredArtifact;
use a2a_proto::binary::index;
use a2a_proto::error::RpcError;
use a2a_proto::jsonrpc::Id;
use bincode::enc::Encoder;
use bincode::error::EncodeError;
use bincode::Encode;

fn wire_id(id: &Id) -> u64 {
    match id {
        Id::Uint(n) => *n,
        Id::Int(n) => *n as u64,
        _ => 0,
    }
}

/// A response frame's payload (`ServerFrame::Response`), from the reply as
/// the core made it.
pub(crate) struct ResponseRef<'a>(pub &'a Id, pub &'a Result<Reply, RpcError>);

impl Encode for ResponseRef<'_> {
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        index::RESPONSE.encode(e)?;
        wire_id(self.0).encode(e)?;
        match self.1 {
            Ok(r) => {
                index::RESULT_OK.encode(e)?;
                r.encode(e)
            }
            Err(err) => {
                index::RESULT_ERR.encode(e)?;
                err.encode(e)
            }
        }
    }
}

/// An artifact as `a2a_proto::types::Artifact` encodes (field order, a
/// `Vec`'s length prefix), from its stored pieces.
struct ArtifactRef<'a>(&'a StoredArtifact);

impl Encode for ArtifactRef<'_> {
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        let a = self.0;
        a.id().encode(e)?;
        a.name().encode(e)?;
        a.description().encode(e)?;
        (a.part_count() as u64).encode(e)?;
        for p in a.parts() {
            p.encode(e)?;
        }
        a.metadata().encode(e)
    }
}

impl Encode for TaskView {
    /// The field order of `a2a_proto::types::Task`.
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        let r = &*self.rec;
        "task".encode(e)?;
        r.id.encode(e)?;
        r.context_id.encode(e)?;
        r.status.encode(e)?;
        self.history().encode(e)?;
        (r.artifacts.len() as u64).encode(e)?;
        for a in &r.artifacts {
            ArtifactRef(a).encode(e)?;
        }
        r.worker.peer_id.encode(e)?;
        r.requester.peer_id.encode(e)?;
        r.version.encode(e)
    }
}

impl Encode for Reply {
    /// The variant's number from `a2a_proto`'s table, then its fields as
    /// the `Outcome` variant's result type has them.
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        self.kind().index().encode(e)?;
        match self {
            Reply::Handshake(h) => h.encode(e),
            Reply::Registered(r) => r.encode(e),
            // `OkResult { ok: true }`.
            Reply::Ok => true.encode(e),
            Reply::Agents(a) => a.encode(e),
            Reply::Task(t) => t.encode(e),
            Reply::Tasks(ts) => ts.encode(e),
            Reply::TaskList { tasks, next_cursor } => {
                tasks.encode(e)?;
                next_cursor.encode(e)
            }
            Reply::Config(c) => c.encode(e),
            Reply::Events { events, timed_out } => {
                (events.len() as u64).encode(e)?;
                for ev in events {
                    (**ev).encode(e)?;
                }
                timed_out.encode(e)
            }
            // `LeaseResult { lease }`, `LeasesResult { leases }`.
            Reply::Lease(l) => l.encode(e),
            Reply::Leases(ls) => ls.encode(e),
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::task::{fixture, TaskRecord};
    use crate::delivery::Outgoing;
    use crate::transport::binary::write_outgoing;
    use a2a_proto::binary::{encode_frame, ServerFrame};
    use a2a_proto::call::Outcome;
    use a2a_proto::params::{
        AgentsResult, ConfigResult, Lease, LeaseResult, LeasesResult, OkResult, TaskListResult,
        TaskResult, TasksResult, WaitResult,
    };
    use a2a_proto::types::{LaggedParams, Notification, PushConfig, State, Task};
    use std::sync::Arc;

    fn record() -> Arc<TaskRecord> {
        let mut rec = fixture::record(State::Working, 2);
        rec.status.message = Some(fixture::message("m1"));
        rec.version = 3;
        Arc::new(rec)
    }

    /// The owned wire value of a task view: the reference the borrowed
    /// encoding must match byte for byte.
    fn to_task(v: &TaskView) -> Task {
        let r = &*v.rec;
        let history = v.history().to_vec();
        Task {
            kind: "task".into(),
            id: r.id.clone(),
            context_id: r.context_id.clone(),
            status: r.status.clone(),
            history,
            artifacts: r.artifacts.iter().map(|a| a.merged()).collect(),
            agent_name: r.worker.peer_id.clone(),
            requester_name: r.requester.peer_id.clone(),
            version: r.version,
        }
    }

    /// The owned wire value of a reply (see `to_task`).
    fn to_outcome(reply: &Reply) -> Outcome {
        match reply {
            Reply::Handshake(h) => Outcome::Handshake(h.clone()),
            Reply::Registered(r) => Outcome::Registered(r.clone()),
            Reply::Ok => Outcome::Ok(OkResult { ok: true }),
            Reply::Agents(a) => Outcome::Agents(AgentsResult { agents: a.clone() }),
            Reply::Task(t) => Outcome::Task(TaskResult { task: to_task(t) }),
            Reply::Tasks(ts) => Outcome::Tasks(TasksResult {
                tasks: ts.iter().map(to_task).collect(),
            }),
            Reply::TaskList { tasks, next_cursor } => Outcome::TaskList(TaskListResult {
                tasks: tasks.iter().map(to_task).collect(),
                next_cursor: next_cursor.clone(),
            }),
            Reply::Config(c) => Outcome::Config(ConfigResult { config: c.clone() }),
            Reply::Events { events, timed_out } => Outcome::Events(WaitResult {
                events: events.iter().map(|e| (**e).clone()).collect(),
                timed_out: *timed_out,
            }),
            Reply::Lease(l) => Outcome::Lease(LeaseResult { lease: l.clone() }),
            Reply::Leases(ls) => Outcome::Leases(LeasesResult { leases: ls.clone() }),
        }
    }

    fn same_bytes(reply: Reply) {
        let id = Id::Uint(42);
        let result = Ok(reply);
        let mut fast = Vec::new();
        encode_frame(&ResponseRef(&id, &result), &mut fast).unwrap();
        let owned = ServerFrame::Response {
            id: 42,
            result: Ok(to_outcome(result.as_ref().unwrap())),
        };
        let mut slow = Vec::new();
        encode_frame(&owned, &mut slow).unwrap();
        assert_eq!(fast, slow);
        let (frames, used) = a2a_proto::binary::split_frames(&fast).unwrap();
        assert_eq!(used, fast.len());
        let back: ServerFrame =
            a2a_proto::binary::decode_payload(&fast[frames[0].clone()]).unwrap();
        assert_eq!(back, owned);
    }

    #[test]
    fn borrowed_encoding_equals_the_owned_frame() {
        let view = || TaskView {
            rec: record(),
            history_length: Some(1),
        };
        same_bytes(Reply::Task(view()));
        same_bytes(Reply::Tasks(vec![view(), TaskView::full(record())]));
        same_bytes(Reply::TaskList {
            tasks: vec![view()],
            next_cursor: Some("9".into()),
        });
        same_bytes(Reply::Ok);
        same_bytes(Reply::Config(Some(PushConfig {
            id: "p".into(),
            url: None,
            token: Some("k".into()),
        })));
        same_bytes(Reply::Config(None));
        same_bytes(Reply::Agents(vec![]));
        let lease = Lease {
            id: "l".into(),
            paths: vec!["src/**".into()],
            holder: "w".into(),
            exclusive: true,
            expires_at: "2026-12-01T00:00:00.000Z".into(),
            reason: Some("edit".into()),
        };
        same_bytes(Reply::Lease(lease.clone()));
        same_bytes(Reply::Leases(vec![lease]));
        let lag = Arc::new(Notification::Lagged(LaggedParams {
            recipient: "a".into(),
            recipient_context_id: "c".into(),
            dropped: 2,
        }));
        same_bytes(Reply::Events {
            events: vec![lag.clone()],
            timed_out: false,
        });

        let mut fast = Vec::new();
        write_outgoing(&mut fast, &Outgoing::Event(lag.clone())).unwrap();
        let mut slow = Vec::new();
        encode_frame(&ServerFrame::Notification((*lag).clone()), &mut slow).unwrap();
        assert_eq!(fast, slow);
        let err: Result<Reply, RpcError> = Err(RpcError::invalid_params("x"));
        let mut fast = Vec::new();
        encode_frame(&ResponseRef(&Id::Uint(1), &err), &mut fast).unwrap();
        let mut slow = Vec::new();
        encode_frame(
            &ServerFrame::Response {
                id: 1,
                result: Err(RpcError::invalid_params("x")),
            },
            &mut slow,
        )
        .unwrap();
        assert_eq!(fast, slow);
    }
}
