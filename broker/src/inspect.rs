//! What `a2a-broker tasks list|show --db PATH` shows, read back: a
//! read-only audit of the durable history, for a person checking a
//! fan-out: who asked whom, every transition, when; `leases list` the same
//! for leases: who held which paths, when, and how each ended. Opens the
//! database read-only and writes nothing. This returns the records; the
//! binary's `cli/audit.rs` prints them.

use crate::core::CoreError;
use crate::store::{self, migrate, read, OpenError};
use a2a_proto::types::{Artifact, Message, PushConfig, State};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why the audit view cannot show what was asked (one line each, printed
/// after `a2a-broker: `).
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// No file at the path.
    #[error("database {} does not exist", .0.display())]
    Missing(PathBuf),
    /// The file cannot be opened or read as a SQLite database.
    #[error("database {}: {source}", .db.display())]
    Unreadable {
        db: PathBuf,
        source: rusqlite::Error,
    },
    /// Its schema is newer than this broker's, or not a broker's.
    #[error(transparent)]
    Schema(#[from] OpenError),
    /// A database no broker has migrated yet.
    #[error("database {} holds no broker tables yet (schema {version})", .db.display())]
    NoTables { db: PathBuf, version: i64 },
    /// `tasks show` of an id (or prefix, or tail) the database does not hold.
    #[error("no task {id} in {} (an id, or a prefix or tail of one, of at least {MIN_PREFIX} characters)", .db.display())]
    NoTask { id: String, db: PathBuf },
    /// `tasks show` of a prefix or tail more than one task id starts or
    /// ends with.
    #[error("task id prefix or tail {prefix} is ambiguous: {candidates}")]
    Ambiguous { prefix: String, candidates: String },
    /// `tasks list --state` of a name that is no §7 state.
    #[error("unknown state {given:?}; one of: {}", State::ALL.map(State::as_str).join(", "))]
    BadState { given: String },
    /// A query failed.
    #[error(transparent)]
    Query(#[from] rusqlite::Error),
    /// A task or its log could not be read back.
    #[error(transparent)]
    Read(#[from] CoreError),
}

fn open(db: &Path) -> Result<Connection, InspectError> {
    if !db.exists() {
        return Err(InspectError::Missing(db.to_path_buf()));
    }
    let unreadable = |source| InspectError::Unreadable {
        db: db.to_path_buf(),
        source,
    };
    let conn = store::open_reader(db).map_err(unreadable)?;
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(unreadable)?;
    migrate::check_version(&db.display().to_string(), v)?;
    if v != a2a_proto::SCHEMA_VERSION {
        return Err(InspectError::NoTables {
            db: db.to_path_buf(),
            version: v,
        });
    }
    Ok(conn)
}

/// What `tasks list` selects (the flags of the subcommand).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Only tasks of this requester context.
    pub context: Option<String>,
    /// Only tasks in this §7 state (a wire name, checked before the database is opened).
    pub state: Option<String>,
    /// Only tasks where this agent is the requester or the worker.
    pub agent: Option<String>,
    /// Most tasks on one page.
    pub limit: u32,
    /// Only tasks older than this cursor (a creation `seq`, as printed after
    /// the previous page).
    pub before: Option<i64>,
}

/// The shortest task id prefix or tail `tasks show` accepts: shorter ones would
/// match too much of a big database to be a deliberate choice.
pub const MIN_PREFIX: usize = 4;

/// At most this many candidates are named when a prefix or tail is ambiguous.
const MAX_CANDIDATES: usize = 10;

/// One row of `tasks list`.
#[derive(Debug, Clone)]
pub struct TaskRow {
    pub id: String,
    /// The creation sequence number (the `--before` cursor).
    pub seq: i64,
    pub state: String,
    pub version: i64,
    /// The requester's context.
    pub ctx: String,
    /// The requester's peer id.
    pub req: String,
    /// The worker's context.
    pub wctx: String,
    /// The worker's peer id.
    pub wrk: String,
    pub created: String,
    pub updated: String,
}

/// One page of `tasks list`, newest first.
#[derive(Debug, Clone)]
pub struct TaskPage {
    pub tasks: Vec<TaskRow>,
    /// More tasks match than the page holds: the next page's cursor.
    pub next_before: Option<i64>,
}

/// `tasks list`: newest first, one page of at most `q.limit` tasks, and
/// the cursor of the next page when more match.
pub fn list_tasks(db: &Path, q: &ListQuery) -> Result<TaskPage, InspectError> {
    if let Some(s) = q.state.as_deref() {
        if State::parse(s).is_none() {
            return Err(InspectError::BadState {
                given: s.to_owned(),
            });
        }
    }
    let conn = open(db)?;
    let mut st = conn.prepare(
        "SELECT id, seq, state, version, context_id, requester_peer, worker_ctx, worker_peer,
                created_at, updated_at
             FROM a2a_tasks
             WHERE (?1 IS NULL OR context_id = ?1)
               AND (?2 IS NULL OR state = ?2)
               AND (?3 IS NULL OR requester_peer = ?3 OR worker_peer = ?3)
               AND (?4 IS NULL OR seq < ?4)
             ORDER BY seq DESC LIMIT ?5",
    )?;
    // One more than a page: whether a next page exists, without a count.
    let want = i64::from(q.limit) + 1;
    let rows = st.query_map(params![q.context, q.state, q.agent, q.before, want], |r| {
        Ok(TaskRow {
            id: r.get(0)?,
            seq: r.get(1)?,
            state: r.get(2)?,
            version: r.get(3)?,
            ctx: r.get(4)?,
            req: r.get(5)?,
            wctx: r.get(6)?,
            wrk: r.get(7)?,
            created: r.get(8)?,
            updated: r.get(9)?,
        })
    })?;
    let mut page = rows.collect::<Result<Vec<TaskRow>, _>>()?;
    let more = page.len() > q.limit as usize;
    page.truncate(q.limit as usize);
    let next_before = if more {
        page.last().map(|t| t.seq)
    } else {
        None
    };
    Ok(TaskPage {
        tasks: page,
        next_before,
    })
}

/// The full id of the task `id` names: itself if a task has it, else the
/// one task whose id starts or ends with it (at least [`MIN_PREFIX`]
/// characters). Tails matter: UUIDv7 ids begin with the time, so tasks made
/// within a minute share long prefixes, while their random ends differ.
fn resolve(conn: &Connection, db: &Path, id: &str) -> Result<String, InspectError> {
    let exact: Option<String> = conn
        .query_row("SELECT id FROM a2a_tasks WHERE id = ?1", [id], |r| r.get(0))
        .optional()?;
    if let Some(found) = exact {
        return Ok(found);
    }
    let no_task = || InspectError::NoTask {
        id: id.to_owned(),
        db: db.to_path_buf(),
    };
    if id.chars().count() < MIN_PREFIX {
        return Err(no_task());
    }
    // `substr`, not `LIKE`: a prefix holding `%` or `_` means itself.
    let mut st = conn.prepare(
        "SELECT id FROM a2a_tasks \
         WHERE substr(id, 1, length(?1)) = ?1 OR substr(id, -length(?1)) = ?1 \
         ORDER BY id LIMIT ?2",
    )?;
    let mut found = st
        .query_map(params![id, MAX_CANDIDATES as i64 + 1], |r| {
            r.get::<_, String>(0)
        })?
        .collect::<Result<Vec<String>, _>>()?;
    match found.len() {
        0 => Err(no_task()),
        1 => Ok(found.remove(0)),
        n => {
            let more = n > MAX_CANDIDATES;
            found.truncate(MAX_CANDIDATES);
            Err(InspectError::Ambiguous {
                prefix: id.to_owned(),
                candidates: found.join(", ") + if more { ", …" } else { "" },
            })
        }
    }
}

/// A party of a task, by name.
#[derive(Debug, Clone)]
pub struct PartyName {
    pub peer_id: String,
    pub context_id: String,
}

/// One entry of a task's log, its payload the full event JSON.
#[derive(Debug, Clone)]
pub struct LogLine {
    pub version: u64,
    pub at: String,
    pub actor: String,
    pub kind: String,
    pub payload: String,
}

/// What `tasks show` shows of one task.
#[derive(Debug, Clone)]
pub struct TaskAudit {
    pub id: String,
    pub requester: PartyName,
    pub worker: PartyName,
    pub state: State,
    pub version: u64,
    pub created_at: String,
    pub updated_at: String,
    pub history: Vec<Arc<Message>>,
    /// Each artifact with its appended chunks merged.
    pub artifacts: Vec<Artifact>,
    /// The push configs, with the party that set each.
    pub push_configs: Vec<(PartyName, PushConfig)>,
    /// Every transition, oldest first.
    pub log: Vec<LogLine>,
}

/// `tasks show`: the task `id` names (an id, or a unique prefix or tail
/// of at least [`MIN_PREFIX`] characters), and its whole log.
pub fn task(db: &Path, id: &str) -> Result<TaskAudit, InspectError> {
    let conn = open(db)?;
    let id = resolve(&conn, db, id)?;
    let id = id.as_str();
    let rec = read::load_task(&conn, id)?.ok_or_else(|| InspectError::NoTask {
        id: id.to_owned(),
        db: db.to_path_buf(),
    })?;
    let name = |p: &crate::core::task::Party| PartyName {
        peer_id: p.peer_id.clone(),
        context_id: p.context_id.clone(),
    };
    let log = read::full_log(&conn, id)?
        .into_iter()
        .map(|e| LogLine {
            version: e.version,
            at: e.at,
            actor: e.actor,
            kind: e.kind,
            payload: e.payload,
        })
        .collect();
    Ok(TaskAudit {
        id: rec.id.clone(),
        requester: name(&rec.requester),
        worker: name(&rec.worker),
        state: rec.state(),
        version: rec.version,
        created_at: rec.created_at.clone(),
        updated_at: rec.updated_at.clone(),
        history: rec.history.clone(),
        artifacts: rec.artifacts.iter().map(|a| a.merged()).collect(),
        push_configs: rec
            .push_configs
            .iter()
            .map(|(owner, cfg)| (name(owner), cfg.clone()))
            .collect(),
        log,
    })
}

/// What `leases list` selects.
#[derive(Debug, Clone, Default)]
pub struct LeaseQuery {
    /// Only leases held in this context.
    pub context: Option<String>,
    /// Only leases of this holder (a peer id).
    pub holder: Option<String>,
    /// Most leases shown, newest first.
    pub limit: u32,
}

/// One row of `leases list`.
#[derive(Debug, Clone)]
pub struct LeaseRow {
    pub id: String,
    pub context: String,
    pub holder: String,
    pub paths: Vec<String>,
    pub exclusive: bool,
    pub reason: Option<String>,
    pub acquired: String,
    pub expires: String,
    /// `None` while the lease is held.
    pub ended: Option<String>,
    /// How it ended (`released`, `expired`, `deregistered`, ...).
    pub end_reason: Option<String>,
}

/// `leases list`: the lease records, newest first: who held which paths,
/// from when, until when, and how each ended (`held` while live). A
/// database written only by brokers without leases has no record table:
/// that is an empty list, not an error.
pub fn leases(db: &Path, q: &LeaseQuery) -> Result<Vec<LeaseRow>, InspectError> {
    let conn = open(db)?;
    let has_table: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'a2a_ext_leases')",
        [],
        |r| r.get(0),
    )?;
    let mut rows = Vec::new();
    if has_table {
        let mut st = conn.prepare(
            "SELECT id, context_id, holder_peer, paths, exclusive, reason, acquired_at,
                    expires_at, ended_at, end_reason
                 FROM a2a_ext_leases
                 WHERE (?1 IS NULL OR context_id = ?1) AND (?2 IS NULL OR holder_peer = ?2)
                 ORDER BY acquired_at DESC, id DESC LIMIT ?3",
        )?;
        let found = st.query_map(params![q.context, q.holder, i64::from(q.limit)], |r| {
            let paths: String = r.get(3)?;
            Ok(LeaseRow {
                id: r.get(0)?,
                context: r.get(1)?,
                holder: r.get(2)?,
                // A record this build cannot read shows its raw text.
                paths: serde_json::from_str(&paths).unwrap_or_else(|_| vec![paths]),
                exclusive: r.get::<_, i64>(4)? != 0,
                reason: r.get(5)?,
                acquired: r.get(6)?,
                expires: r.get(7)?,
                ended: r.get(8)?,
                end_reason: r.get(9)?,
            })
        })?;
        rows = found.collect::<Result<Vec<LeaseRow>, _>>()?;
    }
    Ok(rows)
}
