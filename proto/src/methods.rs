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
/// `Variant(params type) NAME_CONSTANT, route, Result, handler,
///     { rust: Type::fn, c: c_function, node: jsMethod, tool: action };`
///
/// - `Variant`: the [`Call`](crate::call::Call) variant. The rows are in
///   the binary codec's order (bincode numbers `Call`'s variants by their
///   place here, docs/protocol.md §1 Framing): append, never reorder.
/// - `NAME_CONSTANT`: the constant below that holds its wire name.
/// - `route`: where the broker answers the call ([`Route`](crate::call::Route)):
///   `session` (the connection's own state), `read` (without the writer),
///   `write` (on the writer thread), `wait` (parked in a pull queue).
/// - `Result`: the [`Outcome`](crate::call::Outcome) variant of its result
///   (`TaskOrTasks`: `Tasks` for a broadcast, else `Task`).
/// - `handler`: the broker's module for the method (`broker/src/methods/`).
/// - The bindings: the method's typed entry point in each binding, `_` where
///   a binding has none (the Rust client's generic `Agent::call::<M>`, the
///   C ABI's `a2a_client_call_json` and the Node addon's `agent.request`
///   reach every method) or the model's tool does not offer it. The bindings test
///   (`tests/tests/it/bindings.rs`) fails when a row's name is missing
///   from its binding (`a2a-client`'s source, the C header, the Node
///   types) or the tool's action list and the table disagree.
///   [`crate::request`] has one marker type per row.
///
/// It expands to `$callback! { rows }`: a crate generates its own
/// per-method code with a `macro_rules!` of its own that takes the rows.
#[macro_export]
macro_rules! method_table {
    ($callback:ident) => {
        $callback! {
            Handshake($crate::params::HandshakeParams) HANDSHAKE, session, Handshake, handshake,
                { rust: Client::connect, c: a2a_client_new, node: connect, tool: _ };
            Register($crate::params::RegisterParams) AGENTS_REGISTER, write, Registered, agents_register,
                { rust: Client::register, c: a2a_client_register, node: register, tool: _ };
            Deregister($crate::params::TokenParams) AGENTS_DEREGISTER, write, Ok, agents_deregister,
                { rust: Agent::deregister, c: a2a_agent_deregister, node: deregister, tool: _ };
            ListAgents($crate::params::ListAgentsParams) AGENTS_LIST, read, Agents, agents_list,
                { rust: Agent::list_agents, c: a2a_agent_list_agents, node: list, tool: discover };
            Send($crate::params::SendParams) MESSAGE_SEND, write, TaskOrTasks, message_send,
                { rust: Agent::send, c: a2a_agent_send, node: send, tool: send };
            Stream($crate::params::SendParams) MESSAGE_STREAM, write, TaskOrTasks, message_stream,
                { rust: Agent::stream, c: _, node: stream, tool: _ };
            Get($crate::params::GetParams) TASKS_GET, read, Task, tasks_get,
                { rust: Agent::get_task, c: a2a_agent_get_task, node: get, tool: get };
            Status($crate::params::StatusParams) TASKS_STATUS, write, Task, tasks_status,
                { rust: Agent::set_status, c: a2a_agent_set_status, node: status, tool: complete };
            Cancel($crate::params::CancelParams) TASKS_CANCEL, write, Task, tasks_cancel,
                { rust: Agent::cancel, c: a2a_agent_cancel, node: cancel, tool: cancel };
            Resubscribe($crate::params::ResubscribeParams) TASKS_RESUBSCRIBE, write, Task, tasks_resubscribe,
                { rust: Agent::resubscribe, c: a2a_agent_resubscribe, node: resubscribe, tool: _ };
            PushSet($crate::params::PushSetParams) PUSH_CONFIG_SET, write, Config, push_config_set,
                { rust: Agent::set_push_config, c: a2a_agent_set_push_config, node: setPush, tool: _ };
            PushGet($crate::params::PushGetParams) PUSH_CONFIG_GET, read, Config, push_config_get,
                { rust: Agent::push_config, c: a2a_agent_get_push_config, node: getPush, tool: _ };
            ListTasks($crate::params::ListTasksParams) TASKS_LIST, read, TaskList, tasks_list,
                { rust: Agent::list_tasks, c: a2a_agent_list_tasks, node: listTasks, tool: _ };
            Artifact($crate::params::ArtifactParams) TASKS_ARTIFACT, write, Task, tasks_artifact,
                { rust: Agent::add_artifact, c: a2a_agent_add_artifact, node: artifact, tool: _ };
            Wait($crate::params::WaitParams) EVENTS_WAIT, wait, Events, events_wait,
                { rust: Agent::wait, c: a2a_agent_wait_event, node: wait, tool: wait };
            LeaseAcquire($crate::params::AcquireLeaseParams) LEASES_ACQUIRE, write, Lease, leases_acquire,
                { rust: Agent::acquire_lease, c: a2a_agent_acquire_lease, node: lease, tool: lease };
            LeaseRenew($crate::params::RenewLeaseParams) LEASES_RENEW, write, Lease, leases_renew,
                { rust: Agent::renew_lease, c: a2a_agent_renew_lease, node: renew, tool: _ };
            LeaseRelease($crate::params::ReleaseLeaseParams) LEASES_RELEASE, write, Ok, leases_release,
                { rust: Agent::release_lease, c: a2a_agent_release_lease, node: release, tool: release };
            LeaseList($crate::params::ListLeasesParams) LEASES_LIST, write, Leases, leases_list,
                { rust: Agent::list_leases, c: a2a_agent_list_leases, node: leases, tool: _ };
        }
    };
}

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
pub const LEASES_ACQUIRE: &str = "a2a.leases.acquire";
pub const LEASES_RENEW: &str = "a2a.leases.renew";
pub const LEASES_RELEASE: &str = "a2a.leases.release";
pub const LEASES_LIST: &str = "a2a.leases.list";

/// Every method name, in the table's order.
pub const ALL: &[&str] = {
    macro_rules! all {
        ($( $variant:ident($params:ty) $konst:ident, $route:ident, $result:ident, $handler:ident, $bindings:tt; )*) => {
            &[$($konst),*]
        };
    }
    method_table!(all)
};

/// Notification: a task's status or artifact changed.
pub const TASK_EVENT: &str = "a2a.task.event";
/// Notification: a task with a push config reached a terminal state.
pub const PUSH: &str = "a2a.push";
/// Notification (ext): events were dropped for a slow recipient.
pub const LAGGED: &str = "a2a.lagged";
/// Notification (ext): a lease that the recipient waited on or was refused
/// ended (docs/protocol.md §6 Events, §11 Leases).
pub const LEASE_RELEASED: &str = "a2a.lease.released";
