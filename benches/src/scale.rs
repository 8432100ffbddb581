//! A raw writer that builds large broker databases quickly (the
//! database scaling benchmark, `examples/db_scaling.rs`): the rows the broker
//! writes for that benchmark's workload, in the order it writes them, straight
//! into SQLite in large transactions with `synchronous = OFF`.
//!
//! The workload: requesters in their own contexts (`scale-ctx-K`, peer
//! `req`) each create 100 tasks for `wrk` in `bench-workers` (one message
//! each), then deregister, which cancels each of their tasks with a broker
//! note. Per task: an `a2a_tasks` row (inserted, then updated to
//! `canceled`), two `a2a_messages` rows, two `a2a_task_log` rows; per
//! requester an `a2a_agents` row. Values are the broker's own encodings:
//! messages and statuses are `a2a_proto` types through `serde_json`, log
//! payloads through the broker's encoder (`a2a_broker::bench::log_status`),
//! ids and timestamps from the broker's minting.

use a2a_broker::bench;
use a2a_broker::Durability;
use a2a_proto::types::{Message, Part, Role, State, StatusUpdate, StreamEvent, TaskStatus};
use rusqlite::params;
use std::path::Path;
use std::sync::Arc;

/// 200 characters: the benchmark's task message.
pub const TEXT_200: &str = "Please review the change to src/store/write.rs and report any problem you find; check the group commit, the task log and the idempotency lookup, then write a short note of what you changed and why it is safe.";

/// Tasks per requester context.
pub const PER_CONTEXT: u64 = 100;

/// Tasks per transaction while building.
const PER_TX: u64 = 10_000;

/// The database file's bytes plus its write-ahead log's.
pub fn disk_bytes(db: &Path) -> u64 {
    let len = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    len(db) + len(Path::new(&wal))
}

