//! Error codes and the JSON-RPC error object (docs/protocol.md §8).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object (or breaks a session rule).
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// Internal error (a bug, or the database failed).
pub const INTERNAL_ERROR: i64 = -32603;
/// Every A2A domain error uses this code; `data.errorCode` says which.
pub const A2A_ERROR: i64 = 1400;

/// The A2A domain errors, carried in `data.errorCode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum A2aErrorCode {
    #[serde(rename = "A2A_UNKNOWN_TOKEN")]
    UnknownToken,
    #[serde(rename = "A2A_UNKNOWN_AGENT")]
    UnknownAgent,
    #[serde(rename = "A2A_UNKNOWN_TASK")]
    UnknownTask,
    #[serde(rename = "A2A_CROSS_CONTEXT_DENIED")]
    CrossContextDenied,
    #[serde(rename = "A2A_INVALID_TRANSITION")]
    InvalidTransition,
    #[serde(rename = "A2A_TASK_TERMINAL")]
    TaskTerminal,
    #[serde(rename = "A2A_SEND_CAP")]
    SendCap,
    #[serde(rename = "A2A_NO_PEERS")]
    NoPeers,
    #[serde(rename = "A2A_PAYLOAD_TOO_LARGE")]
    PayloadTooLarge,
    /// (ext) A live lease of another holder overlaps (§11 Leases).
    #[serde(rename = "A2A_LEASE_CONFLICT")]
    LeaseConflict,
    /// (ext) No lease of the caller's context has this id, or it has ended.
    #[serde(rename = "A2A_UNKNOWN_LEASE")]
    UnknownLease,
}

impl A2aErrorCode {
    /// The wire name, e.g. `A2A_UNKNOWN_TOKEN`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownToken => "A2A_UNKNOWN_TOKEN",
            Self::UnknownAgent => "A2A_UNKNOWN_AGENT",
            Self::UnknownTask => "A2A_UNKNOWN_TASK",
            Self::CrossContextDenied => "A2A_CROSS_CONTEXT_DENIED",
            Self::InvalidTransition => "A2A_INVALID_TRANSITION",
            Self::TaskTerminal => "A2A_TASK_TERMINAL",
            Self::SendCap => "A2A_SEND_CAP",
            Self::NoPeers => "A2A_NO_PEERS",
            Self::PayloadTooLarge => "A2A_PAYLOAD_TOO_LARGE",
            Self::LeaseConflict => "A2A_LEASE_CONFLICT",
            Self::UnknownLease => "A2A_UNKNOWN_LEASE",
        }
    }
}

/// A JSON-RPC 2.0 error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>, data: Option<Value>) -> Self {
        Self {
            code,
            message: message.into(),
            data,
        }
    }

    /// `-32700`: the line is not JSON.
    pub fn parse(detail: impl std::fmt::Display) -> Self {
        Self::new(
            PARSE_ERROR,
            "parse error",
            Some(json!({ "reason": detail.to_string() })),
        )
    }

    /// `-32600` with `data.reason`.
    pub fn invalid_request(reason: &str) -> Self {
        Self::new(
            INVALID_REQUEST,
            "invalid request",
            Some(json!({ "reason": reason })),
        )
    }

    /// `-32600` for a method called before `app.handshake`: the data names
    /// the method to call first (§2).
    pub fn handshake_required(method: &str) -> Self {
        Self::new(
            INVALID_REQUEST,
            format!("handshake required: call app.handshake before {method}"),
            Some(json!({ "reason": "handshake required", "method": "app.handshake" })),
        )
    }

    /// `-32601` for `method`.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            METHOD_NOT_FOUND,
            "method not found",
            Some(json!({ "method": method })),
        )
    }

    /// `-32602` with a human reason in `data.reason`.
    pub fn invalid_params(reason: impl std::fmt::Display) -> Self {
        Self::new(
            INVALID_PARAMS,
            "invalid params",
            Some(json!({ "reason": reason.to_string() })),
        )
    }

    /// `-32602` for a bound of §9 whose refusal is `-32602` (an id over
    /// `A2A_MAX_ID_BYTES`): `data.reason` and, as every bound error (§8),
    /// `data.limit` (the constant's name), `data.max` and `data.actual`.
    pub fn invalid_params_bound(
        reason: impl std::fmt::Display,
        limit: &str,
        max: u64,
        actual: u64,
    ) -> Self {
        Self::new(
            INVALID_PARAMS,
            "invalid params",
            Some(json!({
                "reason": reason.to_string(),
                "limit": limit,
                "max": max,
                "actual": actual,
            })),
        )
    }

    /// `-32603`.
    pub fn internal(reason: impl std::fmt::Display) -> Self {
        Self::new(
            INTERNAL_ERROR,
            "internal error",
            Some(json!({ "reason": reason.to_string() })),
        )
    }

    /// Code `1400` with `data.errorCode` and any extra `data` fields.
    pub fn a2a(code: A2aErrorCode, message: impl Into<String>, extra: Option<Value>) -> Self {
        let mut data = serde_json::Map::new();
        data.insert("errorCode".into(), Value::from(code.as_str()));
        if let Some(Value::Object(more)) = extra {
            data.extend(more);
        }
        Self::new(A2A_ERROR, message, Some(Value::Object(data)))
    }

    /// The `data.errorCode` of an A2A error, if this is one.
    pub fn a2a_code(&self) -> Option<&str> {
        self.data.as_ref()?.get("errorCode")?.as_str()
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)?;
        if let Some(data) = &self.data {
            write!(f, " {data}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RpcError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a2a_error_carries_code_and_extra_data() {
        let e = RpcError::a2a(
            A2aErrorCode::SendCap,
            "send cap reached",
            Some(json!({"limit": "A2A_MAX_SENDS_PER_RUN", "max": 200})),
        );
        assert_eq!(e.code, 1400);
        assert_eq!(e.a2a_code(), Some("A2A_SEND_CAP"));
        assert_eq!(e.data.unwrap()["max"], 200);
    }
}

// Binary frames carry `data` as its JSON text (see `crate::json`).
impl bincode::Encode for RpcError {
    fn encode<E: bincode::enc::Encoder>(
        &self,
        e: &mut E,
    ) -> Result<(), bincode::error::EncodeError> {
        self.code.encode(e)?;
        self.message.encode(e)?;
        self.data.clone().map(crate::json::JsonValue).encode(e)
    }
}

impl<C> bincode::Decode<C> for RpcError {
    fn decode<D: bincode::de::Decoder<Context = C>>(
        d: &mut D,
    ) -> Result<Self, bincode::error::DecodeError> {
        Ok(RpcError {
            code: i64::decode(d)?,
            message: String::decode(d)?,
            data: Option::<crate::json::JsonValue>::decode(d)?.map(|v| v.0),
        })
    }
}
bincode::impl_borrow_decode!(RpcError);
