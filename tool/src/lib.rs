//! The one tool a model holds to talk to other agents through the broker
//! (ADR 0147's `A2A`; ADR 0164 gives parents the same tool as kind
//! `parent`), defined once here and adapted by every surface: the MCP
//! server (`a2a-broker mcp`), the Node addon's `agent.tool()`.
//!
//! - [`schema`]: the tool's name, description, and the JSON Schemas of its
//!   arguments and structured result (flat objects; no token anywhere).
//! - [`Session`]: the tool bound to one registered agent, whose token it
//!   holds and never shows; [`Session::call`] runs one call and answers a
//!   [`ToolResult`]: text for the model, a structured value, an error flag.
//! - `args`: the arguments read and checked; `render`: peer text framed as
//!   untrusted input, nearest names; [`ToolError`]: a mistake and its fix.
//!
//! Structured results, by action:
//!
//! | action | structured |
//! |---|---|
//! | `discover` | `{peers: [{name, description, kind, skills}]}` |
//! | `send` | `{taskId, state}` (a new task with `to`, a message on one with `taskId`) |
//! | `get` | `{taskId, state, requester, worker, history: [{from, text}], artifacts: [{name, text}]}` |
//! | `wait` | `{events: [{taskId, state, from, text, artifact?}], dropped?}` |
//! | `complete` | `{taskId, state}` |
//! | `cancel` | `{taskId, state}` |
//! | `lease` | `{leaseId, paths, exclusive, expiresAt}` |
//! | `release` | `{leaseId, released}` |
//! | any, failed | `{error: {code, message}}` with `isError` (a lease conflict adds `holder`, `leaseId`, `paths`) |
//!
//! ```no_run
//! use a2a_client::{read_secret, Client};
//! use a2a_tool::{Registration, Session, SessionOptions};
//! use serde_json::json;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let socket = std::path::Path::new("/run/user/1000/a2a-broker/main.sock");
//! let client = Client::connect(socket, &read_secret(socket)?)?;
//! let reg = Registration { context_id: "s1".into(), name: "planner".into(), ..Default::default() };
//! let tool = Session::register(&client, &reg, SessionOptions::default())?;
//! let r = tool.call(&json!({"action": "send", "to": "coder", "text": "Write the parser"}));
//! println!("{}\n{}", r.text, r.structured);
//! # Ok(()) }
//! ```

mod args;
pub mod error;
mod render;
pub mod schema;
mod session;

pub use args::{excerpt, DEFAULT_WAIT_SECONDS};
pub use error::ToolError;
pub use session::{
    message_text, NoControl, Registration, Session, SessionOptions, ToolResult, WaitControl,
};

/// The longest `wait` (`timeoutSeconds`' maximum): the broker's stream
/// wait ceiling, below a host's 300 s idle watchdog (ADR 0147).
pub const MAX_WAIT_SECONDS: u64 = a2a_client::proto::limits::A2A_MAX_STREAM_WAIT_SECONDS;

/// Messages one agent may put on one task through the tool (its first
/// message, follow-ups, questions) before the tool refuses more and asks
/// it to settle the task: two agents answering each other's questions
/// forever stop after this many rounds each. A policy of the tool, not a
/// broker bound (a program may send more through the client).
pub const DEFAULT_TURN_CAP: u32 = 12;
