//! What the benchmarks' raw baselines need of the broker's insides, and
//! nothing else: not part of the supported surface (hidden from the docs).
//!
//! - [`open_writer`]: a database with the broker's schema and pragmas, for
//!   the raw-SQLite baseline of the commit benchmark.
//! - [`now`], [`uuid`]: the broker's timestamps and task ids, so the
//!   baseline writes values of the same shapes and order.
//! - [`log_status`], [`status_row`]: the compact stored status forms, for
//!   the scaling benchmark's raw builder.
//!   (Wake-ups per event on a server's event rings and frames per write
//!   call: `SocketServer::ring_wake_stats` and `write_stats`.)
//! - [`EventInjector`]: delivers events to an agent as the writer's
//!   routing does, to measure the delivery path alone.

use crate::delivery::{Endpoint, RingPublishes};
use crate::Broker;
use a2a_proto::types::Notification;
use std::path::Path;

pub use crate::store::OpenError;

/// Opens (creating and migrating) a database as the broker's writer does.
pub fn open_writer(
    path: &Path,
    durability: crate::Durability,
) -> Result<rusqlite::Connection, OpenError> {
    crate::store::open_writer(path, durability)
}

/// Now, as the broker stamps it (`2026-11-30T09:23:55.420Z`).
pub fn now() -> String {
    crate::clock::now()
}

/// A task id as the broker mints it (time-ordered UUIDv7).
pub fn uuid() -> String {
    crate::ids::uuid()
}

/// The task log payload the broker writes for a status change logged
/// `at` (the compact form; `msg_pos`: its message's place in the history),
/// so the scaling benchmark's raw builder writes the broker's rows.
pub fn log_status(
    status: &a2a_proto::types::TaskStatus,
    msg_pos: Option<usize>,
    at: &str,
) -> String {
    crate::store::write::log_status(status, msg_pos, at).unwrap_or_default()
}

/// A message's `a2a_messages.body` as the broker writes it (the row form,
/// without what the row and its task hold).
pub fn message_row(msg: &a2a_proto::types::Message) -> String {
    crate::store::write::message_row_body(msg).unwrap_or_default()
}

/// The task row's status column as the broker writes it.
pub fn status_row(status: &a2a_proto::types::TaskStatus, msg_pos: Option<usize>) -> String {
    crate::store::write::status_row(status, msg_pos, None).unwrap_or_default()
}

/// A live push agent's endpoint, to deliver events to.
pub struct EventInjector(Endpoint);

impl EventInjector {
    /// The endpoint of the push agent `peer_id`, if one is registered.
    pub fn for_agent(broker: &Broker, peer_id: &str) -> Option<EventInjector> {
        match &broker.shared.registry.read().by_peer(peer_id)?.endpoint {
            e @ Endpoint::Push(_) => Some(EventInjector(e.clone())),
            Endpoint::Pull(_) => None,
        }
    }

    /// Delivers one event as routing after a commit does (into the
    /// connection's ring, published at once, or its outbox): a commit
    /// group of one event.
    pub fn push(&self, event: Notification) {
        let mut rings = RingPublishes::default();
        self.0.deliver(event, &mut rings);
        rings.publish();
    }
}
