//! The rows each call writes, inside the writer's transaction.
//! Statements are cached on the connection, so a call costs no SQL parsing.
//!
//! Each stored message is encoded once, for its `a2a_messages` row; the
//! task's status column and the task log refer to a message kept in the
//! task's history by its place instead of copying it ([`status_row`],
//! [`log_status`]; readers expand both back, `store::read`), so a change
//! costs its message's bytes once on disk, not three times. A status whose
//! message is not in the history is written in full, splicing in the
//! message's encoding ([`status_json`]).
//!
//! A message's row leaves out what the row and its task already hold
//! ([`message_row_body`], to cut the disk per task): its `taskId` (the
//! row's `task_id`), `contextId` (the task's `context_id`: stamping gives
//! every stored message its task's context, `engine::calls::stamp`) and
//! `from` (the row's `from_peer`); readers put them back
//! (`store::read::stored_message`). About 85 bytes a message.

use crate::agents::registry::Agent;
use crate::core::task::{Party, TaskRecord};
use crate::core::CoreError;
use a2a_proto::types::{Artifact, Message, PushConfig, State, StreamEvent, TaskStatus};
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

/// A task status's JSON, as `serde_json` writes a [`TaskStatus`]; with
/// `message_body` (the status message's own encoding, already made for its
/// row) the message is spliced in, not encoded again.
pub fn status_json(status: &TaskStatus, message_body: Option<&str>) -> Result<String, CoreError> {
    let (Some(_), Some(body)) = (&status.message, message_body) else {
        return json(status);
    };
    let ts = json(&status.timestamp)?;
    let state = status.state.as_str();
    let mut out = String::with_capacity(body.len() + ts.len() + state.len() + 40);
    out.push_str("{\"state\":\"");
    out.push_str(state);
    out.push_str("\",\"message\":");
    out.push_str(body);
    out.push_str(",\"timestamp\":");
    out.push_str(&ts);
    out.push('}');
    Ok(out)
}

/// A status in the compact stored form, shared by the task row's status
/// column and the task log: the status with its message replaced by
/// `"ref"`, the message's place in the task's history (its `a2a_messages`
/// row's `pos`), when the message is there. A message kept on the status
/// only (a terminal move past a bound) is copied in full. In the log the
/// timestamp is left out when it is the entry's `at` (always, for entries
/// this broker writes), and the event's task id, context id and `final`
/// are the task's and its state's. Readers (`store::read`) tell it from
/// the full JSON of earlier brokers: a `TaskStatus` never has `ref`, and a
/// full log entry starts with `kind`.
fn compact(
    status: &TaskStatus,
    msg_pos: Option<usize>,
    timestamp: Option<&str>,
) -> Result<String, CoreError> {
    #[derive(serde::Serialize)]
    struct Compact<'a> {
        state: State,
        #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
        msg_ref: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<&'a Message>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<&'a str>,
    }
    let m = status.message.as_deref();
    let msg_pos = msg_pos.filter(|_| m.is_some());
    json(&Compact {
        state: status.state,
        msg_ref: msg_pos,
        message: m.filter(|_| msg_pos.is_none()),
        timestamp,
    })
}

/// The task row's status column: the compact form when the status
/// message is in the history at `msg_pos` (`ref` instead of a second copy
/// of it), else the full `TaskStatus` JSON ([`status_json`]).
pub fn status_row(
    status: &TaskStatus,
    msg_pos: Option<usize>,
    message_body: Option<&str>,
) -> Result<String, CoreError> {
    match (&status.message, msg_pos) {
        (Some(_), Some(_)) => compact(status, msg_pos, Some(&status.timestamp)),
        _ => status_json(status, message_body),
    }
}

/// The task log's payload for a status change logged `at` (the compact
/// form, see [`status_row`]); `msg_pos`: where its message is in the
/// task's history, if it is.
pub fn log_status(
    status: &TaskStatus,
    msg_pos: Option<usize>,
    at: &str,
) -> Result<String, CoreError> {
    let ts = (status.timestamp != at).then_some(status.timestamp.as_str());
    compact(status, msg_pos, ts)
}

/// Writes a new task row; `status` is its status's JSON ([`status_json`]).
pub fn insert_task(
    c: &Connection,
    rec: &TaskRecord,
    seq: i64,
    status: &str,
) -> Result<(), CoreError> {
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
        status,
        rec.version as i64,
        rec.create_message_id,
        rec.broadcast,
        rec.created_at,
        rec.updated_at
    ])?;
    Ok(())
}

