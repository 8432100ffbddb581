//! The writer: one thread that owns the SQLite write connection and every
//! mutating call, in the order it receives them.
//!
//! It drains its queue in batches (take one, then whatever else is waiting,
//! up to `batch_max`; it never waits to fill a batch), runs the calls in
//! one transaction, commits once, and only then publishes the changed
//! tasks to readers, routes the calls' events and releases their responses.
//!
//! Calls get no savepoint each (a fifth of the writer's time went to the
//! savepoints' sub-journal): every call validates completely before its
//! first write (`calls`), so a refused call has written nothing and is
//! undone in memory alone. A call that fails after writing (SQLite
//! refused a write, or a bug panicked) is detected by the connection's
//! change counter: then the whole batch's transaction rolls back, its
//! calls are answered `-32603` (none was applied), and the writer's
//! memory is restored, as for a failed commit. The calls queued behind it
//! in the same batch run in a fresh transaction.
//!
//! Architecture invariant: nothing a client can observe (a response, an
//! event, a task read) reflects a write before the commit that holds it.
//!
//! - [`calls`]: what each mutating method does (validation and writes).
//! - [`effects`]: what a call leaves to do after the commit: events, replies,
//!   blocking waits.

mod calls;
mod effects;

use crate::core::idempotency::Creations;
use crate::core::registry::{ConnId, Registry};
use crate::core::task::Party;
use crate::core::task::TaskRecord;
use crate::core::CoreError;
use crate::delivery::{Outbox, Responder, RingPublishes, Timer};
use crate::rpc_errors::to_rpc;
use crate::store::checkpoint::Checkpointer;
use crate::store::read;
use a2a_proto::call::Call;
use a2a_proto::error::RpcError;
use a2a_proto::params::RegisterParams;
use crossbeam_channel::{Receiver, Sender};
use effects::{Blocking, Effects};
use parking_lot::RwLock;
use rusqlite::Connection;
use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// How many tasks the writer and the read cache keep in memory before
/// evicting terminal ones (they are reloaded from SQLite on demand).
const TASK_CACHE_TARGET: usize = 8192;

/// State shared by the writer and the readers.
pub struct Shared {
    /// Live agents. Changed only by the writer thread.
    pub registry: RwLock<Registry>,
    /// Committed task records: readers look here before SQLite.
    pub tasks: RwLock<HashMap<String, Arc<TaskRecord>>>,
    pub timer: Timer,
    /// Commit counters (for benchmarks and tests).
    pub stats: EngineStats,
}

/// How the writer has grouped calls into commits so far.
#[derive(Default, Debug)]
pub struct EngineStats {
    /// Transactions committed.
    pub commits: std::sync::atomic::AtomicU64,
    /// Calls those transactions held (refused calls included).
    pub calls: std::sync::atomic::AtomicU64,
}

/// A call for the writer: the parsed [`Call`] as it came, plus what only
/// the connection knows where the call needs it.
#[derive(Debug)]
pub enum Op {
    /// `a2a.agents.register`: the agent lives on this connection and its
    /// events go to this outbox.
    Register {
        conn: ConnId,
        outbox: Arc<Outbox>,
        params: RegisterParams,
    },
    /// Every other call the writer runs (the mutating methods and
    /// `a2a.tasks.resubscribe`); reads never come here.
    Call(Call),
}

impl Op {
    /// Does this call write rows? (Those that do not still go through the
    /// writer, so that their events are ordered with everyone else's.)
    fn writes(&self) -> bool {
        !matches!(self, Op::Call(Call::Resubscribe(_)))
    }
}

/// What the writer's queue carries.
pub enum Command {
    /// Boxed: the queue moves commands by value, and a call's params are large.
    Call { op: Box<Op>, reply: Responder },
    /// A connection closed: its agents' tokens die after the calls it
    /// queued before closing; `done` is signalled once that is committed.
    ConnectionClosed { conn: ConnId, done: Sender<()> },
    /// A blocking send's wait ran out.
    BlockingExpired(u64),
    /// Finish the calls queued so far, then stop; signals `done`.
    Shutdown(Sender<()>),
}

/// A handle to the writer thread.
#[derive(Clone)]
pub struct EngineHandle {
    tx: Sender<Command>,
}

impl EngineHandle {
    /// Queues a call. If the writer has stopped, the responder answers `-32603`.
    pub fn call(&self, op: Op, reply: Responder) {
        let _ = self.tx.send(Command::Call {
            op: Box::new(op),
            reply,
        });
    }

