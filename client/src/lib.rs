//! The typed client of `a2a-broker`'s local socket (PROTOCOL.md), over
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
//! Modules:
//! - [`client`]: [`Client`]: connect + handshake (with the broker's
//!   secret), register, the typed [`Client::call`] and JSON
//!   [`Client::call_json`] escape hatches.
//! - [`agent`]: [`Agent`]: a registered agent, one method per `a2a.*` call,
//!   and [`Agent::wait`] for its events (push queue or `a2a.events.wait`).
//! - `conn`: the socket, the request writer, the reader thread, responses
//!   matched to callers by id.
//! - `demux`: notifications routed to per-agent queues by recipient.
//! - [`builders`]: cards, text messages, artifacts, fresh ids.
//! - [`error`]: [`ClientError`] and [`CloseReason`].
//!
//! Threads: each [`Client`] owns one background reader thread, joined when
//! the connection closes. Every blocking call ends by its timeout, or as
//! soon as the connection dies (then with [`ClientError::Closed`]).
//!
//! Embedders outside Rust: writes to a socket the broker closed raise
//! `SIGPIPE` on Unix. Rust programs and Node ignore it by default; a C
//! host must ignore it too (`signal(SIGPIPE, SIG_IGN)`), or a dying broker
//! kills it.

pub mod agent;
pub mod builders;
pub mod client;
mod conn;
mod demux;
pub mod error;

pub use a2a_proto as proto;
pub use a2a_proto::error::RpcError;
pub use a2a_proto::params::{HandshakeResult, ListRole, SendConfiguration, TaskListResult};
pub use a2a_proto::types::{
    AgentCard, Artifact, Delivery, Message, Notification, Part, PushConfig, State, Task,
};
pub use agent::{Agent, TaskQuery};
pub use builders::{
    agent_card, message_to, new_id, skill, task_message, text_artifact, text_message,
};
pub use client::{read_secret, secret_file, Client, ClientOptions, SECRET_ENV};
pub use error::{ClientError, CloseReason};

/// An event delivered to an agent: `a2a.task.event`, `a2a.push` or
/// `a2a.lagged`, typed.
pub type Event = a2a_proto::types::Notification;
