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
//! - `args`: the arguments read and checked; `render`: the one escaping
//!   rule for every string another agent chose, peer text framed as
//!   untrusted input, nearest names; `inbox`: the agent's events kept slim
//!   and bounded until the model waits; [`ToolError`]: a mistake and its fix.
//!
//! Texts in results (and in the structured values) are cut to
//! [`QUOTE_MAX_CHARS`] per message or artifact, saying how much was left
//! out; a result's text stays within [`RESULT_MAX_CHARS`].
//!
//! Structured results, by action:
//!
//! | action | structured |
//! |---|---|
//! | `discover` | `{peers: [{name, description, kind, skills}]}` |
//! | `send` | `{taskId, state}` (a new task with `to`, a message on one with `taskId`) |
//! | `get` | `{taskId, state, requester, worker, history: [{from, text}], artifacts: [{name, text}], omitted?}` (the newest messages and artifacts that fit one result; `omitted` counts the rest) |
//! | `wait` | `{events: [{taskId, state, from, text, artifact?}], dropped?, pending?}` (at most [`WAIT_MAX_EVENTS`] events; `pending` are left for the next `wait`) |
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
pub mod fuzz;
mod inbox;
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

// ---- What one result may hold, and what a session keeps for the model ----
//
// A model reads every character of a result, and a host may refuse (or
// silently cut) a long one: a result stays well below the 25,000-token
// output limit common among MCP hosts. What is left over waits for the next
// call, and the text says so.

/// Characters of one result's text at most (about 12,000 tokens); `wait`
/// stops adding updates before it would pass this, `get` and `discover`
/// leave out what does not fit and say how much.
pub const RESULT_MAX_CHARS: usize = 48_000;
/// Updates in one `wait` result at most; the rest stay queued for the next
/// `wait`, and the text says how many wait.
pub const WAIT_MAX_EVENTS: usize = 50;
/// Characters of one quoted peer text (a message, an artifact) at most,
/// escaped: one message's whole text (`A2A_MAX_TEXT_CHARS`) fits; a longer
/// artifact or data part is cut, saying how much was left out. The
/// structured result cuts its texts at the same length.
pub const QUOTE_MAX_CHARS: usize = a2a_client::proto::limits::A2A_MAX_TEXT_CHARS;
/// Characters of a name, id, path or attribute a peer chose, as shown (the
/// broker's ids are at most `A2A_MAX_ID_BYTES`; file and artifact names
/// have no bound of their own).
pub const NAME_MAX_CHARS: usize = a2a_client::proto::limits::A2A_MAX_ID_BYTES;
/// Characters of a description or reason shown on one line.
pub const LINE_MAX_CHARS: usize = 1_000;
/// Bytes a session holds for the model between two `wait`s, at most (an
/// estimate of the queued updates' strings). Updates are kept slim as they
/// arrive (no file bytes, no metadata, texts cut to [`QUOTE_MAX_CHARS`]);
/// past this bound a new update keeps no text (`get` reads it), and past it
/// even so the oldest updates are dropped and the next `wait` says how many.
pub const INBOX_MAX_BYTES: usize = 8 * 1024 * 1024;
