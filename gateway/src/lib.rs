//! `a2a-gateway`: local agents of an `a2a-broker` served to any A2A v1.0
//! client over HTTP (the JSON-RPC binding, with SSE streaming and push
//! notifications), and the TCK's system under test (`serve-tck`).
//!
//! The gateway is a separate, opt-in process: a client of the broker's
//! local socket (its own connection on its tokio runtime, [`conn`], with
//! `a2a-client`'s types), so nothing listens on the network unless it is
//! started. Modules, from the wire inwards:
//! - [`http`]: axum routes: agent cards, the JSON-RPC endpoint, SSE.
//! - [`grpc`]: the gRPC binding on the same port, through the JSON-RPC
//!   handler.
//! - [`security`]: bind rule, bearer identities, rate limits, webhook
//!   SSRF guard, audit lines.
//! - [`conn`]: the broker connections (one per identity; one for
//!   `remote add`'s mirror peers), on the gateway's own runtime (a reader
//!   task each, no threads).
//! - [`core`]: the v1.0 operations as `a2a.*` calls on the broker (one
//!   requester agent per identity and A2A context), task event hubs.
//! - [`push`]: push notification configs and their delivery.
//! - [`store`]: the gateway's durable state (SQLite): tasks, push
//!   configs, remote task ids.
//! - [`state_file`]: the state file's permissions (owner-only).
//! - [`limits`]: the gateway's own bounds.
//! - [`mapping`]: v1.0 <-> `a2a.*` translation (states, roles, parts, ids,
//!   contexts, paging, errors), pure functions with tests.
//! - [`v1`]: the A2A v1.0 JSON types (ProtoJSON: camelCase out, camelCase
//!   or snake_case in).
//! - [`server`]: start-up (broker connection, card discovery, bind).
//! - [`tck`]: `serve-tck`, the TCK's system under test.
//! - [`outbound`]: remote A2A agents as broker peers (`remote add`).

pub mod conn;
pub mod core;
pub mod grpc;
pub mod http;
pub mod limits;
pub mod mapping;
pub mod outbound;
pub mod push;
pub mod security;
pub mod server;
pub mod state_file;
pub mod store;
pub mod tck;
pub mod v1;
