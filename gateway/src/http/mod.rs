//! The HTTP face of the gateway (axum): per exposed agent `NAME`,
//!
//! - `GET /agents/NAME/.well-known/agent-card.json`: its v1.0 agent card
//!   (and `GET /.well-known/agent-card.json` for the first exposed agent),
//!   with `Cache-Control`, `ETag` and `Last-Modified`;
//! - `POST /agents/NAME` and `POST /agents/NAME/`: the JSON-RPC binding
//!   ([`jsonrpc`]), SSE for the streaming methods ([`sse`]);
//! - `/agents/NAME/message:send`, `/agents/NAME/tasks/...` and the other
//!   paths of the HTTP+JSON binding ([`rest`]), on the same base URL.
//!
//! Both bindings run the same operations ([`ops`]). Every answer is JSON
//! (or SSE): a client that calls `response.json()` unguarded never meets
//! an HTML error page. The checks before a call is dispatched, in order
//! ([`admit`], the same for both bindings): bearer identity (401), rate
//! limit (429), body size (413), the agent (404); then `Content-Type`
//! (-32005, HTTP+JSON 415), `A2A-Version` (-32009, HTTP+JSON 400), then the
//! JSON-RPC envelope or the HTTP+JSON route.

pub mod card;
pub mod edge;
pub mod jsonrpc;
pub mod ops;
pub mod rest;
pub mod sse;

use crate::core::Core;
use crate::security::{audit_refusal, AuditLog, RateLimiter, Tokens};
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::Router;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What the HTTP layer needs besides the core.
pub struct HttpConfig {
    /// The origin clients reach the gateway at, e.g. `http://127.0.0.1:8080`
    /// (interface URLs in the cards are made from it).
    pub public_url: String,
    pub tokens: Tokens,
    pub limiter: RateLimiter,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Time a request has to send its whole body.
    pub body_timeout: Duration,
    /// Body bytes held at once, all requests together (KiB permits).
    pub body_budget: Arc<Semaphore>,
    /// Longest life of one SSE stream.
    pub max_stream: Duration,
    /// The SSE methods are offered.
    pub streaming: bool,
    /// `GetExtendedAgentCard` is offered.
    pub extended_card: bool,
    /// Extensions a message request must list in `A2A-Extensions`.
    pub required_extensions: Vec<String>,
    /// The audit file, if any (`--audit`).
    pub audit: AuditLog,
    /// The server's stop signal (true once it stops): open streams end at
    /// once rather than holding the stop for its whole grace period
    /// (their clients subscribe again to the gateway started next).
    pub stopping: tokio::sync::watch::Receiver<bool>,
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
        .route("/agents/{agent}/{*path}", any(rest::handle))
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
    let refuse =
        |status, e: &crate::mapping::GatewayError| rpc_error(status, Value::Null, e.to_json());
    match admit(&app, &agent, &headers, body, refuse).await {
        Ok(a) => jsonrpc::handle(Arc::clone(&app), a.identity, agent, &headers, &a.body).await,
        Err(r) => r,
    }
}

/// A request that passed the checks every call of both bindings meets
/// before its binding reads it.
pub struct Admitted {
    /// The caller's identity (its bearer token's name).
    pub identity: String,
    /// The whole request body.
    pub body: Vec<u8>,
    /// The body's share of the body budget, held while the call runs.
    pub _held: Option<OwnedSemaphorePermit>,
}

