//! The gateway's own durable state: one SQLite file (`--state PATH`,
//! default `<broker socket>.gateway.db`), so that a restart of the gateway,
//! clean or killed, changes nothing a client can observe.
//!
//! What it holds, and why the broker alone cannot answer it:
//! - `tasks`: every A2A task the gateway created, with the identity,
//!   exposed agent and A2A context it belongs to (the broker knows the
//!   task's requester registration, not which HTTP identity asked), and
//!   the task's last known state, status time and version, which
//!   `ListTasks` filters, orders and pages on without visiting every
//!   context of the caller.
//! - `push_configs` and `push_sent`: the v1.0 push configs of each task
//!   (several per task, which the broker's one-config-per-task cannot
//!   hold) and the version of the last event queued for delivery, so a
//!   webhook registered before a restart hears what happens after it.
//! - `remote_tasks` / `remote_forwards` / `remote_contexts`: for `remote
//!   add`, the remote task id of each broker task (recorded before its
//!   result is awaited), which broker messages were forwarded (and under
//!   which remote `messageId`), and the remote context of each local
//!   conversation: a restarted bridge resumes, it never sends again.
//!
//! The file, its `-wal` and its `-shm` are owner-only (0600): created so,
//! and tightened at open if found looser ([`crate::state_file`]).
//!
//! Writes that a client's next call depends on (a task created, a push
//! config stored) are committed before the call is answered. Updates of a
//! task's state as events arrive come from the broker client's reader
//! thread, which must never block, so they go through a queue to one
//! writer thread that commits them in batches. WAL with `synchronous =
//! NORMAL`: a commit survives a killed process (not a power loss, which
//! the broker's own database guards against for the tasks themselves).
//!
//! Group commit: a new task's row goes through the same queue,
//! and its `SendMessage` waits for the commit that holds it. The rule: a
//! task's row is committed before the call that created it is answered,
//! never after; concurrent sends share one transaction (with the state
//! updates queued beside them) instead of one commit each under a shared
//! lock. Reads use a connection of their own (WAL lets them run beside
//! the writer), so a `GetTask` never waits for a commit in progress.
//!
//! Commit in place when alone: a new task's row whose send is
//! the only one under way in the gateway, and finds no commit under way
//! and none waited for in the queue, is committed right there, on the
//! caller's thread, instead of being handed to the writer thread and
//! handed back: two thread wake-ups off a lone `SendMessage`'s reply path.
//! The rule above is unchanged (the row is committed before the answer);
//! sends that overlap queue and share the writer's commits as before (one
//! log write for the group, and no runtime thread held by a commit). WAL checkpoints (SQLite's automatic one
//! runs inside whichever commit fills the log, and fsyncs) are the writer
//! thread's alone: the log's size is watched after every commit
//! ([`WAL_PAGES`]), and once it passes [`limits::STATE_CHECKPOINT_PAGES`]
//! the writer checkpoints, so no caller's commit pays for one.
//!
//! Open tasks counted in memory: every new task checks its
//! identity's bound of open tasks. That count was a query on the read
//! connection per `SendMessage` (a read transaction: two lock syscalls,
//! and the pages a commit changed read again); it is now kept beside the
//! write connection, moved by the very statements that change a task's
//! state (its row written, a newer state applied), and counted again from
//! the file at open and after a commit that failed. It is what the query
//! would answer, plus the rows of a commit under way (a task about to be
//! answered counts against its identity already).

use crate::limits;
use a2a_proto::types::State;
use parking_lot::Mutex;
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;

/// The remote `messageId` a broker message's forward was recorded under
/// (the writer reads it before recording one; a resumed task reads it).
const FORWARD_RECORD: &str =
    "SELECT remote_message_id FROM remote_forwards WHERE peer = ?1 AND task_id = ?2 AND message_id = ?3";

/// The schema, applied at open (idempotent).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    identity TEXT NOT NULL,
    agent TEXT NOT NULL,
    context TEXT NOT NULL,
    state TEXT NOT NULL,
    ts_ms INTEGER NOT NULL,
    version INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_caller ON tasks (identity, agent, ts_ms DESC, id DESC);
CREATE INDEX IF NOT EXISTS tasks_by_context ON tasks (identity, agent, context, ts_ms DESC, id DESC);
-- Open tasks only (a partial index: the bounds' counts cost the open
-- tasks, not every task ever made).
CREATE INDEX IF NOT EXISTS tasks_open ON tasks (identity, context)
    WHERE state NOT IN ('completed', 'canceled', 'failed', 'rejected');
CREATE TABLE IF NOT EXISTS push_configs (
    task_id TEXT NOT NULL,
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    identity TEXT NOT NULL,
    config TEXT NOT NULL,
    PRIMARY KEY (task_id, id)
);
CREATE TABLE IF NOT EXISTS push_sent (
    task_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS remote_tasks (
    peer TEXT NOT NULL,
    task_id TEXT NOT NULL,
    remote_task TEXT,
    remote_context TEXT,
    PRIMARY KEY (peer, task_id)
);
CREATE TABLE IF NOT EXISTS remote_forwards (
    peer TEXT NOT NULL,
    task_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    remote_message_id TEXT NOT NULL,
    PRIMARY KEY (peer, task_id, message_id)
);
CREATE TABLE IF NOT EXISTS remote_contexts (
    peer TEXT NOT NULL,
    context TEXT NOT NULL,
    remote_context TEXT NOT NULL,
    PRIMARY KEY (peer, context)
);
";

/// Why the state file could not be used.
#[derive(Debug, thiserror::Error)]
#[error("gateway state {path}: {source}")]
pub struct StoreError {
    pub path: String,
    #[source]
    pub source: rusqlite::Error,
}

/// One task as the gateway records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRow {
    pub id: String,
    pub identity: String,
    pub agent: String,
    /// The A2A (v1.0) context id.
    pub context: String,
    pub state: State,
    pub version: u64,
}

