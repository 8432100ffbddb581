//! `a2a-broker tasks list|show --db PATH`: a read-only audit of the durable
//! history, for a person checking a fan-out: who asked whom, every
//! transition, when; `leases list` the same for leases: who held which
//! paths, when, and how each ended. Opens the database read-only and writes
//! nothing.

use crate::core::CoreError;
use crate::store::{self, migrate, read, OpenError};
use a2a_proto::types::{Part, State, StreamEvent};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};

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

/// The demo (`crate::demo`, on its way out of the library) reports its
/// failures as lines of text.
impl From<InspectError> for String {
    fn from(e: InspectError) -> String {
        e.to_string()
    }
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

/// A short, one-line rendering of some parts.
pub(crate) fn summarize(parts: &[Part]) -> String {
    let mut out: Vec<String> = Vec::new();
    for p in parts {
        out.push(match p {
            Part::Text { text, .. } => {
                let mut t: String = text.chars().take(60).collect();
                if text.chars().count() > 60 {
                    t.push('…');
                }
                format!("{t:?}")
            }
            Part::File { file, .. } => format!(
                "[file {}]",
                file.name
                    .as_deref()
                    .or(file.uri.as_deref())
                    .unwrap_or("inline bytes")
            ),
            Part::Data { data, .. } => format!("[data {} keys]", data.len()),
        });
    }
    out.join(" + ")
}

/// What `tasks list` selects and how it prints (the flags of the subcommand).
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
    /// One JSON object per line instead of the table.
    pub json: bool,
}

/// The shortest task id prefix or tail `tasks show` accepts: shorter ones would
/// match too much of a big database to be a deliberate choice.
pub const MIN_PREFIX: usize = 4;

/// At most this many candidates are named when a prefix or tail is ambiguous.
const MAX_CANDIDATES: usize = 10;

/// `1 message`, `2 messages`.
pub(crate) fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// One row of `tasks list`.
struct ListRow {
    id: String,
    seq: i64,
    state: String,
    version: i64,
    ctx: String,
    req: String,
    wctx: String,
    wrk: String,
    created: String,
    updated: String,
}

/// `tasks list --context C --limit N`: the table, first page (the demo's view).
pub fn list(db: &Path, context: Option<&str>, limit: u32) -> Result<(), InspectError> {
    list_with(
        db,
        &ListQuery {
            context: context.map(str::to_owned),
            limit,
            ..ListQuery::default()
        },
    )
}

