//! The test kit of the a2a broker: what every test that drives a real
//! broker needs, in one place, split by concern. The integration suite, the
//! client's tests, the C ABI's and the Node addon's test drivers and the
//! load generator use it; it has no tokio and does not link the broker
//! (of ours it links the client, for its sans-I/O wire core).
//!
//! - [`bin`]: where the `a2a-broker` binary is (`A2A_BROKER_BIN`, else the
//!   caller's profile in the target directory), built on demand.
//! - [`process`]: a broker child: [`Spawn`] (stdio and/or socket, extra
//!   flags and environment), the ready line with a deadline, stderr, exit,
//!   SIGKILL/SIGTERM, kill on drop.
//! - [`conn`]: an NDJSON [`Conn`] over stdio, a socket or any byte stream,
//!   matching responses by id and stashing notifications.
//! - [`lines`]: a broker's output cut into lines by the client's wire core
//!   (`a2a_client::wire`), for every connection here: no splitter of the
//!   kit's own.
//! - [`broker`]: [`Broker`], a child plus the test's connection over a
//!   [`Transport`], and [`on_both_transports!`] to run a test on each.
//! - [`proto`]: handshake (with the secret), agents, tasks, messages.
//! - [`assert`](mod@assert): error codes, A2A `errorCode`s, bounds, timestamps.
//! - `db` (feature `db`): SQLite helpers for durability tests.
//! - [`temp`]: temporary database directories.
//! - [`transcript`]: request/response transcript files, run over any
//!   [`transcript::Lines`] and rewritten with `UPDATE_EXPECT=1`.
//! - [`raw`]: an NDJSON connection that keeps lines as text (large
//!   replies, reply sizes).
//! - [`layering`]: the imports between a crate's own modules, and
//!   [`layering::assert_no_import_cycle`], each crate's own test.
//! - [`measure`]: a broker's peak memory and a thread's CPU time, from `/proc`.
//! - [`pin`]: thread placement for benchmarks (same core, cross core).
//!
//! Every wait has a deadline ([`TIMEOUT`]), so no test can hang; the
//! deadlines bound hangs and never measure speed.

use std::time::Duration;

pub mod assert;
pub mod bin;
pub mod broker;
pub mod conn;
#[cfg(feature = "db")]
pub mod db;
pub mod layering;
pub mod lines;
pub mod measure;
pub mod pin;
pub mod process;
pub mod proto;
pub mod raw;
pub mod temp;
pub mod transcript;

pub use assert::{
    assert_a2a_error, assert_bound_error, assert_rpc_bound, assert_rpc_error, assert_timestamp,
    result,
};
pub use bin::broker_bin;
pub use broker::{Broker, Transport};
pub use conn::Conn;
#[cfg(feature = "db")]
pub use db::{open_db, table_names, user_version};
pub use process::{socket_path_for, BrokerProcess, Spawn, SpawnError, SECRET_ENV};
pub use proto::{
    listed_task_ids, pair, parts_msg, seq, text_msg, text_msg_on, text_msg_to, tid, unique, Agent,
    A2A_ERROR, PROTOCOL_VERSION,
};
pub use serde_json::{json, Value};
pub use temp::TestDb;

/// How long any single expected answer may take before the test fails.
/// Generous on purpose: it only bounds a hang, it never measures speed.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The bound for answers to calls that carry tens of megabytes (a debug
/// build on a loaded 2-core machine parses them slowly). Again only a hang
/// guard.
pub const SLOW_TIMEOUT: Duration = Duration::from_secs(120);
