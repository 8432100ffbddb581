//! Method and notification names (docs/protocol.md §2, §5, §6).

pub const HANDSHAKE: &str = "app.handshake";
pub const AGENTS_REGISTER: &str = "a2a.agents.register";
pub const AGENTS_DEREGISTER: &str = "a2a.agents.deregister";
pub const AGENTS_LIST: &str = "a2a.agents.list";
pub const MESSAGE_SEND: &str = "a2a.message.send";
pub const MESSAGE_STREAM: &str = "a2a.message.stream";
pub const TASKS_GET: &str = "a2a.tasks.get";
pub const TASKS_STATUS: &str = "a2a.tasks.status";
pub const TASKS_CANCEL: &str = "a2a.tasks.cancel";
pub const TASKS_RESUBSCRIBE: &str = "a2a.tasks.resubscribe";
pub const PUSH_CONFIG_SET: &str = "a2a.tasks.pushNotificationConfig.set";
pub const PUSH_CONFIG_GET: &str = "a2a.tasks.pushNotificationConfig.get";
pub const TASKS_LIST: &str = "a2a.tasks.list";
pub const TASKS_ARTIFACT: &str = "a2a.tasks.artifact";
pub const EVENTS_WAIT: &str = "a2a.events.wait";

/// Notification: a task's status or artifact changed.
pub const TASK_EVENT: &str = "a2a.task.event";
/// Notification: a task with a push config reached a terminal state.
pub const PUSH: &str = "a2a.push";
/// Notification (ext): events were dropped for a slow recipient.
pub const LAGGED: &str = "a2a.lagged";