    /// Invalidates a closed connection's tokens, after the calls it queued
    /// before closing; returns once that is done (or the writer is gone).
    pub fn connection_closed(&self, conn: ConnId) {
        let (done, rx) = crossbeam_channel::bounded(1);
        if self
            .tx
            .send(Command::ConnectionClosed { conn, done })
            .is_ok()
        {
            let _ = rx.recv();
        }
    }

    /// Commits everything queued so far, then stops the writer. Returns
    /// once the last commit is done (or the writer is gone).
    pub fn shutdown(&self) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        if self.tx.send(Command::Shutdown(tx)).is_ok() {
            let _ = rx.recv();
        }
    }
}

/// Starts the writer thread on an open write connection.
pub fn start(
    conn: Connection,
    shared: Arc<Shared>,
    batch_max: usize,
) -> Result<EngineHandle, CoreError> {
    let (tx, rx) = crossbeam_channel::unbounded();
    let open_counts = read::open_counts(&conn)?;
    let next_seq = read::max_seq(&conn)? + 1;
    let checkpointer = Checkpointer::start(&conn);
    let engine = Engine {
        checkpointer,
        conn,
        shared,
        tasks: HashMap::new(),
        settled: VecDeque::new(),
        open_counts,
        next_seq,
        creations: Creations::default(),
        waiters: HashMap::new(),
        waiters_by_task: HashMap::new(),
        next_waiter: 0,
        tx: tx.clone(),
        batch_max: batch_max.max(1),
    };
    std::thread::Builder::new()
        .name("a2a-writer".into())
        .spawn(move || engine.run(rx))
        .map_err(|e| CoreError::Internal(format!("spawn writer: {e}")))?;
    Ok(EngineHandle { tx })
}

/// What a batch changed in the writer's memory, to restore if its commit fails.
#[derive(Default)]
struct Undo {
    /// Each task touched, as it was before the batch (or call).
    tasks: HashMap<String, Option<Arc<TaskRecord>>>,
    open_counts: HashMap<String, usize>,
    sends: Vec<(Arc<crate::core::registry::Agent>, u32)>,
    /// Agents registered: removed again if the commit fails, made visible if it succeeds.
    registered: Vec<Arc<crate::core::registry::Agent>>,
    /// Agents deregistered: kept if the commit fails, removed (and their
    /// pull queues closed) only once it succeeds.
    leaving: Vec<Arc<crate::core::registry::Agent>>,
    /// Tasks that reached a terminal state: eviction candidates once committed.
    settled: Vec<String>,
    next_seq: Option<i64>,
    /// Creations recorded in memory: `(party, messageId, length before)`.
    creations: Vec<(Party, String, usize)>,
}

impl Undo {
    /// Adds a later call's record to a batch's: what was there first wins.
    fn absorb(&mut self, later: Undo) {
        for (k, v) in later.tasks {
            self.tasks.entry(k).or_insert(v);
        }
        for (k, v) in later.open_counts {
            self.open_counts.entry(k).or_insert(v);
        }
        for (agent, n) in later.sends {
            if !self.sends.iter().any(|(a, _)| a.same(&agent)) {
                self.sends.push((agent, n));
            }
        }
        self.registered.extend(later.registered);
        self.leaving.extend(later.leaving);
        self.settled.extend(later.settled);
        if self.next_seq.is_none() {
            self.next_seq = later.next_seq;
        }
        self.creations.extend(later.creations);
    }
}

struct Engine {
    /// Runs the checkpoints this thread no longer runs (`None`: SQLite's
    /// auto-checkpoint on this connection, as before).
    checkpointer: Option<Checkpointer>,
    conn: Connection,
    shared: Arc<Shared>,
    /// The writer's view of tasks, including the open batch's changes.
    tasks: HashMap<String, Arc<TaskRecord>>,
    /// Ids of terminal tasks in `tasks`, oldest settled first: the eviction order.
    settled: VecDeque<String>,
    /// Non-terminal tasks per requester context (`A2A_MAX_TASKS_PER_CONTEXT`).
    open_counts: HashMap<String, usize>,
    /// The next task creation sequence number.
    next_seq: i64,
    /// Which tasks requesters created with which `messageId`, where memory
    /// knows exactly (`core::idempotency::Creations`).
    creations: Creations,
    waiters: HashMap<u64, Blocking>,
    waiters_by_task: HashMap<String, Vec<u64>>,
    next_waiter: u64,
    /// To queue commands to itself (blocking-send expiries from the timer).
    tx: Sender<Command>,
    batch_max: usize,
}

