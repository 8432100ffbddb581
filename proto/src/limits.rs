//! The bounds of docs/protocol.md §9, in one place, named exactly as in the contract.

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
/// Bytes of pending events (their encoded size) a pull agent holds before
/// the oldest are dropped; one event larger than this is still held, alone.
pub const MAX_PULL_QUEUE_BYTES: usize = 64 * 1024 * 1024;
/// Default page size of `a2a.tasks.list`.
pub const DEFAULT_LIST_LIMIT: usize = 100;
/// Largest page of `a2a.tasks.list`.
pub const MAX_LIST_LIMIT: usize = 1000;
/// Undelivered events a connection's outbox holds before the oldest are
/// dropped and reported with `a2a.lagged`.
pub const OUTBOX_EVENT_BOUND: usize = 65_536;
/// Calls the writer commits in one transaction at most (`--batch-max` default).
pub const DEFAULT_BATCH_MAX: usize = 256;
/// Calls one connection puts in a commit group at most while another
/// connection's calls wait too: a group's time is what each of its calls
/// waits for, so a flood shares the writer instead of queueing ahead.
pub const WRITER_SHARE_CALLS: usize = 2;
/// Payload bytes (text, file and data parts) of the calls in one commit
/// group at most; a call with more goes in a group of its own, taking turns
/// with groups of smaller calls, so large payloads never go ahead of them.
pub const WRITER_GROUP_BYTES: usize = 256 * 1024;
/// Unread responses a socket connection may accumulate before the broker
/// closes it (a client that sends but never reads).
pub const OUTBOX_RESPONSE_BOUND: usize = 16_384;
/// Bytes of undelivered events (their encoded size) a connection's outbox
/// holds before the oldest are dropped and reported with `a2a.lagged`: with
/// [`OUTBOX_EVENT_BOUND`], what a client that stops reading can make the
/// broker hold in events. One event larger than this (a file of up to
/// `A2A_MAX_FILE_BYTES` is smaller) is still delivered, alone.
pub const OUTBOX_EVENT_BYTES: usize = 64 * 1024 * 1024;
/// Bytes of unread responses (their encoded size; a task's stored messages
/// and artifacts) a socket connection may accumulate before the broker
/// closes it; one response larger than this never closes it alone.
pub const OUTBOX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// Task records the broker keeps in memory at most (the writer's cache,
/// which the readers' cache mirrors), open and terminal alike; the rest
/// are read from SQLite when used.
pub const TASK_CACHE_TASKS: usize = 8192;
/// Bytes of task records (content and kept renderings, as the broker
/// estimates them) the broker keeps in memory at most, open and terminal
/// alike: with [`TASK_CACHE_TASKS`], what bounds the broker's memory for
/// tasks whatever the number of open tasks.
pub const TASK_CACHE_BYTES: usize = 32 * 1024 * 1024;
/// Task ids the broker remembers by creating `messageId` (idempotent
/// retries answered from memory) over all requesters at most; past it the
/// requesters remembered longest are looked up in SQLite instead.
pub const CREATIONS_TRACKED: usize = 16_384;

// ---- Bounds (ext) on everything else a client can make the broker store or hold (§9) ----

/// `messageId`, `taskId`, `artifactId`, `contextId`, `card.name`, a push config's `id`.
pub const A2A_MAX_ID_BYTES: usize = 256;
/// Serialized agent card.
pub const A2A_MAX_CARD_BYTES: usize = 64 * 1024;
/// Serialized `metadata`, summed over a message and its parts (or an artifact and its parts).
pub const A2A_MAX_METADATA_BYTES: usize = 64 * 1024;
/// One artifact, appends included (decoded file bytes + UTF-8 text bytes +
/// serialized data parts + `uri` lengths).
pub const A2A_MAX_ARTIFACT_BYTES: usize = 20 * 1024 * 1024;
/// Artifacts per task.
pub const A2A_MAX_ARTIFACTS: usize = 64;
/// Serialized size of a task's stored messages and artifacts together.
pub const A2A_MAX_TASK_BYTES: usize = 28 * 1024 * 1024;
/// Task log entries per task (the creation and every status update, message
/// and artifact call count).
pub const A2A_MAX_TASK_LOG: u64 = 10_000;
/// Entries of one NDJSON batch.
pub const A2A_MAX_BATCH: usize = 256;
/// Unanswered `a2a.events.wait` / blocking sends per connection.
pub const A2A_MAX_PARKED_WAITS: usize = 64;
/// Longest line or frame the broker writes (§1 Framing); clients accept up to this.
pub const A2A_MAX_OUT_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// Largest shared-memory event ring a connection may ask for (§1 Framing, the event ring); a
/// larger request is granted this size.
pub const MAX_EVENT_RING_BYTES: usize = 16 * 1024 * 1024;
/// The shared memory all of a broker's event rings may take together
/// (§1 Framing, the event ring), at most: this, and never more than half of `/dev/shm`'s size
/// (`RingBudget` in the broker's `delivery/ring.rs`). A ring that would go
/// past it is not granted (the connection's events go over the socket).
pub const MAX_EVENT_RINGS_TOTAL_BYTES: u64 = 1024 * 1024 * 1024;
/// Events queued behind a connection's full event ring before the oldest
/// are dropped (reported by the ring's lag record).
pub const EVENT_RING_OVERFLOW_EVENTS: usize = 4096;
/// Bytes of events queued behind a connection's full event ring before the
/// oldest are dropped (reported by the ring's lag record).
pub const EVENT_RING_OVERFLOW_BYTES: usize = 4 * 1024 * 1024;

// ---- Leases (ext, §11 Leases) ----

/// Paths in one `a2a.leases.acquire`.
pub const A2A_MAX_LEASE_PATHS: usize = 64;
/// Bytes of one lease path (before normalising).
pub const A2A_MAX_LEASE_PATH_BYTES: usize = 1024;
/// Bytes of a lease's `reason`.
pub const A2A_MAX_LEASE_REASON_BYTES: usize = 1024;
/// Live leases one agent holds at once.
pub const A2A_MAX_LEASES_PER_AGENT: usize = 64;
/// Shortest `ttlSeconds` of a lease.
pub const A2A_MIN_LEASE_TTL_SECONDS: u64 = 1;
/// Longest `ttlSeconds` of a lease (renew to hold it longer).
pub const A2A_MAX_LEASE_TTL_SECONDS: u64 = 3600;
/// Longest `waitSeconds` of an `a2a.leases.acquire` (a parked wait).
pub const A2A_MAX_LEASE_WAIT_SECONDS: u64 = 120;
/// Steps one `a2a.leases.acquire` or `a2a.leases.list` may spend comparing
/// its paths with the live leases of its context (`lease_path::Work`: a
/// step per pair of paths, per pair of segments and per byte compared).
/// The comparison runs on the broker's single writer, so this bounds how
/// long one call can hold every other client's writes (about 10 ms of
/// steps at the worst case measured, BENCHMARKS.md).
pub const A2A_MAX_LEASE_MATCH_STEPS: u64 = 6_000_000;

// ---- Before the handshake, on the local socket (§2) ----

/// Longest line or frame accepted on a socket connection before its handshake.
pub const PRE_HANDSHAKE_FRAME_BYTES: usize = 64 * 1024;
/// Seconds a socket connection has to complete its handshake.
pub const HANDSHAKE_TIMEOUT_SECONDS: u64 = 10;
/// Default of `--max-connections`: socket connections held at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
