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
//! - `settle` -- the completion queue that settles promises on the JS
//!   thread, one wake-up per burst of answers.
//! - `error` -- how a failure becomes a JS `Error` (`code`, `kind`,
//!   `errorCode`, `data`).
//!
//! Architecture invariant: no call holds a thread while it waits for the
//! broker. Calls are submissions whose completions run on the client's
//! reader thread; `wait` parks a future on one timer thread; connecting
//! (once per connection) uses a short-lived thread of its own. The libuv
//! thread pool, shared with the file system, DNS and crypto, is never used.
//!
//! `unsafe`: the promise queue calls napi directly (a raw threadsafe
//! function without a JS function, raw deferreds), because napi-rs's
//! deferred type creates a threadsafe function (a libuv handle) per promise;
//! every `unsafe` block says why it is sound.

#![allow(unsafe_code)]

pub mod agent;
pub mod broker;
mod compact;
mod error;
pub mod events;
mod settle;
pub mod tool;
