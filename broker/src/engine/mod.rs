//! The writer: one thread that owns the SQLite write connection and every
//! mutating call: each connection's in the order it sent them, the
//! connections taking turns ([`intake`]).
//!
//! It drains its queue in batches (it never waits to fill one: each batch
//! is chosen from what is waiting, up to `batch_max` calls, shared fairly
//! between the connections that wait, see [`intake`]), runs the calls in
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
//! - [`context`]: [`WriteCtx`], what each mutating method (`crate::methods`)
//!   runs against, and the steps the methods share.
//! - [`effects`]: what a call leaves to do after the commit: events, replies,
//!   blocking waits.
//! - [`cache`]: the task records kept in memory, bounded by count and bytes.
//! - [`intake`]: the queue per connection, and which calls make the next group.

mod cache;
mod context;
mod effects;
mod intake;
mod leases;
pub(crate) mod trim;

pub(crate) use context::{
    check_bytes_room, check_log_room, check_status_message, current_status_event, history_room,
    party_role, stamp, status_event, worker_only, Caches, Encoded, Move, Origin, RunOnWriter,
    WriteCtx, Written,
};
pub(crate) use effects::{BlockingSpec, Effects, Routed};
pub(crate) use leases::{lease_view, LeaseWait};

use crate::agents::registry::Registry;
use crate::core::idempotency::Creations;
use crate::core::task::Party;
use crate::core::task::TaskRecord;
use crate::core::ConnId;
use crate::core::{CoreError, StoreError};
use crate::delivery::{Responder, RingPublishes, Timer};
use crate::rpc_errors::to_rpc;
use crate::store::checkpoint::Checkpointer;
use crate::store::read;
use a2a_proto::call::Call;
use a2a_proto::error::RpcError;
use cache::TaskCache;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use effects::Blocking;
use parking_lot::RwLock;
use rusqlite::Connection;
use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the writer's queue stays empty before the writer gives the
/// memory freed meanwhile back to the OS (`trim`).
pub(crate) const IDLE_RELEASE: Duration = Duration::from_millis(200);
/// How often it does so at most under a load that never pauses.
const BUSY_RELEASE: Duration = Duration::from_secs(5);
/// How long the writer waits for a small call before an oversized call's
/// group, when the last group held small calls (`run`).
const SMALL_CALL_GRACE: Duration = Duration::from_millis(2);
/// The writer time owed to small calls at most (`run`).
const SMALL_CALL_OWED_MAX: Duration = Duration::from_millis(200);

/// State shared by the writer and the readers.
pub struct Shared {
    /// Live agents. Changed only by the writer thread.
    pub registry: RwLock<Registry>,
    /// Committed task records: readers look here before SQLite. Holds
    /// only records the writer's cache holds too (the writer drops a
    /// record from both), so the writer's bounds bound it.
    pub tasks: RwLock<HashMap<String, Arc<TaskRecord>>>,
    pub timer: Timer,
    /// Commit counters (for benchmarks and tests).
    pub stats: EngineStats,
}

impl Shared {
    /// Is this task in the committed-task cache (a read of it needs no SQLite)?
    pub fn is_cached(&self, id: &str) -> bool {
        self.tasks.read().contains_key(id)
    }
}

/// How the writer has grouped calls into commits so far.
#[derive(Default, Debug)]
pub struct EngineStats {
    /// Transactions committed.
    pub commits: std::sync::atomic::AtomicU64,
    /// Calls those transactions held (refused calls included).
    pub calls: std::sync::atomic::AtomicU64,
}

/// A call for the writer: the parsed [`Call`] as it came (a `write`
/// method of the table), and the connection it came from.
#[derive(Debug)]
pub struct Op {
    pub call: Call,
    pub from: Origin,
    /// A parked `a2a.leases.acquire` queued again by the writer: the end
    /// of its wait (`None` for every call a client sent).
    pub resume: Option<Instant>,
}

