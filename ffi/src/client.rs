//! [`a2a_client`]: one connection to the broker (connect with the secret,
//! optionally asking for the event ring), its dispatch mode and readiness
//! descriptor, a2a_client_poll, registration, and the JSON escape hatch.

use crate::agent::a2a_agent;
use crate::args::{bad_enum, c_enum, handle, millis_or, opt_str_arg, out_arg, str_arg, write_out};
use crate::calls::{a2a_reply_cb, reply_async, reply_blocking};
use crate::dispatch::{a2a_dispatch, Dispatcher};
use crate::reply::{a2a_reply, ReplyData};
use crate::status::{a2a_status, guard, guard_value, FfiError};
use ::a2a_client::{agent_card, AgentCard, Client, ClientOptions, Delivery, SecretFrom};
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

/// A connection to the broker (opaque). Made by a2a_client_new, freed by
/// a2a_client_free.
#[allow(non_camel_case_types)]
pub struct a2a_client {
    client: Client,
    dispatcher: Arc<Dispatcher>,
}

/// How a client behaves; a zeroed struct (or a NULL pointer) means the
/// defaults.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct a2a_client_options {
    /// Longest wait of a blocking call, in ms (0: longer than the broker's
    /// longest hold, so it only fires for a broker that stopped answering).
    pub call_timeout_ms: u32,
    /// Bound of the connect, the handshake and every socket write, in ms
    /// (0: 10 s).
    pub io_timeout_ms: u32,
    /// How long to keep retrying a connect refused because the broker's
    /// backlog is full, in ms (0: fail at once).
    pub connect_retry_ms: u32,
    /// Ask for a shared-memory event ring of this many bytes (0: none).
    /// The broker may decline: see a2a_client_uses_event_ring. Events reach
    /// callbacks and a2a_agent_next_event the same way on either path.
    pub event_ring_bytes: usize,
    /// Where completion and event callbacks run (another value than the
    /// A2A_DISPATCH_ constants fails a2a_client_new with
    /// A2A_STATUS_INVALID_ARGUMENT).
    pub dispatch: a2a_dispatch,
    /// Sent as `client` in the handshake (NULL: "a2a-ffi").
    pub client_name: *const c_char,
}

/// How a registered agent receives its events: one of the A2A_DELIVERY_
/// constants (an integer, checked on entry).
#[allow(non_camel_case_types)]
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct a2a_delivery(pub i32);

impl a2a_delivery {
    /// On this connection, as they happen.
    pub const PUSH: a2a_delivery = a2a_delivery(0);
    /// Fetched with `a2a.events.wait` (by a2a_agent_wait_event, or while an
    /// event callback is set).
    pub const PULL: a2a_delivery = a2a_delivery(1);
}

c_enum!(a2a_delivery {
    PUSH => "A2A_DELIVERY_PUSH",
    PULL => "A2A_DELIVERY_PULL",
});

