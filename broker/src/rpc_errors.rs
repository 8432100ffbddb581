//! The one place where core failures, and the transports' and the
//! session's refusals, become JSON-RPC errors (docs/protocol.md §8 Errors).

use crate::core::CoreError;
use a2a_proto::check::CheckError;
use a2a_proto::error::{A2aErrorCode as C, RpcError};
use a2a_proto::error::{INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST};
use a2a_proto::limits::{A2A_MAX_OUT_FRAME_BYTES, A2A_MAX_PARKED_WAITS};
use serde_json::json;

/// Maps a core failure to its wire error.
pub fn to_rpc(e: CoreError) -> RpcError {
    let msg = e.to_string();
    match e {
        CoreError::MissingToken => RpcError::a2a(
            C::UnknownToken,
            msg,
            Some(json!({ "reason": "missing token" })),
        ),
        CoreError::UnknownToken => RpcError::a2a(
            C::UnknownToken,
            msg,
            Some(json!({ "reason": "invalid token" })),
        ),
        CoreError::UnknownAgent(name) => {
            RpcError::a2a(C::UnknownAgent, msg, Some(json!({ "agent": name })))
        }
        CoreError::AmbiguousRecipient(candidates) => RpcError::a2a(
            C::UnknownAgent,
            msg,
            Some(json!({ "reason": "ambiguous recipient", "candidates": candidates })),
        ),
        CoreError::UnknownTask(id) => {
            RpcError::a2a(C::UnknownTask, msg, Some(json!({ "taskId": id })))
        }
        CoreError::CrossContextDenied(_) => RpcError::a2a(C::CrossContextDenied, msg, None),
        CoreError::InvalidTransition { from, to } => RpcError::a2a(
            C::InvalidTransition,
            msg,
            Some(json!({ "from": from.as_str(), "to": to.as_str() })),
        ),
        CoreError::TaskTerminal(state) => RpcError::a2a(
            C::TaskTerminal,
            msg,
            Some(json!({ "state": state.as_str() })),
        ),
        CoreError::SendCap { limit, max, actual } => RpcError::a2a(
            C::SendCap,
            msg,
            Some(json!({ "limit": limit, "max": max, "actual": actual })),
        ),
        CoreError::NoPeers => RpcError::a2a(C::NoPeers, msg, None),
        CoreError::InvalidParams(reason) => RpcError::invalid_params(reason),
        CoreError::Check(e) => refused(e),
        CoreError::LeaseConflict {
            lease_id,
            holder,
            paths,
        } => RpcError::a2a(
            C::LeaseConflict,
            msg,
            Some(json!({ "holder": holder, "leaseId": lease_id, "paths": paths })),
        ),
        CoreError::UnknownLease(id) => {
            RpcError::a2a(C::UnknownLease, msg, Some(json!({ "leaseId": id })))
        }
        CoreError::Internal(reason) => RpcError::internal(reason),
    }
}

/// A request its pre-check (or the core, for a bound of its state) refused.
fn refused(e: CheckError) -> RpcError {
    let msg = e.to_string();
    match e {
        CheckError::PayloadTooLarge { limit, max, actual } => RpcError::a2a(
            C::PayloadTooLarge,
            msg,
            Some(json!({ "limit": limit, "max": max, "actual": actual })),
        ),
        CheckError::InvalidParams(reason) => RpcError::invalid_params(reason),
        CheckError::IdTooLong { actual, .. } => RpcError::invalid_params_bound(
            msg,
            "A2A_MAX_ID_BYTES",
            a2a_proto::limits::A2A_MAX_ID_BYTES as u64,
            actual,
        ),
        CheckError::OutOfBounds {
            reason,
            limit,
            min,
            max,
            actual,
        } => {
            let mut data =
                json!({ "reason": reason, "limit": limit, "max": max, "actual": actual });
            if let Some(min) = min {
                data["min"] = json!(min);
            }
            RpcError::new(
                a2a_proto::error::INVALID_PARAMS,
                "invalid params",
                Some(data),
            )
        }
        // A value that could not be sized is the broker's bug, not the caller's.
        CheckError::Unsizable(_) => RpcError::internal(msg),
    }
}

/// A failed commit's calls: `-32603` with the store's reason
/// (`data.reason`, e.g. "database file removed").
pub fn store(e: &crate::core::StoreError) -> RpcError {
    RpcError::internal(e)
}

// The refusals of the transports and the session: each is answered on the
// connection it concerns (most then close it).

/// A connection over `--max-connections`, answered and closed at once.
pub fn too_many_connections() -> RpcError {
    RpcError::new(
        INVALID_REQUEST,
        "invalid request: the broker holds as many connections as it may (--max-connections)",
        Some(json!({"reason": "too many connections"})),
    )
}

/// A socket connection that broke a pre-handshake rule (`reason`; lines
/// are bounded by `max` bytes until the handshake), closed after this.
pub fn pre_handshake_closed(reason: &str, max: usize) -> RpcError {
    RpcError::new(
        INVALID_REQUEST,
        format!("invalid request: {reason}; the connection is closed"),
        Some(json!({
            "reason": reason,
            "method": a2a_proto::methods::HANDSHAKE,
            "max": max,
        })),
    )
}

/// A handshake offering another protocol version (docs/protocol.md §2).
pub fn version_mismatch() -> RpcError {
    RpcError::new(
        INVALID_REQUEST,
        "invalid request",
        Some(json!({
            "reason": "protocol version mismatch",
            "protocolVersion": a2a_proto::PROTOCOL_VERSION,
        })),
    )
}

