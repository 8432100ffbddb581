//! Shared drivers of the `a2a-broker` benchmarks (`benches/stdio_get.rs`,
//! `benches/commit.rs`, `benches/socket.rs`). Every benchmark measures the
//! broker and a raw baseline in the same process, on the same machine
//! state, and reports the ratio: on a shared 2-core machine absolute rates
//! mean little.
//!
//! Modules:
//! - [`binaries`]: the release `a2a-broker` binary (built on demand).
//! - [`disk`]: the latency of one `fsync` / `fdatasync`, printed beside the figures.
//! - [`frames`]: the local socket's two codecs and the frame reader every
//!   client and raw server here uses, on the client's wire core.
//! - [`stdio`]: a child process on pipes and the pipelining client that
//!   keeps at most `depth` requests unanswered.
//! - [`inproc`]: the broker in this process (the library's memory connection), fed NDJSON
//!   lines, with the same pipelining.
//! - [`workload`]: request lines, requester rotation (A2A send bounds) and
//!   the [`workload::Client`] trait both drivers implement.
//! - [`socket`]: the broker's local socket in this process, minimal NDJSON
//!   and binary clients, and the raw Unix-socket server they are compared with.
//! - [`pin`]: thread placement (same core, cross core) by thread name,
//!   from the test kit.
//! - [`raw_sqlite`]: the rows of one task creation written by plain rusqlite.
//! - [`scale`]: large databases of the broker's rows, built by a raw
//!   writer, for the scaling benchmark (`examples/db_scaling.rs`).
//! - [`wal`]: WAL bytes written per call.
//! - [`report`]: samples kept from criterion's runs, medians and ratios.
//! - [`flood`]: floods of the broker from other connections, and a
//!   well-behaved client's send + complete measured beside them
//!   (`examples/fair_share.rs`).
//! - [`window`]: the Rust client's windowed read loop (also the C ABI
//!   bench's baseline).

pub mod binaries;
pub mod disk;
pub mod flood;
pub mod frames;
pub mod inproc;
pub use a2a_testkit::pin;
pub mod raw_sqlite;
pub mod report;
pub mod scale;
pub mod socket;
pub mod stdio;
pub mod wal;
pub mod window;
pub mod workload;
