//! The host-core A2A broker: durable `a2a.*` tasks in SQLite, routed between
//! agents over local transports (docs/protocol.md).
//!
//! One direction of flow:
//! ```text
//! transport (stdio NDJSON)        -> dispatch: session rules, params, reads
//!   -> engine (one writer thread): auth, bounds, addressing, state machine,
//!      rows in one transaction per batch of calls
//!   -> after commit: route events to outboxes / pull queues, answer calls
//! ```
//!
//! The library surface is deliberate: what another crate needs and nothing
//! else (ARCHITECTURE.md has the map of the private modules).
//! - [`server`]: start a broker ([`server::start`]) or run `a2a-broker serve`
//!   ([`server::serve`]) from a [`server::ServeConfig`] and a [`Durability`].
//! - [`transport::socket`]: [`transport::socket::listen`] serves a started
//!   broker on a local socket ([`transport::socket::SocketServer`]).
//! - [`memory`]: a broker in this process spoken to in NDJSON
//!   lines ([`MemoryBroker`], [`MemoryConnection`]), for tests and benchmarks.
//! - [`inspect`]: the records of `a2a-broker tasks list|show` and `leases
//!   list`, the read-only audit view (the binary prints them).
//!
//! The command line (clap, the demo, `call`, every printed line) is the
//! `a2a-cli` package's (`cli/`, binary `a2a-broker`), not the library's.
pub mod inspect;
pub mod memory;
pub mod server;
pub mod transport;

pub(crate) mod agents;
pub(crate) mod broker;
pub(crate) mod clock;
pub(crate) mod core;
pub(crate) mod delivery;
pub(crate) mod dispatch;
pub(crate) mod engine;
pub(crate) mod ids;
pub(crate) mod methods;
pub(crate) mod read_calls;
pub(crate) mod reply;
pub(crate) mod rpc_errors;
pub(crate) mod secret;
pub(crate) mod session;
pub(crate) mod store;

/// Entry points for the benchmarks (`benches/`, the gateway's
/// `send_bench`): the writer's row encoders, an event injector, an
/// in-process connection. Behind the `bench` feature, so that a production
/// build does not carry them.
#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod bench;

pub use broker::{Broker, BrokerStats};
pub use memory::{MemoryBroker, MemoryConnection, MemoryError};
/// `a2a-broker check --db PATH`: header, schema, every page and index, read-only.
pub use store::check::check_command as check_database;
pub use store::Durability;
