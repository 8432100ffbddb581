//! Transports: they frame and unframe, nothing else.
//!
//! - [`ndjson`]: the line reader (32 MiB cap, resynchronising on `\n`) and
//!   the writer of responses and notifications as JSON lines.
//! - [`stdio`]: the canonical transport on stdin/stdout.

pub mod ndjson;
pub mod stdio;
