//! `a2a.tasks.artifact` (ext, docs/protocol.md §5 Methods): the worker
//! adds an artifact, replaces one (same id, `append: false`), or appends a
//! chunk to one (`append: true`), writing only the call's own row
//! (`core::artifact`).

use super::WriteMethod;
use crate::clock;
use crate::core::artifact::{chunk_key, StoredArtifact};
use crate::core::CoreError;
use crate::engine::{check_bytes_room, check_log_room, worker_only, Effects, WriteCtx, Written};
use crate::reply::Reply;
use crate::store::write;
use a2a_proto::check::{check_artifact, CheckError};
use a2a_proto::limits::{A2A_MAX_ARTIFACTS, A2A_MAX_ARTIFACT_BYTES};
use a2a_proto::params::ArtifactParams;
use a2a_proto::types::{ArtifactUpdate, StreamEvent};

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = ArtifactParams;

    fn run(p: ArtifactParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        let agent = cx.caller(p.token.as_deref())?;
        let rec = cx.task(&p.id)?;
        worker_only(&rec, &agent, "only the task's worker may add artifacts")?;
        if rec.state().is_terminal() {
            return Err(CoreError::TaskTerminal(rec.state()));
        }
        check_log_room(&rec)?;
        let content = check_artifact(&p.artifact)?;
        let body = write::json(&p.artifact)?;
        let pos = rec
            .artifacts
            .iter()
            .position(|a| a.id() == p.artifact.artifact_id);
        // What the task and the artifact would hold after the call.
        let (replaced_bytes, artifact_content) = match pos {
            Some(i) if p.append => (0, rec.artifacts[i].content_bytes + content),
            Some(i) => (rec.artifacts[i].stored_bytes, content),
            None => (0, content),
        };
        if pos.is_none() && rec.artifacts.len() >= A2A_MAX_ARTIFACTS {
            return Err(CoreError::SendCap {
                limit: "A2A_MAX_ARTIFACTS",
                max: A2A_MAX_ARTIFACTS as u64,
                actual: rec.artifacts.len() as u64 + 1,
            });
        }
        if artifact_content > A2A_MAX_ARTIFACT_BYTES as u64 {
            return Err(CoreError::Check(CheckError::PayloadTooLarge {
                limit: "A2A_MAX_ARTIFACT_BYTES",
                max: A2A_MAX_ARTIFACT_BYTES as u64,
                actual: artifact_content,
            }));
        }
        let mut shrunk = (*rec).clone();
        shrunk.stored_bytes -= replaced_bytes;
        check_bytes_room(&shrunk, body.len())?;

        let me = agent.party();
        let now = clock::now();
        let mut next = shrunk;
        let stored = body.len() as u64;
        match pos {
            Some(i) if p.append => {
                let key = chunk_key(&p.artifact.artifact_id, next.artifacts[i].chunks.len() + 1);
                write::insert_artifact_chunk(cx.conn, &next.id, &key, i, &body)?;
                next.artifacts[i] = next.artifacts[i].appended(p.artifact.clone(), content, stored);
            }
            Some(i) => {
                write::put_artifact(cx.conn, &next.id, i, &p.artifact, &body)?;
                next.artifacts[i] = StoredArtifact::new(p.artifact.clone(), content, stored);
            }
            None => {
                let i = next.artifacts.len();
                write::put_artifact(cx.conn, &next.id, i, &p.artifact, &body)?;
                next.artifacts
                    .push(StoredArtifact::new(p.artifact.clone(), content, stored));
            }
        }
        next.stored_bytes += stored;
        next.version += 1;
        next.updated_at = now.clone();
        let event = StreamEvent::Artifact(ArtifactUpdate {
            task_id: next.id.clone(),
            context_id: next.context_id.clone(),
            artifact: p.artifact,
            append: p.append,
            last_chunk: p.last_chunk,
        });
        let mut effects = Effects::reply(Reply::Ok);
        let to = next.requester.clone();
        // An artifact leaves the task's status as it was.
        let written = Written {
            row_status: None,
            state_changed: false,
            msg_pos: None,
        };
        cx.record_change(&next, event, written, &me, to, &now, &mut effects.events)?;
        let next = cx.put_task(next);
        effects.reply = Reply::task(next, None);
        Ok(effects)
    }
}
