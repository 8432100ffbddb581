//! The typed client of `a2a-broker`'s local socket (docs/protocol.md), over
//! binary frames: no JSON on the hot path, and no async runtime required.
//! Plain threads can use it, which is what the C ABI and the Node addon
//! that wrap it need.
//!
//! ```no_run
//! use a2a_client::{agent_card, message_to, read_secret, Client, Delivery};
//! use std::time::Duration;
//! # fn main() -> Result<(), a2a_client::ClientError> {
//! let socket = std::path::Path::new("/run/user/1000/a2a-broker/main.sock");
//! let client = Client::connect(socket, &read_secret(socket)?)?;
//! let me = client.register("session-1", agent_card("planner"), Delivery::Push)?;
//! let task = me.send(message_to("coder", "write the parser"), None)?;
//! for event in me.wait(Duration::from_secs(5))? {
//!     println!("{task:?} -> {event:?}");
//! }
//! # Ok(()) }
//! ```
//!
//! Non-blocking underneath: every call is a submission (`*_async`) that
//! returns a [`Pending`] at once; the blocking methods are
//! `*_async(..)?.wait(timeout)`. A `Pending` can be waited for with a
//! timeout, polled ([`Pending::try_take`]), handed to a callback
//! ([`Pending::on_complete`]) or `.await`ed from any executor (it is a
//! `Future`; this crate has no runtime). Events reach a per-agent handler
//! ([`Agent::set_event_handler`]), a non-blocking drain
//! ([`Agent::try_events`]), a `Stream` ([`Agent::events`]) or the blocking
//! [`Agent::wait`].
//!
//! ```no_run
//! # fn main() -> Result<(), a2a_client::ClientError> {
//! # use a2a_client::{agent_card, message_to, Client, Delivery, Pending, Task};
//! # use std::time::Duration;
//! # let client = Client::connect("/tmp/s", "secret")?;
//! # let me = client.register("session-1", agent_card("planner"), Delivery::Push)?;
//! // 100 sends in flight from one thread, then their answers.
//! let pending: Vec<Pending<Task>> = (0..100)
//!     .map(|i| me.send_async(message_to("coder", &format!("job {i}")), None))
//!     .collect::<Result<_, _>>()?;
//! for p in pending {
//!     println!("{:?}", p.wait(Duration::from_secs(5))?.id);
//! }
//! // Events on the reader thread, answered without blocking it.
//! me.set_event_handler(Some(Box::new(|agent, event| {
//!     println!("{} got {event:?}", agent.id());
//! })));
//! # Ok(()) }
//! ```
//!
//! Modules:
//! - [`client`]: [`Client`]: connect + handshake (with the broker's
//!   secret), register, the typed ([`Client::call`], [`Client::call_async`])
//!   and JSON ([`Client::call_json`], [`Client::call_json_async`]) escape
//!   hatches, [`Client::close`].
//! - [`agent`]: [`Agent`]: a registered agent, one `_async` method per
//!   `a2a.*` call and its blocking twin, and its events.
//! - [`pending`]: [`Pending`], the handle of a submitted call.
//! - [`events`]: [`EventHandler`] and the [`Events`] stream; the per-agent
//!   queue and its handler protocol.
//! - [`wire`]: the wire core, sans I/O: both framings' codec, the bounded
//!   framer, the table of calls waiting by id; every driver in the tree
//!   (this crate's threads, the gateway's tokio tasks, the Node addon,
//!   the test kits) feeds it bytes.
//! - `conn`: the threads driver of the wire core: the socket, the
//!   coalescing writer thread, the reader thread.
//! - `demux`: notifications routed to per-agent queues by recipient.
//! - `ring`: the shared-memory event ring's reader thread, when the broker
//!   grants one (`ClientOptions::event_ring_bytes`).
//! - [`builders`]: cards, text messages, artifacts, fresh ids.
//! - [`locate`]: a broker from a NAME or a path (the broker's own rule),
//!   its secret, and the errors that tell "no broker there" from "wrong
//!   secret".
//! - [`error`]: [`ClientError`], its [`ErrorKind`], the typed
//!   [`A2aErrorCode`], and [`CloseReason`].
//!
//! Threads: each [`Client`] (connection) owns a writer thread and a reader
//! thread, joined when its last handle is dropped (see [`Client`]).
//! Submitting never blocks on the socket. Every blocking call ends by its
//! timeout, or as soon as the connection dies (then with
//! [`ClientError::Closed`]); every pending call fails within moments of the
//! connection's end. Handlers and `on_complete` callbacks run on the reader
//! thread: a blocking call of the same client there fails with
//! [`ClientError::WouldDeadlock`] instead of hanging.
//!
//! Embedders outside Rust: every write is a `send` with `MSG_NOSIGNAL` (on
//! Linux and FreeBSD), so a broker that dies never raises `SIGPIPE` in the
//! host; elsewhere (macOS) a C host must ignore `SIGPIPE` itself
//! (`signal(SIGPIPE, SIG_IGN)`), as Rust programs and Node do by default.

pub mod agent;
pub mod builders;
pub mod client;
mod conn;
mod demux;
pub mod error;
mod events;
pub mod locate;
pub mod pending;
mod ring;
mod shared;
pub mod wire;

pub use a2a_proto as proto;
pub use a2a_proto::error::RpcError;
pub use a2a_proto::params::{HandshakeResult, ListRole, SendConfiguration, TaskListResult};
pub use a2a_proto::types::{
    AgentCard, Artifact, Delivery, Message, Notification, Part, PushConfig, State, Task,
};
pub use agent::{Agent, EventHandler, Events, TaskQuery};
pub use builders::{
    agent_card, message_to, new_id, skill, task_message, text_artifact, text_message,
};
pub use client::{read_secret, secret_file, Client, ClientOptions, SECRET_ENV};
pub use error::{A2aErrorCode, ClientError, CloseReason, ErrorKind};
pub use locate::{locate, Located, NoBroker, SecretError, SecretFrom, SecretProblem};
pub use pending::Pending;

/// An event delivered to an agent: `a2a.task.event`, `a2a.push` or
/// `a2a.lagged`, typed.
pub type Event = a2a_proto::types::Notification;

/// The repository README's Rust examples, compiled as doc tests of this
/// crate (`cargo test -p a2a-client --doc`), so that what readers copy
/// builds.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
