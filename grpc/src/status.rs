//! A2A errors as gRPC statuses (the A2A v1.0 specification's error code mappings and its gRPC
//! error handling): the code mapped from the
//! JSON-RPC code, the message as it is, and for an A2A-specific error a
//! `google.rpc.ErrorInfo` (reason, domain `a2a-protocol.org`) in the
//! status details, as the binding requires.

use prost::Message;
use serde_json::Value;
use tonic::{Code, Status};

/// The `domain` of every A2A `ErrorInfo`.
pub const DOMAIN: &str = "a2a-protocol.org";

const ERROR_INFO_URL: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// `google.rpc.Status`, what `grpc-status-details-bin` carries.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<prost_types::Any>,
}

/// `google.rpc.ErrorInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ErrorInfo {
    #[prost(string, tag = "1")]
    pub reason: String,
    #[prost(string, tag = "2")]
    pub domain: String,
    #[prost(btree_map = "string, string", tag = "3")]
    pub metadata: std::collections::BTreeMap<String, String>,
}

/// The gRPC code of a JSON-RPC error code. `throttled` (the HTTP binding
/// answered 429: a bound of the caller's share) is RESOURCE_EXHAUSTED
/// whatever the code.
pub fn code_of(jsonrpc_code: i64, throttled: bool) -> Code {
    if throttled {
        return Code::ResourceExhausted;
    }
    match jsonrpc_code {
        -32001 => Code::NotFound,
        -32002 | -32003 | -32004 | -32007 | -32008 | -32009 => Code::FailedPrecondition,
        -32005 | -32700 | -32600 | -32602 => Code::InvalidArgument,
        -32006 | -32603 => Code::Internal,
        -32601 => Code::Unimplemented,
        _ => Code::Unknown,
    }
}

/// A status with `reason`'s `ErrorInfo` in its details, if there is one.
pub fn status(code: Code, message: &str, reason: Option<&str>) -> Status {
    let Some(reason) = reason else {
        return Status::new(code, message);
    };
    let info = ErrorInfo {
        reason: reason.to_owned(),
        domain: DOMAIN.to_owned(),
        metadata: Default::default(),
    };
    let details = RpcStatus {
        code: code as i32,
        message: message.to_owned(),
        details: vec![prost_types::Any {
            type_url: ERROR_INFO_URL.to_owned(),
            value: info.encode_to_vec(),
        }],
    };
    Status::with_details(code, message, details.encode_to_vec().into())
}

/// The status of a JSON-RPC error object (`{"code", "message", "data"}`,
/// its `ErrorInfo` reason in `data` as the JSON-RPC binding writes it).
pub fn from_jsonrpc(error: &Value, throttled: bool) -> Status {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("error");
    let reason = error
        .get("data")
        .and_then(Value::as_array)
        .and_then(|d| {
            d.iter()
                .find(|x| x.get("@type").and_then(Value::as_str) == Some(ERROR_INFO_URL))
        })
        .and_then(|x| x.get("reason"))
        .and_then(Value::as_str);
    status(code_of(code, throttled), message, reason)
}

/// The `ErrorInfo` reason a status carries, if any (what a client reads).
pub fn reason_of(status: &Status) -> Option<String> {
    let s = RpcStatus::decode(status.details()).ok()?;
    s.details
        .iter()
        .filter(|a| a.type_url == ERROR_INFO_URL)
        .find_map(|a| ErrorInfo::decode(a.value.as_slice()).ok())
        .filter(|i| i.domain == DOMAIN)
        .map(|i| i.reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a2a_errors_carry_their_code_and_error_info() {
        let e = json!({"code": -32001, "message": "task t not found", "data": [
            {"@type": ERROR_INFO_URL, "reason": "TASK_NOT_FOUND", "domain": DOMAIN}]});
        let s = from_jsonrpc(&e, false);
        assert_eq!(s.code(), Code::NotFound);
        assert_eq!(s.message(), "task t not found");
        assert_eq!(reason_of(&s).as_deref(), Some("TASK_NOT_FOUND"));
        let plain = from_jsonrpc(&json!({"code": -32602, "message": "bad"}), false);
        assert_eq!(plain.code(), Code::InvalidArgument);
        assert_eq!(reason_of(&plain), None);
        assert_eq!(
            from_jsonrpc(&json!({"code": -32602, "message": "over"}), true).code(),
            Code::ResourceExhausted
        );
        // The specification's table.
        for (c, want) in [
            (-32002, Code::FailedPrecondition),
            (-32003, Code::FailedPrecondition),
            (-32004, Code::FailedPrecondition),
            (-32005, Code::InvalidArgument),
            (-32006, Code::Internal),
            (-32007, Code::FailedPrecondition),
            (-32008, Code::FailedPrecondition),
            (-32009, Code::FailedPrecondition),
            (-32601, Code::Unimplemented),
        ] {
            assert_eq!(code_of(c, false), want, "{c}");
        }
        // Not an error object: a status all the same, no panic.
        assert_eq!(
            from_jsonrpc(&json!("nonsense"), false).code(),
            Code::Unknown
        );
    }
}
