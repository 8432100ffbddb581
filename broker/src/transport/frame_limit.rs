//! The outgoing frame bound (docs/protocol.md §1 Framing, §9 Bounds): the errors that stand in for a
//! response that would be written larger than `A2A_MAX_OUT_FRAME_BYTES`,
//! shared by both codecs' writers.

use a2a_proto::error::{RpcError, INTERNAL_ERROR, INVALID_REQUEST};
use a2a_proto::limits::A2A_MAX_OUT_FRAME_BYTES;
use serde_json::json;

/// A single response over the bound (the task bounds make this a bug).
pub fn response_too_large() -> RpcError {
    RpcError::new(
        INTERNAL_ERROR,
        "internal error: the response would exceed the outgoing frame bound",
        Some(json!({
            "reason": "response too large",
            "limit": "A2A_MAX_OUT_FRAME_BYTES",
            "max": A2A_MAX_OUT_FRAME_BYTES,
        })),
    )
}

/// A batch response that would take the batch's reply over the bound.
pub fn batch_reply_too_large() -> RpcError {
    RpcError::new(
        INVALID_REQUEST,
        "invalid request: this response would take the batch reply over the outgoing frame bound; send the request alone",
        Some(json!({
            "reason": "batch reply too large",
            "limit": "A2A_MAX_OUT_FRAME_BYTES",
            "max": A2A_MAX_OUT_FRAME_BYTES,
        })),
    )
}
