//! Reads: whole tasks, listings, the task log. Used by reader threads on
//! read-only connections, and by the writer on its own connection (where it
//! also sees the writes of its open batch).

use crate::core::artifact::{split_key, StoredArtifact};
use crate::core::task::{Party, TaskRecord};
use crate::core::CoreError;
use a2a_proto::params::ListRole;
use a2a_proto::types::{Artifact, Message, PushConfig, State, StreamEvent, TaskStatus};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::HashMap;
use std::sync::Arc;

fn decode<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, CoreError> {
    serde_json::from_str(text)
        .map_err(|e| CoreError::Internal(format!("decoding a stored row: {e}")))
}

/// Loads a whole task, or `None` if no task has this id.
pub fn load_task(c: &Connection, id: &str) -> Result<Option<TaskRecord>, CoreError> {
    let row = c
        .prepare_cached(
            "SELECT context_id, requester_peer, worker_ctx, worker_peer, status, version,
                    create_message_id, broadcast, created_at, updated_at
             FROM a2a_tasks WHERE id = ?1",
        )?
        .query_row([id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, bool>(7)?,
                r.get::<_, String>(8)?,
                r.get::<_, String>(9)?,
            ))
        })
        .optional()?;
    let Some((ctx, req_peer, w_ctx, w_peer, status, version, mid, broadcast, created, updated)) =
        row
    else {
        return Ok(None);
    };
    let status: StoredStatus = decode(&status)?;
    let mut history: Vec<(i64, Message)> = Vec::new();
    let mut message_bytes: u64 = 0;
    {
        let mut st =
            c.prepare_cached("SELECT pos, body, from_peer FROM a2a_messages WHERE task_id = ?1")?;
        let mut rows = st.query([id])?;
        while let Some(r) = rows.next()? {
            let body: String = r.get(1)?;
            let (msg, len) = stored_message(&body, id, &ctx, &r.get::<_, String>(2)?)?;
            message_bytes += len;
            history.push((r.get(0)?, msg));
        }
    }
    history.sort_by_key(|(pos, _)| *pos);
    let history: Vec<Arc<Message>> = history.into_iter().map(|(_, m)| Arc::new(m)).collect();
    let status = status.resolve(c, id, &history, &updated)?;
    let mut stored_bytes: u64 = 0;
    // Each artifact's row and then its appended chunks' rows (same `pos`,
    // keys that sort in append order: `core::artifact::chunk_key`).
    let mut artifacts: Vec<StoredArtifact> = Vec::new();
    {
        let mut st = c.prepare_cached(
            "SELECT artifact_id, body FROM a2a_artifacts WHERE task_id = ?1 ORDER BY pos, artifact_id",
        )?;
        let mut rows = st.query([id])?;
        while let Some(r) = rows.next()? {
            let key: String = r.get(0)?;
            let body: String = r.get(1)?;
            let piece: Artifact = decode(&body)?;
            let content = a2a_proto::check::check_parts(&piece.parts)
                .map(|s| s.content_bytes as u64)
                .unwrap_or(0);
            stored_bytes += body.len() as u64;
            match (split_key(&key), artifacts.last_mut()) {
                ((_, true), Some(last)) => {
                    *last = last.appended(piece, content, body.len() as u64);
                }
                _ => artifacts.push(StoredArtifact::new(piece, content, body.len() as u64)),
            }
        }
    }
    // One per task since schema 12's first release kept one per party: of
    // rows left from then, the last loaded stands for the task.
    let mut push_configs = Vec::new();
    {
        let mut st = c.prepare_cached(
            "SELECT owner_ctx, owner_peer, config FROM a2a_push_configs WHERE task_id = ?1 ORDER BY owner_ctx, owner_peer",
        )?;
        let mut rows = st.query([id])?;
        while let Some(r) = rows.next()? {
            let owner = Party {
                context_id: r.get(0)?,
                peer_id: r.get(1)?,
            };
            let cfg: PushConfig = decode(&r.get::<_, String>(2)?)?;
            push_configs = vec![(owner, cfg)];
        }
    }
    Ok(Some(TaskRecord {
        id: id.to_owned(),
        context_id: ctx.clone(),
        requester: Party {
            context_id: ctx,
            peer_id: req_peer,
        },
        worker: Party {
            context_id: w_ctx,
            peer_id: w_peer,
        },
        status,
        history,
        artifacts,
        stored_bytes: stored_bytes + message_bytes,
        version: version as u64,
        create_message_id: mid,
        broadcast,
        push_configs,
        created_at: created,
        updated_at: updated,
        render: Default::default(),
    }))
}

