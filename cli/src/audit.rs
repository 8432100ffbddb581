//! `a2a-broker tasks list|show` and `leases list`, printed: the records
//! the library's `inspect` reads back, as a table, a task's story, or
//! JSON lines. The demo prints its audit view with these too.

use a2a_broker::inspect::{self, InspectError, LeaseQuery, ListQuery};
use a2a_proto::types::{Part, StreamEvent};
use std::path::Path;

/// A short, one-line rendering of some parts.
pub fn summarize(parts: &[Part]) -> String {
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

/// `1 message`, `2 messages`.
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
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
        false,
    )
}

/// `tasks list`: newest first, one page of at most `q.limit` tasks. When
/// more match, the cursor of the next page is printed on stderr as
/// `next page: --before SEQ`, so stdout stays a table or pure JSON lines.
pub fn list_with(db: &Path, q: &ListQuery, json: bool) -> Result<(), InspectError> {
    let page = inspect::list_tasks(db, q)?;
    if json {
        for t in &page.tasks {
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
        for t in &page.tasks {
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
        if page.tasks.is_empty() {
            println!("(no tasks)");
        }
    }
    if let Some(seq) = page.next_before {
        eprintln!("next page: --before {seq}");
    }
    Ok(())
}

/// `tasks show`.
pub fn show(db: &Path, id: &str) -> Result<(), InspectError> {
    let rec = inspect::task(db, id)?;
    println!("task {}", rec.id);
    println!(
        "  requester {} ({})  ->  worker {} ({})",
        rec.requester.peer_id, rec.requester.context_id, rec.worker.peer_id, rec.worker.context_id
    );
    println!(
        "  state {}, version {}, created {}, updated {}",
        rec.state.as_str(),
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
    println!("log ({}):", plural(rec.log.len(), "transition"));
    for e in &rec.log {
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

/// `leases list`: the lease records, newest first: who held which paths,
/// from when, until when, and how each ended (`held` while live).
pub fn leases(db: &Path, q: &LeaseQuery, json: bool) -> Result<(), InspectError> {
    let rows = inspect::leases(db, q)?;
    if json {
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
