//! The read-only methods, answered on the connection's own thread: from the
//! committed-task cache when it has the task, else from a read-only SQLite
//! connection. They never queue behind the writer.

use crate::core::addressing::addressable;
use crate::core::registry::Agent;
use crate::core::task::TaskRecord;
use crate::core::CoreError;
use crate::engine::Shared;
use crate::reply::{Reply, TaskView};
use crate::store::{self, read};
use a2a_proto::limits::{DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT};
use a2a_proto::params::{GetParams, ListAgentsParams, ListTasksParams, PushGetParams};
use rusqlite::Connection;
use std::path::Path;
use std::sync::Arc;

/// What a read needs: shared state and this connection's read handle.
pub struct ReadCtx<'a> {
    pub shared: &'a Shared,
    pub db_path: &'a Path,
    pub conn: &'a mut Option<Connection>,
}

impl ReadCtx<'_> {
    fn db(&mut self) -> Result<&Connection, CoreError> {
        if self.conn.is_none() {
            *self.conn = Some(store::open_reader(self.db_path)?);
        }
        Ok(self.conn.as_ref().expect("just opened"))
    }

    fn agent(&self, token: Option<&str>) -> Result<Arc<Agent>, CoreError> {
        self.shared.registry.read().resolve(token)
    }

    /// A committed task: cached, or loaded from SQLite.
    fn task(&mut self, id: &str) -> Result<Arc<TaskRecord>, CoreError> {
        if let Some(rec) = self.shared.tasks.read().get(id) {
            return Ok(rec.clone());
        }
        read::load_task(self.db()?, id)?
            .map(Arc::new)
            .ok_or_else(|| CoreError::UnknownTask(id.to_owned()))
    }

    /// A task the caller is party to.
    fn party_task(&mut self, agent: &Agent, id: &str) -> Result<Arc<TaskRecord>, CoreError> {
        let rec = self.task(id)?;
        if rec.role_of(&agent.party()).is_none() {
            return Err(CoreError::CrossContextDenied("only a party to the task may read it"));
        }
        Ok(rec)
    }
}

/// `a2a.agents.list`: the cards the caller may address, itself excluded,
/// sorted by name; with `skill`, only cards with a skill of that id or tag.
pub fn list_agents(c: &mut ReadCtx<'_>, p: ListAgentsParams) -> Result<Reply, CoreError> {
    let agent = c.agent(p.token.as_deref())?;
    let reg = c.shared.registry.read();
    let cards = addressable(&reg, &agent)
        .filter(|a| {
            p.skill.as_deref().is_none_or(|want| {
                a.card
                    .skills
                    .iter()
                    .any(|s| s.id == want || s.tags.iter().any(|t| t == want))
            })
        })
        .map(|a| a.card.clone())
        .collect();
    Ok(Reply::Agents(cards))
}

/// `a2a.tasks.get`.
pub fn get_task(c: &mut ReadCtx<'_>, p: GetParams) -> Result<Reply, CoreError> {
    let agent = c.agent(p.token.as_deref())?;
    let rec = c.party_task(&agent, &p.id)?;
    Ok(Reply::task(rec, p.history_length.map(|n| n as usize)))
}

/// `a2a.tasks.pushNotificationConfig.get`: the caller's own config, or null.
pub fn push_config(c: &mut ReadCtx<'_>, p: PushGetParams) -> Result<Reply, CoreError> {
    let agent = c.agent(p.token.as_deref())?;
    let rec = c.party_task(&agent, &p.task_id)?;
    Ok(Reply::Config(rec.push_config_of(&agent.party()).cloned()))
}

/// `a2a.tasks.list` (ext): the caller's tasks, newest first, paged.
pub fn list_tasks(c: &mut ReadCtx<'_>, p: ListTasksParams) -> Result<Reply, CoreError> {
    let agent = c.agent(p.token.as_deref())?;
    let limit = p
        .limit
        .map_or(DEFAULT_LIST_LIMIT, |l| l as usize)
        .clamp(1, MAX_LIST_LIMIT);
    let before = match p.cursor.as_deref() {
        None => None,
        Some(cur) => Some(
            cur.parse::<i64>()
                .map_err(|_| CoreError::InvalidParams(format!("cursor `{cur}` is not one this broker gave")))?,
        ),
    };
    let (ids, next) = read::list_task_ids(c.db()?, &agent.party(), p.role, p.state, limit, before)?;
    let mut tasks = Vec::with_capacity(ids.len());
    for id in ids {
        tasks.push(TaskView::full(c.task(&id)?));
    }
    Ok(Reply::TaskList {
        tasks,
        next_cursor: next.map(|n| n.to_string()),
    })
}
