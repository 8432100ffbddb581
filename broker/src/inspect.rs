//! `a2a-broker tasks list|show --db PATH`: a read-only audit of the durable
//! history, for a person checking a fan-out: who asked whom, every
//! transition, when. Opens the database read-only and writes nothing.

use crate::store::{self, migrate, read};
use a2a_proto::types::{Part, StreamEvent};
use rusqlite::{params, Connection};
use std::path::Path;

fn open(db: &Path) -> Result<Connection, String> {
    if !db.exists() {
        return Err(format!("database {} does not exist", db.display()));
    }
    let conn = store::open_reader(db).map_err(|e| format!("database {}: {e}", db.display()))?;
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| format!("database {}: {e}", db.display()))?;
    migrate::check_version(&db.display().to_string(), v).map_err(|e| e.to_string())?;
    if v != a2a_proto::SCHEMA_VERSION {
        return Err(format!(
            "database {} holds no broker tables yet (schema {v})",
            db.display()
        ));
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
pub fn list(db: &Path, context: Option<&str>, limit: u32) -> Result<(), String> {
    let conn = open(db)?;
    let mut st = conn
        .prepare(
            "SELECT id, state, version, context_id, requester_peer, worker_ctx, worker_peer, updated_at
             FROM a2a_tasks WHERE (?1 IS NULL OR context_id = ?1) ORDER BY seq DESC LIMIT ?2",
        )
        .map_err(|e| e.to_string())?;
    let rows = st
        .query_map(params![context, limit], |r| {
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
        })
        .map_err(|e| e.to_string())?;
    println!(
        "{:<36}  {:<14} {:>3}  {:<40} UPDATED",
        "TASK", "STATE", "VER", "REQUESTER -> WORKER"
    );
    let mut n = 0;
    for row in rows {
        let (id, state, version, ctx, req, wctx, wrk, updated) = row.map_err(|e| e.to_string())?;
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
pub fn show(db: &Path, id: &str) -> Result<(), String> {
    let conn = open(db)?;
    let rec = read::load_task(&conn, id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no task {id} in {}", db.display()))?;
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
    for e in read::full_log(&conn, id).map_err(|e| e.to_string())? {
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
