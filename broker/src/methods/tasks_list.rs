//! `a2a.tasks.list` (ext, docs/protocol.md §5 Methods): the caller's
//! tasks, newest first, paged; always read from SQLite (its index).

use super::ReadMethod;
use crate::core::CoreError;
use crate::engine::Shared;
use crate::read_calls::ReadCtx;
use crate::reply::{Reply, TaskView};
use crate::store::read;
use a2a_proto::limits::{DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT};
use a2a_proto::params::ListTasksParams;

/// Bytes of tasks one `a2a.tasks.list` page may carry: the outgoing frame
/// bound less room for the envelope.
const LIST_REPLY_BUDGET: usize = a2a_proto::limits::A2A_MAX_OUT_FRAME_BYTES - 64 * 1024;

pub(crate) struct Handler;

impl ReadMethod for Handler {
    type Params = ListTasksParams;

    fn here(_: &ListTasksParams, _: &Shared) -> bool {
        false
    }

    fn run(p: ListTasksParams, c: &mut ReadCtx<'_>) -> Result<Reply, CoreError> {
        let agent = c.agent(p.token.as_deref())?;
        let limit = p
            .limit
            .map_or(DEFAULT_LIST_LIMIT, |l| l as usize)
            .clamp(1, MAX_LIST_LIMIT);
        let before = match p.cursor.as_deref() {
            None => None,
            Some(cur) => Some(cur.parse::<i64>().map_err(|_| {
                CoreError::InvalidParams(format!("cursor `{cur}` is not one this broker gave"))
            })?),
        };
        let (page, more) =
            read::list_task_ids(c.db()?, &agent.party(), p.role, p.state, limit, before)?;
        // The answer must fit one outgoing frame (§1 Framing, §9 Bounds): past the budget the
        // page ends early, and its cursor picks up where it stopped.
        let mut budget = LIST_REPLY_BUDGET;
        let mut tasks = Vec::with_capacity(page.len());
        let mut last_seq = None;
        let mut cut = false;
        for (seq, id) in &page {
            let view = TaskView::full(c.task(id)?);
            let size = a2a_proto::check::json_len(&view).map_err(CoreError::from)?;
            if size > budget && !tasks.is_empty() {
                cut = true;
                break;
            }
            budget = budget.saturating_sub(size);
            tasks.push(view);
            last_seq = Some(*seq);
        }
        Ok(Reply::TaskList {
            tasks,
            next_cursor: (more || cut)
                .then_some(last_seq)
                .flatten()
                .map(|n| n.to_string()),
        })
    }
}