/// Ids of the tasks a requester created with `message_id`, oldest first.
pub fn creations(
    c: &Connection,
    requester: &Party,
    message_id: &str,
) -> Result<Vec<String>, CoreError> {
    let mut st = c.prepare_cached(
        "SELECT id FROM a2a_tasks WHERE context_id = ?1 AND requester_peer = ?2 AND create_message_id = ?3 ORDER BY seq",
    )?;
    let ids = st
        .query_map(
            params![requester.context_id, requester.peer_id, message_id],
            |r| r.get(0),
        )?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(ids)
}

/// Has this requester created any task at all? (One step into the
/// requester index.)
pub fn has_created(c: &Connection, requester: &Party) -> Result<bool, CoreError> {
    Ok(c.prepare_cached(
        "SELECT 1 FROM a2a_tasks WHERE context_id = ?1 AND requester_peer = ?2 LIMIT 1",
    )?
    .query_row(params![requester.context_id, requester.peer_id], |_| Ok(()))
    .optional()?
    .is_some())
}

const OPEN: &str = "state NOT IN ('completed', 'canceled', 'failed', 'rejected')";

/// Ids of a party's non-terminal tasks, as worker or as requester.
pub fn open_tasks_of(
    c: &Connection,
    party: &Party,
    as_worker: bool,
) -> Result<Vec<String>, CoreError> {
    let sql = if as_worker {
        format!("SELECT id FROM a2a_tasks WHERE worker_ctx = ?1 AND worker_peer = ?2 AND {OPEN} ORDER BY seq")
    } else {
        format!("SELECT id FROM a2a_tasks WHERE context_id = ?1 AND requester_peer = ?2 AND {OPEN} ORDER BY seq")
    };
    let mut st = c.prepare_cached(&sql)?;
    let ids = st
        .query_map(params![party.context_id, party.peer_id], |r| r.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(ids)
}

/// Non-terminal tasks per requester context. Reads the partial index of
/// open tasks (`store::START_INDEXES`), not every task ever stored.
pub fn open_counts(c: &Connection) -> Result<HashMap<String, usize>, CoreError> {
    let mut st = c.prepare(&format!(
        "SELECT context_id, count(*) FROM a2a_tasks INDEXED BY a2a_tasks_open WHERE {OPEN} GROUP BY context_id"
    ))?;
    let counts = st
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as usize))
        })?
        .collect::<Result<HashMap<_, _>, _>>()?;
    Ok(counts)
}

/// The highest task creation sequence number so far (one step down the
/// `seq` index, `store::START_INDEXES`).
pub fn max_seq(c: &Connection) -> Result<i64, CoreError> {
    Ok(
        c.query_row("SELECT coalesce(max(seq), 0) FROM a2a_tasks", [], |r| {
            r.get(0)
        })?,
    )
}

/// One page of a party's tasks, newest first: `(ids, next cursor)`.
pub fn list_task_ids(
    c: &Connection,
    party: &Party,
    role: ListRole,
    state: Option<State>,
    limit: usize,
    before_seq: Option<i64>,
) -> Result<(Vec<(i64, String)>, bool), CoreError> {
    let (as_req, as_worker) = match role {
        ListRole::Requester => (true, false),
        ListRole::Worker => (false, true),
        ListRole::Any => (true, true),
    };
    let mut st = c.prepare_cached(
        "SELECT seq, id FROM a2a_tasks
         WHERE ((?3 AND context_id = ?1 AND requester_peer = ?2) OR (?4 AND worker_ctx = ?1 AND worker_peer = ?2))
           AND (?5 IS NULL OR state = ?5) AND seq < ?6
         ORDER BY seq DESC LIMIT ?7",
    )?;
    let rows = st
        .query_map(
            params![
                party.context_id,
                party.peer_id,
                as_req,
                as_worker,
                state.map(|s| s.as_str()),
                before_seq.unwrap_or(i64::MAX),
                (limit + 1) as i64
            ],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
        )?
        .collect::<Result<Vec<_>, _>>()?;
    let more = rows.len() > limit;
    let page: Vec<(i64, String)> = rows.into_iter().take(limit).collect();
    Ok((page, more))
}

