//! Earlier A2A protocol versions served beside v1.0: pure translations of
//! their requests into the v1.0 shapes the gateway's operations read, and
//! of the v1.0 answers back into their shapes (no I/O here; the JSON-RPC
//! binding decides which version a request speaks and calls these).
//!
//! - [`v03`]: A2A v0.3 (`message/send`, `kind` discriminators, lowercase
//!   states, the v0.3 agent card fields).

pub mod v03;
