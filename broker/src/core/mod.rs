//! The broker's rules, free of JSON framing and transports.
//!
//! - [`error`]: every caller-visible failure of the core, one variant each.
//! - [`state`]: the task state machine of docs/protocol.md §7 Task states.
//! - [`task`]: the in-memory task record and its parties.
//! - [`artifact`]: an artifact as stored (first call + appended chunks), and its merge rule.
//! - [`idempotency`]: when a send is a retry by `messageId`, and when reuse is refused.
//! - [`lease`]: live leases per context, their conflicts, expiries and watchers.
//!
//! The live agents (registry, addressing) are `crate::agents`, above this
//! module and `crate::delivery`: an agent holds its endpoint.

pub mod artifact;
pub mod error;
pub mod idempotency;
pub mod lease;
pub mod state;
pub mod task;

pub use error::{CoreError, StoreError};

/// Identifies one transport connection (its agents share its fate).
pub type ConnId = u64;
