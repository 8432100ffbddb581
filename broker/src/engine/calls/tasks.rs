//! `a2a.tasks.status`, `.cancel`, `.artifact` (ext), `.resubscribe` and
//! `.pushNotificationConfig.set`.

use super::super::effects::{Effects, Routed};
use super::super::{Engine, Undo};
use super::{check_history_room, party_role, stamp, worker_only};
use crate::clock;
use crate::core::state::check_move;
use crate::core::task::{Party, TaskRecord};
use crate::core::CoreError;
use crate::reply::Reply;
use crate::store::{read, write};
use a2a_proto::params::{
    ArtifactParams, CancelParams, PushSetParams, ResubscribeParams, StatusParams,
};
use a2a_proto::types::{ArtifactUpdate, Message, PushConfig, Role, State, StreamEvent};
use std::sync::Arc;

impl Engine {
    /// Checks an optional status message: stamped later, but refused now if
    /// its id is taken or the history is full.
    fn check_status_message(rec: &TaskRecord, msg: Option<&Message>) -> Result<(), CoreError> {
        if let Some(m) = msg {
            if rec.history.iter().any(|h| h.message_id == m.message_id) {
                return Err(CoreError::InvalidParams(format!(
                    "messageId `{}` is already used on this task",
                    m.message_id
                )));
            }
            check_history_room(rec)?;
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
        let next = self.transition(&rec, p.state, msg, true, &me, &mut effects.events, undo)?;
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
        let next = self.transition(
            &rec,
            State::Canceled,
            msg,
            true,
            &me,
            &mut effects.events,
            undo,
        )?;
        effects.reply = Reply::task(next, None);
        Ok(effects)
    }

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
        if p.artifact.artifact_id.is_empty() {
            return Err(CoreError::InvalidParams(
                "artifactId must not be empty".into(),
            ));
        }
        let me = agent.party();
        let now = clock::now();
        let mut next = (*rec).clone();
        let pos = next
            .artifacts
            .iter()
            .position(|a| a.artifact_id == p.artifact.artifact_id);
        let pos = match pos {
            Some(i) if p.append => {
                let stored = &mut next.artifacts[i];
                stored.parts.extend(p.artifact.parts.iter().cloned());
                if p.artifact.name.is_some() {
                    stored.name.clone_from(&p.artifact.name);
                }
                if p.artifact.description.is_some() {
                    stored.description.clone_from(&p.artifact.description);
                }
                if p.artifact.metadata.is_some() {
                    stored.metadata.clone_from(&p.artifact.metadata);
                }
                i
            }
            Some(i) => {
                next.artifacts[i] = p.artifact.clone();
                i
            }
            None => {
                next.artifacts.push(p.artifact.clone());
                next.artifacts.len() - 1
            }
        };
        next.version += 1;
        next.updated_at = now.clone();
        let event = StreamEvent::Artifact(ArtifactUpdate {
            task_id: next.id.clone(),
            context_id: next.context_id.clone(),
            artifact: p.artifact,
            append: p.append,
            last_chunk: p.last_chunk,
        });
        write::put_artifact(&self.conn, &next.id, pos, &next.artifacts[pos])?;
        let mut effects = Effects::reply(Reply::Ok);
        let to = next.requester.clone();
        self.record_change(&next, event, &me, to, &now, &mut effects.events)?;
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
            for (version, event) in read::log_after(&self.conn, &rec.id, after)? {
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

    /// Stores the push config `owner` sets on a task (one per party).
    pub(in crate::engine) fn set_push_config(
        &mut self,
        rec: &TaskRecord,
        owner: &Party,
        cfg: PushConfig,
        undo: &mut Undo,
    ) -> Result<Arc<TaskRecord>, CoreError> {
        write::put_push_config(&self.conn, &rec.id, owner, &cfg)?;
        let mut next = rec.clone();
        match next.push_configs.iter_mut().find(|(o, _)| o == owner) {
            Some((_, c)) => *c = cfg,
            None => next.push_configs.push((owner.clone(), cfg)),
        }
        Ok(self.put_task(next, undo))
    }
}
