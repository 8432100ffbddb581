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
//! - [`InProcessConn`]: calls into the broker's dispatch with no transport,
//!   for the gateway bench's floor of an HTTP front inside the broker's
//!   process (`send_bench --inproc`).

use crate::delivery::{Endpoint, Outbox, Outgoing, Responder, Response, RingPublishes};
use crate::Broker;
use a2a_proto::call::Call;
use a2a_proto::error::RpcError;
use a2a_proto::jsonrpc::Id;
use a2a_proto::types::Notification;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::oneshot;

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

/// The log length past which the broker's writer restarts its
/// write-ahead log, so a replay of its writes restarts it alike.
pub const LOG_RESTART_BYTES: i64 = crate::store::checkpoint::RESTART_BYTES;

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

/// A broker connection with no transport: a call goes straight into the
/// broker's dispatch on the caller's task (as a socket connection's reader
/// hands it on), and its answer comes back from the session's outbox
/// through a drain task on the caller's tokio runtime, to the waiting call
/// by request id. Its session is handshaken from the start; events
/// addressed to agents it registers are dropped. A measuring instrument
/// (what an HTTP front inside the broker's process would cost), never
/// served.
pub struct InProcessConn {
    broker: Arc<Broker>,
    session: parking_lot::Mutex<crate::session::Session>,
    waiters: parking_lot::Mutex<HashMap<u64, oneshot::Sender<CallResult>>>,
    next_id: AtomicU64,
}

/// A call's result as its JSON `result` (or the error).
pub type CallResult = Result<serde_json::Value, RpcError>;

impl InProcessConn {
    /// A new connection of `broker`; must be called inside a tokio runtime.
    pub fn open(broker: Arc<Broker>) -> Arc<InProcessConn> {
        let outbox = Arc::new(Outbox::new(1024));
        let mut session = broker.session(outbox.clone());
        session.handshaken = true;
        let conn = Arc::new(InProcessConn {
            broker,
            session: parking_lot::Mutex::new(session),
            waiters: Default::default(),
            next_id: AtomicU64::new(1),
        });
        let weak = Arc::downgrade(&conn);
        tokio::spawn(async move {
            let mut items = Vec::new();
            while outbox.drain_async(&mut items).await {
                let Some(conn) = weak.upgrade() else { return };
                for item in items.drain(..) {
                    if let Outgoing::Response(Response {
                        id: Id::Uint(id),
                        result,
                    }) = item
                    {
                        let answer = result.map(|reply| {
                            serde_json::to_value(&reply).unwrap_or(serde_json::Value::Null)
                        });
                        if let Some(tx) = conn.waiters.lock().remove(&id) {
                            let _ = tx.send(answer);
                        }
                    }
                }
            }
        });
        conn
    }

    /// Makes one call and waits for its answer.
    pub async fn call(&self, call: Call) -> CallResult {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().insert(id, tx);
        {
            let mut s = self.session.lock();
            let responder = Responder::direct(s.outbox.clone(), Id::Uint(id));
            self.broker.handle_call(&mut s, call, responder);
        }
        // A responder is never dropped unanswered; the sender goes only
        // with the connection.
        rx.await
            .unwrap_or_else(|_| Err(crate::rpc_errors::handler_panicked()))
    }
}

impl Drop for InProcessConn {
    /// Ends the session as a transport does when its connection ends (its
    /// agents' tokens die), and stops the drain task.
    fn drop(&mut self) {
        let placeholder = self.broker.session(Arc::new(Outbox::new(1)));
        let s = std::mem::replace(&mut *self.session.lock(), placeholder);
        s.outbox.close();
        self.broker.close(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_proto::params::{RegisterParams, SendParams};
    use a2a_proto::types::{AgentCard, Message};

    fn register(name: &str) -> Call {
        let card: AgentCard = serde_json::from_value(serde_json::json!({
            "name": name, "description": "d", "version": "1", "url": "local://x",
            "capabilities": {}, "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"], "skills": []
        }))
        .expect("card");
        Call::Register(RegisterParams {
            context_id: format!("ctx-{name}"),
            card,
            delivery: None,
            hidden: false,
        })
    }

    #[test]
    fn an_in_process_connection_answers_calls_and_errors_by_id() {
        let dir = tempfile::tempdir().expect("dir");
        let broker =
            crate::server::start(&crate::server::ServeConfig::new(dir.path().join("b.db")))
                .expect("broker");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let conn = InProcessConn::open(broker.clone());
            let a = conn.call(register("a")).await.expect("register a");
            let b = conn.call(register("b")).await.expect("register b");
            let message: Message = serde_json::from_value(serde_json::json!({
                "kind": "message", "messageId": "m1", "role": "user",
                "parts": [{"kind": "text", "text": "hi"}], "to": b["peerId"]
            }))
            .expect("message");
            // Both in flight at once: each answer reaches its own call.
            let send = |token: Option<String>, id: &str| {
                let mut message = message.clone();
                message.message_id = id.into();
                conn.call(Call::Send(SendParams {
                    token,
                    message,
                    configuration: None,
                }))
            };
            let token = a["token"].as_str().map(str::to_owned);
            let (sent, refused) =
                tokio::join!(send(token, "m1"), send(Some("not-a-token".into()), "m2"));
            let sent = sent.expect("send");
            assert_eq!(sent["task"]["status"]["state"], "submitted", "{sent}");
            assert_eq!(sent["task"]["history"][0]["messageId"], "m1", "{sent}");
            assert!(refused.is_err(), "{refused:?}");
        });
        broker.shutdown();
    }
}