/// What a `ListTasks` page asks of the store.
#[derive(Debug, Clone, Default)]
pub struct ListFilter<'a> {
    pub identity: &'a str,
    pub agent: &'a str,
    pub context: Option<&'a str>,
    pub state: Option<State>,
    /// Status time strictly after this (ms since the epoch).
    pub after_ms: Option<i64>,
    pub limit: usize,
    pub offset: usize,
}

/// An update the writer thread commits.
enum Write {
    Task {
        id: String,
        state: State,
        ts_ms: i64,
        version: u64,
    },
    PushSent {
        task_id: String,
        version: u64,
    },
    /// A task the gateway created: answered once its row is committed.
    Insert {
        row: TaskRow,
        ts_ms: i64,
        done: tokio::sync::oneshot::Sender<Result<(), String>>,
    },
    /// Answered once the writes queued before it are committed.
    Flush(mpsc::Sender<()>),
    /// The log has grown past its bound: the writer checkpoints it.
    Checkpoint,
}

/// Open tasks per identity (see the module doc).
type OpenCounts = Mutex<HashMap<String, usize>>;

/// A gateway state file, open (cheap to clone): what `remote add`'s
/// bridges record remote task ids in ([`crate::OutboundOptions::store`]),
/// and what a served gateway writes ([`crate::Running::state_file`]).
/// Opaque: its tables are the gateway's own.
#[derive(Clone)]
pub struct StateFile(pub(crate) Store);

impl StateFile {
    /// Opens (or creates, owner-only) the state file at `path`.
    pub fn open(path: &Path) -> Result<StateFile, StoreError> {
        Store::open(path).map(StateFile)
    }
}

impl std::fmt::Debug for StateFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateFile")
    }
}

/// The state file (cheap to clone).
#[derive(Clone)]
pub struct Store {
    /// The write connection (the writer thread's, and the few writes made
    /// in place), with the updates waiting for their rows.
    conn: Arc<Mutex<Shared>>,
    /// Open tasks per identity, as written through `conn`.
    open: Arc<OpenCounts>,
    /// The read connection: reads never wait behind a commit.
    read: Arc<Mutex<Connection>>,
    writes: Arc<Writes>,
    /// The directory of an in-memory store's file (removed with the last
    /// clone).
    _dir: Option<Arc<tempfile::TempDir>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store")
    }
}

/// The connection, and the updates that came before their task's row.
struct Shared {
    conn: Connection,
    /// A task's events can arrive (on the reader thread) before the call
    /// that created it has returned and its row is written: the latest
    /// such update per task waits here for the row (bounded).
    early: HashMap<String, (State, i64, u64)>,
    /// The store's open-task counts, moved as rows are written.
    open: Arc<OpenCounts>,
}

/// Does the open-task bound count a task in a state of this wire name
/// (not terminal: the SQL's `NOT IN` lists of this file)?
fn is_open(state: &str) -> bool {
    !state_of(state).is_terminal()
}

impl Shared {
    /// A task of `identity` went from counted open (`was`) or not to
    /// counted open (`now`) or not.
    fn moved(&self, identity: &str, was: bool, now: bool) {
        if was == now {
            return;
        }
        let mut open = self.open.lock();
        if now {
            *open.entry(identity.to_owned()).or_insert(0) += 1;
        } else if let Some(n) = open.get_mut(identity) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(identity);
            }
        }
    }

    /// Counts the open tasks again from the file (at open, and after a
    /// commit that failed and was rolled back).
    fn recount(&self) -> rusqlite::Result<()> {
        let mut stmt = self.conn.prepare(
            "SELECT identity, COUNT(*) FROM tasks
             WHERE state NOT IN ('completed', 'canceled', 'failed', 'rejected') GROUP BY identity",
        )?;
        let counts = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        *self.open.lock() = counts
            .into_iter()
            .map(|(id, n)| (id, usize::try_from(n).unwrap_or(0)))
            .collect();
        Ok(())
    }
}

impl std::ops::Deref for Shared {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.conn
    }
}

/// Updates held for rows not yet written, at most.
const MAX_EARLY: usize = 4096;

thread_local! {
    /// The pages in the state file's log after the last commit made on
    /// this thread (set by the write connection's WAL hook, which SQLite
    /// calls on the committing thread at each commit).
    static WAL_PAGES: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// The write connection's WAL hook: records the log's size (and, by being
/// installed, replaces SQLite's automatic checkpoint: see the module doc).
fn note_wal_pages(_wal: &rusqlite::hooks::Wal, pages: std::ffi::c_int) -> rusqlite::Result<()> {
    WAL_PAGES.with(|p| p.set(pages));
    Ok(())
}

/// Has a commit on this thread since the last call left the log past its
/// bound? (Reads and clears the mark.)
fn log_full() -> bool {
    WAL_PAGES.with(|p| p.replace(0)) >= limits::STATE_CHECKPOINT_PAGES
}

/// The write connection, held for writes made in place: when it is let go
/// after a commit that left the log past its bound, the writer thread is
/// asked to checkpoint.
struct WriteGuard<'a> {
    conn: parking_lot::MutexGuard<'a, Shared>,
    writes: &'a Writes,
}

impl std::ops::Deref for WriteGuard<'_> {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.conn
    }
}

impl std::ops::DerefMut for WriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut Shared {
        &mut self.conn
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        if log_full() {
            // At once: the log grows with every commit made meanwhile.
            self.writes.push(Write::Checkpoint, true);
        }
    }
}

