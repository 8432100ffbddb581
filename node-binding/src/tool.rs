//! `NativeTool`: the A2A tool (`a2a-tool`, the one definition the MCP
//! server serves too) bound to one `NativeAgent`. `index.js` wraps it as
//! `agent.tool(options)`, in the shape the Pi agent runtime takes.
//!
//! A tool call runs the session's blocking `call` on a short-lived thread
//! of its own and settles its promise through `settle` when done: tool
//! calls are paced by a model (a few a minute), and a `wait` may block for
//! up to 120 s, which must hold neither the JS thread nor a libuv pool
//! thread. `abort(callId)` flags a call; a `wait` sees the flag within
//! 50 ms and returns what it has.

use crate::agent::NativeAgent;
use crate::error::Failure;
use crate::settle::{self, Payload};
use a2a_tool::{schema, Session, SessionOptions, WaitControl};
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi::Env;
use napi_derive::napi;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The tool bound to one agent.
#[napi]
pub struct NativeTool {
    session: Arc<Session>,
    /// The abort flags of the calls in flight, by the JS side's call id.
    in_flight: Arc<Mutex<HashMap<u32, Arc<AtomicBool>>>>,
}

struct Flag(Arc<AtomicBool>);

impl WaitControl for Flag {
    fn cancelled(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// The A2A tool bound to `agent`; `turnCap` overrides the default
/// per-task turn cap.
#[napi]
pub fn create_tool(agent: &NativeAgent, turn_cap: Option<u32>) -> NativeTool {
    let mut options = SessionOptions::default();
    if let Some(cap) = turn_cap {
        options.turn_cap = cap;
    }
    NativeTool {
        session: Arc::new(Session::with_options(agent.agent.clone(), options)),
        in_flight: Arc::new(Mutex::new(HashMap::new())),
    }
}

#[napi]
impl NativeTool {
    /// The tool's name (`A2A`).
    #[napi(getter)]
    pub fn name(&self) -> String {
        schema::NAME.to_owned()
    }

    /// A short title.
    #[napi(getter)]
    pub fn title(&self) -> String {
        schema::TITLE.to_owned()
    }

    /// The description a model reads.
    #[napi(getter)]
    pub fn description(&self) -> String {
        schema::description()
    }

    /// The JSON Schema of the arguments, as JSON text.
    #[napi(getter)]
    pub fn input_schema(&self) -> String {
        schema::input_schema().to_string()
    }

    /// The JSON Schema of the structured result, as JSON text.
    #[napi(getter)]
    pub fn output_schema(&self) -> String {
        schema::output_schema().to_string()
    }

    /// One tool call: `args` is the arguments' JSON text; resolves with
    /// `{text, structured, isError}`. `callId` names it for `abort`.
    #[napi]
    pub fn call<'env>(
        &self,
        env: &'env Env,
        args: String,
        call_id: u32,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let (ticket, promise) = settle::promise(env)?;
        let args: serde_json::Value = match serde_json::from_str(&args) {
            Ok(v) => v,
            Err(e) => {
                ticket.settle(Err(Failure::invalid("args", e)));
                return Ok(promise);
            }
        };
        let flag = Arc::new(AtomicBool::new(false));
        self.in_flight.lock().insert(call_id, flag.clone());
        let session = self.session.clone();
        let in_flight = self.in_flight.clone();
        let spawned = std::thread::Builder::new()
            .name("a2a-tool-call".into())
            .spawn(move || {
                let r = session.call_with(&args, &Flag(flag));
                in_flight.lock().remove(&call_id);
                ticket.settle(Ok(Payload::Json(r.to_json().to_string())));
            });
        if spawned.is_err() {
            // The closure, and its ticket, were dropped: the dropped ticket
            // rejects the promise.
            self.in_flight.lock().remove(&call_id);
        }
        Ok(promise)
    }

    /// Ends call `callId` early if it is waiting (a `wait` returns what it
    /// has; other actions finish as they would).
    #[napi]
    pub fn abort(&self, call_id: u32) {
        if let Some(flag) = self.in_flight.lock().get(&call_id) {
            flag.store(true, Ordering::Release);
        }
    }
}