/// Writes a task's status and version; `status` is the status's JSON
/// ([`status_json`]), or `None` when the change left the status as it was
/// (an artifact): then only the version and time are written.
///
/// `state_changed`: the state column is written only when the state
/// changed. Writing it makes SQLite maintain the partial index of open
/// tasks (`store::START_INDEXES`), whose condition reads it: for a
/// `working → working` progress update that was a third of the writer's
/// time.
pub fn update_task(
    c: &Connection,
    rec: &TaskRecord,
    status: Option<&str>,
    state_changed: bool,
) -> Result<(), CoreError> {
    match status {
        Some(status) if !state_changed => c
            .prepare_cached(
                "UPDATE a2a_tasks SET status = ?2, version = ?3, updated_at = ?4 WHERE id = ?1",
            )?
            .execute(params![rec.id, status, rec.version as i64, rec.updated_at])?,
        Some(status) => c
            .prepare_cached(
                "UPDATE a2a_tasks SET state = ?2, status = ?3, version = ?4, updated_at = ?5 WHERE id = ?1",
            )?
            .execute(params![
                rec.id,
                rec.status.state.as_str(),
                status,
                rec.version as i64,
                rec.updated_at
            ])?,
        None => c
            .prepare_cached("UPDATE a2a_tasks SET version = ?2, updated_at = ?3 WHERE id = ?1")?
            .execute(params![rec.id, rec.version as i64, rec.updated_at])?,
    };
    Ok(())
}

/// A stamped message's row body: its JSON without `taskId`, `contextId`
/// and `from`, which the row and its task hold (see the module doc). The
/// fields left are `Message`'s, in its order, as `serde_json` writes them.
pub fn message_row_body(msg: &Message) -> Result<String, CoreError> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Row<'a> {
        role: a2a_proto::types::Role,
        parts: &'a [a2a_proto::types::Part],
        message_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        to: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<&'a a2a_proto::types::Object>,
    }
    json(&Row {
        role: msg.role,
        parts: &msg.parts,
        message_id: &msg.message_id,
        to: msg.to.as_deref(),
        metadata: msg.metadata.as_ref(),
    })
}

/// [`message_row_body`] cut out of the message's full JSON `body` (already
/// made by the caller), without encoding its parts again: a message of
/// megabytes costs a copy, not a second encoding. The three fields sit
/// together between `messageId` and `to` in `serde_json`'s output; they
/// are cut only where their exact encoding is found at the place the
/// fields after them leave for it, else `None` (then the row is encoded).
fn row_from_full(msg: &Message, body: &str) -> Option<String> {
    let mut cut = String::new();
    for (name, v) in [
        ("taskId", &msg.task_id),
        ("contextId", &msg.context_id),
        ("from", &msg.from),
    ] {
        if let Some(v) = v {
            cut.push_str(",\"");
            cut.push_str(name);
            cut.push_str("\":");
            cut.push_str(&json(v).ok()?);
        }
    }
    #[derive(serde::Serialize)]
    struct After<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        to: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<&'a a2a_proto::types::Object>,
    }
    let after = json(&After {
        to: msg.to.as_deref(),
        metadata: msg.metadata.as_ref(),
    })
    .ok()?;
    // `{}` (nothing after: the body ends `}`) or `{...}` (it ends `,...}`).
    let after_len = if after.len() == 2 { 1 } else { after.len() };
    let end = body.len().checked_sub(after_len)?;
    let start = end.checked_sub(cut.len())?;
    if body.get(start..end)? != cut || !body.ends_with(&after[1..]) {
        return None;
    }
    let mut row = String::with_capacity(body.len() - cut.len());
    row.push_str(&body[..start]);
    row.push_str(&body[end..]);
    Some(row)
}

