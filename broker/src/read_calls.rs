//! The read-only methods, answered without the writer: on the connection's
//! own thread when the committed-task cache has what they need, else on a
//! reader thread with a read-only SQLite connection ([`ReadWorkers`]), so a
//! slow read never stalls the socket runtime that serves every connection.
//! They never queue behind the writer.

use crate::core::addressing::addressable;
use crate::core::registry::Agent;
use crate::core::task::TaskRecord;
use crate::core::CoreError;
use crate::engine::Shared;
use crate::reply::{Reply, TaskView};
use crate::store::{self, read};
use a2a_proto::limits::{DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT};
use a2a_proto::params::{GetParams, ListAgentsParams, ListTasksParams, PushGetParams};
use crossbeam_channel::RecvTimeoutError;
use parking_lot::Mutex;
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::Arc;

/// Bytes of tasks one `a2a.tasks.list` page may carry: the outgoing frame
/// bound less room for the envelope.
const LIST_REPLY_BUDGET: usize = a2a_proto::limits::A2A_MAX_OUT_FRAME_BYTES - 64 * 1024;

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

    /// Frees the idle connections' page caches (SQLite's
    /// `shrink_memory`): a reader that went idle needs none of it.
    fn shrink_idle(&self) {
        for c in self.idle.lock().iter() {
            let _ = c.execute_batch("PRAGMA shrink_memory;");
        }
    }

    fn give_back(&self, c: Connection) {
        let mut idle = self.idle.lock();
        if idle.len() < IDLE_READERS {
            idle.push(c);
        }
    }
}

/// A read to run on a reader thread: it answers its responder itself.
type ReadJob = Box<dyn FnOnce(&ReaderPool) + Send>;

/// Threads that run the reads needing SQLite (cache misses, every
/// `a2a.tasks.list`): two, as SQLite reads in WAL mode run side by side and
/// this machine class has two cores; more would only queue on them.
pub struct ReadWorkers {
    tx: crossbeam_channel::Sender<ReadJob>,
}

/// Reader threads.
const READ_THREADS: usize = 2;

impl ReadWorkers {
    /// Starts the reader threads on `pool`; they end when this is dropped.
    pub fn start(pool: Arc<ReaderPool>) -> Self {
        let (tx, rx) = crossbeam_channel::unbounded::<ReadJob>();
        for i in 0..READ_THREADS {
            let rx = rx.clone();
            let pool = pool.clone();
            std::thread::Builder::new()
                .name(format!("a2a-read-{i}"))
                .spawn(move || {
                    // A reader thread allocates the records it loads; the
                    // connections' threads free them. Once idle, it gives
                    // what they freed back to the OS (`engine::trim`),
                    // and the idle connections their page caches.
                    let mut dirty = false;
                    loop {
                        let job = if dirty {
                            rx.recv_timeout(crate::engine::IDLE_RELEASE)
                        } else {
                            rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
                        };
                        match job {
                            // The job's own panic boundary answers its caller.
                            Ok(job) => {
                                job(&pool);
                                dirty = true;
                            }
                            Err(RecvTimeoutError::Timeout) => {
                                pool.shrink_idle();
                                crate::engine::trim::release_free_memory();
                                dirty = false;
                            }
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                    }
                })
                .expect("spawn reader thread");
        }
        Self { tx }
    }

    /// Queues a read; if the threads are gone the job is dropped, and its
    /// responder answers `-32603`.
    pub fn run(&self, job: ReadJob) {
        let _ = self.tx.send(job);
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
    let (page, more) =
        read::list_task_ids(c.db()?, &agent.party(), p.role, p.state, limit, before)?;
    // The answer must fit one outgoing frame (§1.1): past the budget the
    // page ends early, and its cursor picks up where it stopped.
    let mut budget = LIST_REPLY_BUDGET;
    let mut tasks = Vec::with_capacity(page.len());
    let mut last_seq = None;
    let mut cut = false;
    for (seq, id) in &page {
        let view = TaskView::full(c.task(id)?);
        let size = a2a_proto::check::json_len(&view).map_err(CoreError::from)?;
        if size > budget && !tasks.is_empty() {
            cut = true;
            break;
        }
        budget = budget.saturating_sub(size);
        tasks.push(view);
        last_seq = Some(*seq);
    }
    Ok(Reply::TaskList {
        tasks,
        next_cursor: (more || cut)
            .then_some(last_seq)
            .flatten()
            .map(|n| n.to_string()),
    })
}
