//! The failures the core reports to callers; the dispatcher turns each into
//! its JSON-RPC error in one function (`crate::rpc_errors`).

use a2a_proto::check::CheckError;
use a2a_proto::types::State;

/// One variant per caller-visible failure.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CoreError {
    /// No token was given (absent, `null` or empty).
    #[error("missing token: register first and pass the token it returns")]
    MissingToken,
    /// The token is malformed, unknown or invalidated.
    #[error("invalid token: unknown, or invalidated by a deregistration or a closed connection")]
    UnknownToken,
    /// The named agent is not live or may not be addressed by the caller.
    #[error("unknown agent `{0}`")]
    UnknownAgent(String),
    /// `to` was omitted and several peers could be meant.
    #[error("ambiguous recipient: name one of the candidates in `to`")]
    AmbiguousRecipient(Vec<String>),
    /// No task has this id.
    #[error("unknown task `{0}`")]
    UnknownTask(String),
    /// The caller is not a party to the task (or not the party the call needs).
    #[error("{0}")]
    CrossContextDenied(&'static str),
    /// The state machine does not allow this move.
    #[error("cannot move a task from {from} to {to}", from = .from.as_str(), to = .to.as_str())]
    InvalidTransition { from: State, to: State },
    /// The task is in a terminal state.
    #[error("task is {} and can no longer change", .0.as_str())]
    TaskTerminal(State),
    /// A count bound of §9 would be exceeded.
    #[error("{limit} reached")]
    SendCap {
        limit: &'static str,
        max: u64,
        actual: u64,
    },
    /// The caller has no peer to address.
    #[error("no peers to address")]
    NoPeers,
    /// The params are well-formed JSON of the wrong shape or meaning.
    #[error("{0}")]
    InvalidParams(String),
    /// A request refused as its pre-check refuses it: a bound of §9 (an
    /// id's length, a size, a lease's numbers; the pre-checks' own, or
    /// one the core checks against its state, such as a task's bytes) or
    /// params the pre-check found wrong. One error type for both, so a
    /// bound has one wire error whoever finds it.
    #[error(transparent)]
    Check(#[from] CheckError),
    /// (ext) A live lease of another holder overlaps the paths asked for.
    #[error("lease conflict: {holder} holds {} of these paths (lease {lease_id})", .paths.join(", "))]
    LeaseConflict {
        lease_id: String,
        holder: String,
        paths: Vec<String>,
    },
    /// (ext) No live lease of the caller's context has this id.
    #[error("unknown lease `{0}` (never granted in this context, or ended)")]
    UnknownLease(String),
    /// The database failed, or a bug.
    #[error("{0}")]
    Internal(String),
}

/// `data.reason` of the calls refused because the file is gone.
pub const REMOVED_REASON: &str = "database file removed";

/// `data.reason` of the writes refused once a read has found a damaged page.
pub const DAMAGED_REASON: &str = "database damaged";

/// Why a COMMIT failed, for the calls it held (their wire error is made
/// at the edge: `rpc_errors::store`; the texts are its `data.reason`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A read or the check found the file damaged.
    #[error("{}", DAMAGED_REASON)]
    Damaged,
    /// The file guard refused: the database file is gone.
    #[error("{}", REMOVED_REASON)]
    Removed,
    /// SQLite's own failure.
    #[error("commit failed: {0}")]
    Commit(String),
}