/// A handshake without the socket's secret (the session closes after).
pub fn bad_secret() -> RpcError {
    RpcError::invalid_request("bad secret")
}

/// `a2a.events.wait` from an agent registered with `delivery: "push"`.
pub fn wait_needs_pull() -> RpcError {
    RpcError::invalid_params("a2a.events.wait is for agents registered with delivery \"pull\"")
}

/// A binary connection whose first bytes are not the preamble.
pub fn bad_preamble() -> RpcError {
    RpcError::invalid_request(&format!(
        "expected the binary preamble A2AB + codec version {}",
        a2a_proto::binary::CODEC_VERSION
    ))
}

/// A binary frame that cannot be read (`why`); the connection is closed.
pub fn bad_frame(why: &dyn std::fmt::Display) -> RpcError {
    RpcError::invalid_request(&why.to_string())
}

/// A client that wrote impossible indices into its event ring.
pub fn ring_corrupt() -> RpcError {
    RpcError::new(
        INTERNAL_ERROR,
        "event ring corrupt: the client wrote impossible indices into its ring; the connection is closed",
        Some(json!({"reason": "event ring corrupt"})),
    )
}

/// An NDJSON line longer than the frame bound.
pub fn frame_too_large() -> RpcError {
    RpcError::new(
        INVALID_REQUEST,
        "invalid request",
        Some(json!({
            "reason": "frame too large",
            "limit": "MAX_FRAME_BYTES",
            "max": a2a_proto::limits::MAX_FRAME_BYTES,
        })),
    )
}

/// A wait or blocking send on a connection that has all its parking
/// places taken.
pub fn too_many_waits() -> RpcError {
    RpcError::new(
        INVALID_PARAMS,
        "too many waits: this connection already has 64 unanswered waits or blocking sends",
        Some(json!({
            "reason": "too many waits",
            "limit": "A2A_MAX_PARKED_WAITS",
            "max": A2A_MAX_PARKED_WAITS,
            "actual": A2A_MAX_PARKED_WAITS + 1,
        })),
    )
}

/// A request whose handler panicked (caught: the connection and the
/// broker go on).
pub fn handler_panicked() -> RpcError {
    RpcError::internal("the request failed inside the broker")
}

/// A request dropped without an answer (its responder went away).
pub fn dropped_request() -> RpcError {
    RpcError::internal("request dropped without an answer")
}

/// A single response over the outgoing frame bound (docs/protocol.md §1
/// Framing, §9 Bounds; the task bounds make this a bug). Both codecs'
/// writers send it instead.
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

/// A batch response that would take the batch's reply over the outgoing
/// frame bound.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_commit_is_an_internal_error_with_the_store_s_reason() {
        use crate::core::StoreError;
        for (e, reason) in [
            (StoreError::Removed, "database file removed"),
            (StoreError::Damaged, "database damaged"),
            (
                StoreError::Commit("disk I/O error".into()),
                "commit failed: disk I/O error",
            ),
        ] {
            let w = store(&e);
            assert_eq!(w.code, INTERNAL_ERROR);
            assert_eq!(w.data.unwrap()["reason"], reason);
        }
    }

    #[test]
    fn bounds_carry_limit_max_actual() {
        let e = to_rpc(CoreError::SendCap {
            limit: "A2A_MAX_TASK_HISTORY",
            max: 256,
            actual: 257,
        });
        assert_eq!(e.code, 1400);
        let d = e.data.unwrap();
        assert_eq!(d["errorCode"], "A2A_SEND_CAP");
        assert_eq!(d["limit"], "A2A_MAX_TASK_HISTORY");
        assert_eq!(
            (d["max"].as_u64(), d["actual"].as_u64()),
            (Some(256), Some(257))
        );
    }

    #[test]
    fn transport_refusals_name_their_reason_and_bound() {
        let cases = [
            (too_many_connections(), -32600, "too many connections"),
            (
                pre_handshake_closed("handshake timeout", 4096),
                -32600,
                "handshake timeout",
            ),
            (ring_corrupt(), -32603, "event ring corrupt"),
            (frame_too_large(), -32600, "frame too large"),
            (too_many_waits(), -32602, "too many waits"),
            (response_too_large(), -32603, "response too large"),
            (batch_reply_too_large(), -32600, "batch reply too large"),
        ];
        for (e, code, reason) in cases {
            assert_eq!(e.code, code, "{reason}");
            assert_eq!(e.data.unwrap()["reason"], reason);
        }
        let d = pre_handshake_closed("batch before handshake", 4096)
            .data
            .unwrap();
        assert_eq!(
            (d["max"].as_u64(), &d["method"]),
            (Some(4096), &json!(a2a_proto::methods::HANDSHAKE))
        );
        assert_eq!(too_many_waits().data.unwrap()["max"], A2A_MAX_PARKED_WAITS);
    }

    #[test]
    fn ambiguity_is_an_unknown_agent_with_candidates() {
        let e = to_rpc(CoreError::AmbiguousRecipient(vec!["a".into(), "b".into()]));
        let d = e.data.unwrap();
        assert_eq!(d["errorCode"], "A2A_UNKNOWN_AGENT");
        assert_eq!(d["reason"], "ambiguous recipient");
        assert_eq!(d["candidates"], json!(["a", "b"]));
    }
}
