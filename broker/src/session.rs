//! One connection's state: who it is to the writer (its `ConnId` and
//! outbox), whether its handshake is done, the secret it must present, and
//! its parking places for unanswered waits and blocking sends.

use crate::core::ConnId;
use crate::delivery::outbox::Parked;
use crate::delivery::Outbox;
use crate::secret::Secret;
use a2a_proto::error::RpcError;
use a2a_proto::limits::A2A_MAX_PARKED_WAITS;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// One connection's state.
pub struct Session {
    pub conn: ConnId,
    pub outbox: Arc<Outbox>,
    pub(crate) handshaken: bool,
    /// Required in the handshake (local-socket connections); never logged.
    pub(crate) secret: Option<Arc<Secret>>,
    /// Set when the connection must close (a bad secret).
    pub closing: bool,
    /// Unanswered waits and blocking sends (`A2A_MAX_PARKED_WAITS`).
    parked: Arc<AtomicUsize>,
    /// Set once a call of this connection was queued to the writer: only
    /// then can the writer hold anything of it (agents, leases) that its
    /// close must end.
    queued: AtomicBool,
}

impl Session {
    pub(crate) fn new(conn: ConnId, outbox: Arc<Outbox>, secret: Option<Arc<Secret>>) -> Self {
        Session {
            conn,
            outbox,
            handshaken: false,
            secret,
            closing: false,
            parked: Default::default(),
            queued: AtomicBool::new(false),
        }
    }

    /// A call of this connection goes to the writer.
    pub(crate) fn mark_queued(&self) {
        self.queued.store(true, Ordering::Relaxed);
    }

    /// Must its close wait for the writer ([`crate::broker::Broker::close`])?
    /// Only if a call of it went there: a connection that never queued a
    /// call registered nothing and holds no lease, and nothing of it is in
    /// flight (so churn of connections that only shake hands, or read,
    /// never costs the writer a wake-up each).
    pub fn needs_writer_to_close(&self) -> bool {
        self.handshaken && self.queued.load(Ordering::Relaxed)
    }

    /// Has the connection completed its handshake?
    pub fn is_handshaken(&self) -> bool {
        self.handshaken
    }

    /// Takes one of the connection's parking places, or refuses the call.
    pub(crate) fn park(&self) -> Result<Parked, RpcError> {
        Parked::take(&self.parked, A2A_MAX_PARKED_WAITS)
            .ok_or_else(crate::rpc_errors::too_many_waits)
    }
}
