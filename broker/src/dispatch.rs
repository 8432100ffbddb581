//! From a decoded request to its handler: the session rules (handshake
//! first), the panic boundary, params parsing (errors become `-32602` here,
//! in one place), reads answered on the connection's own thread, and
//! mutating calls queued to the writer.
//!
//! Architecture invariant: a read never waits for the writer, and a slow
//! request (a blocked `events.wait`, a blocking send) never holds the
//! connection: its responder is parked and the next line is read at once.

use crate::core::registry::ConnId;
use crate::core::validate;
use crate::delivery::outbox::BatchCollector;
use crate::delivery::{Endpoint, Outbox, Responder};
use crate::engine::{EngineHandle, Op, Shared};
use crate::errors::to_rpc;
use crate::reads;
use crate::reply::Reply;
use a2a_proto::error::RpcError;
use a2a_proto::jsonrpc::{parse_line, Id, Incoming, Request};
use a2a_proto::limits::{A2A_DEFAULT_STREAM_WAIT_SECONDS, A2A_MAX_STREAM_WAIT_SECONDS};
use a2a_proto::methods as m;
use a2a_proto::params::*;
use a2a_proto::PROTOCOL_VERSION;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
];

/// The broker as its transports see it.
pub struct Broker {
    pub shared: Arc<Shared>,
    pub engine: EngineHandle,
    db_path: PathBuf,
    next_conn: AtomicU64,
}

/// One connection's state.
pub struct Session {
    pub conn: ConnId,
    pub outbox: Arc<Outbox>,
    handshaken: bool,
    /// Opened on the first read that misses the cache.
    reader: Option<rusqlite::Connection>,
}

impl Broker {
    pub fn new(shared: Arc<Shared>, engine: EngineHandle, db_path: PathBuf) -> Self {
        Self {
            shared,
            engine,
            db_path,
            next_conn: AtomicU64::new(1),
        }
    }

    /// A new connection writing into `outbox`.
    pub fn session(&self, outbox: Arc<Outbox>) -> Session {
        Session {
            conn: self.next_conn.fetch_add(1, Ordering::Relaxed),
            outbox,
            handshaken: false,
            reader: None,
        }
    }

    /// The connection ended: its agents' tokens die, their tasks stay open.
    pub fn close(&self, s: Session) {
        self.engine.connection_closed(s.conn);
    }

    /// Answers a line that was longer than the frame limit.
    pub fn frame_too_large(&self, s: &Session) {
        let err = RpcError::new(
            a2a_proto::error::INVALID_REQUEST,
            "invalid request",
            Some(json!({"reason": "frame too large", "max": a2a_proto::limits::MAX_FRAME_BYTES})),
        );
        Responder::direct(s.outbox.clone(), Id::Null).send(Err(err));
    }

    /// Handles one NDJSON line.
    pub fn handle_line(&self, s: &mut Session, line: &[u8]) {
        match parse_line(line) {
            Incoming::Blank => {}
            Incoming::Single(Ok(req)) => {
                let responder = match &req.id {
                    Some(id) => Responder::direct(s.outbox.clone(), id.clone()),
                    None => Responder::discard(),
                };
                self.handle(s, req, responder);
            }
            Incoming::Single(Err(rej)) => Responder::direct(s.outbox.clone(), rej.id).send(Err(rej.error)),
            Incoming::Batch(items) => {
                let answered = items
                    .iter()
                    .filter(|i| !matches!(i, Ok(Request { id: None, .. })))
                    .count();
                let batch = (answered > 0).then(|| BatchCollector::new(s.outbox.clone(), answered));
                let mut slot = 0;
                for item in items {
                    let mut next_responder = |id: Id| {
                        let r = Responder::in_batch(batch.clone().expect("counted"), slot, id);
                        slot += 1;
                        r
                    };
                    match item {
                        Ok(req) => {
                            let responder = match &req.id {
                                Some(id) => next_responder(id.clone()),
                                None => Responder::discard(),
                            };
                            self.handle(s, req, responder);
                        }
                        Err(rej) => next_responder(rej.id).send(Err(rej.error)),
                    }
                }
            }
        }
    }

    /// Runs one request behind the panic boundary.
    pub fn handle(&self, s: &mut Session, req: Request<'_>, responder: Responder) {
        let mut slot = Some(responder);
        let outcome = catch_unwind(AssertUnwindSafe(|| self.route(s, &req, &mut slot)));
        let result = match outcome {
            Ok(Some(result)) => result,
            Ok(None) => return,
            Err(_) => Err(RpcError::internal("the request failed inside the broker")),
        };
        if let Some(r) = slot.take() {
            r.send(result);
        }
    }

