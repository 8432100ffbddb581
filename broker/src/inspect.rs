//! `a2a-broker tasks list|show --db PATH`: a read-only audit of the durable
//! history, for a person checking a fan-out: who asked whom, every
//! transition, when. Opens the database read-only and writes nothing.

use crate::core::CoreError;
use crate::store::{self, migrate, read, OpenError};
use a2a_proto::types::{Part, StreamEvent};
use rusqlite::{params, Connection};
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
    /// `tasks show` of an id the database does not hold.
    #[error("no task {id} in {}", .db.display())]
    NoTask { id: String, db: PathBuf },
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

/// `tasks list`.
pub fn list(db: &Path, context: Option<&str>, limit: u32) -> Result<(), InspectError> {
    let conn = open(db)?;
    let mut st = conn.prepare(
        "SELECT id, state, version, context_id, requester_peer, worker_ctx, worker_peer, updated_at
             FROM a2a_tasks WHERE (?1 IS NULL OR context_id = ?1) ORDER BY seq DESC LIMIT ?2",
    )?;
    let rows = st.query_map(params![context, limit], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, String>(4)?,
            r.get::<_, String>(5)?,
            r.get::<_, String>(6)?,
            r.get::<_, String>(7)?,
        ))
    })?;
    println!(
        "{:<36}  {:<14} {:>3}  {:<40} UPDATED",
        "TASK", "STATE", "VER", "REQUESTER -> WORKER"
    );
    let mut n = 0;
    for row in rows {
        let (id, state, version, ctx, req, wctx, wrk, updated) = row?;
        n += 1;
        let who = if ctx == wctx {
            format!("{req} -> {wrk} ({ctx})")
        } else {
            format!("{req} ({ctx}) -> {wrk} ({wctx})")
        };
        println!("{id:<36}  {state:<14} {version:>3}  {who:<40} {updated}");
    }
    if n == 0 {
        println!("(no tasks)");
    }
    Ok(())
}

/// `tasks show`.
pub fn show(db: &Path, id: &str) -> Result<(), InspectError> {
    let conn = open(db)?;
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
    println!("history ({} messages):", rec.history.len());
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
        println!("artifacts:");
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
    println!("log:");
    for e in read::full_log(&conn, id)? {
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
