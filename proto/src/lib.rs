//! Wire types and the NDJSON envelope codec of the `a2a.*` protocol (protocol 10).
//!
//! This crate is I/O free: it knows the shapes of the contract in
//! `docs/protocol.md` and how to read and write them, never a pipe or a socket.
//! Both the broker and its clients build on it. One exception, kept small:
//! [`private_file`] sets the permission bits of owner-only files (never
//! their contents), because the broker and the gateway share no other crate.
//!
//! - [`call`]: every method as one typed value ([`call::Call`]), and every result ([`call::Outcome`]).
//! - [`binary`]: the binary frame codec (ext): magic, length prefix, bincode payloads.
//! - [`check`]: the request pre-checks (ids, parts, the §9 size bounds), [`call::Call::precheck`] applies them.
//! - [`lines`]: NDJSON line splitting under a size cap.
//! - [`lease_path`]: lease paths (ext): their normal form and when two overlap.
//! - [`limits`]: the §9 bounds, named exactly as in the contract.
//! - [`methods`]: the method table ([`method_table!`]: every per-method list is generated from it), method and notification names.
//! - [`error`]: JSON-RPC error codes, the A2A error codes and the error object.
//! - [`types`]: parts, messages, artifacts, tasks, cards, events (§3, §6 Events).
//! - [`params`]: the params and results of every method (§2, §5).
//! - [`request`]: one marker type per method ([`request::Method`]: name, binary number, params and result types).
//! - [`json`]: free-form JSON inside typed messages (raw JSON text in binary frames).
//! - [`private_file`]: owner-only SQLite files (the broker's database, the gateway's
//!   state file): their `-wal`/`-shm` family and the permission bits removed.
//! - [`secret`]: the local socket's secret: its environment variable and file name.
//! - [`jsonrpc`]: the JSON-RPC 2.0 envelope: request ids, incoming lines, responses.

pub mod binary;
pub mod call;
pub mod check;
pub mod error;
pub mod json;
pub mod jsonrpc;
pub mod lease_path;
pub mod limits;
pub mod lines;
pub mod methods;
pub mod params;
pub mod private_file;
pub mod request;
pub mod secret;
pub mod socket_path;
pub mod types;

#[doc(hidden)]
pub mod fuzz;
#[doc(hidden)]
pub mod sample;

/// The protocol version this crate speaks (`app.handshake`).
pub const PROTOCOL_VERSION: u32 = 10;
/// The database schema version the broker migrates to.
pub const SCHEMA_VERSION: i64 = 12;
/// The tables a schema-12 database must hold (docs/protocol.md §10): what
/// the broker's start checks for, and what the migration tests look for.
pub const SCHEMA_TABLES: [&str; 6] = [
    "a2a_agents",
    "a2a_tasks",
    "a2a_messages",
    "a2a_artifacts",
    "a2a_push_configs",
    "a2a_task_log",
];