/// What the writer's queue carries.
pub enum Command {
    /// Boxed: the queue moves commands by value, and a call's params are
    /// large. `weight`: its payload bytes (`Call::precheck`'s count).
    Call {
        op: Box<Op>,
        reply: Responder,
        weight: usize,
    },
    /// A connection closed: its agents' tokens die after the calls it
    /// queued before closing; `done` is signalled once that is committed.
    ConnectionClosed { conn: ConnId, done: Sender<()> },
    /// A blocking send's wait ran out.
    BlockingExpired(u64),
    /// A parked lease acquisition's wait ran out.
    LeaseWaitExpired(u64),
    /// The next lease expiry is due: its transaction sweeps it.
    LeaseTick,
    /// Finish the calls queued so far, then stop; signals `done`.
    Shutdown(Sender<()>),
}

/// A handle to the writer thread.
#[derive(Clone)]
pub struct EngineHandle {
    tx: Sender<Command>,
}

impl EngineHandle {
    /// Queues a call of `weight` payload bytes (its pre-check counted them,
    /// on the caller's thread: the writer's time is the shared one). If the
    /// writer has stopped, the responder answers `-32603`.
    pub fn call(&self, op: Op, weight: usize, reply: Responder) {
        let _ = self.tx.send(Command::Call {
            op: Box::new(op),
            reply,
            weight,
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
        caches: Caches {
            tasks: TaskCache::default(),
            open_counts,
            next_seq,
            creations: Creations::default(),
            leases: Default::default(),
        },
        waiters: HashMap::new(),
        waiters_by_task: HashMap::new(),
        lease_waiters: HashMap::new(),
        lease_tick: None,
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
pub(crate) struct Undo {
    /// Each task the batch (or call) changed in the writer's cache. To undo
    /// them the cache drops them: SQLite, rolled back, has them as they were.
    pub(crate) tasks: HashSet<String>,
    pub(crate) open_counts: HashMap<String, usize>,
    pub(crate) sends: Vec<(Arc<crate::agents::registry::Agent>, u32)>,
    /// Agents registered: removed again if the commit fails, made visible if it succeeds.
    pub(crate) registered: Vec<Arc<crate::agents::registry::Agent>>,
    /// Agents deregistered: kept if the commit fails, removed (and their
    /// pull queues closed) only once it succeeds.
    pub(crate) leaving: Vec<Arc<crate::agents::registry::Agent>>,
    pub(crate) next_seq: Option<i64>,
    /// Creations recorded in memory: `(party, messageId, length before)`.
    pub(crate) creations: Vec<(Party, String, usize)>,
    /// Leases granted, renewed or ended (`core::lease`).
    pub(crate) leases: Vec<crate::core::lease::LeaseUndo>,
    /// Contexts where a lease ended: their parked acquisitions try again
    /// after the commit (not a change to undo).
    pub(crate) lease_contexts: Vec<String>,
}

impl Undo {
    /// Adds a later call's record to a batch's: what was there first wins.
    fn absorb(&mut self, later: Undo) {
        self.tasks.extend(later.tasks);
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
        if self.next_seq.is_none() {
            self.next_seq = later.next_seq;
        }
        self.creations.extend(later.creations);
        self.leases.extend(later.leases);
        self.lease_contexts.extend(later.lease_contexts);
    }
}

struct Engine {
    /// Runs the checkpoints this thread no longer runs (`None`: SQLite's
    /// auto-checkpoint on this connection, as before).
    checkpointer: Option<Checkpointer>,
    conn: Connection,
    shared: Arc<Shared>,
    /// The tasks, counts and creations the calls change.
    caches: Caches,
    waiters: HashMap<u64, Blocking>,
    waiters_by_task: HashMap<String, Vec<u64>>,
    /// Parked lease acquisitions (`leases`), numbered with the blocking sends.
    lease_waiters: HashMap<u64, leases::LeaseWaiter>,
    /// The lease tick on the timer: the expiry it is for, and its key.
    lease_tick: Option<(crate::core::lease::Millis, crate::delivery::timer::TimerKey)>,
    next_waiter: u64,
    /// To queue commands to itself (blocking-send expiries from the timer).
    tx: Sender<Command>,
    batch_max: usize,
}

/// A call failed after some of its rows were written; the error it answers.
struct Poisoned(CoreError);

/// One call's result, waiting for the commit.
struct Done {
    reply: Responder,
    /// The core's error: the wire's is made when the call is answered.
    result: Result<Effects, CoreError>,
}

impl Engine {
    fn run(mut self, rx: Receiver<Command>) {
        // Batches since free memory was last given back (`trim`): it is
        // given back once the queue has been empty for `IDLE_RELEASE`,
        // and under a load that never pauses every `BUSY_RELEASE`.
        let mut dirty = false;
        let mut released = Instant::now();
        let mut intake = intake::Intake::new(self.batch_max);
        // Writer time oversized groups took that smaller calls may still
        // have, and whether the last group held smaller calls.
        let mut owed = Duration::ZERO;
        let mut small_last = false;
        loop {
            if intake.is_idle() {
                let next = if dirty {
                    rx.recv_timeout(IDLE_RELEASE)
                } else {
                    rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
                };
                match next {
                    Ok(c) => intake.push(c),
                    Err(RecvTimeoutError::Timeout) => {
                        trim::release_free_memory();
                        (dirty, released) = (false, Instant::now());
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            if dirty && released.elapsed() >= BUSY_RELEASE {
                trim::release_free_memory();
                released = Instant::now();
            }
            dirty = true;
            // Everything waiting joins its connection's queue (moving a
            // pointer each); what comes after a shutdown is not taken.
            let drain = |intake: &mut intake::Intake| {
                while !intake.stopping() {
                    match rx.try_recv() {
                        Ok(c) => intake.push(c),
                        Err(_) => break,
                    }
                }
            };
            drain(&mut intake);
            // Before an oversized call's group, while that call's time is
            // owed to smaller ones: a connection whose small call was just
            // answered most often sends its next at once, and would
            // otherwise meet the whole oversized group in its way, call
            // after call. Waiting a moment for it is paid from the owed time.
            if owed > Duration::ZERO
                && small_last
                && !intake.stopping()
                && intake.oversized_waiting()
                && !intake.fitting_waiting()
            {
                let t = Instant::now();
                if let Ok(c) = rx.recv_timeout(owed.min(SMALL_CALL_GRACE)) {
                    intake.push(c);
                    drain(&mut intake);
                }
                owed = owed.saturating_sub(t.elapsed());
            }
            let (batch, oversized) = intake.group(owed > Duration::ZERO);
            small_last = !oversized && !batch.is_empty();
            let t = Instant::now();
            if let Some(done) = self.process(batch) {
                if let Some(cp) = self.checkpointer.take() {
                    cp.stop();
                }
                // A clean exit leaves every commit in the database file itself.
                crate::store::close(self.conn);
                let _ = done.send(());
                return;
            }
            // While both wait, smaller calls get as much of the writer's
            // time as the oversized ones took (their groups go first).
            owed = if oversized {
                (owed + t.elapsed()).min(SMALL_CALL_OWED_MAX)
            } else {
                owed.saturating_sub(t.elapsed())
            };
        }
    }

    /// Runs one batch: returns the shutdown signal if the batch asked to stop.
    fn process(&mut self, batch: Vec<Command>) -> Option<Sender<()>> {
        let mut undo = Undo::default();
        let mut done: Vec<Done> = Vec::with_capacity(batch.len());
        let mut expired = Vec::new();
        let mut closed: Vec<Sender<()>> = Vec::new();
        let mut shutdown = None;
        // Lease ends found outside any call (expiries, closed connections).
        let mut lease_events = Vec::new();
        // A transaction for the calls, and for what ends leases: a tick,
        // and a closed connection whose agents hold some.
        let needs_tx = batch.iter().any(|c| match c {
            Command::Call { .. } | Command::LeaseTick => true,
            Command::ConnectionClosed { conn, .. } => self.caches.leases.any_on(*conn),
            _ => false,
        });
        let began = if needs_tx {
            self.sql("BEGIN IMMEDIATE")
        } else {
            Ok(())
        };
        if needs_tx && began.is_ok() {
            self.sweep_leases(&mut undo, &mut lease_events);
        }
        let mut cmds = batch.into_iter();
        while let Some(cmd) = cmds.next() {
            match cmd {
                Command::Call { op, reply, .. } => {
                    let result = match &began {
                        Ok(()) => self.run_call(*op, &mut undo),
                        Err(e) => Ok(Err(CoreError::Internal(format!("database: {e}")))),
                    };
                    match result {
                        Ok(result) => done.push(Done { reply, result }),
                        Err(Poisoned(err)) => {
                            let err = to_rpc(err);
                            // The call wrote part of its rows: nothing of
                            // this transaction may be kept.
                            let _ = self.sql("ROLLBACK");
                            self.restore(undo);
                            tracing::warn!(calls = done.len() + 1, error = %err.message, "a call failed after writing; the batch's calls are refused");
                            reply.send(Err(err));
                            let others = to_rpc(CoreError::Internal(
                                "database: another call of the same commit failed halfway; this call was not applied".into(),
                            ));
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
                    let in_tx = needs_tx && began.is_ok();
                    self.leases_of_closed(conn, in_tx, &mut undo, &mut lease_events);
                    self.connection_closed(conn);
                    closed.push(done);
                }
                Command::BlockingExpired(id) => expired.push(id),
                // Its answer is the conflict it met, already committed.
                Command::LeaseWaitExpired(id) => self.finish_lease_waiter(id, Ok(())),
                Command::LeaseTick => self.lease_tick = None,
                Command::Shutdown(tx) => shutdown = Some(tx),
            }
        }
        let undo = if needs_tx && began.is_ok() {
            match self.commit_batch(done.len(), undo) {
                Ok(undo) => undo,
                Err(err) => {
                    self.refuse_batch(done, &crate::rpc_errors::store(&err), expired, closed);
                    return shutdown;
                }
            }
        } else {
            undo
        };
        self.publish(&undo);
        self.commit_registry(&undo);
        // Every call's events first, each event ring published once, then
        // the answers: a client finds a call's events in its ring before
        // the call's response reaches it (as on the socket, where they are
        // written ahead of it).
        let mut rings = RingPublishes::default();
        self.route(lease_events, &mut rings);
        for d in &mut done {
            if let Ok(effects) = &mut d.result {
                self.route(std::mem::take(&mut effects.events), &mut rings);
            }
        }
        rings.publish();
        for d in done {
            match d.result {
                Ok(effects) => self.release(effects, d.reply),
                Err(e) => d.reply.send(Err(to_rpc(e))),
            }
        }
        self.wake_waiters(undo.tasks.iter());
        self.wake_lease_waiters(&undo.lease_contexts);
        self.schedule_lease_tick();
        for id in expired {
            self.finish_waiter(id);
        }
        for c in closed {
            let _ = c.send(());
        }
        self.evict();
        // After the answers: a log restart the checkpointer runs here
        // delays the next group, not this one's replies.
        if needs_tx {
            if let Some(cp) = &self.checkpointer {
                cp.committed(&self.conn);
            }
        }
        shutdown
    }

    /// Commits the batch's transaction of `calls` calls. If the commit
    /// fails: rolled back, the caches restored, and the error to refuse
    /// the calls with.
    fn commit_batch(&mut self, calls: usize, undo: Undo) -> Result<Undo, StoreError> {
        use std::sync::atomic::Ordering::Relaxed;
        self.shared.stats.commits.fetch_add(1, Relaxed);
        self.shared.stats.calls.fetch_add(calls as u64, Relaxed);
        let Err(e) = self.sql("COMMIT") else {
            return Ok(undo);
        };
        let _ = self.sql("ROLLBACK");
        self.restore(undo);
        // The file guard's refusal is reported on exit, at every level.
        if matches!(&e, rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_COMMITHOOK)
        {
            tracing::info!(calls, "commit refused: the database file is gone");
        } else {
            tracing::warn!(calls, error = %e, "commit failed; the batch's calls are refused");
        }
        Err(crate::store::commit_error(&e))
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
    ) -> Result<Result<Effects, CoreError>, Poisoned> {
        let writes = op.call.writes();
        let before = self.conn.total_changes();
        let mut undo = Undo::default();
        let result = catch_unwind(AssertUnwindSafe(|| self.execute(op, &mut undo)));
        let err = match result {
            Ok(Ok(effects)) => {
                batch_undo.absorb(undo);
                return Ok(Ok(effects));
            }
            Ok(Err(e)) => e,
            Err(_) => CoreError::Internal("the call failed inside the broker".into()),
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

    /// Runs one call's method against the writer's state.
    fn execute(&mut self, op: Op, undo: &mut Undo) -> Result<Effects, CoreError> {
        let mut cx = WriteCtx {
            conn: &self.conn,
            shared: &self.shared,
            caches: &mut self.caches,
            undo,
            from: &op.from,
            pinned: &self.waiters_by_task,
            resume: op.resume,
        };
        op.call.run_on_writer(&mut cx)
    }

    /// Restores the writer's memory after a failed call or commit. The
    /// tasks the call or batch changed are dropped from both caches: the
    /// database holds them as they were (a refused call wrote nothing; a
    /// failed batch was rolled back), and they are reloaded when next used.
    fn restore(&mut self, undo: Undo) {
        if !undo.tasks.is_empty() {
            let mut shared = self.shared.tasks.write();
            for id in &undo.tasks {
                self.caches.tasks.remove(id);
                shared.remove(id);
            }
        }
        for (ctx, n) in undo.open_counts {
            if n == 0 {
                self.caches.open_counts.remove(&ctx);
            } else {
                self.caches.open_counts.insert(ctx, n);
            }
        }
        for (agent, n) in undo.sends {
            agent.sends.store(n, std::sync::atomic::Ordering::Relaxed);
        }
        if let Some(seq) = undo.next_seq {
            self.caches.next_seq = seq;
        }
        for (party, mid, before) in undo.creations.iter().rev() {
            self.caches.creations.unrecord(party, mid, *before);
        }
        for agent in &undo.leaving {
            agent.set_leaving(false);
        }
        let mut reg = self.shared.registry.write();
        for agent in undo.registered {
            reg.remove(&agent);
        }
        // After the registry is as it will stay: an ended lease whose
        // holder's connection closed meanwhile does not come back.
        self.caches.leases.undo(undo.leases, |l| {
            reg.live_party(&l.holder)
                .is_some_and(|a| a.conn == l.conn && !a.is_leaving())
        });
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
            self.caches.creations.forget(&agent.party());
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

    /// Makes the batch's committed task records visible to readers. A
    /// record the writer dropped during the batch (its cache was over its
    /// bounds) is dropped from theirs too: readers then load it from SQLite.
    fn publish(&self, undo: &Undo) {
        if undo.tasks.is_empty() {
            return;
        }
        let mut shared = self.shared.tasks.write();
        for id in &undo.tasks {
            match self.caches.tasks.peek(id) {
                Some(rec) => shared.insert(id.clone(), rec.clone()),
                None => shared.remove(id),
            };
        }
    }

    /// Brings the writer's cache back within its bounds (`context::evict`).
    fn evict(&mut self) {
        context::evict(&mut self.caches, &self.shared, &self.waiters_by_task);
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
            self.caches.creations.forget(&agent.party());
            if let crate::delivery::Endpoint::Pull(q) = &agent.endpoint {
                q.close(to_rpc(CoreError::UnknownToken));
            }
        }
    }

    /// The writer's current record of a task, loading it if needed (for
    /// the blocking sends' answers, after the commit).
    fn task(&mut self, id: &str) -> Result<Arc<TaskRecord>, CoreError> {
        context::task(
            &self.conn,
            &self.shared,
            &mut self.caches,
            &self.waiters_by_task,
            id,
        )
    }
}
