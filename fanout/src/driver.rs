//! The seam between the fan-out's state machine ([`crate::engine`]) and a
//! wire: a [`Driver`] submits calls for an agent *slot* and completes each
//! with a callback, never blocking the caller; the events of every agent it
//! registered reach one [`Sink`] as normalised [`Ev`]s. Two drivers exist:
//! the Rust client over binary frames ([`crate::binary`], also the event
//! ring) and a minimal NDJSON one ([`crate::ndjson`], stdio and the socket).
//!
//! Callbacks and the sink run on the driver's reader threads, so the state
//! machine answers an event with more submissions and no thread per agent.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The completion of one submitted call (`Err` holds the broker's or the
/// connection's error as text: the generator only counts and shows them).
pub type Done<T> = Box<dyn FnOnce(Result<T, String>) + Send + 'static>;

/// Where a driver hands every event: the agent slot it arrived for, and
/// the event.
pub type Sink = Arc<dyn Fn(usize, Ev) + Send + Sync + 'static>;

/// What an event says, reduced to what the state machine needs.
#[derive(Debug, Clone, PartialEq)]
pub enum EvKind {
    /// A `status-update` to this state (wire name), `final` when terminal.
    Status { state: String, is_final: bool },
    /// An `artifact-update`.
    Artifact,
    /// An `a2a.push` (the generator sets no push config, so never expected).
    Push,
    /// `a2a.lagged`: the broker dropped this many events.
    Lagged { dropped: u64 },
    /// (ext) `a2a.lease.released`: a lease this agent waited on or was
    /// refused ended.
    LeaseReleased,
}

/// How an `a2a.leases.acquire` was answered.
#[derive(Debug, Clone, PartialEq)]
pub enum LeaseAnswer {
    Granted {
        id: String,
    },
    /// `A2A_LEASE_CONFLICT`: `holder` holds an overlapping lease.
    Conflict {
        holder: String,
    },
}

/// One event delivered to an agent.
#[derive(Debug, Clone)]
pub struct Ev {
    /// Per-recipient sequence number (`None` only for `a2a.lagged`).
    pub seq: Option<u64>,
    /// The task it is about (empty for `a2a.lagged`).
    pub task_id: String,
    /// The task's version after the change (0 where the event has none).
    pub version: u64,
    pub kind: EvKind,
    /// The sender's clock at submission (`metadata.t`, ns since the Unix
    /// epoch), for the send-to-event latency.
    pub sent_ns: Option<u64>,
    /// The first text part of the status message (tells claims from jobs).
    pub text: String,
}

/// The metadata key carrying the send time.
pub const SENT_KEY: &str = "t";

/// Now, in ns since the Unix epoch: the one clock every process of a run
/// shares (worker processes stamp with it too).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The task states the open-task check asks the broker for.
pub const OPEN_STATES: [&str; 4] = ["submitted", "working", "input-required", "auth-required"];

/// An exclusive lease asked for ([`Driver::acquire_lease`]): its paths,
/// time to live, and how long to wait for a conflict to clear.
#[derive(Clone, Copy, Debug)]
pub struct LeaseAsk<'a> {
    pub paths: &'a [String],
    pub ttl_seconds: u64,
    pub wait_seconds: Option<u64>,
}

/// A worker's status move ([`Driver::status`]): the state's wire name and
/// the text of the message that goes with it.
#[derive(Clone, Copy, Debug)]
pub struct StatusTo<'a> {
    pub state: &'static str,
    pub text: &'a str,
}

/// A wire the generator can drive. Every method returns at once; `done`
/// runs exactly once, on any thread (often a reader thread), or on the
/// caller's when the submission itself fails.
pub trait Driver: Send + Sync {
    /// `a2a.agents.register` of agent `slot` on connection `conn` (taken
    /// modulo the number of connections); answers its peer id. The agent's
    /// events reach the sink under `slot` from then on.
    fn register(&self, slot: usize, conn: usize, context: &str, name: &str, done: Done<String>);
    /// `a2a.agents.list`: the peer ids it may address.
    fn list_agents(&self, slot: usize, done: Done<Vec<String>>);
    /// `a2a.message.send` creating a task for `to` (`"*"`: a broadcast);
    /// answers the created task ids.
    fn create(&self, slot: usize, to: &str, text: &str, sent_ns: u64, done: Done<Vec<String>>);
    /// `a2a.message.send` on an existing task (the requester's answer).
    fn reply(&self, slot: usize, task: &str, text: &str, sent_ns: u64, done: Done<()>);
    /// `a2a.tasks.status` with a text message (the worker's).
    fn status(&self, slot: usize, task: &str, to: StatusTo<'_>, sent_ns: u64, done: Done<()>);
    /// `a2a.tasks.artifact` with a one-part text artifact.
    fn artifact(&self, slot: usize, task: &str, sent_ns: u64, done: Done<()>);
    /// How many of this agent's tasks are in `state` (`a2a.tasks.list`,
    /// role any; one page of up to 100 is enough to tell none from some).
    fn count_tasks(&self, slot: usize, state: &'static str, done: Done<u64>);
    /// `a2a.leases.acquire` of exclusive leases on `paths` (parked up to
    /// `wait_seconds` when given); a conflict is an answer, not an error.
    fn acquire_lease(&self, slot: usize, ask: LeaseAsk<'_>, done: Done<LeaseAnswer>);
    /// `a2a.leases.release`.
    fn release_lease(&self, slot: usize, lease_id: &str, done: Done<()>);
    /// Did every connection get the shared-memory event ring it asked for?
    /// `None` when none was asked for.
    fn event_ring(&self) -> Option<bool> {
        None
    }
    /// Closes every connection and drops every agent (their handlers hold
    /// the sink, which holds the driver: this breaks the cycle).
    fn close(&self);
}
