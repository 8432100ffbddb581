//! From a decoded request to its method: the session rules (handshake
//! first), the panic boundary, params parsing (errors become `-32602` here,
//! in one place), the pre-checks of `a2a_proto::check`, then the method's
//! route (`methods/`): reads answered without the writer, mutating calls
//! queued to it.
//!
//! Architecture invariant: a read never waits for the writer, and a slow
//! request (a blocked `events.wait`, a blocking send) never holds the
//! connection: its responder is parked and the next line is read at once.

use crate::broker::Broker;
use crate::delivery::outbox::BatchCollector;
use crate::delivery::Responder;
use crate::reply::Reply;
use crate::rpc_errors::to_rpc;
use crate::session::Session;
use a2a_proto::call::Call;
use a2a_proto::error::RpcError;
use a2a_proto::jsonrpc::{parse_line, Id, Incoming, Request};
use a2a_proto::methods as m;
use std::panic::{catch_unwind, AssertUnwindSafe};

impl Broker {
    /// Answers a line that was longer than the frame limit.
    pub(crate) fn frame_too_large(&self, s: &Session) {
        let err = crate::rpc_errors::frame_too_large();
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
            Err(_) => Err(crate::rpc_errors::handler_panicked()),
        };
        if let Some(r) = slot.take() {
            r.send(result);
        }
    }

    /// `Some(result)` to answer now; `None` when the responder was handed on.
    fn route(
        &self,
        s: &mut Session,
        mut call: Call,
        slot: &mut Option<Responder>,
    ) -> Option<Result<Reply, RpcError>> {
        // Refused here, on the connection's thread, so the writer never
        // pays for decoding a large payload just to refuse it.
        let weight = match call.precheck() {
            Ok(payload_bytes) => payload_bytes,
            Err(e) => return Some(Err(to_rpc(e.into()))),
        };
        // One line per method, from the method table (`methods/mod.rs`).
        self.route_call(s, call, weight, slot)
    }
}