/// Connects to the broker named by `socket` and shakes hands with
/// `secret`. `socket` is what `a2a-broker serve --socket` was given: a
/// path (it contains a `/`), or a NAME, found as the broker places it
/// (`$XDG_RUNTIME_DIR/a2a-broker/NAME.sock`, else
/// `/tmp/a2a-broker-UID/NAME.sock`). `secret` NULL: the A2A_BROKER_SECRET
/// environment variable, else the owner-only file the broker wrote beside
/// its socket (`NAME.secret`). `options` may be NULL.
///
/// Nothing listening there (no socket file, or one a broker that is gone
/// left) fails with A2A_STATUS_NO_BROKER, whose message names the path and
/// how to start a broker, whatever the secret. A secret file that cannot be
/// read fails with A2A_STATUS_IO; a wrong secret with A2A_STATUS_RPC (code
/// -32600); both messages say where the secret came from.
///
/// Threads: any.
#[no_mangle]
pub extern "C" fn a2a_client_new(
    socket: *const c_char,
    secret: *const c_char,
    options: *const a2a_client_options,
    out: *mut *mut a2a_client,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or NUL-terminated strings, NULL or a readable
        // options struct (header rule).
        let (socket, secret, opts) = unsafe {
            (
                str_arg(socket, "socket")?,
                opt_str_arg(secret, "secret")?,
                options.as_ref().copied(),
            )
        };
        out_arg(out, "out")?;
        let mut o = ClientOptions {
            client_name: "a2a-ffi".into(),
            ..ClientOptions::default()
        };
        let mut dispatch = a2a_dispatch::THREAD;
        if let Some(x) = opts {
            o.call_timeout = millis_or(x.call_timeout_ms, o.call_timeout);
            o.io_timeout = millis_or(x.io_timeout_ms, o.io_timeout);
            o.connect_retry = millis_or(x.connect_retry_ms, o.connect_retry);
            o.event_ring_bytes = (x.event_ring_bytes > 0).then_some(x.event_ring_bytes);
            dispatch = x.dispatch;
            // SAFETY: NULL or a NUL-terminated string (header rule).
            if let Some(name) = unsafe { opt_str_arg(x.client_name, "client_name") }? {
                o.client_name = name.to_owned();
            }
        }
        let dispatcher = Dispatcher::new(dispatch)?;
        // The locator every front end uses (docs/protocol.md §2): a NAME or
        // a path, the secret beside the socket, "no broker" told apart.
        let broker = ::a2a_client::locate(socket);
        let client = broker.connect(secret.map(|s| (s, SecretFrom::Given)), o)?;
        let c = a2a_client {
            client,
            dispatcher: Arc::new(dispatcher),
        };
        // SAFETY: checked non-NULL above.
        unsafe { write_out(out, Box::into_raw(Box::new(c))) };
        Ok(())
    })
}

/// Closes the connection and frees the client. NULL is ignored. Every
/// call still pending completes first, with A2A_STATUS_CLOSED if its
/// answer had not come: in thread mode its callback runs on the reader
/// thread, in poll mode on this thread, before this returns. Event
/// callbacks stop. Agent handles stay valid to be freed; their calls fail
/// with A2A_STATUS_CLOSED. When this returns no callback of this client
/// runs, except: called from one of its own callbacks in thread mode, the
/// callbacks still owed run on the reader thread after that callback
/// returns. The client's threads have ended when this returns, except
/// when it is called on one of them (a thread-mode callback, on the
/// reader thread or the event ring's): they then end on their own just
/// after that callback returns (the connection is already shut down), so
/// a program that exits at that instant may leave them mid-way, which
/// leak checkers such as Valgrind report as memory possibly lost.
///
/// Threads: any, its own callbacks included; no other thread may be
/// using the handle (as for every _free).
#[no_mangle]
pub extern "C" fn a2a_client_free(client: *mut a2a_client) {
    guard_value((), || {
        if client.is_null() {
            return;
        }
        // SAFETY: made by a2a_client_new as a Box, freed once (header rule).
        let c = unsafe { Box::from_raw(client) };
        c.dispatcher.shut_down(|| c.client.close());
        // Another handle may still hold the connection (a callback under
        // way on the reader thread holds its agent): its threads are
        // waited for here, not left to the last handle's drop.
        c.client.close_and_wait();
        drop(c);
    })
}

/// Closes the connection now without freeing the client: pending calls
/// complete with A2A_STATUS_CLOSED (their callbacks still run), later
/// calls fail at once with it. The broker invalidates the tokens of the
/// agents registered on this connection and leaves their tasks open.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_client_close(client: *const a2a_client) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or a live client (header rule).
        unsafe { handle(client, "client") }?.client.close();
        Ok(())
    })
}

/// Did the broker grant the event ring asked for in the options? (false
/// also for a NULL client).
///
/// Threads: any.
#[no_mangle]
pub extern "C" fn a2a_client_uses_event_ring(client: *const a2a_client) -> bool {
    guard_value(false, || {
        // SAFETY: NULL or a live client (header rule).
        unsafe { client.as_ref() }.is_some_and(|c| c.client.uses_event_ring())
    })
}