/// The checks before a call, in order: bearer identity (401), rate limit
/// (429, with `Retry-After`), the body within its bound and timeout (413,
/// 408), the agent (404); each refusal has its audit line and is written
/// by the binding's `refuse` (JSON-RPC and HTTP+JSON frame errors
/// differently).
pub async fn admit(
    app: &App,
    agent: &str,
    headers: &HeaderMap,
    body: Body,
    refuse: impl Fn(StatusCode, &crate::mapping::GatewayError) -> Response,
) -> Result<Admitted, Response> {
    use crate::mapping::GatewayError as E;
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let Some(identity) = app.config.tokens.identify(auth) else {
        let why = if auth.is_some() {
            "bad credentials"
        } else {
            "no credentials"
        };
        audit_refusal(&app.config.audit, None, agent, 401, why);
        let mut r = refuse(StatusCode::UNAUTHORIZED, &E::Unauthenticated);
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return Err(r);
    };
    if let Err(wait) = app.config.limiter.check(&identity) {
        audit_refusal(&app.config.audit, Some(&identity), agent, 429, "rate limit");
        let mut r = refuse(StatusCode::TOO_MANY_REQUESTS, &E::RateLimited);
        let secs = wait.ceil().max(1.0) as u64;
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return Err(r);
    }
    let (bytes, held) = match read_body(&app.config, headers, body).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            audit_refusal(
                &app.config.audit,
                Some(&identity),
                agent,
                413,
                "body too large",
            );
            return Err(refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                &E::InvalidRequest(format!(
                    "request body over {} bytes",
                    app.config.max_body_bytes
                )),
            ));
        }
        Err(BodyError::Timeout) => {
            audit_refusal(
                &app.config.audit,
                Some(&identity),
                agent,
                408,
                "body too slow",
            );
            return Err(refuse(
                StatusCode::REQUEST_TIMEOUT,
                &E::InvalidRequest(format!(
                    "request body not received within {} s",
                    app.config.body_timeout.as_secs()
                )),
            ));
        }
        Err(BodyError::Broken) => {
            audit_refusal(
                &app.config.audit,
                Some(&identity),
                agent,
                400,
                "body broken off",
            );
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                &E::InvalidRequest("request body broken off".into()),
            ));
        }
    };
    if app.core.agent(agent).is_none() {
        audit_refusal(
            &app.config.audit,
            Some(&identity),
            agent,
            404,
            "no such agent",
        );
        return Err(refuse(
            StatusCode::NOT_FOUND,
            &E::InvalidRequest(format!("no agent `{agent}` here")),
        ));
    }
    Ok(Admitted {
        identity,
        body: bytes,
        _held: held,
    })
}

/// Why a request body was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyError {
    /// Over the body bound (declared or sent).
    TooLarge,
    /// Not all there within the body timeout (waiting for room included).
    Timeout,
    /// The connection broke off mid-body.
    Broken,
}

/// Reads a request body within the body bound and timeout, taking its
/// bytes from the shared body budget as they arrive (all of a declared
/// `Content-Length` at once, before reading any): memory held by bodies
/// being read stays under the budget, however many arrive slowly. The
/// permits come back with the body and are held while the call runs.
pub async fn read_body(
    config: &HttpConfig,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), BodyError> {
    let max = config.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(BodyError::TooLarge);
    }
    let deadline = tokio::time::Instant::now() + config.body_timeout;
    let budget_kib = crate::limits::BODY_BUDGET_KIB;
    let mut held: Option<OwnedSemaphorePermit> = None;
    let mut held_kib = 0usize;
    // Takes room for `bytes` in all (the budget's whole size at most, so
    // one body over the budget still gets read, alone).
    let mut reserve = |bytes: usize, held: &mut Option<OwnedSemaphorePermit>| {
        let want = if bytes <= crate::limits::SMALL_BODY_BYTES {
            0
        } else {
            bytes.div_ceil(1024).min(budget_kib)
        };
        let more = want.saturating_sub(held_kib);
        held_kib = held_kib.max(want);
        let sem = Arc::clone(&config.body_budget);
        let mut prior = held.take();
        async move {
            if more > 0 {
                let n = u32::try_from(more).unwrap_or(u32::MAX);
                let p = tokio::time::timeout_at(deadline, sem.acquire_many_owned(n))
                    .await
                    .map_err(|_| BodyError::Timeout)?
                    .map_err(|_| BodyError::Broken)?;
                match &mut prior {
                    Some(h) => h.merge(p),
                    None => prior = Some(p),
                }
            }
            Ok::<_, BodyError>(prior)
        }
    };
    if let Some(n) = declared {
        held = reserve(n, &mut held).await?;
    }
    let mut chunks: Vec<axum::body::Bytes> = Vec::new();
    let mut len = 0usize;
    let mut stream = body.into_data_stream();
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .map_err(|_| BodyError::Timeout)?;
        let chunk = match next {
            None => break,
            Some(Err(_)) => return Err(BodyError::Broken),
            Some(Ok(c)) => c,
        };
        len += chunk.len();
        if len > max {
            return Err(BodyError::TooLarge);
        }
        held = reserve(len, &mut held).await?;
        chunks.push(chunk);
    }
    let bytes = if chunks.len() == 1 {
        chunks.pop().map(|c| c.to_vec()).unwrap_or_default()
    } else {
        let mut all = Vec::with_capacity(len);
        for c in chunks {
            all.extend_from_slice(&c);
        }
        all
    };
    Ok((bytes, held))
}
