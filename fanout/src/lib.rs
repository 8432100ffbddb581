//! `a2a-fanout`: the fan-out load generator of the a2a broker. N delegates
//! (32 by default) register, discover each other, lease the files they
//! edit (or broadcast file claims),
//! send each other tasks, ask for input and answer, attach artifacts and
//! complete, for a number of tasks or seconds; the run reports tasks/s,
//! events/s and send-to-event latency per transport and durability mode,
//! and checks that every task ended and every event arrived exactly once
//! and in order per recipient.
//!
//! The library is what the binary runs, so that a test can drive it:
//! [`run::run`] one [`run::Config`] into a [`report::Report`].
//!
//! Modules:
//! - [`driver`]: the [`driver::Driver`] seam (calls with callbacks, events
//!   to a sink) and the normalised event.
//! - [`binary`]: the driver over the Rust client (binary frames, ring).
//! - [`ndjson`]: a minimal NDJSON driver (stdio, socket NDJSON).
//! - [`engine`]: the delegates' state machine and the checks.
//! - [`run`]: brokers, transports, worker processes, progress.
//! - [`report`]: the summary table and JSON.
//! - [`profile`]: per-thread CPU from `/proc` (the bottleneck).
//! - [`chart`]: the sweeps behind BENCHMARKS.md's SVG charts.
//! - [`soak`]: `--soak`, the broker's memory, log, database and bytes
//!   written sampled through a long run, and their chart.
//! - [`error`]: [`FanoutError`], why a run could not be made.

pub mod binary;
pub mod chart;
pub mod driver;
pub mod engine;
pub mod error;
pub mod ndjson;
pub mod profile;
pub mod report;
pub mod run;
pub mod soak;

pub use error::FanoutError;
pub use report::Report;
pub use run::{run, Config, Durability, Transport};