/// The readiness descriptor of an A2A_DISPATCH_POLL client: readable while
/// callbacks are queued for a2a_client_poll. Owned by the client (do not
/// close it; it is closed by a2a_client_free). Watch it for reading with
/// poll(2), epoll (level- or edge-triggered), libuv's uv_poll_t, ...
/// A2A_STATUS_INVALID_ARGUMENT for a thread-mode client.
///
/// Threads: any.
#[no_mangle]
pub extern "C" fn a2a_client_fd(client: *const a2a_client, out_fd: *mut c_int) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or a live client (header rule).
        let c = unsafe { handle(client, "client") }?;
        out_arg(out_fd, "out_fd")?;
        let fd = c
            .dispatcher
            .fd()
            .ok_or_else(|| FfiError::invalid("not an A2A_DISPATCH_POLL client"))?;
        // SAFETY: checked non-NULL above.
        unsafe { write_out(out_fd, fd) };
        Ok(())
    })
}

/// Runs up to `max` queued callbacks (completions and events) of an
/// A2A_DISPATCH_POLL client on this thread, without blocking, and writes
/// how many ran to `*out_n` (0 when nothing was queued). The descriptor
/// stays readable while callbacks remain queued. Callbacks may call this
/// again (it nests), and may free the client: this then returns once that
/// callback has, having run nothing more (the free ran what was owed), and
/// the caller must not use the client again.
///
/// Threads: any (usually the host's event-loop thread); several threads
/// may poll one client, each callback then runs on one of them.
#[no_mangle]
pub extern "C" fn a2a_client_poll(
    client: *const a2a_client,
    max: usize,
    out_n: *mut usize,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or a live client (header rule).
        let c = unsafe { handle(client, "client") }?;
        out_arg(out_n, "out_n")?;
        if c.dispatcher.mode() != a2a_dispatch::POLL {
            return Err(FfiError::invalid("not an A2A_DISPATCH_POLL client"));
        }
        // The callbacks run here may free the client (the header allows
        // it): hold the dispatcher for the whole loop, not through `c`,
        // or the loop would read it freed once no agent handle holds it.
        let dispatcher = Arc::clone(&c.dispatcher);
        let n = dispatcher.poll(max);
        // SAFETY: checked non-NULL above.
        unsafe { write_out(out_n, n) };
        Ok(())
    })
}

/// The card of a registration: `card_json` if given (a JSON agent card),
/// with `name` as its name.
///
/// # Safety
/// NULL or NUL-terminated strings.
unsafe fn card_arg(name: *const c_char, card_json: *const c_char) -> Result<AgentCard, FfiError> {
    // SAFETY: forwarded from the caller.
    let name = unsafe { str_arg(name, "name") }?;
    // SAFETY: forwarded from the caller.
    let mut card = match unsafe { opt_str_arg(card_json, "card_json") }? {
        None => agent_card(name),
        Some(j) => {
            let mut v: serde_json::Value = serde_json::from_str(j)
                .map_err(|e| FfiError::invalid(format!("`card_json` is not JSON: {e}")))?;
            if let Some(o) = v.as_object_mut() {
                o.entry("name").or_insert_with(|| name.into());
            }
            serde_json::from_value::<AgentCard>(v)
                .map_err(|e| FfiError::invalid(format!("`card_json` is not an agent card: {e}")))?
        }
    };
    card.name = name.to_owned();
    Ok(card)
}

fn delivery(d: a2a_delivery) -> Result<Delivery, FfiError> {
    match d {
        a2a_delivery::PUSH => Ok(Delivery::Push),
        a2a_delivery::PULL => Ok(Delivery::Pull),
        _ => Err(bad_enum(d, "delivery_mode", |_| true)),
    }
}

/// The arguments of a2a_client_register (both forms), read in their order.
///
/// # Safety
/// NULL or a live handle and NUL-terminated strings.
unsafe fn register_args<'a>(
    client: *const a2a_client,
    context_id: *const c_char,
    name: *const c_char,
    card_json: *const c_char,
    delivery_mode: a2a_delivery,
) -> Result<(&'a a2a_client, &'a str, AgentCard, Delivery), FfiError> {
    // SAFETY: forwarded from the caller.
    unsafe {
        let c = handle(client, "client")?;
        let ctx = str_arg(context_id, "context_id")?;
        let card = card_arg(name, card_json)?;
        Ok((c, ctx, card, delivery(delivery_mode)?))
    }
}