/// A call failed after some of its rows were written; the error it answers.
struct Poisoned(RpcError);

/// One call's result, waiting for the commit.
struct Done {
    reply: Responder,
    result: Result<Effects, RpcError>,
}

impl Engine {
    fn run(mut self, rx: Receiver<Command>) {
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            while batch.len() < self.batch_max {
                match rx.try_recv() {
                    Ok(c) => batch.push(c),
                    Err(_) => break,
                }
            }
            if let Some(done) = self.process(batch) {
                if let Some(cp) = self.checkpointer.take() {
                    cp.stop();
                }
                // A clean exit leaves every commit in the database file itself.
                crate::store::close(self.conn);
                let _ = done.send(());
                return;
            }
        }
    }

    /// Runs one batch: returns the shutdown signal if the batch asked to stop.
    fn process(&mut self, batch: Vec<Command>) -> Option<Sender<()>> {
        let mut undo = Undo::default();
        let mut done: Vec<Done> = Vec::with_capacity(batch.len());
        let mut expired = Vec::new();
        let mut closed: Vec<Sender<()>> = Vec::new();
        let mut shutdown = None;
        let has_calls = batch.iter().any(|c| matches!(c, Command::Call { .. }));
        let began = if has_calls {
            self.sql("BEGIN IMMEDIATE")
        } else {
            Ok(())
        };
        let mut cmds = batch.into_iter();
        while let Some(cmd) = cmds.next() {
            match cmd {
                Command::Call { op, reply } => {
                    let result = match &began {
                        Ok(()) => self.run_call(*op, &mut undo),
                        Err(e) => Ok(Err(RpcError::internal(format!("database: {e}")))),
                    };
                    match result {
                        Ok(result) => done.push(Done { reply, result }),
                        Err(Poisoned(err)) => {
                            // The call wrote part of its rows: nothing of
                            // this transaction may be kept.
                            let _ = self.sql("ROLLBACK");
                            self.restore(undo);
                            tracing::warn!(calls = done.len() + 1, error = %err.message, "a call failed after writing; the batch's calls are refused");
                            reply.send(Err(err));
                            let others = RpcError::internal(
                                "database: another call of the same commit failed halfway; this call was not applied",
                            );
                            self.refuse_batch(done, &others, expired, closed);
                            let rest: Vec<Command> = cmds.collect();
                            let later = if rest.is_empty() {
                                None
                            } else {
                                self.process(rest)
                            };
                            return shutdown.or(later);
                        }
                    }
                }
                Command::ConnectionClosed { conn, done } => {
                    self.connection_closed(conn);
                    closed.push(done);
                }
                Command::BlockingExpired(id) => expired.push(id),
                Command::Shutdown(tx) => shutdown = Some(tx),
            }
        }
        if has_calls && began.is_ok() {
            use std::sync::atomic::Ordering::Relaxed;
            self.shared.stats.commits.fetch_add(1, Relaxed);
            self.shared
                .stats
                .calls
                .fetch_add(done.len() as u64, Relaxed);
            if let Err(e) = self.sql("COMMIT") {
                let _ = self.sql("ROLLBACK");
                self.restore(undo);
                let err = crate::store::commit_error(&e);
                // The file guard's refusal is reported on exit, at every level.
                if matches!(&e, rusqlite::Error::SqliteFailure(f, _)
                    if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_COMMITHOOK)
                {
                    tracing::info!(
                        calls = done.len(),
                        "commit refused: the database file is gone"
                    );
                } else {
                    tracing::warn!(calls = done.len(), error = %e, "commit failed; the batch's calls are refused");
                }
                self.refuse_batch(done, &err, expired, closed);
                return shutdown;
            }
        }
        self.publish(&undo);
        self.commit_registry(&undo);
        self.settled.extend(undo.settled.iter().cloned());
        // Every call's events first, each event ring published once, then
        // the answers: a client finds a call's events in its ring before
        // the call's response reaches it (as on the socket, where they are
        // written ahead of it).
        let mut rings = RingPublishes::default();
        for d in &mut done {
            if let Ok(effects) = &mut d.result {
                self.route(std::mem::take(&mut effects.events), &mut rings);
            }
        }
        rings.publish();
        for d in done {
            match d.result {
                Ok(effects) => self.release(effects, d.reply),
                Err(e) => d.reply.send(Err(e)),
            }
        }
        self.wake_waiters(undo.tasks.keys());
        for id in expired {
            self.finish_waiter(id);
        }
        for c in closed {
            let _ = c.send(());
        }
        self.evict(&undo);
        // After the answers: a log restart the checkpointer runs here
        // delays the next group, not this one's replies.
        if has_calls {
            if let Some(cp) = &self.checkpointer {
                cp.committed(&self.conn);
            }
        }
        shutdown
    }

    /// Answers the calls of a batch that was rolled back with `err`, then
    /// finishes its expiries and signals its closed connections. Expiries
    /// are not writes: a failed commit must not leave those blocking sends
    /// hanging until the client gives up.
    fn refuse_batch(
        &mut self,
        done: Vec<Done>,
        err: &RpcError,
        expired: Vec<u64>,
        closed: Vec<Sender<()>>,
    ) {
        for d in done {
            d.reply.send(Err(err.clone()));
        }
        for id in expired {
            self.finish_waiter(id);
        }
        for c in closed {
            let _ = c.send(());
        }
    }

    /// One call behind a panic boundary, without a savepoint. A call that
    /// is refused (or panics) before its first write is undone in memory
    /// alone (its own undo record) and answered with its error; one that
    /// fails after writing rows is `Poisoned`: its batch must roll back.
    fn run_call(
        &mut self,
        op: Op,
        batch_undo: &mut Undo,
    ) -> Result<Result<Effects, RpcError>, Poisoned> {
        let writes = op.writes();
        let before = self.conn.total_changes();
        let mut undo = Undo::default();
        let result = catch_unwind(AssertUnwindSafe(|| self.execute(op, &mut undo)));
        let err = match result {
            Ok(Ok(effects)) => {
                batch_undo.absorb(undo);
                return Ok(Ok(effects));
            }
            Ok(Err(e)) => to_rpc(e),
            Err(_) => RpcError::internal("the call failed inside the broker"),
        };
        self.restore(undo);
        // `total_changes` counts every row a completed statement changed
        // (triggers included); a failed statement leaves no change (SQLite
        // rolls a statement back by itself). So an unchanged count means
        // the call wrote nothing.
        if writes && self.conn.total_changes() != before {
            return Err(Poisoned(err));
        }
        Ok(Err(err))
    }

    /// Runs a fixed statement (`BEGIN IMMEDIATE`, `COMMIT`, `ROLLBACK`),
    /// parsed once per connection.
    fn sql(&self, stmt: &str) -> rusqlite::Result<()> {
        self.conn.prepare_cached(stmt)?.execute([]).map(|_| ())
    }

    fn execute(&mut self, op: Op, undo: &mut Undo) -> Result<Effects, CoreError> {
        match op {
            Op::Register {
                conn,
                outbox,
                params,
            } => self.register(conn, outbox, params, undo),
            Op::Call(call) => match call {
                Call::Deregister(p) => self.deregister(p.token.as_deref(), undo),
                Call::Send(p) => self.send(p, false, undo),
                Call::Stream(p) => self.send(p, true, undo),
                Call::Status(p) => self.status(p, undo),
                Call::Cancel(p) => self.cancel(p, undo),
                Call::Artifact(p) => self.artifact(p, undo),
                Call::Resubscribe(p) => self.resubscribe(p),
                Call::PushSet(p) => self.push_set(p, undo),
                Call::Register(_) => Err(CoreError::Internal(format!(
                    "{} reached the writer without its connection",
                    a2a_proto::methods::AGENTS_REGISTER
                ))),
                read @ (Call::Handshake(_)
                | Call::ListAgents(_)
                | Call::Get(_)
                | Call::PushGet(_)
                | Call::ListTasks(_)
                | Call::Wait(_)) => Err(CoreError::Internal(format!(
                    "{} is answered without the writer",
                    read.method()
                ))),
            },
        }
    }

    /// Restores the writer's memory after a failed call or commit.
    fn restore(&mut self, undo: Undo) {
        for (id, before) in undo.tasks {
            match before {
                Some(rec) => self.tasks.insert(id, rec),
                None => self.tasks.remove(&id),
            };
        }
        for (ctx, n) in undo.open_counts {
            self.open_counts.insert(ctx, n);
        }
        for (agent, n) in undo.sends {
            agent.sends.store(n, std::sync::atomic::Ordering::Relaxed);
        }
        if let Some(seq) = undo.next_seq {
            self.next_seq = seq;
        }
        for (party, mid, before) in undo.creations.iter().rev() {
            self.creations.unrecord(party, mid, *before);
        }
        for agent in &undo.leaving {
            agent.set_leaving(false);
        }
        let mut reg = self.shared.registry.write();
        for agent in undo.registered {
            reg.remove(&agent);
        }
    }

    /// After a commit: registrations become visible, deregistrations take
    /// effect (token dead, name free, pull waits answered).
    fn commit_registry(&mut self, undo: &Undo) {
        if undo.registered.is_empty() && undo.leaving.is_empty() {
            return;
        }
        for agent in &undo.registered {
            agent.mark_committed();
            tracing::info!(conn = agent.conn, peer = %agent.peer_id, context = %agent.context_id, kind = ?agent.kind, "agent registered");
        }
        if undo.leaving.is_empty() {
            return;
        }
        let mut reg = self.shared.registry.write();
        for agent in &undo.leaving {
            self.creations.forget(&agent.party());
            reg.remove(agent);
            tracing::info!(conn = agent.conn, peer = %agent.peer_id, context = %agent.context_id, "agent deregistered");
        }
        drop(reg);
        for agent in &undo.leaving {
            if let crate::delivery::Endpoint::Pull(q) = &agent.endpoint {
                q.close(to_rpc(CoreError::UnknownToken));
            }
        }
    }

    /// Makes the batch's committed task records visible to readers.
    fn publish(&self, undo: &Undo) {
        if undo.tasks.is_empty() {
            return;
        }
        let mut shared = self.shared.tasks.write();
        for id in undo.tasks.keys() {
            if let Some(rec) = self.tasks.get(id) {
                shared.insert(id.clone(), rec.clone());
            }
        }
    }

    /// Drops terminal tasks from memory, oldest settled first, while the
    /// caches hold more than their target. Costs one step per task evicted
    /// (open tasks are never candidates, so nothing scans them).
    fn evict(&mut self, undo: &Undo) {
        let mut budget = self.settled.len();
        let mut victims = Vec::new();
        while self.tasks.len() - victims.len() > TASK_CACHE_TARGET && budget > 0 {
            budget -= 1;
            let Some(id) = self.settled.pop_front() else {
                break;
            };
            let terminal = self.tasks.get(&id).is_some_and(|r| r.state().is_terminal());
            if !terminal {
                continue; // evicted already, or its terminal move was rolled back
            }
            if undo.tasks.contains_key(&id) || self.waiters_by_task.contains_key(&id) {
                self.settled.push_back(id); // still in use: later
                continue;
            }
            victims.push(id);
        }
        if victims.is_empty() {
            return;
        }
        let mut shared = self.shared.tasks.write();
        for id in victims {
            self.tasks.remove(&id);
            shared.remove(&id);
        }
    }

    fn connection_closed(&mut self, conn: ConnId) {
        let gone = self.shared.registry.write().remove_connection(conn);
        if !gone.is_empty() {
            tracing::info!(
                conn,
                agents = gone.len(),
                "connection closed; its agents' tokens are dead"
            );
        }
        for agent in gone {
            self.creations.forget(&agent.party());
            if let crate::delivery::Endpoint::Pull(q) = &agent.endpoint {
                q.close(to_rpc(CoreError::UnknownToken));
            }
        }
    }

    // ---- helpers shared by the calls ----

    /// The writer's current record of a task, loading it if needed.
    fn task(&mut self, id: &str) -> Result<Arc<TaskRecord>, CoreError> {
        if let Some(rec) = self.tasks.get(id) {
            return Ok(rec.clone());
        }
        let rec = read::load_task(&self.conn, id)?
            .ok_or_else(|| CoreError::UnknownTask(id.to_owned()))?;
        let rec = Arc::new(rec);
        if rec.state().is_terminal() {
            self.settled.push_back(id.to_owned());
        }
        self.tasks.insert(id.to_owned(), rec.clone());
        Ok(rec)
    }

    /// Replaces a task record, remembering the old one for a failed commit.
    fn put_task(&mut self, rec: TaskRecord, undo: &mut Undo) -> Arc<TaskRecord> {
        let before = self.tasks.get(&rec.id).cloned();
        undo.tasks.entry(rec.id.clone()).or_insert(before);
        let rec = Arc::new(rec);
        self.tasks.insert(rec.id.clone(), rec.clone());
        rec
    }

    fn add_open(&mut self, ctx: &str, delta: isize, undo: &mut Undo) {
        let cur = self.open_counts.get(ctx).copied().unwrap_or(0);
        undo.open_counts.entry(ctx.to_owned()).or_insert(cur);
        self.open_counts
            .insert(ctx.to_owned(), cur.saturating_add_signed(delta));
    }

    fn open_count(&self, ctx: &str) -> usize {
        self.open_counts.get(ctx).copied().unwrap_or(0)
    }
}
