//! The host-core A2A broker: durable `a2a.*` tasks in SQLite, routed between
//! agents over local transports (PROTOCOL.md).
//!
//! One direction of flow:
//! ```text
//! transport (stdio NDJSON)        -> dispatch: session rules, params, reads
//!   -> engine (one writer thread): auth, bounds, addressing, state machine,
//!      rows in one transaction per batch of calls
//!   -> after commit: route events to outboxes / pull queues, answer calls
//! ```
//!
//! Modules:
//! - [`core`]: rules without I/O: registry, tokens, addressing, state machine, bounds.
//! - [`store`]: SQLite: migrations, the rows each call writes, reads.
//! - [`engine`]: the writer thread with group commit and the mutating calls.
//! - [`reads`]: the read-only methods, answered without the writer.
//! - [`dispatch`]: from a decoded request to its handler.
//! - [`delivery`]: outboxes, pull queues, the timer.
//! - [`reply`]: typed results.
//! - [`errors`]: core failures to JSON-RPC errors, in one function.
//! - [`transport`]: framing (NDJSON on stdio).
//! - [`server`]: `a2a-broker serve`: start-up, signals, shutdown.
//! - [`inspect`]: `a2a-broker tasks list|show`: the read-only audit view.
//! - [`clock`]: timestamps and random ids.
//! - [`fuzz_entry`]: what the fuzz targets run (also over the corpus in tests).

pub mod clock;
pub mod core;
pub mod delivery;
pub mod dispatch;
pub mod engine;
pub mod errors;
pub mod fuzz_entry;
pub mod inspect;
pub mod reads;
pub mod reply;
pub mod server;
pub mod store;
pub mod transport;

pub use transport::memory::{MemoryBroker, MemoryConnection, MemoryError};
