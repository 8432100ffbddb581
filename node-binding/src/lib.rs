//! `a2a-node`: the Node.js addon over `a2a-client` (napi-rs 3). A thin
//! wrapper: the client does the work (binary frames on the local socket,
//! a reader and a writer thread per connection), this crate turns its
//! completions into settled promises and its events into JS callbacks.
//! The JS API users see (`Broker`, `Agent`, `delegate`, `serve`,
//! `Broker.spawn`) is `index.js` over these native classes; its types are
//! `index.d.ts`.
//!
//! Modules:
//! - [`broker`] -- `NativeBroker`: connect, register, close.
//! - [`agent`] -- `NativeAgent`: one method per `a2a.*` call.
//! - [`tool`] -- `NativeTool`: the A2A tool (`a2a-tool`) bound to an
//!   agent, under `agent.tool()` in `index.js`.
//! - [`events`] -- `onEvent` (batches through a weak threadsafe function)
//!   and `wait` (a timer thread, not the libuv pool).
//! - `compact` -- the compact event batch (the default way events cross
//!   into JS, chosen by measurement).
//! - `calls` -- the calls connection on the JS thread's own libuv loop:
//!   calls written, read and settled on the JS thread, no thread hop
//!   (`uv`: the libuv functions it needs, found in the Node process;
//!   `wire`: how its answer lines settle promises). The lines are the
//!   client's wire core's (`a2a_client::wire`): it encodes the requests,
//!   says where each line ends, keeps the calls waiting by id, and finds
//!   an answer's result in its line.
//! - [`rawcall`] -- raw napi entry points of the task calls on the loop's
//!   calls connection (no napi-rs method wrapper per call).
//! - `settle` -- the completion queue that settles promises on the JS
//!   thread, one wake-up per burst of answers (the client's path).
//! - `error` -- how a failure becomes a JS `Error` (`code`, `kind`,
//!   `errorCode`, `data`).
//! - `js` -- JS-thread helpers (`JSON.parse`), the lowest layer.
//!
//! Layers (no import cycle between modules; `tests/layering.rs` checks it):
//! the leaves `js`, `uv`, `compact` <- `error` <- `settle` <-
//! `wire` <- `calls` <- `agent` <- `events`, `tool`, `broker`, `rawcall`. A lower layer never
//! names a higher one: a value only a higher one can make (a
//! `NativeAgent`) crosses down as a closure (`settle::Payload::Native`).
//!
//! Architecture invariant: no call holds a thread while it waits for the
//! broker. Calls are written by the JS thread and completed in its loop's
//! poll callback (`calls`), or, where libuv cannot be used, submitted to
//! the client and completed on its reader thread; `wait` parks a future on
//! one timer thread; connecting (once per connection) uses a short-lived
//! thread of its own. The libuv thread pool, shared with the file system,
//! DNS and crypto, is never used.
//!
//! `unsafe`: the promise queue calls napi directly (a raw threadsafe
//! function without a JS function, raw deferreds), because napi-rs's
//! deferred type creates a threadsafe function (a libuv handle) per promise;
//! every `unsafe` block says why it is sound.

#![allow(unsafe_code)]

pub mod agent;
pub mod broker;
#[cfg(unix)]
mod calls;
#[cfg(not(unix))]
#[path = "calls_none.rs"]
mod calls;
mod compact;
mod error;
pub mod events;
mod js;
pub mod rawcall;
mod settle;
pub mod tool;
mod uv;
#[cfg(unix)]
mod wire;