/// Appends a stamped message to a task's history; `body` is its full
/// JSON, stored as it is only for a message not stamped for this task
/// (else the row form, [`message_row_body`]).
pub fn insert_message(
    c: &Connection,
    task_id: &str,
    pos: usize,
    msg: &Message,
    body: &str,
) -> Result<(), CoreError> {
    let row;
    let body = if msg.task_id.as_deref() == Some(task_id) {
        row = match row_from_full(msg, body) {
            Some(r) => r,
            None => message_row_body(msg)?,
        };
        &row
    } else {
        body
    };
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

/// What a task log entry holds.
pub enum LogPayload<'a> {
    /// A status change: written in the compact form ([`log_status`]);
    /// `msg_pos` is its message's place in the history, if it is there.
    Status {
        status: &'a TaskStatus,
        msg_pos: Option<usize>,
    },
    /// Any other event: its full JSON.
    Event(&'a StreamEvent),
}

/// Appends one change to the task log.
pub fn append_log(
    c: &Connection,
    task_id: &str,
    version: u64,
    payload: LogPayload<'_>,
    actor: &str,
    at: &str,
) -> Result<(), CoreError> {
    let (kind, text) = match payload {
        LogPayload::Status { status, msg_pos } => {
            ("status-update", log_status(status, msg_pos, at)?)
        }
        LogPayload::Event(event @ StreamEvent::Status(_)) => ("status-update", json(event)?),
        LogPayload::Event(event @ StreamEvent::Artifact(_)) => ("artifact-update", json(event)?),
    };
    c.prepare_cached(
        "INSERT INTO a2a_task_log (task_id, version, kind, actor, payload, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![task_id, version as i64, kind, actor, text, at])?;
    Ok(())
}

/// Records a granted lease.
pub fn insert_lease(
    c: &Connection,
    l: &crate::core::lease::LeaseRec,
    acquired_at: &str,
    expires_at: &str,
) -> Result<(), CoreError> {
    c.prepare_cached(
        "INSERT INTO a2a_ext_leases (id, context_id, holder_peer, paths, exclusive, reason,
           acquired_at, expires_at, ended_at, end_reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, NULL)",
    )?
    .execute(params![
        l.id,
        l.holder.context_id,
        l.holder.peer_id,
        json(&l.paths)?,
        l.exclusive,
        l.reason,
        acquired_at,
        expires_at
    ])?;
    Ok(())
}

/// Records a renewal: the lease's new end.
pub fn renew_lease(c: &Connection, id: &str, expires_at: &str) -> Result<(), CoreError> {
    c.prepare_cached("UPDATE a2a_ext_leases SET expires_at = ?2 WHERE id = ?1")?
        .execute(params![id, expires_at])?;
    Ok(())
}

/// Records how and when a lease ended.
pub fn end_lease(
    c: &Connection,
    id: &str,
    at: &str,
    how: a2a_proto::types::LeaseEnd,
) -> Result<(), CoreError> {
    c.prepare_cached(
        "UPDATE a2a_ext_leases SET ended_at = ?2, end_reason = ?3 WHERE id = ?1 AND ended_at IS NULL",
    )?
    .execute(params![id, at, how.as_str()])?;
    Ok(())
}

/// At start: every lease still open ended with the last run (its holder's
/// token died with it). Returns how many.
pub fn end_open_leases(c: &Connection, at: &str) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE a2a_ext_leases SET ended_at = ?1, end_reason = ?2 WHERE ended_at IS NULL",
        params![at, a2a_proto::types::LeaseEnd::Restart.as_str()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_proto::types::{Part, Role};
    use std::sync::Arc;

    fn message() -> Message {
        Message {
            role: Role::User,
            parts: vec![Part::text("hé \"quoted\" \u{1}")],
            message_id: "m1".into(),
            task_id: Some("t".into()),
            context_id: Some("c".into()),
            from: Some("a".into()),
            to: Some("b".into()),
            metadata: None,
        }
    }

    #[test]
    fn the_spliced_status_is_serde_s_own() {
        for state in State::ALL {
            for msg in [None, Some(Arc::new(message()))] {
                let status = TaskStatus {
                    state,
                    message: msg.clone(),
                    timestamp: "2026-11-30T09:23:55.420Z".into(),
                };
                let body = msg.as_ref().map(|m| json(&**m).unwrap());
                assert_eq!(
                    status_json(&status, body.as_deref()).unwrap(),
                    serde_json::to_string(&status).unwrap()
                );
            }
        }
    }

    #[test]
    fn the_row_cut_from_the_full_json_is_the_row_encoded() {
        let mut map = serde_json::Map::new();
        map.insert("taskId".into(), serde_json::json!("inside metadata"));
        let meta = a2a_proto::types::Object::from(map);
        for (to, metadata, from) in [
            (Some("b"), None, Some("a")),
            (None, None, Some("a")),
            (Some("b"), Some(meta.clone()), None),
            (None, Some(meta), Some("a \"q\"")),
        ] {
            let msg = Message {
                to: to.map(str::to_owned),
                metadata,
                from: from.map(str::to_owned),
                ..message()
            };
            let full = json(&msg).unwrap();
            let row = message_row_body(&msg).unwrap();
            assert_eq!(row_from_full(&msg, &full).as_deref(), Some(row.as_str()));
            // Not the message's own JSON: not cut.
            assert_eq!(row_from_full(&msg, &row), None);
        }
    }

    #[test]
    fn the_compact_forms_refer_or_copy() {
        let at = "2026-11-30T09:23:55.420Z";
        let status = TaskStatus {
            state: State::Working,
            message: Some(Arc::new(message())),
            timestamp: at.into(),
        };
        assert_eq!(
            log_status(&status, Some(3), at).unwrap(),
            r#"{"state":"working","ref":3}"#
        );
        assert_eq!(
            log_status(&status, Some(3), "2026-11-30T09:23:56.000Z").unwrap(),
            r#"{"state":"working","ref":3,"timestamp":"2026-11-30T09:23:55.420Z"}"#
        );
        assert_eq!(
            status_row(&status, Some(3), None).unwrap(),
            r#"{"state":"working","ref":3,"timestamp":"2026-11-30T09:23:55.420Z"}"#
        );
        let copied = log_status(&status, None, at).unwrap();
        assert!(
            copied.starts_with(r#"{"state":"working","message":{"#),
            "{copied}"
        );
        assert_eq!(
            status_row(&status, None, None).unwrap(),
            serde_json::to_string(&status).unwrap()
        );
        let bare = TaskStatus {
            message: None,
            ..status
        };
        assert_eq!(
            log_status(&bare, Some(3), at).unwrap(),
            r#"{"state":"working"}"#
        );
        assert_eq!(
            status_row(&bare, Some(3), None).unwrap(),
            serde_json::to_string(&bare).unwrap()
        );
    }
}
