//! `app.handshake`: the protocol version check, the local socket's secret,
//! and what the broker advertises. The one call a connection may make
//! before its handshake.

use crate::reply::Reply;
use crate::rpc_errors;
use crate::session::Session;
use a2a_proto::error::RpcError;
use a2a_proto::params::{HandshakeParams, HandshakeResult};
use a2a_proto::PROTOCOL_VERSION;

/// What `app.handshake` advertises beyond the base protocol.
pub const FEATURES: &[&str] = &[
    "a2a.tasks.list",
    "a2a.tasks.artifact",
    "a2a.events.wait",
    "broadcast",
    "idempotent-send",
    "resubscribe-replay",
    "pull-delivery",
    "batch",
    "event-ring",
    "leases",
];

/// Answers a handshake; a bad secret also marks the session closing.
pub(crate) fn run(s: &mut Session, p: HandshakeParams) -> Result<Reply, RpcError> {
    if p.protocol_version != PROTOCOL_VERSION {
        tracing::info!(
            conn = s.conn,
            offered = p.protocol_version,
            "handshake refused: protocol version mismatch"
        );
        return Err(rpc_errors::version_mismatch());
    }
    if let Some(secret) = &s.secret {
        let offered = p.secret.as_deref().unwrap_or("");
        if !secret.matches(offered) {
            s.closing = true;
            tracing::info!(conn = s.conn, "handshake refused: bad secret");
            return Err(rpc_errors::bad_secret());
        }
    }
    s.handshaken = true;
    Ok(Reply::Handshake(HandshakeResult {
        protocol_version: PROTOCOL_VERSION,
        host: "a2a-broker".into(),
        host_version: env!("CARGO_PKG_VERSION").into(),
        features: FEATURES.iter().map(|f| f.to_string()).collect(),
        capabilities: vec!["a2a".into()],
        // Granted once; a repeated handshake answers the same ring.
        // Only a local socket's outbox has a ring slot (stdio is the
        // host's own pipe and gets no ring). A ring the broker cannot back
        // is declined (§1 Framing, the event ring): no `eventRing`, events over the socket.
        event_ring: match (&p.event_ring, s.outbox.ring()) {
            (Some(req), Some(slot)) => match slot.grant(req.bytes) {
                Ok(info) => Some(info),
                Err(why) => {
                    tracing::info!(
                        conn = s.conn,
                        requested = req.bytes,
                        "event ring declined, events go over the socket: {why}"
                    );
                    None
                }
            },
            _ => None,
        },
    }))
}
