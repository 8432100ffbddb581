//! `a2a.events.wait` (ext, docs/protocol.md §5 Methods): a pull agent's
//! long poll. Parked in the agent's pull queue, which answers it when an
//! event arrives or its time runs out; the connection reads on meanwhile.

use crate::broker::Broker;
use crate::delivery::{Endpoint, Responder};
use crate::reply::Reply;
use crate::rpc_errors::{self, to_rpc};
use crate::session::Session;
use a2a_proto::error::RpcError;
use a2a_proto::limits::{A2A_DEFAULT_STREAM_WAIT_SECONDS, A2A_MAX_STREAM_WAIT_SECONDS};
use a2a_proto::params::WaitParams;
use std::time::Duration;

/// `Some(result)` to answer now; `None` once parked (the queue answers).
pub(crate) fn run(
    b: &Broker,
    s: &Session,
    p: WaitParams,
    slot: &mut Option<Responder>,
) -> Option<Result<Reply, RpcError>> {
    let agent = match b.shared.registry.read().resolve(p.token.as_deref()) {
        Ok(a) => a,
        Err(e) => return Some(Err(to_rpc(e))),
    };
    let Endpoint::Pull(queue) = &agent.endpoint else {
        return Some(Err(rpc_errors::wait_needs_pull()));
    };
    let secs = p
        .timeout_seconds
        .unwrap_or(A2A_DEFAULT_STREAM_WAIT_SECONDS as f64)
        .clamp(0.0, A2A_MAX_STREAM_WAIT_SECONDS as f64);
    let parked = match s.park() {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let responder = slot.take().expect("responder present").parked(parked);
    queue.wait(
        p.after_seq,
        Duration::from_secs_f64(secs),
        responder,
        &b.shared.timer,
    );
    None
}
