//! The broker's rules, free of JSON framing and transports.
//!
//! - [`error`]: every caller-visible failure of the core, one variant each.
//! - [`state`]: the task state machine of docs/protocol.md §7 Task states.
//! - [`task`]: the in-memory task record and its parties.
//! - [`artifact`]: an artifact as stored (first call + appended chunks), and its merge rule.
//! - [`idempotency`]: when a send is a retry by `messageId`, and when reuse is refused.
//! - [`lease`]: live leases per context, their conflicts, expiries and watchers.
//! - [`registry`]: live agents, peer ids and capability tokens.
//! - [`addressing`]: who may address whom, and the `to` resolution rules.

pub mod addressing;
pub mod artifact;
pub mod error;
pub mod idempotency;
pub mod lease;
pub mod registry;
pub mod state;
pub mod task;

pub use error::CoreError;