/// `tasks list`: newest first, one page of at most `q.limit` tasks. When
/// more match, the cursor of the next page is printed on stderr as
/// `next page: --before SEQ`, so stdout stays a table or pure JSON lines.
pub fn list_with(db: &Path, q: &ListQuery) -> Result<(), InspectError> {
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
        Ok(ListRow {
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
    let mut page = rows.collect::<Result<Vec<ListRow>, _>>()?;
    let more = page.len() > q.limit as usize;
    page.truncate(q.limit as usize);
    if q.json {
        for t in &page {
            let line = serde_json::json!({
                "id": t.id,
                "seq": t.seq,
                "contextId": t.ctx,
                "requester": t.req,
                "worker": t.wrk,
                "workerContextId": t.wctx,
                "state": t.state,
                "version": t.version,
                "createdAt": t.created,
                "updatedAt": t.updated,
            });
            println!("{line}");
        }
    } else {
        println!(
            "{:<36}  {:<14} {:>3}  {:<40} UPDATED",
            "TASK", "STATE", "VER", "REQUESTER -> WORKER"
        );
        for t in &page {
            let who = if t.ctx == t.wctx {
                format!("{} -> {} ({})", t.req, t.wrk, t.ctx)
            } else {
                format!("{} ({}) -> {} ({})", t.req, t.ctx, t.wrk, t.wctx)
            };
            println!(
                "{:<36}  {:<14} {:>3}  {who:<40} {}",
                t.id, t.state, t.version, t.updated
            );
        }
        if page.is_empty() {
            println!("(no tasks)");
        }
    }
    if more {
        if let Some(last) = page.last() {
            eprintln!("next page: --before {}", last.seq);
        }
    }
    Ok(())
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

/// `tasks show`.
pub fn show(db: &Path, id: &str) -> Result<(), InspectError> {
    let conn = open(db)?;
    let id = resolve(&conn, db, id)?;
    let id = id.as_str();
    let rec = read::load_task(&conn, id)?.ok_or_else(|| InspectError::NoTask {
        id: id.to_owned(),
        db: db.to_path_buf(),
    })?;
    println!("task {}", rec.id);
    println!(
        "  requester {} ({})  ->  worker {} ({})",
        rec.requester.peer_id, rec.requester.context_id, rec.worker.peer_id, rec.worker.context_id
    );
    println!(
        "  state {}, version {}, created {}, updated {}",
        rec.state().as_str(),
        rec.version,
        rec.created_at,
        rec.updated_at
    );
    println!("history ({}):", plural(rec.history.len(), "message"));
    for (i, m) in rec.history.iter().enumerate() {
        println!(
            "  [{}] {} -> {}: {}",
            i + 1,
            m.from.as_deref().unwrap_or("?"),
            m.to.as_deref().unwrap_or("?"),
            summarize(&m.parts)
        );
    }
    if !rec.artifacts.is_empty() {
        println!("artifacts ({}):", plural(rec.artifacts.len(), "artifact"));
        for a in &rec.artifacts {
            let a = a.merged();
            println!(
                "  {}{}: {}",
                a.artifact_id,
                a.name
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default(),
                summarize(&a.parts)
            );
        }
    }
    for (owner, cfg) in &rec.push_configs {
        println!(
            "push config {} set by {} ({})",
            cfg.id, owner.peer_id, owner.context_id
        );
    }
    let log = read::full_log(&conn, id)?;
    println!("log ({}):", plural(log.len(), "transition"));
    for e in log {
        let what = match serde_json::from_str::<StreamEvent>(&e.payload) {
            Ok(StreamEvent::Status(s)) => format!(
                "{}{}{}",
                s.status.state.as_str(),
                if s.is_final { " (final)" } else { "" },
                s.status
                    .message
                    .as_ref()
                    .map(|m| format!(": {}", summarize(&m.parts)))
                    .unwrap_or_default()
            ),
            Ok(StreamEvent::Artifact(a)) => format!(
                "artifact {}{}",
                a.artifact.artifact_id,
                if a.append { " (append)" } else { "" }
            ),
            Err(err) => format!("unreadable entry: {err}"),
        };
        println!(
            "  v{:<3} {}  {:<16} {:<16} {}",
            e.version, e.at, e.actor, e.kind, what
        );
    }
    Ok(())
}

/// What `leases list` selects and how it prints.
#[derive(Debug, Clone, Default)]
pub struct LeaseQuery {
    /// Only leases held in this context.
    pub context: Option<String>,
    /// Only leases of this holder (a peer id).
    pub holder: Option<String>,
    /// Most leases shown, newest first.
    pub limit: u32,
    /// One JSON object per line instead of the table.
    pub json: bool,
}

/// One row of `leases list`.
struct LeaseRow {
    id: String,
    context: String,
    holder: String,
    paths: Vec<String>,
    exclusive: bool,
    reason: Option<String>,
    acquired: String,
    expires: String,
    ended: Option<String>,
    end_reason: Option<String>,
}

/// `leases list`: the lease records, newest first: who held which paths,
/// from when, until when, and how each ended (`held` while live). A
/// database written only by brokers without leases has no record table:
/// that is an empty list, not an error.
pub fn leases(db: &Path, q: &LeaseQuery) -> Result<(), InspectError> {
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
    if q.json {
        for l in &rows {
            let line = serde_json::json!({
                "id": l.id,
                "contextId": l.context,
                "holder": l.holder,
                "paths": l.paths,
                "exclusive": l.exclusive,
                "reason": l.reason,
                "acquiredAt": l.acquired,
                "expiresAt": l.expires,
                "endedAt": l.ended,
                "end": l.end_reason.as_deref().unwrap_or(if l.ended.is_none() { "held" } else { "ended" }),
            });
            println!("{line}");
        }
        return Ok(());
    }
    println!(
        "{:<36}  {:<24} {:<6} {:<24} {:<24} {:<12} PATHS",
        "LEASE", "HOLDER (CONTEXT)", "MODE", "ACQUIRED", "UNTIL", "END"
    );
    for l in &rows {
        let until = l.ended.as_deref().unwrap_or(&l.expires);
        let end = match (&l.ended, l.end_reason.as_deref()) {
            (None, _) => "held",
            (Some(_), Some(r)) => r,
            (Some(_), None) => "ended",
        };
        let mut paths = l.paths.join(" ");
        if let Some(r) = &l.reason {
            paths.push_str(&format!("  ({})", summarize(&[Part::text(r.as_str())])));
        }
        println!(
            "{:<36}  {:<24} {:<6} {:<24} {:<24} {:<12} {paths}",
            l.id,
            format!("{} ({})", l.holder, l.context),
            if l.exclusive { "excl" } else { "shared" },
            l.acquired,
            until,
            end,
        );
    }
    if rows.is_empty() {
        println!("(no leases)");
    }
    Ok(())
}