/// Where a database's bytes are, per table and index (SQLite's `dbstat`):
/// `(name, bytes on pages, bytes of cells, bytes unused)`, largest first.
pub fn breakdown(db: &Path) -> Vec<(String, u64, u64, u64)> {
    let c = rusqlite::Connection::open(db).expect("open");
    let mut st = c
        .prepare(
            "SELECT name, sum(pgsize), sum(payload), sum(unused) FROM dbstat GROUP BY name ORDER BY sum(pgsize) DESC",
        )
        .expect("dbstat");
    let n = |r: &rusqlite::Row<'_>, i| r.get::<_, i64>(i).map(|v| v as u64);
    st.query_map([], |r| Ok((r.get(0)?, n(r, 1)?, n(r, 2)?, n(r, 3)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect()
}

/// How long `PRAGMA quick_check(1)` takes on `db` alone (read-only, as
/// the broker's start-up runs it before anything writes).
pub fn page_check(db: &Path) -> std::time::Duration {
    if !db.exists() {
        return std::time::Duration::ZERO;
    }
    let c = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open read-only");
    let t = std::time::Instant::now();
    let verdict: String = c
        .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
        .expect("quick_check");
    assert_eq!(verdict, "ok", "the built database is damaged");
    t.elapsed()
}

/// Builds a database of `n` tasks at `db` (which must not exist) and
/// returns the ids of its 300 oldest tasks, for reads of old tasks.
pub fn build(db: &Path, n: u64, text: &str) -> Vec<String> {
    build_as(db, n, text, Forms::Compact)
}

/// Which broker's rows the builder writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forms {
    /// This broker's: compact status column, task log and message rows,
    /// start-up indexes.
    Compact,
    /// The rows of the broker before its compact writer: the full status JSON in the task row,
    /// the full event JSON in the log, no start-up indexes.
    Full,
}

/// [`build`], writing the rows of `forms`.
pub fn build_as(db: &Path, n: u64, text: &str, forms: Forms) -> Vec<String> {
    let mut conn = bench::open_writer(db, Durability::Normal).expect("open the database");
    conn.execute_batch("PRAGMA synchronous = OFF;")
        .expect("synchronous off");
    if forms == Forms::Full {
        conn.execute_batch("DROP INDEX a2a_tasks_open; DROP INDEX a2a_tasks_seq;")
            .expect("drop the start-up indexes");
    }
    let mut oldest = Vec::new();
    let mut made = 0u64;
    let mut k = 0u64;
    let mut seq = 0i64;
    while made < n {
        let tx = conn.transaction().expect("begin");
        let end = (made + PER_TX).min(n);
        while made < end {
            k += 1;
            let batch = PER_CONTEXT.min(end - made);
            let ids = context(&tx, k, batch, text, &mut seq, forms);
            if oldest.len() < 300 {
                oldest.extend(ids.into_iter().take(300 - oldest.len()));
            }
            made += batch;
        }
        tx.commit().expect("commit");
    }
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .expect("checkpoint");
    drop(conn);
    oldest
}

fn stamped(text: &str, id: &str, ctx: &str, role: Role, mid: String) -> Arc<Message> {
    Arc::new(Message {
        role,
        parts: vec![Part::text(text)],
        message_id: mid,
        task_id: Some(id.to_owned()),
        context_id: Some(ctx.to_owned()),
        from: Some("req".into()),
        to: Some("wrk".into()),
        metadata: None,
    })
}

/// One requester's tasks and its deregistration; the task ids.
fn context(
    c: &rusqlite::Connection,
    k: u64,
    n: u64,
    text: &str,
    seq: &mut i64,
    forms: Forms,
) -> Vec<String> {
    let row = |status: &TaskStatus, pos| match forms {
        Forms::Compact => bench::status_row(status, Some(pos)),
        Forms::Full => serde_json::to_string(status).expect("status"),
    };
    let logged = |id: &str, status: &TaskStatus, pos, at: &str| match forms {
        Forms::Compact => bench::log_status(status, Some(pos), at),
        Forms::Full => serde_json::to_string(&StreamEvent::Status(StatusUpdate {
            task_id: id.to_owned(),
            context_id: format!("scale-ctx-{k}"),
            status: status.clone(),
            is_final: status.state.is_terminal(),
        }))
        .expect("event"),
    };
    let body_of = |msg: &a2a_proto::types::Message| match forms {
        Forms::Compact => bench::message_row(msg),
        Forms::Full => serde_json::to_string(msg).expect("message"),
    };
    let ctx = format!("scale-ctx-{k}");
    let now = bench::now();
    let card = serde_json::json!({"name": "req", "kind": "subagent"});
    let card: a2a_proto::types::AgentCard = serde_json::from_value(card).expect("card");
    c.prepare_cached(
        "INSERT INTO a2a_agents (context_id, peer_id, kind, delivery, card, registered_at, deregistered_at)
         VALUES (?1, 'req', 'subagent', 'push', ?2, ?3, NULL)",
    )
    .expect("prepare")
    .execute(params![ctx, serde_json::to_string(&card).expect("card"), now])
    .expect("agent");
    let mut ids = Vec::with_capacity(n as usize);
    for i in 0..n {
        let id = bench::uuid();
        let mid = format!("s{k}-{i}");
        let msg = stamped(text, &id, &ctx, Role::User, mid.clone());
        let body = body_of(&msg);
        let status = TaskStatus {
            state: State::Submitted,
            message: Some(msg),
            timestamp: now.clone(),
        };
        *seq += 1;
        c.prepare_cached(
            "INSERT INTO a2a_tasks (id, seq, context_id, requester_peer, worker_ctx, worker_peer,
               state, status, version, create_message_id, broadcast, created_at, updated_at)
             VALUES (?1, ?2, ?3, 'req', 'bench-workers', 'wrk', 'submitted', ?4, 1, ?5, 0, ?6, ?6)",
        )
        .expect("prepare")
        .execute(params![id, *seq, ctx, row(&status, 0), mid, now])
        .expect("task");
        message(c, &id, &mid, 0, &body);
        log(c, &id, 1, &logged(&id, &status, 0, &now), &now);
        ids.push(id);
    }
    // The requester deregisters: each task is canceled with a note.
    let at = bench::now();
    c.prepare_cached(
        "UPDATE a2a_agents SET deregistered_at = ?2 WHERE context_id = ?1 AND peer_id = 'req'",
    )
    .expect("prepare")
    .execute(params![ctx, at])
    .expect("deregister");
    for id in &ids {
        let mid = format!("broker-{}", bench::uuid());
        let note = stamped(
            "agent req deregistered; task canceled by the broker",
            id,
            &ctx,
            Role::User,
            mid.clone(),
        );
        let body = body_of(&note);
        message(c, id, &mid, 1, &body);
        let status = TaskStatus {
            state: State::Canceled,
            message: Some(note),
            timestamp: at.clone(),
        };
        c.prepare_cached(
            "UPDATE a2a_tasks SET state = 'canceled', status = ?2, version = 2, updated_at = ?3 WHERE id = ?1",
        )
        .expect("prepare")
        .execute(params![id, row(&status, 1), at])
        .expect("cancel");
        log(c, id, 2, &logged(id, &status, 1, &at), &at);
    }
    ids
}

fn message(c: &rusqlite::Connection, id: &str, mid: &str, pos: i64, body: &str) {
    c.prepare_cached(
        "INSERT INTO a2a_messages (task_id, message_id, pos, from_peer, body) VALUES (?1, ?2, ?3, 'req', ?4)",
    )
    .expect("prepare")
    .execute(params![id, mid, pos, body])
    .expect("message");
}

fn log(c: &rusqlite::Connection, id: &str, version: i64, payload: &str, at: &str) {
    c.prepare_cached(
        "INSERT INTO a2a_task_log (task_id, version, kind, actor, payload, at) VALUES (?1, ?2, 'status-update', 'req', ?3, ?4)",
    )
    .expect("prepare")
    .execute(params![id, version, payload, at])
    .expect("log");
}
