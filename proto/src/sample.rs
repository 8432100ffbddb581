//! Sample values that tests of other crates build alike (the broker's
//! event weights, the A2A tool's inbox), made in one place. Not part of the
//! supported surface.

use crate::types::{Message, Notification, State, StreamEvent, TaskEventParams, TaskStatus};
use std::sync::Arc;

/// An `a2a.task.event` to `recipient` (both in context `c`): the task `t`
/// moved to `state` with `message`; the first event of its first version.
pub fn status_event(recipient: &str, state: State, message: Message) -> Notification {
    Notification::TaskEvent(TaskEventParams {
        recipient: recipient.into(),
        recipient_context_id: "c".into(),
        context_id: "c".into(),
        seq: 1,
        task_version: 1,
        event: StreamEvent::status(
            "t".into(),
            "c".into(),
            TaskStatus {
                state,
                message: Some(Arc::new(message)),
                timestamp: "2026-01-01T00:00:00.000Z".into(),
            },
        ),
    })
}
