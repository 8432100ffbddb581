//! What the read methods (`methods/`, route `read`) run on, without the
//! writer: [`ReadCtx`], on the connection's own thread when the
//! committed-task cache has what they need, else on a reader thread with a
//! read-only SQLite connection ([`ReadWorkers`]), so a slow read never
//! stalls the socket runtime that serves every connection. They never
//! queue behind the writer.

use crate::agents::registry::Agent;
use crate::core::task::TaskRecord;
use crate::core::CoreError;
use crate::engine::Shared;
use crate::store::{self, read};
use crossbeam_channel::RecvTimeoutError;
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

    pub(crate) fn db(&mut self) -> Result<&Connection, CoreError> {
        if self.conn.is_none() {
            self.conn = Some(self.pool.take()?);
        }
        Ok(self.conn.as_ref().expect("just taken"))
    }

    pub(crate) fn agent(&self, token: Option<&str>) -> Result<Arc<Agent>, CoreError> {
        self.shared.registry.read().resolve(token)
    }

    /// A committed task: cached, or loaded from SQLite.
    pub(crate) fn task(&mut self, id: &str) -> Result<Arc<TaskRecord>, CoreError> {
        if let Some(rec) = self.shared.tasks.read().get(id) {
            return Ok(rec.clone());
        }
        read::load_task(self.db()?, id)?
            .map(Arc::new)
            .ok_or_else(|| CoreError::UnknownTask(id.to_owned()))
    }

    /// A task the caller is party to.
    pub(crate) fn party_task(
        &mut self,
        agent: &Agent,
        id: &str,
    ) -> Result<Arc<TaskRecord>, CoreError> {
        let rec = self.task(id)?;
        if rec.role_of(&agent.party()).is_none() {
            return Err(CoreError::CrossContextDenied(
                "only a party to the task may read it",
            ));
        }
        Ok(rec)
    }
}
