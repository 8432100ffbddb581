//! `NativeBroker`: one connection to the broker (an `a2a_client::Client`,
//! binary frames on the local socket), the calls connection on the JS
//! thread's loop beside it where libuv allows (`calls`), and the calls
//! that are not an agent's: connecting and registering.

use crate::agent::NativeAgent;
use crate::calls::{self, Link};
use crate::error::Failure;
use crate::settle::{self, Payload};
use a2a_client::{AgentCard, Client, ClientOptions, Delivery, SecretFrom};
use napi::bindgen_prelude::{PromiseRaw, ToNapiValue, Unknown};
use napi::{sys, Env};
use napi_derive::napi;
use std::rc::Rc;
use std::time::Duration;

/// How to reach the broker.
#[napi(object)]
pub struct ConnectOptions {
    /// The broker's `serve --socket` NAME, or its socket's path (found as
    /// every front end finds it: `a2a_client::locate`).
    pub socket: String,
    /// The broker's secret; default `A2A_BROKER_SECRET`, else the file the
    /// broker wrote beside the socket.
    pub secret: Option<String>,
    /// Ask for a shared-memory event ring of this many bytes
    /// (docs/protocol.md, "The shared-memory event ring"); the broker may
    /// decline (see `usesEventRing`).
    pub event_ring: Option<u32>,
    /// Longest wait for any answer, in seconds (default: the broker's
    /// longest hold plus 30 s).
    pub call_timeout_seconds: Option<f64>,
}

/// A connection to the broker.
#[napi]
pub struct NativeBroker {
    client: Client,
    /// The calls connection on this thread's loop (see `calls`), if any.
    calls: Option<Rc<Link>>,
}

/// Wraps a connected client (and its calls connection's socket) as a
/// `NativeBroker`, on the JS thread, where the socket joins the loop.
#[allow(unsafe_code)]
fn make_broker(
    env: sys::napi_env,
    client: Client,
    calls: Option<calls::Stream>,
) -> Result<sys::napi_value, Failure> {
    let calls = calls.and_then(|s| calls::attach(env, s));
    // SAFETY: on the JS thread (a `Payload::Native` runs there).
    unsafe { NativeBroker::to_napi_value(env, NativeBroker { client, calls }) }
        .map_err(|e| Failure::internal(e.reason))
}

/// Wraps a registered agent as a `NativeAgent` bound to its broker's
/// calls connection, found by number (the completion that made the agent
/// ran on another thread).
#[allow(unsafe_code)]
fn make_agent(
    env: sys::napi_env,
    agent: a2a_client::Agent,
    link: Option<calls::LinkKey>,
) -> Result<sys::napi_value, Failure> {
    let calls = link.and_then(Link::find);
    // SAFETY: on the JS thread (a `Payload::Native` runs there).
    unsafe { NativeAgent::to_napi_value(env, NativeAgent::new(agent, calls)) }
        .map_err(|e| Failure::internal(e.reason))
}

#[napi]
impl NativeBroker {
    /// Connects and shakes hands. The connect runs on a short-lived thread
    /// of its own (never a libuv pool thread); the promise settles from it.
    /// No broker at the socket and a secret that cannot be read or is
    /// refused reject with messages that say which.
    #[napi]
    pub fn connect<'env>(
        env: &'env Env,
        options: ConnectOptions,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let (ticket, promise) = settle::promise(env)?;
        let mut opts = ClientOptions {
            client_name: "a2a-node".into(),
            event_ring_bytes: options.event_ring.map(|b| b as usize),
            ..ClientOptions::default()
        };
        if let Some(t) = options.call_timeout_seconds {
            match Duration::try_from_secs_f64(t) {
                Ok(d) => opts.call_timeout = d,
                Err(e) => {
                    ticket.settle(Err(Failure::invalid("callTimeoutSeconds", e)));
                    return Ok(promise);
                }
            }
        }
        let spawned = std::thread::Builder::new()
            .name("a2a-node-connect".into())
            .spawn(move || {
                let located = a2a_client::locate(&options.socket);
                let io_timeout = opts.io_timeout;
                let r = match options.secret {
                    Some(s) => Ok((s, SecretFrom::Given)),
                    None => located.secret(),
                }
                .and_then(|(secret, from)| {
                    let client = located.connect(Some((&secret, from)), opts)?;
                    // The calls connection, where the loop can take it; a
                    // failure leaves calls on the client's connection.
                    let calls = crate::uv::get()
                        .and_then(|_| calls::open(&located.socket, &secret, io_timeout).ok());
                    Ok((client, calls))
                });
                ticket.settle(
                    r.map(|(client, calls)| {
                        Payload::Native(Box::new(move |env| make_broker(env, client, calls)))
                    })
                    .map_err(Failure::from),
                );
            });
        if let Err(e) = spawned {
            // The ticket went down with the closure and rejected itself.
            drop(e);
        }
        Ok(promise)
    }

    /// `a2a.agents.register`: resolves with a `NativeAgent`. `card` is the
    /// AgentCard as JSON; `delivery` is `"push"` (default) or `"pull"`.
    #[napi]
    pub fn register<'env>(
        &self,
        env: &'env Env,
        context_id: String,
        card: String,
        delivery: Option<String>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let (ticket, promise) = settle::promise(env)?;
        let card: AgentCard = match serde_json::from_str(&card) {
            Ok(c) => c,
            Err(e) => {
                ticket.settle(Err(Failure::invalid("card", e)));
                return Ok(promise);
            }
        };
        let delivery = match delivery.as_deref() {
            None | Some("push") => Delivery::Push,
            Some("pull") => Delivery::Pull,
            Some(other) => {
                ticket.settle(Err(Failure::invalid(
                    "delivery",
                    format!("{other:?} (expected \"push\" or \"pull\")"),
                )));
                return Ok(promise);
            }
        };
        let link = self.calls.as_ref().map(|l| l.key());
        match self.client.register_async(&context_id, card, delivery) {
            Ok(p) => p.on_complete(move |r| {
                ticket.settle(
                    r.map(|a| Payload::Native(Box::new(move |env| make_agent(env, a, link))))
                        .map_err(Failure::from),
                );
            }),
            Err(e) => ticket.settle(Err(e.into())),
        }
        Ok(promise)
    }

    /// Did the broker grant the event ring asked for?
    #[napi(getter)]
    pub fn uses_event_ring(&self) -> bool {
        self.client.uses_event_ring()
    }

    /// The handshake result, as JSON.
    #[napi(getter)]
    pub fn handshake(&self) -> String {
        serde_json::to_string(self.client.handshake_result()).unwrap_or_default()
    }

    /// Closes the connection: pending calls reject with `closed`, agents
    /// made from it stop receiving events.
    #[napi]
    pub fn close(&self) {
        self.client.close();
        if let Some(l) = &self.calls {
            l.close();
        }
    }

    /// `(frames written, write system calls)` of this connection, for
    /// benchmarks.
    #[napi]
    pub fn write_stats(&self) -> Vec<f64> {
        let (a, b) = self.client.write_stats();
        vec![a as f64, b as f64]
    }
}
