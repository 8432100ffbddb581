//! The rows each call writes, inside the writer's transaction.
//! Statements are cached on the connection, so a call costs no SQL parsing.

use crate::core::registry::Agent;
use crate::core::task::{Party, TaskRecord};
use crate::core::CoreError;
use a2a_proto::types::{Artifact, Message, PushConfig, StreamEvent};
use rusqlite::{params, Connection};

/// The JSON text of a stored value (one encoding, reused for its row and its size).
pub fn json<T: serde::Serialize + ?Sized>(v: &T) -> Result<String, CoreError> {
    serde_json::to_string(v).map_err(|e| CoreError::Internal(format!("encoding a row: {e}")))
}

/// Records a registration (re-registering the same party replaces it).
pub fn put_agent(c: &Connection, a: &Agent, at: &str) -> Result<(), CoreError> {
    let kind = json(&a.kind)?;
    let delivery = json(&a.delivery)?;
    c.prepare_cached(
        "INSERT INTO a2a_agents (context_id, peer_id, kind, delivery, card, registered_at, deregistered_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL)
         ON CONFLICT (context_id, peer_id) DO UPDATE SET kind = excluded.kind,
           delivery = excluded.delivery, card = excluded.card,
           registered_at = excluded.registered_at, deregistered_at = NULL",
    )?
    .execute(params![
        a.context_id,
        a.peer_id,
        kind.trim_matches('"'),
        delivery.trim_matches('"'),
        json(&a.card)?,
        at
    ])?;
    Ok(())
}

/// Records that an agent left.
pub fn mark_deregistered(c: &Connection, party: &Party, at: &str) -> Result<(), CoreError> {
    c.prepare_cached(
        "UPDATE a2a_agents SET deregistered_at = ?3 WHERE context_id = ?1 AND peer_id = ?2",
    )?
    .execute(params![party.context_id, party.peer_id, at])?;
    Ok(())
}

/// Writes a new task row.
pub fn insert_task(c: &Connection, rec: &TaskRecord, seq: i64) -> Result<(), CoreError> {
    c.prepare_cached(
        "INSERT INTO a2a_tasks (id, seq, context_id, requester_peer, worker_ctx, worker_peer,
           state, status, version, create_message_id, broadcast, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?
    .execute(params![
        rec.id,
        seq,
        rec.context_id,
        rec.requester.peer_id,
        rec.worker.context_id,
        rec.worker.peer_id,
        rec.status.state.as_str(),
        json(&rec.status)?,
        rec.version as i64,
        rec.create_message_id,
        rec.broadcast,
        rec.created_at,
        rec.updated_at
    ])?;
    Ok(())
}

/// Writes a task's status and version.
pub fn update_task(c: &Connection, rec: &TaskRecord) -> Result<(), CoreError> {
    c.prepare_cached(
        "UPDATE a2a_tasks SET state = ?2, status = ?3, version = ?4, updated_at = ?5 WHERE id = ?1",
    )?
    .execute(params![
        rec.id,
        rec.status.state.as_str(),
        json(&rec.status)?,
        rec.version as i64,
        rec.updated_at
    ])?;
    Ok(())
}

/// Appends a stamped message to a task's history; `body` is its JSON.
pub fn insert_message(
    c: &Connection,
    task_id: &str,
    pos: usize,
    msg: &Message,
    body: &str,
) -> Result<(), CoreError> {
    c.prepare_cached(
        "INSERT INTO a2a_messages (task_id, message_id, pos, from_peer, body) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        task_id,
        msg.message_id,
        pos as i64,
        msg.from.as_deref().unwrap_or(""),
        body
    ])?;
    Ok(())
}

/// Writes an artifact's first (or replacing) call, `body` its JSON; a
/// replaced artifact's appended chunks go.
pub fn put_artifact(
    c: &Connection,
    task_id: &str,
    pos: usize,
    art: &Artifact,
    body: &str,
) -> Result<(), CoreError> {
    c.prepare_cached(
        "INSERT INTO a2a_artifacts (task_id, artifact_id, pos, body) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (task_id, artifact_id) DO UPDATE SET body = excluded.body",
    )?
    .execute(params![task_id, art.artifact_id, pos as i64, body])?;
    // Chunk keys are `id NUL n` (`core::artifact::chunk_key`): all of them
    // sort in [`id NUL`, `id \x01`).
    c.prepare_cached(
        "DELETE FROM a2a_artifacts WHERE task_id = ?1 AND artifact_id > ?2 AND artifact_id < ?3",
    )?
    .execute(params![
        task_id,
        format!("{}\u{0}", art.artifact_id),
        format!("{}\u{1}", art.artifact_id)
    ])?;
    Ok(())
}

/// Writes one appended chunk of an artifact as a row of its own (the
/// artifact's earlier rows are not touched: an append costs its own size).
pub fn insert_artifact_chunk(
    c: &Connection,
    task_id: &str,
    key: &str,
    pos: usize,
    body: &str,
) -> Result<(), CoreError> {
    c.prepare_cached(
        "INSERT INTO a2a_artifacts (task_id, artifact_id, pos, body) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![task_id, key, pos as i64, body])?;
    Ok(())
}

/// Writes a task's push config (one per task: any other party's goes), and
/// the party that set it.
pub fn put_push_config(
    c: &Connection,
    task_id: &str,
    owner: &Party,
    cfg: &PushConfig,
) -> Result<(), CoreError> {
    c.prepare_cached(
        "DELETE FROM a2a_push_configs WHERE task_id = ?1 AND (owner_ctx, owner_peer) != (?2, ?3)",
    )?
    .execute(params![task_id, owner.context_id, owner.peer_id])?;
    c.prepare_cached(
        "INSERT INTO a2a_push_configs (task_id, owner_ctx, owner_peer, config) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (task_id, owner_ctx, owner_peer) DO UPDATE SET config = excluded.config",
    )?
    .execute(params![task_id, owner.context_id, owner.peer_id, json(cfg)?])?;
    Ok(())
}

/// Appends one change to the task log.
pub fn append_log(
    c: &Connection,
    task_id: &str,
    version: u64,
    event: &StreamEvent,
    actor: &str,
    at: &str,
) -> Result<(), CoreError> {
    let kind = match event {
        StreamEvent::Status(_) => "status-update",
        StreamEvent::Artifact(_) => "artifact-update",
    };
    c.prepare_cached(
        "INSERT INTO a2a_task_log (task_id, version, kind, actor, payload, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![task_id, version as i64, kind, actor, json(event)?, at])?;
    Ok(())
}
