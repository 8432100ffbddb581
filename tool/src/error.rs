//! A mistake the model made, or a failure it should hear about: a short
//! stable code for programs and a sentence for the model that says what to
//! do instead. Broker errors never reach the model raw.

use serde_json::{json, Map, Value};

/// A tool error: `code` for programs, `message` for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// Stable, kebab-case: `unknown-peer`, `unknown-task`, `not-worker`, …
    pub code: String,
    /// What went wrong and what to do next, written for a model.
    pub message: String,
    /// More fields for programs, beside `code` and `message` (a lease
    /// conflict's `holder`, `leaseId` and `paths`).
    pub details: Option<Map<String, Value>>,
}

impl ToolError {
    pub fn new(code: &str, message: String) -> ToolError {
        ToolError {
            code: code.to_owned(),
            message,
            details: None,
        }
    }

    /// This error with `details` beside its code and message.
    pub fn with_details(mut self, details: Map<String, Value>) -> ToolError {
        self.details = Some(details);
        self
    }

    /// The structured form (`{"error": {code, message, ...details}}`).
    pub fn structured(&self) -> Value {
        let mut e = self.details.clone().unwrap_or_default();
        e.insert("code".into(), json!(self.code));
        e.insert("message".into(), json!(self.message));
        json!({ "error": e })
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}
