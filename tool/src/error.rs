//! A mistake the model made, or a failure it should hear about: a short
//! stable code for programs and a sentence for the model that says what to
//! do instead. Broker errors never reach the model raw.

use serde_json::{json, Value};

/// A tool error: `code` for programs, `message` for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// Stable, kebab-case: `unknown-peer`, `unknown-task`, `not-worker`, …
    pub code: String,
    /// What went wrong and what to do next, written for a model.
    pub message: String,
}

impl ToolError {
    pub fn new(code: &str, message: String) -> ToolError {
        ToolError {
            code: code.to_owned(),
            message,
        }
    }

    /// The structured form (`{"error": {code, message}}`).
    pub fn structured(&self) -> Value {
        json!({"error": {"code": self.code, "message": self.message}})
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}
