//! From a decoded request to its handler: the session rules (handshake
//! first), the panic boundary, params parsing (errors become `-32602` here,
//! in one place), the pre-checks of `a2a_proto::check`, reads answered on
//! the connection's own thread, and mutating calls queued to the writer.
//!
//! Architecture invariant: a read never waits for the writer, and a slow
//! request (a blocked `events.wait`, a blocking send) never holds the
//! connection: its responder is parked and the next line is read at once.

use crate::broker::Broker;
use crate::delivery::outbox::BatchCollector;
use crate::delivery::{Endpoint, Responder};
use crate::engine::Op;
use crate::handshake::handshake;
use crate::read_calls::{self, ReadCtx};
use crate::reply::Reply;
use crate::rpc_errors::to_rpc;
use crate::session::Session;
use a2a_proto::call::Call;
use a2a_proto::error::RpcError;
use a2a_proto::jsonrpc::{parse_line, Id, Incoming, Request};
use a2a_proto::limits::{A2A_DEFAULT_STREAM_WAIT_SECONDS, A2A_MAX_STREAM_WAIT_SECONDS};
use a2a_proto::methods as m;
use a2a_proto::params::{SendParams, WaitParams};
use serde_json::json;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

impl Broker {
    /// Answers a line that was longer than the frame limit.
    pub(crate) fn frame_too_large(&self, s: &Session) {
        let err = RpcError::new(
            a2a_proto::error::INVALID_REQUEST,
            "invalid request",
            Some(json!({
                "reason": "frame too large",
                "limit": "MAX_FRAME_BYTES",
                "max": a2a_proto::limits::MAX_FRAME_BYTES,
            })),
        );
        Responder::direct(s.outbox.clone(), Id::Null).send(Err(err));
    }

    /// Handles one NDJSON line.
    pub(crate) fn handle_line(&self, s: &mut Session, line: &[u8]) {
        match parse_line(line) {
            Incoming::Blank => {}
            Incoming::Single(Ok(req)) => {
                let responder = match &req.id {
                    Some(id) => Responder::direct(s.outbox.clone(), id.clone()),
                    None => Responder::discard(),
                };
                self.handle_json(s, &req, responder);
            }
            Incoming::Single(Err(rej)) => {
                Responder::direct(s.outbox.clone(), rej.id).send(Err(rej.error))
            }
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
                            self.handle_json(s, &req, responder);
                        }
                        Err(rej) => next_responder(rej.id).send(Err(rej.error)),
                    }
                }
            }
        }
    }

    /// A JSON request: the session rule first, then its params into a [`Call`].
    fn handle_json(&self, s: &mut Session, req: &Request<'_>, responder: Responder) {
        let method = req.method.as_ref();
        if method != m::HANDSHAKE && !s.handshaken {
            return responder.send(Err(RpcError::handshake_required(method)));
        }
        match Call::from_json(method, req.params_str()) {
            Ok(call) => self.handle_call(s, call, responder),
            Err(e) => responder.send(Err(e)),
        }
    }

    /// Runs one typed call behind the panic boundary.
    pub(crate) fn handle_call(&self, s: &mut Session, call: Call, responder: Responder) {
        if !s.handshaken && !matches!(call, Call::Handshake(_)) {
            return responder.send(Err(RpcError::handshake_required(call.method())));
        }
        let mut slot = Some(responder);
        let outcome = catch_unwind(AssertUnwindSafe(|| self.route(s, call, &mut slot)));
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
        call: Call,
        slot: &mut Option<Responder>,
    ) -> Option<Result<Reply, RpcError>> {
        let mut call = call;
        // Refused here, on the connection's thread, so the writer never
        // pays for decoding a large payload just to refuse it.
        if let Err(e) = a2a_proto::check::precheck(&mut call) {
            return Some(Err(to_rpc(e.into())));
        }
        let op = match call {
            Call::Handshake(p) => return Some(handshake(s, p)),
            Call::ListAgents(p) => return Some(self.read(|c| read_calls::list_agents(c, p))),
            Call::Get(p) => {
                let cached = self.cached(&p.id);
                return self.read_where(cached, slot, move |c| read_calls::get_task(c, p));
            }
            Call::ListTasks(p) => {
                return self.read_where(false, slot, move |c| read_calls::list_tasks(c, p));
            }
            Call::PushGet(p) => {
                let cached = self.cached(&p.task_id);
                return self.read_where(cached, slot, move |c| read_calls::push_config(c, p));
            }
            Call::Wait(p) => return self.wait(s, p, slot),
            Call::Register(p) => Ok(Op::Register {
                conn: s.conn,
                outbox: s.outbox.clone(),
                params: p,
            }),
            Call::Send(p) => self.blocking(s, &p, slot).map(|_| Op::Call(Call::Send(p))),
            call @ (Call::Deregister(_)
            | Call::Stream(_)
            | Call::Status(_)
            | Call::Cancel(_)
            | Call::Artifact(_)
            | Call::Resubscribe(_)
            | Call::PushSet(_)) => Ok(Op::Call(call)),
        };
        match op {
            Ok(op) => {
                self.engine
                    .call(op, slot.take().expect("responder present"));
                None
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// Runs a read that needs no SQLite on this connection's thread.
    fn read(
        &self,
        f: impl FnOnce(&mut ReadCtx<'_>) -> Result<Reply, crate::core::CoreError>,
    ) -> Result<Reply, RpcError> {
        let mut ctx = ReadCtx::new(&self.shared, &self.readers);
        f(&mut ctx).map_err(to_rpc)
    }

    /// Is this task in the committed-task cache (a read of it needs no SQLite)?
    fn cached(&self, id: &str) -> bool {
        self.shared.tasks.read().contains_key(id)
    }

    /// Runs a read here if it needs no SQLite, else on a reader thread,
    /// which answers the responder itself (`None`: handed on).
    fn read_where(
        &self,
        here: bool,
        slot: &mut Option<Responder>,
        f: impl FnOnce(&mut ReadCtx<'_>) -> Result<Reply, crate::core::CoreError> + Send + 'static,
    ) -> Option<Result<Reply, RpcError>> {
        if here {
            return Some(self.read(f));
        }
        let responder = slot.take().expect("responder present");
        let shared = self.shared.clone();
        self.read_workers.run(Box::new(move |pool| {
            let result = catch_unwind(AssertUnwindSafe(|| {
                let mut ctx = ReadCtx::new(&shared, pool);
                f(&mut ctx).map_err(to_rpc)
            }))
            .unwrap_or_else(|_| Err(RpcError::internal("the request failed inside the broker")));
            responder.send(result);
        }));
        None
    }

    /// A blocking send holds one of the connection's parking places until
    /// it is answered (`A2A_MAX_PARKED_WAITS`).
    fn blocking(
        &self,
        s: &Session,
        p: &SendParams,
        slot: &mut Option<Responder>,
    ) -> Result<(), RpcError> {
        if p.configuration.as_ref().and_then(|c| c.blocking) == Some(true) {
            let parked = s.park()?;
            let r = slot.take().expect("responder present");
            *slot = Some(r.parked(parked));
        }
        Ok(())
    }

    fn wait(
        &self,
        s: &Session,
        p: WaitParams,
        slot: &mut Option<Responder>,
    ) -> Option<Result<Reply, RpcError>> {
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
        let parked = match s.park() {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        let responder = slot.take().expect("responder present").parked(parked);
        queue.wait(
            p.after_seq,
            Duration::from_secs_f64(secs),
            responder,
            &self.shared.timer,
        );
        None
    }
}