/// A stored status in either form: the compact one
/// (`store::write::status_row`, `log_status`: `ref` is the message's place
/// in the history) or a full `TaskStatus` (which never has `ref`).
#[derive(serde::Deserialize)]
struct StoredStatus {
    state: State,
    #[serde(rename = "ref")]
    msg_ref: Option<usize>,
    message: Option<Arc<Message>>,
    timestamp: Option<String>,
}

impl StoredStatus {
    /// The status, its message taken from `history` (or its row) when
    /// referred to; `at` stands for a timestamp left out.
    fn resolve(
        self,
        c: &Connection,
        task_id: &str,
        history: &[Arc<Message>],
        at: &str,
    ) -> Result<TaskStatus, CoreError> {
        let message = match self.msg_ref {
            Some(pos) => Some(match history.get(pos) {
                Some(m) => m.clone(),
                None => Arc::new(message_at(c, task_id, pos)?),
            }),
            None => self.message,
        };
        Ok(TaskStatus {
            state: self.state,
            message,
            timestamp: self.timestamp.unwrap_or_else(|| at.to_owned()),
        })
    }
}

/// Is this task log payload in the compact form? (The full event JSON of
/// earlier brokers starts with its `kind`.)
fn is_compact(payload: &str) -> bool {
    payload.starts_with("{\"state\"")
}

/// A message row's body as the message it stores, and the length of the
/// message's full JSON (what the task's size bound counts, as when it was
/// written): a row body in the compact form (`store::write::message_row_body`,
/// no `taskId`) gets back its task's id and context and the row's sender;
/// a full body (earlier brokers) is the message itself.
fn stored_message(
    body: &str,
    task_id: &str,
    ctx: &str,
    from_peer: &str,
) -> Result<(Message, u64), CoreError> {
    let mut msg: Message = decode(body)?;
    let mut len = body.len();
    if msg.task_id.is_none() {
        // Each field put back was `,"name":"value"` in the full JSON.
        let field = |name: &str, v: &str| name.len() + 4 + json_str_len(v);
        len += field("taskId", task_id);
        msg.task_id = Some(task_id.to_owned());
        if msg.context_id.is_none() {
            len += field("contextId", ctx);
            msg.context_id = Some(ctx.to_owned());
        }
        if msg.from.is_none() && !from_peer.is_empty() {
            len += field("from", from_peer);
            msg.from = Some(from_peer.to_owned());
        }
    }
    Ok((msg, len as u64))
}

/// The length of `v` as a JSON string, quotes and escapes included.
fn json_str_len(v: &str) -> usize {
    serde_json::to_string(v).map_or(v.len() + 2, |s| s.len())
}

/// A stored message of a task, by its place in the history.
fn message_at(c: &Connection, task_id: &str, pos: usize) -> Result<Message, CoreError> {
    let row: Option<(String, String, String)> = c
        .prepare_cached(
            "SELECT m.body, m.from_peer, t.context_id FROM a2a_messages m
             JOIN a2a_tasks t ON t.id = m.task_id WHERE m.task_id = ?1 AND m.pos = ?2",
        )?
        .query_row(params![task_id, pos as i64], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    match row {
        Some((body, from, ctx)) => stored_message(&body, task_id, &ctx, &from).map(|(m, _)| m),
        None => Err(CoreError::Internal(format!(
            "task {task_id} refers to message {pos} of its history, which is not stored"
        ))),
    }
}

/// One logged event, from either payload form. `history` (the task's
/// messages, if the caller has them in memory) resolves references
/// without reading their rows; `at` is the entry's time.
fn logged_event(
    c: &Connection,
    task_id: &str,
    context_id: &str,
    payload: &str,
    at: &str,
    history: &[Arc<Message>],
) -> Result<StreamEvent, CoreError> {
    if !is_compact(payload) {
        return decode(payload);
    }
    let stored: StoredStatus = decode(payload)?;
    let status = stored.resolve(c, task_id, history, at)?;
    Ok(StreamEvent::status(
        task_id.to_owned(),
        context_id.to_owned(),
        status,
    ))
}

/// The logged events of a task (`rec`) with a version above `after`, in
/// order, as they were routed when they happened.
pub fn log_after(
    c: &Connection,
    rec: &TaskRecord,
    after: u64,
) -> Result<Vec<(u64, StreamEvent)>, CoreError> {
    let mut st = c.prepare_cached(
        "SELECT version, payload, at FROM a2a_task_log WHERE task_id = ?1 AND version > ?2 ORDER BY version",
    )?;
    let mut rows = st.query(params![rec.id, after as i64])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let payload: String = r.get(1)?;
        let at: String = r.get(2)?;
        let event = logged_event(c, &rec.id, &rec.context_id, &payload, &at, &rec.history)?;
        out.push((r.get::<_, i64>(0)? as u64, event));
    }
    Ok(out)
}

