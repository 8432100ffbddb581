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
use parking_lot::Mutex;
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::Arc;

/// Idle read-only connections shared by all sessions: a socket broker
/// with hundreds of clients needs a few of them, not one each.
pub struct ReaderPool {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

/// Idle read connections kept for reuse.
const IDLE_READERS: usize = 8;

impl ReaderPool {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            idle: Mutex::new(Vec::new()),
        }
    }

    fn take(&self) -> Result<Connection, CoreError> {
        if let Some(c) = self.idle.lock().pop() {
            return Ok(c);
        }
        Ok(store::open_reader(&self.path)?)
    }

    fn give_back(&self, c: Connection) {
        let mut idle = self.idle.lock();
        if idle.len() < IDLE_READERS {
            idle.push(c);
        }
    }
}

/// What a read needs: shared state, and a read connection borrowed from
/// the pool on the first cache miss (returned when the read ends).
pub struct ReadCtx<'a> {
    pub shared: &'a Shared,
    pub pool: &'a ReaderPool,
    conn: Option<Connection>,
}

impl Drop for ReadCtx<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            self.pool.give_back(c);
        }
    }
}

impl<'a> ReadCtx<'a> {
    pub fn new(shared: &'a Shared, pool: &'a ReaderPool) -> Self {
        Self {
            shared,
            pool,
            conn: None,
        }
    }

    fn db(&mut self) -> Result<&Connection, CoreError> {
        if self.conn.is_none() {
            self.conn = Some(self.pool.take()?);
        }
        Ok(self.conn.as_ref().expect("just taken"))
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
            return Err(CoreError::CrossContextDenied(
                "only a party to the task may read it",
            ));
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

/// `a2a.tasks.pushNotificationConfig.get`: the task's config (one per
/// task, whichever party set it), or null.
pub fn push_config(c: &mut ReadCtx<'_>, p: PushGetParams) -> Result<Reply, CoreError> {
    let agent = c.agent(p.token.as_deref())?;
    let rec = c.party_task(&agent, &p.task_id)?;
    Ok(Reply::Config(
        rec.push_configs.first().map(|(_, c)| c.clone()),
    ))
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
        Some(cur) => Some(cur.parse::<i64>().map_err(|_| {
            CoreError::InvalidParams(format!("cursor `{cur}` is not one this broker gave"))
        })?),
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
