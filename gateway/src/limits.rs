//! The gateway's own bounds, in one place. (The broker's contract bounds
//! live in `a2a_proto::limits`; these are what the gateway adds in front
//! of it, per HTTP identity and per connection.)

use std::time::Duration;

/// A2A contexts held registered at once, all identities together (each is
/// a broker registration).
pub const MAX_CONTEXTS: usize = 100_000;
/// A2A contexts one identity may hold registered at once.
pub const MAX_CONTEXTS_PER_IDENTITY: usize = 10_000;
/// Non-terminal tasks one identity may have at once.
pub const MAX_OPEN_TASKS_PER_IDENTITY: usize = 1_000;
/// Blocking `SendMessage` calls one identity may have waiting at once
/// (each holds one of its broker connection's parked waits, at most
/// `A2A_MAX_PARKED_WAITS`, for up to the broker's default wait).
pub const MAX_BLOCKING_PER_IDENTITY: usize = 64;
/// A registered context with no open task and no subscriber is freed
/// (deregistered) after this long unused; it registers again on its next
/// use, as the same party.
pub const CONTEXT_IDLE: Duration = Duration::from_secs(600);
/// Contexts registered ahead for one identity's messages that name no
/// context (a new conversation): such a message takes one instead of
/// waiting for a broker registration (a round trip and a commit in the
/// broker: a lone call's p50 was 2.1x the socket's with it, 1.75x
/// without, BENCHMARKS.md "A2A gateway"), and one more is registered
/// after its answer. They count against the identity's bound, are never
/// registered past it, and are freed when idle like any context.
pub const READY_CONTEXTS_PER_IDENTITY: usize = 2;
/// How often idle contexts are looked for.
pub const CONTEXT_SWEEP: Duration = Duration::from_secs(30);
/// How long a blocking `SendMessage` waits for its task to settle, unless
/// `--reply-timeout` says otherwise (0: without bound).
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the broker holds one blocking send (its default wait): a
/// reply timeout shorter than this is waited for by the gateway instead.
pub const BROKER_BLOCKING_WAIT: Duration = Duration::from_secs(30);

/// Longest a task's state update (from an event) waits in the state
/// writer's queue for a commit to share (see `store`'s group commit).
pub const STATE_UPDATE_DELAY: Duration = Duration::from_millis(5);
/// Pages the state file's write-ahead log may hold before the state
/// writer thread checkpoints it (SQLite's own automatic checkpoint, at the
/// same size, would run inside whichever commit filled the log: a
/// `SendMessage` committing its task's row in place among them). 4,000
/// pages (16 MiB of log): a checkpoint writes each page changed since the
/// last one once and syncs twice, so a longer log between them costs less
/// per task (measured: at 1,000 the checkpoints' syncs were ~4 % of the
/// gateway's CPU at 16 callers).
pub const STATE_CHECKPOINT_PAGES: i32 = 4000;

/// The HTTP edge: time to receive a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time to receive a request's whole body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// TCP connections held at once; past it, the longest-idle connection is
/// closed to make room (so idle connections cannot lock a client out).
pub const MAX_CONNECTIONS: usize = 512;
/// Request body bytes held in memory at once, all requests together (in
/// KiB): a body takes its share as its bytes arrive, and a request that
/// would go over waits for room (within the body timeout), so many slow
/// large bodies cost this much at most, not their sum.
pub const BODY_BUDGET_KIB: usize = 32 << 10;
/// Bodies up to this size are read without taking from the budget (so a
/// small call never queues behind large bodies); they are bounded by the
/// connection cap instead (`MAX_CONNECTIONS` x this = 32 MiB).
pub const SMALL_BODY_BYTES: usize = 64 << 10;

/// Outbound (`remote add`, `serve --remote`): a remote agent whose calls
/// have failed (no connection, no answer, or a 502/503) for this long is
/// unreachable: every task waiting on it gets a status message saying so
/// (its state kept), and another when the remote answers again, at which
/// point the task takes the remote's real state. Detection bound: this,
/// after the first failed call (a broken event stream fails at once; a
/// silent one after [`REMOTE_STREAM_IDLE`]).
pub const REMOTE_UNREACHABLE_AFTER: Duration = Duration::from_secs(5);
/// Bound of one probe of a remote (`GetTask` while polling, `CancelTask`):
/// a host that stopped answering counts as failed after this, not after
/// the long bound of a blocking send.
pub const REMOTE_PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// While a remote is unreachable, its card is fetched this often (one fetch
/// per remote, however many tasks wait on it), so its tasks resume within
/// about this long of its return.
pub const REMOTE_PROBE_EVERY: Duration = Duration::from_secs(1);
/// An event stream from a remote silent this long is given up and its task
/// polled instead (`a2a-gateway serve` writes a keep-alive every 15 s, so
/// three missed ones).
pub const REMOTE_STREAM_IDLE: Duration = Duration::from_secs(45);
/// How long a cancel that cannot reach the remote (unreachable) is retried
/// by the running bridge; past it the record stays in the state file and
/// the next start of the bridge cancels the remote task.
pub const REMOTE_CANCEL_RETRY: Duration = Duration::from_secs(600);
/// After a forwarded task's last event, how long the rest of the remote's
/// event stream (its end) is read for, and how many bytes at most, so its
/// kept-alive connection can be used again (see `outbound::rpc`).
pub const REMOTE_STREAM_DRAIN: Duration = Duration::from_secs(2);
pub const REMOTE_STREAM_DRAIN_BYTES: usize = 64 << 10;
/// After a restart, a message whose forward was recorded before the remote
/// named its task is looked for among the remote's this many newest tasks
/// (`ListTasks`, its largest page) before it is sent again.
pub const REMOTE_LOOKUP_PAGE: usize = 100;
