//! The one place where core failures become JSON-RPC errors (docs/protocol.md §8 Errors).

use crate::core::CoreError;
use a2a_proto::error::{A2aErrorCode as C, RpcError};
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
        CoreError::PayloadTooLarge { limit, max, actual } => RpcError::a2a(
            C::PayloadTooLarge,
            msg,
            Some(json!({ "limit": limit, "max": max, "actual": actual })),
        ),
        CoreError::InvalidParams(reason) => RpcError::invalid_params(reason),
        CoreError::IdTooLong { actual, .. } => RpcError::invalid_params_bound(
            msg,
            "A2A_MAX_ID_BYTES",
            a2a_proto::limits::A2A_MAX_ID_BYTES as u64,
            actual,
        ),
        CoreError::OutOfBounds {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn ambiguity_is_an_unknown_agent_with_candidates() {
        let e = to_rpc(CoreError::AmbiguousRecipient(vec!["a".into(), "b".into()]));
        let d = e.data.unwrap();
        assert_eq!(d["errorCode"], "A2A_UNKNOWN_AGENT");
        assert_eq!(d["reason"], "ambiguous recipient");
        assert_eq!(d["candidates"], json!(["a", "b"]));
    }
}
