//! The method table, and method and notification names (docs/protocol.md
//! §2 Opening a connection, §5 Methods, §6 Events).
//!
//! [`method_table!`](crate::method_table) is the one list of the methods:
//! every per-method list of this crate ([`crate::call::Call`], its parsing
//! and names, [`crate::call::Route`], the pre-checks' dispatch, the result
//! each method answers) and of the broker (its dispatch and its writer's)
//! is generated from it, so adding a method is a row here, not a line in
//! each of those matches.

/// The table of every method. Each row:
///
/// `Variant(params type) NAME_CONSTANT = "wire name", route, Result, handler;`
///
/// - `Variant`: the [`Call`](crate::call::Call) variant. The rows are in
///   the binary codec's order (bincode numbers `Call`'s variants by their
///   place here, docs/protocol.md §1 Framing): append, never reorder.
/// - `route`: where the broker answers the call ([`Route`](crate::call::Route)):
///   `session` (the connection's own state), `read` (without the writer),
///   `write` (on the writer thread), `wait` (parked in a pull queue).
/// - `Result`: the [`Outcome`](crate::call::Outcome) variant of its result
///   (`TaskOrTasks`: `Tasks` for a broadcast, else `Task`).
/// - `handler`: the broker's module for the method (`broker/src/methods/`).
///
/// It expands to `$callback! { rows }`: a crate generates its own
/// per-method code with a `macro_rules!` of its own that takes the rows.
#[macro_export]
macro_rules! method_table {
    ($callback:ident) => {
        $callback! {
            Handshake($crate::params::HandshakeParams) HANDSHAKE = "app.handshake", session, Handshake, handshake;
            Register($crate::params::RegisterParams) AGENTS_REGISTER = "a2a.agents.register", write, Registered, agents_register;
            Deregister($crate::params::TokenParams) AGENTS_DEREGISTER = "a2a.agents.deregister", write, Ok, agents_deregister;
            ListAgents($crate::params::ListAgentsParams) AGENTS_LIST = "a2a.agents.list", read, Agents, agents_list;
            Send($crate::params::SendParams) MESSAGE_SEND = "a2a.message.send", write, TaskOrTasks, message_send;
            Stream($crate::params::SendParams) MESSAGE_STREAM = "a2a.message.stream", write, TaskOrTasks, message_stream;
            Get($crate::params::GetParams) TASKS_GET = "a2a.tasks.get", read, Task, tasks_get;
            Status($crate::params::StatusParams) TASKS_STATUS = "a2a.tasks.status", write, Task, tasks_status;
            Cancel($crate::params::CancelParams) TASKS_CANCEL = "a2a.tasks.cancel", write, Task, tasks_cancel;
            Resubscribe($crate::params::ResubscribeParams) TASKS_RESUBSCRIBE = "a2a.tasks.resubscribe", write, Task, tasks_resubscribe;
            PushSet($crate::params::PushSetParams) PUSH_CONFIG_SET = "a2a.tasks.pushNotificationConfig.set", write, Config, push_config_set;
            PushGet($crate::params::PushGetParams) PUSH_CONFIG_GET = "a2a.tasks.pushNotificationConfig.get", read, Config, push_config_get;
            ListTasks($crate::params::ListTasksParams) TASKS_LIST = "a2a.tasks.list", read, TaskList, tasks_list;
            Artifact($crate::params::ArtifactParams) TASKS_ARTIFACT = "a2a.tasks.artifact", write, Task, tasks_artifact;
            Wait($crate::params::WaitParams) EVENTS_WAIT = "a2a.events.wait", wait, Events, events_wait;
        }
    };
}

/// The name constants, one per row of the table.
macro_rules! name_constants {
    ($( $variant:ident($params:ty) $konst:ident = $name:literal, $route:ident, $result:ident, $handler:ident; )*) => {
        $(
            #[doc = concat!("`", $name, "`.")]
            pub const $konst: &str = $name;
        )*

        /// Every method name, in the table's order.
        pub const ALL: &[&str] = &[$($name),*];
    };
}

method_table!(name_constants);

/// Notification: a task's status or artifact changed.
pub const TASK_EVENT: &str = "a2a.task.event";
/// Notification: a task with a push config reached a terminal state.
pub const PUSH: &str = "a2a.push";
/// Notification (ext): events were dropped for a slow recipient.
pub const LAGGED: &str = "a2a.lagged";