/// Registers an agent in `context_id`, asking for the name `name` (the
/// broker may suffix it; read the result with a2a_agent_id). `card_json`
/// (NULL for the defaults) is a JSON agent card for the rest (skills,
/// description, ...). Writes a new handle to `*out`.
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK (use a2a_client_register_async).
#[no_mangle]
pub extern "C" fn a2a_client_register(
    client: *const a2a_client,
    context_id: *const c_char,
    name: *const c_char,
    card_json: *const c_char,
    delivery_mode: a2a_delivery,
    out: *mut *mut a2a_agent,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and NUL-terminated strings (header rule).
        let (c, ctx, card, delivery) =
            unsafe { register_args(client, context_id, name, card_json, delivery_mode) }?;
        out_arg(out, "out")?;
        c.dispatcher.may_block()?;
        let agent = c.client.register(ctx, card, delivery)?;
        let a = a2a_agent::new(agent, c.dispatcher.clone());
        // SAFETY: checked non-NULL above.
        unsafe { write_out(out, Box::into_raw(Box::new(a))) };
        Ok(())
    })
}

/// a2a_client_register, submitted: `cb` receives a reply of kind
/// A2A_REPLY_KIND_AGENT whose `agent` is borrowed (keep it with
/// a2a_agent_clone). If this returns an error, `cb` never runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_client_register_async(
    client: *const a2a_client,
    context_id: *const c_char,
    name: *const c_char,
    card_json: *const c_char,
    delivery_mode: a2a_delivery,
    cb: a2a_reply_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and NUL-terminated strings (header rule).
        let (c, ctx, card, delivery) =
            unsafe { register_args(client, context_id, name, card_json, delivery_mode) }?;
        let d = c.dispatcher.clone();
        reply_async(&c.dispatcher, cb, userdata, move || {
            c.client.register_async(ctx, card, delivery).map(|p| {
                (p, move |agent| {
                    ReplyData::Agent(Box::new(a2a_agent::new(agent, d)))
                })
            })
        })
    })
}

/// The escape hatch: calls `method` with `params_json` (a JSON object, or
/// NULL for none) and writes the JSON result, as a reply of kind
/// A2A_REPLY_KIND_JSON, to `*out`. Params are checked here as the broker
/// would (A2A_STATUS_RPC with -32601 / -32602). Tokens go in the params
/// (see a2a_agent_token).
///
/// Threads: any; inside a callback of a thread-mode client it fails with
/// A2A_STATUS_WOULD_DEADLOCK.
#[no_mangle]
pub extern "C" fn a2a_client_call_json(
    client: *const a2a_client,
    method: *const c_char,
    params_json: *const c_char,
    out: *mut *mut a2a_reply,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and NUL-terminated strings (header rule).
        let (c, method, params) = unsafe { call_json_args(client, method, params_json) }?;
        reply_blocking(&c.dispatcher, out, || {
            c.client
                .call_json(method, params)
                .map(|v| ReplyData::Json(v.to_string()))
        })
    })
}

/// a2a_client_call_json, submitted. If this returns an error (bad
/// method or params included), `cb` never runs.
///
/// Threads: any, callbacks included.
#[no_mangle]
pub extern "C" fn a2a_client_call_json_async(
    client: *const a2a_client,
    method: *const c_char,
    params_json: *const c_char,
    cb: a2a_reply_cb,
    userdata: *mut c_void,
) -> a2a_status {
    guard(|| {
        // SAFETY: NULL or live handles and NUL-terminated strings (header rule).
        let (c, method, params) = unsafe { call_json_args(client, method, params_json) }?;
        reply_async(&c.dispatcher, cb, userdata, move || {
            c.client
                .call_json_async(method, params)
                .map(|p| (p, |v: serde_json::Value| ReplyData::Json(v.to_string())))
        })
    })
}

/// The arguments of a2a_client_call_json (both forms); NULL params are none.
///
/// # Safety
/// NULL or a live handle and NUL-terminated strings.
unsafe fn call_json_args<'a>(
    client: *const a2a_client,
    method: *const c_char,
    params_json: *const c_char,
) -> Result<(&'a a2a_client, &'a str, serde_json::Value), FfiError> {
    // SAFETY: forwarded from the caller.
    unsafe {
        let c = handle(client, "client")?;
        let method = str_arg(method, "method")?;
        let params = crate::args::opt_json_arg::<serde_json::Value>(params_json, "params_json")?;
        Ok((c, method, params.unwrap_or(serde_json::Value::Null)))
    }
}