/// One entry of the task log, for the audit view.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub version: u64,
    pub kind: String,
    pub actor: String,
    pub payload: String,
    pub at: String,
}

/// The whole log of a task, each payload as the full event JSON (entries
/// in the compact form are expanded, byte for byte what earlier brokers
/// stored).
pub fn full_log(c: &Connection, task_id: &str) -> Result<Vec<LogEntry>, CoreError> {
    let mut st = c.prepare_cached(
        "SELECT version, kind, actor, payload, at FROM a2a_task_log WHERE task_id = ?1 ORDER BY version",
    )?;
    let mut rows = st
        .query_map([task_id], |r| {
            Ok(LogEntry {
                version: r.get::<_, i64>(0)? as u64,
                kind: r.get(1)?,
                actor: r.get(2)?,
                payload: r.get(3)?,
                at: r.get(4)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    if rows.iter().any(|e| is_compact(&e.payload)) {
        let ctx: String = c
            .prepare_cached("SELECT context_id FROM a2a_tasks WHERE id = ?1")?
            .query_row([task_id], |r| r.get(0))?;
        for e in rows.iter_mut().filter(|e| is_compact(&e.payload)) {
            let event = logged_event(c, task_id, &ctx, &e.payload, &e.at, &[])?;
            e.payload = serde_json::to_string(&event)
                .map_err(|err| CoreError::Internal(format!("encoding a log entry: {err}")))?;
        }
    }
    Ok(rows)
}

/// A lease's holder, from its record (live or ended), if the id is known.
pub fn lease_holder(c: &Connection, id: &str) -> Result<Option<Party>, CoreError> {
    Ok(
        c.prepare_cached("SELECT context_id, holder_peer FROM a2a_ext_leases WHERE id = ?1")?
            .query_row([id], |r| {
                Ok(Party {
                    context_id: r.get(0)?,
                    peer_id: r.get(1)?,
                })
            })
            .optional()?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::write::{json, message_row_body};
    use a2a_proto::types::{Part, Role};

    /// The row form loses nothing: the message read back is the one
    /// written, and its counted size is its full JSON's (as when written).
    #[test]
    fn a_message_row_reads_back_whole_and_counts_its_full_size() {
        let mut map = serde_json::Map::new();
        map.insert("k".into(), serde_json::json!({"taskId": "not this one"}));
        let meta = a2a_proto::types::Object::from(map);
        let ctx = "ctx \"quoted\" é \u{1}";
        for (from, metadata) in [(Some("sender"), None), (None, Some(meta))] {
            let msg = Message {
                role: Role::Agent,
                parts: vec![Part::text("hé \"x\"")],
                message_id: "m1".into(),
                task_id: Some("0193-task".into()),
                context_id: Some(ctx.into()),
                from: from.map(str::to_owned),
                to: Some("b".into()),
                metadata,
            };
            let full = json(&msg).unwrap();
            let row = message_row_body(&msg).unwrap();
            assert!(row.len() < full.len(), "{row}");
            assert!(!row.contains("0193-task"), "{row}");
            let (back, len) = stored_message(&row, "0193-task", ctx, from.unwrap_or("")).unwrap();
            assert_eq!(back, msg);
            assert_eq!(len, full.len() as u64);
            // A full body (earlier brokers) reads as it is.
            let (same, len) = stored_message(&full, "0193-task", "other", "other").unwrap();
            assert_eq!(same, msg);
            assert_eq!(len, full.len() as u64);
        }
    }
}