/// Milliseconds since the epoch of an RFC 3339 time (0 if unreadable).
pub fn ts_ms(ts: &str) -> i64 {
    ts.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .unwrap_or(0)
}

fn state_of(s: &str) -> State {
    State::parse(s).unwrap_or(State::Submitted)
}

impl Store {
    /// Opens (creating) the state file at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Self::init(path, None)
    }

    /// A store of the process's lifetime (tests, and `serve-tck`, whose
    /// broker is temporary too): a file in a temporary directory, so that
    /// reads and writes have a connection each as in [`Store::open`].
    pub fn in_memory() -> Result<Store, StoreError> {
        let dir = tempfile::tempdir().map_err(|e| StoreError {
            path: "a temporary directory".into(),
            source: rusqlite::Error::ToSqlConversionFailure(Box::new(e)),
        })?;
        let path = dir.path().join("gateway.db");
        Self::init(&path, Some(Arc::new(dir)))
    }

    fn init(path: &Path, dir: Option<Arc<tempfile::TempDir>>) -> Result<Store, StoreError> {
        let err = |source| StoreError {
            path: path.display().to_string(),
            source,
        };
        let io = |e: std::io::Error| err(rusqlite::Error::ToSqlConversionFailure(Box::new(e)));
        // Owner-only before SQLite writes a byte (see `state_file`).
        for note in crate::state_file::make_private(path).map_err(io)? {
            tracing::warn!("{note}");
        }
        let conn = Connection::open(path).map_err(err)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 10000;",
        )
        .map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        // The log and index SQLite just made have the file's mode; a path
        // that is a symlink SQLite followed to a file made just now is
        // made owner-only here.
        for note in crate::state_file::tighten(&crate::state_file::family(path)).map_err(io)? {
            tracing::warn!("{note}");
        }
        conn.wal_hook(Some(note_wal_pages));
        let read = Connection::open(path).map_err(err)?;
        read.execute_batch("PRAGMA busy_timeout = 10000;")
            .map_err(err)?;
        let open = Arc::new(OpenCounts::default());
        let shared = Shared {
            conn,
            early: HashMap::new(),
            open: Arc::clone(&open),
        };
        shared.recount().map_err(err)?;
        let conn = Arc::new(Mutex::new(shared));
        let queue = Arc::new(Queue::default());
        let (writer, rx) = (Arc::clone(&conn), Arc::clone(&queue));
        std::thread::Builder::new()
            .name("a2a-gateway-store".into())
            .spawn(move || write_loop(&writer, &rx))
            .map_err(|e| err(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
        Ok(Store {
            conn,
            open,
            read: Arc::new(Mutex::new(read)),
            writes: Arc::new(Writes(queue)),
            _dir: dir,
        })
    }

    /// Records a task the gateway just created: returns once the row is
    /// committed (in the writer thread's next transaction, shared with
    /// whatever else has queued up: see the module's group-commit rule).
    ///
    /// `alone`: the caller knows of no other send under way (the gateway
    /// counts them). Only then may the row be committed in place; sends
    /// that overlap share the writer's commits (fewer log writes).
    pub async fn insert_task(&self, row: &TaskRow, ts: &str, alone: bool) -> Result<(), String> {
        if alone {
            if let Some(done) = self.insert_in_place(row, ts_ms(ts)) {
                return done;
            }
        }
        let (done, rx) = tokio::sync::oneshot::channel();
        let queued = self.writes.push(
            Write::Insert {
                row: row.clone(),
                ts_ms: ts_ms(ts),
                done,
            },
            true,
        );
        if !queued {
            return Err("the state writer has stopped".to_owned());
        }
        rx.await
            .unwrap_or_else(|_| Err("the state writer has stopped".into()))
    }

    /// Commits a new task's row on this thread, if nothing else is being
    /// committed or waited for (see the module doc); `None`: it is not
    /// alone, and queues for the writer's next group instead.
    fn insert_in_place(&self, row: &TaskRow, ts_ms: i64) -> Option<Result<(), String>> {
        if self.writes.0.state.lock().urgent {
            return None;
        }
        let mut conn = self.try_write()?;
        self.writes
            .0
            .in_place
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(insert(&mut conn, row, ts_ms).map_err(|e| e.to_string()))
    }

    /// The write connection, for a write made in place.
    fn write(&self) -> WriteGuard<'_> {
        WriteGuard {
            conn: self.conn.lock(),
            writes: &self.writes,
        }
    }

    /// The write connection if no one holds it.
    fn try_write(&self) -> Option<WriteGuard<'_>> {
        Some(WriteGuard {
            conn: self.conn.try_lock()?,
            writes: &self.writes,
        })
    }

    /// New tasks' rows committed so far on their caller's thread (alone)
    /// and by the writer thread (queued, in groups).
    #[cfg(test)]
    pub fn insert_counts(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.writes.0.in_place.load(Relaxed),
            self.writes.0.queued_inserts.load(Relaxed),
        )
    }

    /// State updates the writer kept in memory for a row its same batch
    /// wrote after them (no statement of their own).
    #[cfg(test)]
    pub fn held_for_insert(&self) -> u64 {
        self.writes
            .0
            .held_for_insert
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The task `id`, if the gateway created it.
    pub fn task(&self, id: &str) -> Option<TaskRow> {
        let conn = self.read.lock();
        conn.prepare_cached(
            "SELECT id, identity, agent, context, state, version FROM tasks WHERE id = ?1",
        )
        .and_then(|mut s| s.query_row([id], row_of).optional())
        .ok()
        .flatten()
    }

    /// Queues a task's new state (from an event or a call's result): never
    /// blocks; an older version never overwrites a newer one.
    pub fn note_task(&self, id: &str, state: State, ts: &str, version: u64) {
        self.writes.push(
            Write::Task {
                id: id.to_owned(),
                state,
                ts_ms: ts_ms(ts),
                version,
            },
            false,
        );
    }

    /// Commits a task's new state at once (the answer of `ListTasks` reads
    /// what it just fetched).
    pub fn update_task(&self, id: &str, state: State, ts: &str, version: u64) {
        let _ = apply(
            &mut self.write(),
            &Write::Task {
                id: id.to_owned(),
                state,
                ts_ms: ts_ms(ts),
                version,
            },
        );
    }

    /// One page of a caller's tasks, newest status first, and the count of
    /// all that match.
    pub fn list(&self, f: &ListFilter<'_>) -> Result<(Vec<TaskRow>, usize), rusqlite::Error> {
        let mut sql = String::from(" FROM tasks WHERE identity = ?1 AND agent = ?2");
        let mut args: Vec<rusqlite::types::Value> =
            vec![f.identity.to_owned().into(), f.agent.to_owned().into()];
        if let Some(c) = f.context {
            args.push(c.to_owned().into());
            sql.push_str(&format!(" AND context = ?{}", args.len()));
        }
        if let Some(s) = f.state {
            args.push(s.as_str().to_owned().into());
            sql.push_str(&format!(" AND state = ?{}", args.len()));
        }
        if let Some(a) = f.after_ms {
            args.push(a.into());
            sql.push_str(&format!(" AND ts_ms > ?{}", args.len()));
        }
        let conn = self.read.lock();
        let total: i64 = conn.query_row(
            &format!("SELECT COUNT(*){sql}"),
            rusqlite::params_from_iter(args.iter()),
            |r| r.get(0),
        )?;
        let mut page_args = args.clone();
        page_args.push((f.limit as i64).into());
        page_args.push((f.offset as i64).into());
        let n = page_args.len();
        let mut stmt = conn.prepare(&format!(
            "SELECT id, identity, agent, context, state, version{sql} ORDER BY ts_ms DESC, id DESC LIMIT ?{} OFFSET ?{n}",
            n - 1
        ))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(page_args.iter()), row_of)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok((rows, usize::try_from(total).unwrap_or(0)))
    }

    /// Tasks not yet in a terminal state (what a restarted gateway resumes).
    pub fn open_tasks(&self) -> Vec<TaskRow> {
        let conn = self.read.lock();
        let Ok(mut stmt) = conn.prepare(
            "SELECT id, identity, agent, context, state, version FROM tasks
             WHERE state NOT IN ('completed', 'canceled', 'failed', 'rejected')",
        ) else {
            return Vec::new();
        };
        stmt.query_map([], row_of)
            .map(|rows| rows.filter_map(Result::ok).collect())
            .unwrap_or_default()
    }

    /// Open tasks of one identity (its bound), from memory (see the
    /// module doc).
    pub fn open_task_count(&self, identity: &str) -> usize {
        self.open.lock().get(identity).copied().unwrap_or(0)
    }

    /// Open tasks in one A2A context of an identity.
    pub fn context_has_open_tasks(&self, identity: &str, context: &str) -> bool {
        let conn = self.read.lock();
        conn.prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM tasks WHERE identity = ?1 AND context = ?2
             AND state NOT IN ('completed', 'canceled', 'failed', 'rejected'))",
        )
        .and_then(|mut s| s.query_row([identity, context], |r| r.get::<_, bool>(0)))
        .unwrap_or(true)
    }

    // ---- push configs ----

    /// Stores (or replaces) a push config of a task (committed on return).
    pub fn put_push(
        &self,
        task_id: &str,
        id: &str,
        identity: &str,
        config_json: &str,
    ) -> Result<(), rusqlite::Error> {
        self.write().execute(
            "INSERT INTO push_configs (task_id, id, seq, identity, config)
             VALUES (?1, ?2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM push_configs), ?3, ?4)
             ON CONFLICT (task_id, id) DO UPDATE SET identity = excluded.identity, config = excluded.config",
            params![task_id, id, identity, config_json],
        )?;
        Ok(())
    }

    /// Deletes a push config (absent is fine).
    pub fn delete_push(&self, task_id: &str, id: &str) {
        let _ = self.write().execute(
            "DELETE FROM push_configs WHERE task_id = ?1 AND id = ?2",
            [task_id, id],
        );
    }

    /// Every push config, in creation order: (task, identity, config JSON).
    pub fn all_push(&self) -> Vec<(String, String, String)> {
        let conn = self.read.lock();
        let Ok(mut stmt) =
            conn.prepare("SELECT task_id, identity, config FROM push_configs ORDER BY seq")
        else {
            return Vec::new();
        };
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map(|rows| rows.filter_map(Result::ok).collect())
            .unwrap_or_default()
    }

    /// The version of the last event queued for delivery, per task.
    pub fn all_push_sent(&self) -> Vec<(String, u64)> {
        let conn = self.read.lock();
        let Ok(mut stmt) = conn.prepare("SELECT task_id, version FROM push_sent") else {
            return Vec::new();
        };
        stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))
            .map(|rows| rows.filter_map(Result::ok).collect())
            .unwrap_or_default()
    }

    /// Queues the version of the last event queued for a task's webhooks.
    pub fn note_push_sent(&self, task_id: &str, version: u64) {
        self.writes.push(
            Write::PushSent {
                task_id: task_id.to_owned(),
                version,
            },
            false,
        );
    }

    // ---- remote add ----

    /// Records the remote task (and context) of a broker task.
    pub fn put_remote_task(
        &self,
        peer: &str,
        task_id: &str,
        remote_task: &str,
        remote_context: Option<&str>,
    ) -> Result<(), rusqlite::Error> {
        // Prepared once (this and the forward's record are on every
        // forwarded task's path).
        self.write()
            .prepare_cached(
                "INSERT INTO remote_tasks (peer, task_id, remote_task, remote_context) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (peer, task_id) DO UPDATE SET remote_task = excluded.remote_task,
             remote_context = COALESCE(excluded.remote_context, remote_context)",
            )?
            .execute(params![peer, task_id, remote_task, remote_context])?;
        Ok(())
    }

    /// The remote task and context of a broker task.
    pub fn remote_task(&self, peer: &str, task_id: &str) -> Option<(String, Option<String>)> {
        self.read
            .lock()
            .query_row(
                "SELECT remote_task, remote_context FROM remote_tasks WHERE peer = ?1 AND task_id = ?2 AND remote_task IS NOT NULL",
                [peer, task_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .ok()
            .flatten()
    }

    /// Every recorded remote task of a bridge: (broker task, remote task).
    pub fn remote_tasks_of(&self, peer: &str) -> Vec<(String, String)> {
        let conn = self.read.lock();
        let Ok(mut stmt) = conn.prepare(
            "SELECT task_id, remote_task FROM remote_tasks WHERE peer = ?1 AND remote_task IS NOT NULL",
        ) else {
            return Vec::new();
        };
        stmt.query_map([peer], |r| Ok((r.get(0)?, r.get(1)?)))
            .map(|rows| rows.filter_map(Result::ok).collect())
            .unwrap_or_default()
    }

    /// The remote `messageId` a broker message is (or was) forwarded
    /// under: recorded before the send, so that a send interrupted by a
    /// crash is retried under the same id (the remote may recognise it)
    /// and a message already answered is never sent again.
    pub fn forward_id(
        &self,
        peer: &str,
        task_id: &str,
        message_id: &str,
    ) -> Result<(String, bool), rusqlite::Error> {
        let conn = self.write();
        let known: Option<String> = conn
            .prepare_cached(FORWARD_RECORD)?
            .query_row([peer, task_id, message_id], |r| r.get(0))
            .optional()?;
        if let Some(k) = known {
            return Ok((k, true));
        }
        let fresh = uuid::Uuid::new_v4().to_string();
        conn.prepare_cached(
            "INSERT INTO remote_forwards (peer, task_id, message_id, remote_message_id) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![peer, task_id, message_id, fresh])?;
        Ok((fresh, false))
    }

    /// The remote `messageId` a broker message was recorded under, if its
    /// forward was recorded (the record is written before the message is
    /// sent, so a record alone does not say the remote has it).
    pub fn forward_record(&self, peer: &str, task_id: &str, message_id: &str) -> Option<String> {
        self.read
            .lock()
            .query_row(FORWARD_RECORD, [peer, task_id, message_id], |r| r.get(0))
            .optional()
            .ok()
            .flatten()
    }

    /// Forgets what was recorded of a broker task that ended.
    pub fn forget_remote_task(&self, peer: &str, task_id: &str) {
        let conn = self.write();
        // One commit for both (each delete committed on its own before: a
        // second log write at the end of every forwarded task).
        let forgot = conn.unchecked_transaction().and_then(|tx| {
            tx.prepare_cached("DELETE FROM remote_tasks WHERE peer = ?1 AND task_id = ?2")?
                .execute([peer, task_id])?;
            tx.prepare_cached("DELETE FROM remote_forwards WHERE peer = ?1 AND task_id = ?2")?
                .execute([peer, task_id])?;
            tx.commit()
        });
        if let Err(e) = forgot {
            tracing::warn!(task = %task_id, error = %e, "forgetting a remote task failed");
        }
    }

    /// Records the remote context of a local conversation.
    pub fn put_remote_context(&self, peer: &str, context: &str, remote_context: &str) {
        let _ = self.write().execute(
            "INSERT OR REPLACE INTO remote_contexts (peer, context, remote_context) VALUES (?1, ?2, ?3)",
            [peer, context, remote_context],
        );
    }

    /// The remote context of a local conversation.
    pub fn remote_context(&self, peer: &str, context: &str) -> Option<String> {
        self.read
            .lock()
            .query_row(
                "SELECT remote_context FROM remote_contexts WHERE peer = ?1 AND context = ?2",
                [peer, context],
                |r| r.get(0),
            )
            .optional()
            .ok()
            .flatten()
    }

    /// Waits (up to 5 s) until every write queued before it is committed
    /// (tests, and a stopping gateway).
    pub fn flush(&self) {
        let (tx, rx) = mpsc::channel();
        if self.writes.push(Write::Flush(tx), true) {
            let _ = rx.recv_timeout(std::time::Duration::from_secs(5));
        }
    }
}

fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok(TaskRow {
        id: r.get(0)?,
        identity: r.get(1)?,
        agent: r.get(2)?,
        context: r.get(3)?,
        state: state_of(&r.get::<_, String>(4)?),
        version: r.get::<_, i64>(5)? as u64,
    })
}

fn apply(shared: &mut Shared, w: &Write) -> rusqlite::Result<()> {
    let conn = &shared.conn;
    match w {
        Write::Task {
            id,
            state,
            ts_ms,
            version,
        } => {
            // Only a newer version writes (the same event can be noted
            // twice: from the broker and from the call's own result).
            // Statements are prepared once and cached: parsing SQL was a
            // large part of the writer's time per call in a profile).
            // The row's state before is read first: it moves the count of
            // open tasks (and a task's events before its row, the common
            // case of a blocking send, cost this one lookup).
            let prior: Option<(String, String, i64)> = conn
                .prepare_cached("SELECT identity, state, version FROM tasks WHERE id = ?1")?
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?;
            if let Some((identity, was, v)) = prior {
                if v < *version as i64 {
                    conn.prepare_cached(
                        "UPDATE tasks SET state = ?2, ts_ms = ?3, version = ?4 WHERE id = ?1",
                    )?
                    .execute(params![
                        id,
                        state.as_str(),
                        ts_ms,
                        *version as i64
                    ])?;
                    shared.moved(&identity, is_open(&was), !state.is_terminal());
                }
            } else {
                hold_early(shared, id, *state, *ts_ms, *version);
            }
        }
        Write::PushSent { task_id, version } => {
            conn.prepare_cached(
                "INSERT INTO push_sent (task_id, version) VALUES (?1, ?2)
                 ON CONFLICT (task_id) DO UPDATE SET version = MAX(version, excluded.version)",
            )?
            .execute(params![task_id, *version as i64])?;
        }
        Write::Insert { row, ts_ms, .. } => insert(shared, row, *ts_ms)?,
        Write::Flush(_) | Write::Checkpoint => {}
    }
    Ok(())
}

/// Writes a new task's row, with the newest update that came before it.
fn insert(shared: &mut Shared, row: &TaskRow, ts_ms: i64) -> rusqlite::Result<()> {
    let early = shared.early.remove(&row.id);
    let (state, ts_ms, version) = match early {
        Some((s, t, v)) if v > row.version => (s, t, v),
        _ => (row.state, ts_ms, row.version),
    };
    let values = params![
        row.id,
        row.identity,
        row.agent,
        row.context,
        state.as_str(),
        ts_ms,
        version as i64
    ];
    let fresh = shared
        .conn
        .prepare_cached(
            "INSERT INTO tasks (id, identity, agent, context, state, ts_ms, version)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(values);
    match fresh {
        Ok(_) => {}
        // A row already there (never met: task ids are the broker's,
        // unique) is replaced, its open task out of its identity's count.
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            let (identity, was): (String, String) = shared
                .conn
                .prepare_cached("SELECT identity, state FROM tasks WHERE id = ?1")?
                .query_row([&row.id], |r| Ok((r.get(0)?, r.get(1)?)))?;
            shared
                .conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO tasks (id, identity, agent, context, state, ts_ms, version)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?
                .execute(values)?;
            // The replaced row leaves its identity's count; the new one
            // is counted below.
            shared.moved(&identity, is_open(&was), false);
        }
        Err(e) => return Err(e),
    }
    shared.moved(&row.identity, false, !state.is_terminal());
    Ok(())
}

/// The writer thread's queue. Writes someone waits for (a new task's row,
/// a flush) wake the writer at once; state updates (which nobody waits
/// for) wake it only when the queue was empty, and then it gathers for up
/// to [`limits::STATE_UPDATE_DELAY`] before committing: under load they
/// ride along with the next waited-for commit, so an event costs no
/// wake-up and no commit of its own.
#[derive(Default)]
struct Queue {
    state: Mutex<Queued>,
    wake: parking_lot::Condvar,
    /// New tasks' rows committed in place, and by the writer.
    in_place: std::sync::atomic::AtomicU64,
    queued_inserts: std::sync::atomic::AtomicU64,
    /// State updates held for a row written later in their own batch.
    held_for_insert: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Queued {
    items: Vec<Write>,
    /// A waited-for write is queued.
    urgent: bool,
    /// Every `Store` is gone: commit what is left and stop.
    closed: bool,
}

/// The stores' end of the queue; closes it when the last clone goes.
struct Writes(Arc<Queue>);

impl Writes {
    /// Queues `w` (false if the writer has stopped).
    fn push(&self, w: Write, urgent: bool) -> bool {
        let mut q = self.0.state.lock();
        if q.closed {
            return false;
        }
        let was_empty = q.items.is_empty();
        q.items.push(w);
        let wake = (urgent && !q.urgent) || was_empty;
        q.urgent |= urgent;
        drop(q);
        if wake {
            self.0.wake.notify_one();
        }
        true
    }
}

impl Drop for Writes {
    fn drop(&mut self) {
        self.0.state.lock().closed = true;
        self.0.wake.notify_one();
    }
}

/// Runs a statement without parameters or rows (`BEGIN`, `COMMIT`),
/// prepared once: `execute_batch` parsed both again for every commit.
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// Where in a batch each new task's row is written (by task id).
fn inserts_by_position(batch: &[Write]) -> HashMap<&str, usize> {
    batch
        .iter()
        .enumerate()
        .filter_map(|(i, w)| match w {
            Write::Insert { row, .. } => Some((row.id.as_str(), i)),
            _ => None,
        })
        .collect()
}

/// A state update (the `i`th write of a batch) of a task whose row this
/// same batch writes after it: a blocking send's events come before its
/// answer, so under load they share the batch of the row. The update
/// waits with the row's other early updates (the newest wins when the
/// row is written) instead of a lookup that could only miss: the same
/// outcome as [`apply`], without its statement (two per call).
fn hold_for_insert(shared: &mut Shared, later: &HashMap<&str, usize>, i: usize, w: &Write) -> bool {
    let Write::Task {
        id,
        state,
        ts_ms,
        version,
    } = w
    else {
        return false;
    };
    if later.get(id.as_str()).is_none_or(|&j| j <= i) {
        return false;
    }
    hold_early(shared, id, *state, *ts_ms, *version);
    true
}

/// Keeps the newest update of a task whose row is not written yet.
fn hold_early(shared: &mut Shared, id: &str, state: State, ts_ms: i64, version: u64) {
    if shared.early.len() >= MAX_EARLY {
        shared.early.clear();
    }
    let e = shared
        .early
        .entry(id.to_owned())
        .or_insert((state, ts_ms, 0));
    if version >= e.2 {
        *e = (state, ts_ms, version);
    }
}

/// The writer thread: commits queued writes in batches (one transaction
/// for whatever has queued up), until every store is gone.
fn write_loop(conn: &Mutex<Shared>, queue: &Queue) {
    loop {
        let batch = {
            let mut q = queue.state.lock();
            loop {
                if q.urgent || q.closed {
                    break;
                }
                if q.items.is_empty() {
                    queue.wake.wait(&mut q);
                    continue;
                }
                // Only updates nobody waits for: gather a little longer.
                if queue
                    .wake
                    .wait_for(&mut q, limits::STATE_UPDATE_DELAY)
                    .timed_out()
                {
                    break;
                }
            }
            if q.items.is_empty() && q.closed {
                return;
            }
            q.urgent = false;
            std::mem::take(&mut q.items)
        };
        if !batch.is_empty() {
            commit_batch(conn, queue, batch);
        }
    }
}

/// Commits one batch of the writer's (one transaction), then answers
/// whoever waits for a write of it.
fn commit_batch(conn: &Mutex<Shared>, queue: &Queue, batch: Vec<Write>) {
    {
        let mut c = conn.lock();
        let inserts = batch
            .iter()
            .filter(|w| matches!(w, Write::Insert { .. }))
            .count() as u64;
        queue
            .queued_inserts
            .fetch_add(inserts, std::sync::atomic::Ordering::Relaxed);
        let began = run_cached(&c, "BEGIN").map_err(|e| e.to_string());
        let mut applied = Vec::with_capacity(batch.len());
        let inserted_later = inserts_by_position(&batch);
        for (i, w) in batch.iter().enumerate() {
            let r = if hold_for_insert(&mut c, &inserted_later, i, w) {
                queue
                    .held_for_insert
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            } else {
                apply(&mut c, w).map_err(|e| e.to_string())
            };
            if let Err(e) = &r {
                tracing::warn!(error = %e, "gateway state update failed");
            }
            applied.push(r);
        }
        let committed = match began {
            Ok(()) => run_cached(&c, "COMMIT").map_err(|e| {
                tracing::warn!(error = %e, "gateway state commit failed");
                let _ = c.execute_batch("ROLLBACK");
                // The counts moved with the writes rolled back.
                if let Err(e) = c.recount() {
                    tracing::warn!(error = %e, "gateway state: open tasks not counted again");
                }
                e.to_string()
            }),
            // Without a transaction each write committed on its own.
            Err(_) => Ok(()),
        };
        // The log's checkpoint, here rather than inside a caller's commit
        // (see the module doc): when this commit, or one made in place,
        // filled it.
        let asked = batch.iter().any(|w| matches!(w, Write::Checkpoint));
        if log_full() || asked {
            // (It answers a row: busy, log and checkpointed frames.)
            let done = c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            if let Err(e) = done {
                tracing::warn!(error = %e, "gateway state checkpoint failed");
            }
            // The checkpoint's own commit mark is not a full log.
            log_full();
        }
        drop(c);
        for (w, r) in batch.into_iter().zip(applied) {
            match w {
                Write::Flush(done) => {
                    let _ = done.send(());
                }
                Write::Insert { done, .. } => {
                    let _ = done.send(committed.clone().and(r));
                }
                Write::Task { .. } | Write::PushSent { .. } | Write::Checkpoint => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> TaskRow {
        TaskRow {
            id: id.to_owned(),
            identity: "anonymous".into(),
            agent: "worker".into(),
            context: "ctx-1".into(),
            state: State::Completed,
            version: 3,
        }
    }

    /// A store on a new file (the directory lives as long as the first).
    fn fresh() -> (tempfile::TempDir, std::path::PathBuf, Store) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("state.db");
        let store = Store::open(&path).expect("open");
        (dir, path, store)
    }

    /// Rows as a connection of its own sees them (committed, not merely
    /// written inside a transaction still open).
    fn committed(path: &Path) -> i64 {
        Connection::open(path)
            .expect("open")
            .query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get(0))
            .expect("count")
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_lone_insert_is_committed_in_place_before_it_returns() {
        let (_dir, path, store) = fresh();
        store
            .insert_task(&row("t1"), "2026-12-01T10:00:00Z", true)
            .await
            .expect("insert");
        // Committed on the caller's thread, not handed to the writer.
        assert_eq!(store.insert_counts(), (1, 0));
        assert_eq!(committed(&path), 1);
        assert_eq!(store.task("t1").expect("row").state, State::Completed);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_insert_behind_a_commit_under_way_joins_the_writers_group() {
        let (_dir, path, store) = fresh();
        // A write in progress holds the connection.
        let held = store.write();
        let s2 = store.clone();
        let insert = tokio::spawn(async move {
            s2.insert_task(&row("t2"), "2026-12-01T10:00:00Z", true)
                .await
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!insert.is_finished(), "answered before its commit");
        drop(held);
        insert.await.expect("join").expect("insert");
        assert_eq!(store.insert_counts(), (0, 1));
        assert_eq!(committed(&path), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_insert_beside_other_sends_joins_the_writers_group() {
        let (_dir, path, store) = fresh();
        store
            .insert_task(&row("t3"), "2026-12-01T10:00:00Z", false)
            .await
            .expect("insert");
        assert_eq!(store.insert_counts(), (0, 1));
        assert_eq!(committed(&path), 1);
    }

    fn open_row(id: &str, identity: &str, state: State, version: u64) -> TaskRow {
        TaskRow {
            identity: identity.to_owned(),
            state,
            version,
            ..row(id)
        }
    }

    /// The open tasks per identity as the file holds them (what
    /// `open_task_count` asked SQLite for on every send before).
    fn open_in_file(path: &Path, identity: &str) -> usize {
        Connection::open(path)
            .expect("open")
            .query_row(
                "SELECT COUNT(*) FROM tasks WHERE identity = ?1
                 AND state NOT IN ('completed', 'canceled', 'failed', 'rejected')",
                [identity],
                |r| r.get::<_, i64>(0),
            )
            .expect("count") as usize
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_open_task_count_in_memory_follows_the_file() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("state.db");
        let ts = "2026-12-01T10:00:00Z";
        {
            let store = Store::open(&path).expect("open");
            for (i, who) in ["alice", "alice", "alice", "bob"].iter().enumerate() {
                let r = open_row(&format!("o{i}"), who, State::Working, 1);
                store.insert_task(&r, ts, i % 2 == 0).await.expect("insert");
            }
            // Born terminal: not counted.
            let done = open_row("c1", "alice", State::Completed, 2);
            store.insert_task(&done, ts, true).await.expect("insert");
            assert_eq!(store.open_task_count("alice"), 3);
            assert_eq!(store.open_task_count("bob"), 1);
            // A task ends (through the writer), one goes input-required
            // (still open), an older event is ignored, an event of a task
            // not created here moves nothing.
            store.note_task("o0", State::Completed, ts, 5);
            store.note_task("o1", State::InputRequired, ts, 3);
            store.note_task("o1", State::Failed, ts, 2);
            store.note_task("elsewhere", State::Completed, ts, 9);
            store.update_task("o3", State::Canceled, ts, 4);
            store.flush();
            for who in ["alice", "bob", "carol"] {
                assert_eq!(
                    store.open_task_count(who),
                    open_in_file(&path, who),
                    "{who}"
                );
            }
            assert_eq!(store.open_task_count("alice"), 2);
            assert_eq!(store.open_task_count("bob"), 0);
        }
        // Opened again: counted from the file.
        let store = Store::open(&path).expect("reopen");
        assert_eq!(store.open_task_count("alice"), 2);
        assert_eq!(store.open_task_count("bob"), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_row_written_again_is_replaced_and_counted_once() {
        let (_dir, path, store) = fresh();
        let ts = "2026-12-01T10:00:00Z";
        let r = open_row("dup", "alice", State::Working, 1);
        store.insert_task(&r, ts, true).await.expect("insert");
        store.insert_task(&r, ts, false).await.expect("again");
        assert_eq!(store.open_task_count("alice"), 1);
        let done = open_row("dup", "alice", State::Completed, 2);
        store.insert_task(&done, ts, true).await.expect("replace");
        assert_eq!(store.open_task_count("alice"), 0);
        assert_eq!(open_in_file(&path, "alice"), 0);
        assert_eq!(store.task("dup").expect("row").state, State::Completed);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn events_before_their_row_in_one_batch_cost_no_statement() {
        let (_dir, _, store) = fresh();
        let ts = "2026-12-01T10:00:00Z";
        // One batch as the writer gets it under load: a blocking send's
        // events, then its row (and a row of another task between).
        let task = |id: &str, state, version| Write::Task {
            id: id.to_owned(),
            state,
            ts_ms: ts_ms(ts),
            version,
        };
        let (done, answered) = tokio::sync::oneshot::channel();
        let (other, _) = tokio::sync::oneshot::channel();
        let batch = vec![
            task("t9", State::Working, 2),
            Write::Insert {
                row: open_row("t8", "bob", State::Working, 1),
                ts_ms: ts_ms(ts),
                done: other,
            },
            task("t9", State::Completed, 3),
            Write::Insert {
                row: open_row("t9", "alice", State::Working, 1),
                ts_ms: ts_ms(ts),
                done,
            },
        ];
        commit_batch(&store.conn, &store.writes.0, batch);
        answered.await.expect("answered").expect("committed");
        assert_eq!(store.held_for_insert(), 2);
        // The row holds the newest of them, as when each was looked up.
        let t = store.task("t9").expect("row");
        assert_eq!((t.state, t.version), (State::Completed, 3));
        assert_eq!(store.open_task_count("alice"), 0);
        // A later event of the same task is applied to its row.
        store.note_task("t9", State::Completed, ts, 4);
        store.flush();
        assert_eq!(store.task("t9").expect("row").version, 4);
        assert_eq!(store.held_for_insert(), 2);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_log_is_checkpointed_by_the_writer_and_stays_bounded() {
        let (_dir, path, store) = fresh();
        let main_before = std::fs::metadata(&path).expect("db").len();
        // Each in-place commit appends its pages to the log; without a
        // checkpoint (SQLite's automatic one is replaced by the hook) it
        // would grow by several pages per task for ever.
        for i in 0..3000 {
            store
                .insert_task(&row(&format!("task-{i:05}")), "2026-12-01T10:00:00Z", true)
                .await
                .expect("insert");
        }
        store.flush();
        let (in_place, _) = store.insert_counts();
        assert!(in_place > 2900, "{in_place} of 3000 in place");
        let wal = std::fs::metadata(path.with_extension("db-wal"))
            .expect("wal")
            .len();
        let main_after = std::fs::metadata(&path).expect("db").len();
        // Checkpointed: the rows reached the database file itself, and
        // the log (reused from its start after each checkpoint) stayed
        // near its bound (`STATE_CHECKPOINT_PAGES` of 4 KiB), not the
        // ~12,000 pages of 3,000 commits.
        assert!(
            main_after > main_before + 100_000,
            "{main_before} -> {main_after}"
        );
        let bound = limits::STATE_CHECKPOINT_PAGES as u64 * 4096;
        assert!(wal < bound * 3 / 2, "log of {wal} bytes");
        assert_eq!(committed(&path), 3000);
    }
}