    /// `Some(result)` to answer now; `None` when the responder was handed on.
    fn route(
        &self,
        s: &mut Session,
        req: &Request<'_>,
        slot: &mut Option<Responder>,
    ) -> Option<Result<Reply, RpcError>> {
        let method = req.method.as_ref();
        if method == m::HANDSHAKE {
            return Some(self.handshake(s, req));
        }
        if !s.handshaken {
            return Some(Err(RpcError::invalid_request("handshake required")));
        }
        if !is_known(method) {
            return Some(Err(RpcError::method_not_found(method)));
        }
        let op = match method {
            m::AGENTS_LIST => return Some(params(req).and_then(|p| self.read(s, |c| reads::list_agents(c, p)))),
            m::TASKS_GET => return Some(params(req).and_then(|p| self.read(s, |c| reads::get_task(c, p)))),
            m::TASKS_LIST => return Some(params(req).and_then(|p| self.read(s, |c| reads::list_tasks(c, p)))),
            m::PUSH_CONFIG_GET => {
                return Some(params(req).and_then(|p| self.read(s, |c| reads::push_config(c, p))))
            }
            m::EVENTS_WAIT => return self.wait(req, slot),
            m::AGENTS_REGISTER => params(req).map(|p| Op::Register {
                conn: s.conn,
                outbox: s.outbox.clone(),
                params: p,
            }),
            m::AGENTS_DEREGISTER => params::<TokenParams>(req).map(|p| Op::Deregister { token: p.token }),
            m::MESSAGE_SEND | m::MESSAGE_STREAM => params::<SendParams>(req)
                .and_then(|p| check(validate::check_message(&p.message)).map(|_| p))
                .map(|p| Op::Send {
                    params: p,
                    stream: method == m::MESSAGE_STREAM,
                }),
            m::TASKS_STATUS => params::<StatusParams>(req)
                .and_then(|p| check(p.message.as_ref().map_or(Ok(()), validate::check_message)).map(|_| p))
                .map(Op::Status),
            m::TASKS_CANCEL => params::<CancelParams>(req)
                .and_then(|p| check(p.message.as_ref().map_or(Ok(()), validate::check_message)).map(|_| p))
                .map(Op::Cancel),
            m::TASKS_ARTIFACT => params::<ArtifactParams>(req)
                .and_then(|p| check(validate::check_parts(&p.artifact.parts)).map(|_| p))
                .map(Op::Artifact),
            m::TASKS_RESUBSCRIBE => params(req).map(Op::Resubscribe),
            m::PUSH_CONFIG_SET => params(req).map(Op::PushSet),
            _ => Err(RpcError::method_not_found(method)),
        };
        match op {
            Ok(op) => {
                self.engine.call(op, slot.take().expect("responder present"));
                None
            }
            Err(e) => Some(Err(e)),
        }
    }

    fn handshake(&self, s: &mut Session, req: &Request<'_>) -> Result<Reply, RpcError> {
        let p: HandshakeParams = params(req)?;
        if p.protocol_version != PROTOCOL_VERSION {
            return Err(RpcError::new(
                a2a_proto::error::INVALID_REQUEST,
                "invalid request",
                Some(json!({"reason": "protocol version mismatch", "protocolVersion": PROTOCOL_VERSION})),
            ));
        }
        s.handshaken = true;
        Ok(Reply::Handshake(HandshakeResult {
            protocol_version: PROTOCOL_VERSION,
            host: "a2a-broker".into(),
            host_version: env!("CARGO_PKG_VERSION").into(),
            features: FEATURES.iter().map(|f| f.to_string()).collect(),
            capabilities: vec!["a2a".into()],
            event_ring: None,
        }))
    }

    /// Runs a read on this connection's thread with its read connection.
    fn read(
        &self,
        s: &mut Session,
        f: impl FnOnce(&mut reads::ReadCtx<'_>) -> Result<Reply, crate::core::CoreError>,
    ) -> Result<Reply, RpcError> {
        let mut ctx = reads::ReadCtx {
            shared: &self.shared,
            db_path: &self.db_path,
            conn: &mut s.reader,
        };
        f(&mut ctx).map_err(to_rpc)
    }

    fn wait(&self, req: &Request<'_>, slot: &mut Option<Responder>) -> Option<Result<Reply, RpcError>> {
        let p: WaitParams = match params(req) {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        let agent = match self.shared.registry.read().resolve(p.token.as_deref()) {
            Ok(a) => a,
            Err(e) => return Some(Err(to_rpc(e))),
        };
        let Endpoint::Pull(queue) = &agent.endpoint else {
            return Some(Err(RpcError::invalid_params(
                "a2a.events.wait is for agents registered with delivery \"pull\"",
            )));
        };
        let secs = p
            .timeout_seconds
            .unwrap_or(A2A_DEFAULT_STREAM_WAIT_SECONDS as f64)
            .clamp(0.0, A2A_MAX_STREAM_WAIT_SECONDS as f64);
        let responder = slot.take().expect("responder present");
        queue.wait(p.after_seq, Duration::from_secs_f64(secs), responder, &self.shared.timer);
        None
    }
}

fn is_known(method: &str) -> bool {
    matches!(
        method,
        m::AGENTS_REGISTER
            | m::AGENTS_DEREGISTER
            | m::AGENTS_LIST
            | m::MESSAGE_SEND
            | m::MESSAGE_STREAM
            | m::TASKS_GET
            | m::TASKS_STATUS
            | m::TASKS_CANCEL
            | m::TASKS_RESUBSCRIBE
            | m::PUSH_CONFIG_SET
            | m::PUSH_CONFIG_GET
            | m::TASKS_LIST
            | m::TASKS_ARTIFACT
            | m::EVENTS_WAIT
    )
}

/// Parses a request's params into their typed struct: `-32602` on any mismatch.
fn params<T: DeserializeOwned>(req: &Request<'_>) -> Result<T, RpcError> {
    serde_json::from_str(req.params_str()).map_err(RpcError::invalid_params)
}

fn check(r: Result<(), crate::core::CoreError>) -> Result<(), RpcError> {
    r.map_err(to_rpc)
}
