//! Transports: they frame and unframe, nothing else.
//!
//! - [`ndjson`]: the line reader (32 MiB cap, resynchronising on `\n`) and
//!   the writer of responses and notifications as JSON lines.
//! - [`stdio`]: the canonical transport on stdin/stdout.
//! - [`socket`]: the local socket (ext), NDJSON or binary frames by the first bytes.
//! - [`binary`]: writing binary frames.
//! - [`places`]: the socket's `--max-connections` places, and the eviction
//!   of unauthenticated connections when they are all taken.
//!
//! The in-process connection pair (tests, transcripts, benchmarks) is
//! `crate::memory`: it starts a broker (`server::start`), so it sits above
//! `server`, which serves these transports.
//!
//! The shared-memory event ring a socket connection may ask for is written
//! by routing itself (`crate::delivery::ring`), not by a transport.

pub(crate) mod binary;
pub(crate) mod ndjson;
mod places;
pub mod socket;
pub(crate) mod stdio;
