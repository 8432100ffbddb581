//! `a2a-gateway`: local agents of an `a2a-broker` served to any A2A v1.0
//! client over HTTP (the JSON-RPC binding, with SSE streaming and push
//! notifications), and remote A2A agents bridged into the broker as peers.
//!
//! The gateway is a separate, opt-in process: a client of the broker's
//! local socket (its own connections on its tokio runtime, with
//! `a2a-client`'s types), so nothing listens on the network unless it is
//! started. This library is the server and the bridge; the command line
//! (`serve`, `serve-tck`, `remote add`) and the TCK's system under test are
//! the binary's (`src/main.rs`, `src/remote_cli.rs`, `src/tck/`).
//!
//! The facade is the items below; the modules are private, so what a
//! caller can reach is chosen here:
//! - inbound: [`serve`] with [`ServeOptions`] gives a [`Running`] gateway
//!   (its [`Running::contexts`] and [`Running::state_file`]); callers are
//!   told apart by [`Tokens`]; push webhooks go where [`WebhookPolicy`]
//!   allows; [`GATEWAY_KEY`] is the metadata key a local agent reads the
//!   client's ids under (and sets `messageResponse` in).
//! - outbound: [`add_remote`] bridges a [`RemoteSpec`] over a
//!   [`BrokerConn`] as [`OutboundOptions`] say, giving a [`Remote`];
//!   [`NOTICE_KEY`] marks its reachability notices.
//! - shared: the broker connection ([`BrokerAddr`], [`BrokerConn`],
//!   [`Peer`]) and the state file ([`StateFile`]).
//!
//! Modules, from the wire inwards:
//! - `http`: axum routes: agent cards, the JSON-RPC and HTTP+JSON
//!   endpoints, SSE.
//! - `grpc`: the gRPC binding on the same port, through the JSON-RPC
//!   handler.
//! - `security`: bind rule, bearer identities, rate limits, webhook
//!   SSRF guard, audit lines.
//! - `conn`: the broker connections (one per identity; one for
//!   `remote add`'s mirror peers), on the gateway's own runtime (a reader
//!   task each, no threads).
//! - `core`: the v1.0 operations as `a2a.*` calls on the broker (one
//!   requester agent per identity and A2A context), task event hubs.
//! - `push`: push notification configs and their delivery.
//! - `store`: the gateway's durable state (SQLite): tasks, push
//!   configs, remote task ids.
//! - `state_file`: the state file's permissions (owner-only).
//! - `limits`: the gateway's own bounds.
//! - `compat`: A2A v0.3 requests and answers translated to and from
//!   v1.0 (pure functions with tests).
//! - `mapping`: v1.0 <-> `a2a.*` translation (states, roles, parts, ids,
//!   contexts, paging, errors), pure functions with tests.
//! - `v1`: the A2A v1.0 JSON types (ProtoJSON: camelCase out, camelCase
//!   or snake_case in).
//! - `server`: start-up (broker connection, card discovery, bind).
//! - `outbound`: remote A2A agents as broker peers (its own module tree:
//!   the bridge, the remote's card, the HTTP JSON-RPC client, SSE decoding,
//!   translation), reached only through the outbound items below.

mod compat;
mod conn;
mod core;
mod grpc;
mod http;
mod limits;
mod mapping;
mod outbound;
mod push;
mod security;
mod server;
mod state_file;
mod store;
mod v1;

// Inbound: local agents served over A2A v1.0.
pub use mapping::GATEWAY_KEY;
pub use security::{StartError, Tokens, WebhookPolicy, ANONYMOUS};
pub use server::{start as serve, Contexts, Running, ServeError, ServeOptions};

// Outbound: remote A2A agents as peers of the broker.
pub use outbound::{
    add_remote, origin_of, OutboundError, OutboundOptions, Remote, RemoteError, RemoteSpec,
    RpcOptions, SettleOptions, DEFAULT_CONTEXT, NOTICE_KEY, NOTICE_REACHABLE, NOTICE_UNREACHABLE,
};

// Shared by both directions.
pub use conn::{BrokerAddr, BrokerConn, Peer};
pub use store::{StateFile, StoreError};

/// Bounds a client of the gateway can observe (the rest are internal).
pub use limits::{MAX_BLOCKING_PER_IDENTITY, REMOTE_PROBE_EVERY, REMOTE_UNREACHABLE_AFTER};
