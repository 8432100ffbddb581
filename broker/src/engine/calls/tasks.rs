//! `a2a.tasks.status`, `.cancel`, `.artifact` (ext), `.resubscribe` and
//! `.pushNotificationConfig.set`.

use super::super::effects::{Effects, Routed};
use super::super::{Engine, Undo};
use super::{check_bytes_room, check_log_room, party_role, stamp, worker_only, Move, Written};
use crate::clock;
use crate::core::artifact::{chunk_key, StoredArtifact};
use crate::core::state::check_move;
use crate::core::task::{Party, TaskRecord};
use crate::core::CoreError;
use crate::reply::Reply;
use crate::store::{read, write};
use a2a_proto::check::check_artifact;
use a2a_proto::limits::{A2A_MAX_ARTIFACTS, A2A_MAX_ARTIFACT_BYTES};
use a2a_proto::params::{
    ArtifactParams, CancelParams, PushSetParams, ResubscribeParams, StatusParams,
};
use a2a_proto::types::{ArtifactUpdate, Message, PushConfig, Role, State, StreamEvent};
use std::sync::Arc;

impl Engine {
    /// Refuses a status message whose id the task's history already holds
    /// (the bounds are `Engine::transition`'s).
    fn check_status_message(rec: &TaskRecord, msg: Option<&Message>) -> Result<(), CoreError> {
        if let Some(m) = msg {
            if rec.history.iter().any(|h| h.message_id == m.message_id) {
                return Err(CoreError::InvalidParams(format!(
                    "messageId `{}` is already used on this task",
                    m.message_id
                )));
            }
        }
        Ok(())
    }

    pub(in crate::engine) fn status(
        &mut self,
        p: StatusParams,
        undo: &mut Undo,
    ) -> Result<Effects, CoreError> {
        let agent = self.caller(p.token.as_deref())?;
        let rec = self.task(&p.id)?;
        worker_only(&rec, &agent, "only the task's worker may change its status")?;
        check_move(rec.state(), p.state)?;
        Self::check_status_message(&rec, p.message.as_ref())?;
        let me = agent.party();
        let msg = p.message.map(|m| {
            stamp(
                m,
                &rec.id,
                &rec.context_id,
                Role::Agent,
                &me.peer_id,
                &rec.requester.peer_id,
            )
        });
        let mut effects = Effects::reply(Reply::Ok);
        let mv = Move {
            rec: &rec,
            state: p.state,
            message: msg,
            actor: &me,
        };
        let next = self.transition(mv, &mut effects.events, undo)?;
        effects.reply = Reply::task(next, None);
        Ok(effects)
    }

    pub(in crate::engine) fn cancel(
        &mut self,
        p: CancelParams,
        undo: &mut Undo,
    ) -> Result<Effects, CoreError> {
        let agent = self.caller(p.token.as_deref())?;
        let rec = self.task(&p.id)?;
        let role = party_role(&rec, &agent)?;
        check_move(rec.state(), State::Canceled)?;
        Self::check_status_message(&rec, p.message.as_ref())?;
        let me = agent.party();
        let to = rec.counterpart(&me).peer_id.clone();
        let msg = p
            .message
            .map(|m| stamp(m, &rec.id, &rec.context_id, role, &me.peer_id, &to));
        let mut effects = Effects::reply(Reply::Ok);
        let mv = Move {
            rec: &rec,
            state: State::Canceled,
            message: msg,
            actor: &me,
        };
        let next = self.transition(mv, &mut effects.events, undo)?;
        effects.reply = Reply::task(next, None);
        Ok(effects)
    }

    /// Adds an artifact, replaces one (same id, `append: false`), or
    /// appends a chunk to one (`append: true`), writing only the call's own
    /// row (`core::artifact`).
    pub(in crate::engine) fn artifact(
        &mut self,
        p: ArtifactParams,
        undo: &mut Undo,
    ) -> Result<Effects, CoreError> {
        let agent = self.caller(p.token.as_deref())?;
        let rec = self.task(&p.id)?;
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
            return Err(CoreError::PayloadTooLarge {
                limit: "A2A_MAX_ARTIFACT_BYTES",
                max: A2A_MAX_ARTIFACT_BYTES as u64,
                actual: artifact_content,
            });
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
                write::insert_artifact_chunk(&self.conn, &next.id, &key, i, &body)?;
                next.artifacts[i] = next.artifacts[i].appended(p.artifact.clone(), content, stored);
            }
            Some(i) => {
                write::put_artifact(&self.conn, &next.id, i, &p.artifact, &body)?;
                next.artifacts[i] = StoredArtifact::new(p.artifact.clone(), content, stored);
            }
            None => {
                let i = next.artifacts.len();
                write::put_artifact(&self.conn, &next.id, i, &p.artifact, &body)?;
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
        self.record_change(&next, event, written, &me, to, &now, &mut effects.events)?;
        let next = self.put_task(next, undo);
        effects.reply = Reply::task(next, None);
        Ok(effects)
    }

    /// Replays the log after `afterVersion` (if given), then the current
    /// status, to the caller itself. Writes nothing.
    pub(in crate::engine) fn resubscribe(
        &mut self,
        p: ResubscribeParams,
    ) -> Result<Effects, CoreError> {
        let agent = self.caller(p.token.as_deref())?;
        let rec = self.task(&p.id)?;
        party_role(&rec, &agent)?;
        let me = agent.party();
        let mut effects = Effects::reply(Reply::Ok);
        if let Some(after) = p.after_version {
            for (version, event) in read::log_after(&self.conn, &rec, after)? {
                effects.events.push(Routed::Task {
                    to: me.clone(),
                    context_id: rec.context_id.clone(),
                    version,
                    event,
                });
            }
        }
        effects.events.push(Self::current_status_event(&rec, me));
        effects.reply = Reply::task(rec, None);
        Ok(effects)
    }

    pub(in crate::engine) fn push_set(
        &mut self,
        p: PushSetParams,
        undo: &mut Undo,
    ) -> Result<Effects, CoreError> {
        let agent = self.caller(p.token.as_deref())?;
        let rec = self.task(&p.task_id)?;
        party_role(&rec, &agent)?;
        if p.config.id.is_empty() {
            return Err(CoreError::InvalidParams(
                "config.id must not be empty".into(),
            ));
        }
        self.set_push_config(&rec, &agent.party(), p.config.clone(), undo)?;
        Ok(Effects::reply(Reply::Config(Some(p.config))))
    }

    /// Stores the task's push config (one per task, the last set wins,
    /// whichever party sets it; `owner` is kept for the audit view).
    pub(in crate::engine) fn set_push_config(
        &mut self,
        rec: &TaskRecord,
        owner: &Party,
        cfg: PushConfig,
        undo: &mut Undo,
    ) -> Result<Arc<TaskRecord>, CoreError> {
        write::put_push_config(&self.conn, &rec.id, owner, &cfg)?;
        let mut next = rec.clone();
        next.push_configs = vec![(owner.clone(), cfg)];
        Ok(self.put_task(next, undo))
    }
}
