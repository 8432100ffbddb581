//! The HTTP face of the gateway (axum): per exposed agent `NAME`,
//!
//! - `GET /agents/NAME/.well-known/agent-card.json`: its v1.0 agent card
//!   (and `GET /.well-known/agent-card.json` for the first exposed agent),
//!   with `Cache-Control`, `ETag` and `Last-Modified`;
//! - `POST /agents/NAME` and `POST /agents/NAME/`: the JSON-RPC binding
//!   ([`jsonrpc`]), SSE for the streaming methods ([`sse`]).
//!
//! Every answer is JSON (or SSE): a client that calls `response.json()`
//! unguarded never meets an HTML error page. The checks before a call is
//! dispatched, in order: bearer identity (401), rate limit (429), body
//! size (413), `Content-Type` (-32005), `A2A-Version` (-32009), then the
//! JSON-RPC envelope.

pub mod card;
pub mod jsonrpc;
pub mod sse;

use crate::core::Core;
use crate::security::{RateLimiter, Tokens};
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// What the HTTP layer needs besides the core.
pub struct HttpConfig {
    /// The origin clients reach the gateway at, e.g. `http://127.0.0.1:8080`
    /// (interface URLs in the cards are made from it).
    pub public_url: String,
    pub tokens: Tokens,
    pub limiter: RateLimiter,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Longest life of one SSE stream.
    pub max_stream: Duration,
    /// The SSE methods are offered.
    pub streaming: bool,
    /// `GetExtendedAgentCard` is offered.
    pub extended_card: bool,
    /// Extensions a message request must list in `A2A-Extensions`.
    pub required_extensions: Vec<String>,
}

/// The shared state of every handler.
pub struct App {
    pub core: Arc<Core>,
    pub config: HttpConfig,
    pub cards: card::Cards,
}

/// The router of the gateway.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/.well-known/agent-card.json", get(card::root_card))
        .route(
            "/agents/{agent}/.well-known/agent-card.json",
            get(card::agent_card),
        )
        .route("/agents/{agent}", post(rpc))
        .route("/agents/{agent}/", post(rpc))
        .fallback(not_found)
        // Bodies are read with our own bound (a JSON answer when over it).
        .layer(DefaultBodyLimit::disable())
        .with_state(app)
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"error": "not found"})),
    )
        .into_response()
}

/// A JSON-RPC error answer with an HTTP status.
pub fn rpc_error(status: StatusCode, id: Value, error: Value) -> Response {
    (
        status,
        axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": error})),
    )
        .into_response()
}

async fn rpc(
    State(app): State<Arc<App>>,
    Path(agent): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    use crate::mapping::GatewayError as E;
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let Some(identity) = app.config.tokens.identify(auth) else {
        let mut r = rpc_error(
            StatusCode::UNAUTHORIZED,
            Value::Null,
            E::Unauthenticated.to_json(),
        );
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    };
    if let Err(wait) = app.config.limiter.check(&identity) {
        let mut r = rpc_error(
            StatusCode::TOO_MANY_REQUESTS,
            Value::Null,
            E::RateLimited.to_json(),
        );
        let secs = wait.ceil().max(1.0) as u64;
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return r;
    }
    let bytes = match axum::body::to_bytes(body, app.config.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            return rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                Value::Null,
                E::InvalidRequest(format!(
                    "request body over {} bytes",
                    app.config.max_body_bytes
                ))
                .to_json(),
            )
        }
    };
    if app.core.agent(&agent).is_none() {
        return rpc_error(
            StatusCode::NOT_FOUND,
            Value::Null,
            E::InvalidRequest(format!("no agent `{agent}` here")).to_json(),
        );
    }
    jsonrpc::handle(app, identity, agent, &headers, &bytes).await
}
