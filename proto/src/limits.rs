//! The bounds of PROTOCOL.md §7, in one place, named exactly as in the contract.

/// Unicode scalar values, summed over one message's text parts.
pub const A2A_MAX_TEXT_CHARS: usize = 16_000;
/// Decoded bytes of one file part; also the serialized size of one data part.
pub const A2A_MAX_FILE_BYTES: usize = 20 * 1024 * 1024;
/// Messages in one task's history.
pub const A2A_MAX_TASK_HISTORY: usize = 256;
/// Non-terminal tasks per requester context.
pub const A2A_MAX_TASKS_PER_CONTEXT: usize = 128;
/// Successful sends (tasks created or messages sent) per registration.
pub const A2A_MAX_SENDS_PER_RUN: u32 = 200;
/// Upper clamp of `a2a.events.wait` timeouts, and of blocking sends.
pub const A2A_MAX_STREAM_WAIT_SECONDS: u64 = 120;
/// Default wait of `a2a.events.wait` and of a blocking send.
pub const A2A_DEFAULT_STREAM_WAIT_SECONDS: u64 = 30;

/// Longest accepted frame (an NDJSON line or a binary frame payload).
pub const MAX_FRAME_BYTES: usize = 32 * 1024 * 1024;
/// Pending events a pull agent holds before the oldest are dropped.
pub const MAX_PULL_QUEUE: usize = 1024;
/// Default page size of `a2a.tasks.list`.
pub const DEFAULT_LIST_LIMIT: usize = 100;
/// Largest page of `a2a.tasks.list`.
pub const MAX_LIST_LIMIT: usize = 1000;
/// Undelivered events a connection's outbox holds before the oldest are
/// dropped and reported with `a2a.lagged`.
pub const OUTBOX_EVENT_BOUND: usize = 65_536;
/// Calls the writer commits in one transaction at most (`--batch-max` default).
pub const DEFAULT_BATCH_MAX: usize = 256;
/// Unread responses a socket connection may accumulate before the broker
/// closes it (a client that sends but never reads).
pub const OUTBOX_RESPONSE_BOUND: usize = 16_384;
