//! The gateway as an A2A v1.0 client of one remote agent: its card (a
//! conditional GET), unary calls, and the SSE streams of
//! `SendStreamingMessage` / `SubscribeToTask`, in the binding its card
//! offers: JSON-RPC (a POST to the interface), or HTTP+JSON (each
//! operation's verb and path under it, [`super::rest`]).
//!
//! Every read is bounded (a card, a response body, one stream event), and
//! every call has a timeout, so a remote that misbehaves costs the gateway
//! a failed task, never its memory or a stuck forwarder.

use super::card::{
    card_url, refresh_after, Binding, CachedCard, CardError, Endpoint, RemoteCard, MAX_CARD_BYTES,
};
use super::rest;
use super::sse::{SseDecoder, SseError};
use crate::compat::v03::{self, remote as v03_remote};
use crate::limits::{REMOTE_STREAM_DRAIN, REMOTE_STREAM_DRAIN_BYTES};
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The largest JSON-RPC response body, or SSE event, read from a remote: the
/// broker's own frame bound (32 MiB), since what is read is then sent to it.
pub const MAX_BODY_BYTES: usize = 32 << 20;

/// The A2A protocol version the gateway speaks to remotes.
pub const A2A_VERSION: &str = "1.0";

/// The `A2A-Version` of a call to a remote whose card speaks v0.3.
const A2A_VERSION_V03: &str = "0.3";

/// What went wrong talking to a remote agent.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// No connection could be made (nothing was sent).
    #[error("remote agent unreachable: {0}")]
    Connect(String),
    /// Sending or reading failed after connecting (includes timeouts).
    #[error("remote agent connection failed: {0}")]
    Http(String),
    /// The remote answered with an HTTP error status.
    #[error("remote agent answered HTTP {0}")]
    Status(u16),
    /// The remote's body was not what the binding promises.
    #[error("remote agent sent a bad response: {0}")]
    BadResponse(String),
    /// A body or event over [`MAX_BODY_BYTES`] (or a card over
    /// [`MAX_CARD_BYTES`]).
    #[error("remote agent sent more than {0} bytes")]
    TooLarge(usize),
    /// The remote answered with a JSON-RPC error.
    #[error("remote agent error {code}: {message}")]
    Rpc {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// The remote's URL is not an http(s) URL.
    #[error("not an http(s) url: {0}")]
    BadUrl(String),
    /// The card is unusable.
    #[error(transparent)]
    Card(#[from] CardError),
    /// A call would go to an origin the remote was not added by (its card
    /// names its interface elsewhere) and the operator did not allow: a
    /// card could otherwise aim the gateway at any port or host it can
    /// reach (loopback services, the local network). Nothing was sent.
    #[error("the agent card served at {card} names its JSON-RPC interface at {target}, another origin: refused (an operator may allow it: remote add --allow-origin {target}, serve --remote-allow-origin {target})")]
    ForeignOrigin {
        /// The origin the card was fetched from.
        card: String,
        /// The origin the card names (or the URL, if it has none).
        target: String,
    },
    /// The event stream could not be decoded.
    #[error(transparent)]
    Sse(#[from] SseError),
    /// A call the remote's protocol version cannot carry (nothing was
    /// sent): an operation v0.3 has no use for here, or a request v0.3's
    /// shapes cannot hold.
    #[error("not expressible in A2A v0.3: {0}")]
    NotInV03(String),
}

impl RemoteError {
    /// Is the remote (or its address) possibly gone, so that its card is
    /// worth fetching again before the next call? Transport failures and
    /// "not here" statuses say so; a JSON-RPC error from a live agent
    /// does not.
    pub fn suggests_card_refresh(&self) -> bool {
        match self {
            RemoteError::Connect(_) | RemoteError::Http(_) => true,
            RemoteError::Status(s) => matches!(s, 404 | 405 | 410 | 421 | 502 | 503 | 504),
            _ => false,
        }
    }

    /// Does the error say nothing about the task, only that the remote
    /// cannot be reached now (no connection, a broken or silent one, a
    /// gateway or proxy in front of it answering 502/503/504)?
    pub fn is_unreachable(&self) -> bool {
        match self {
            RemoteError::Connect(_) | RemoteError::Http(_) => true,
            RemoteError::Status(s) => matches!(s, 502..=504),
            _ => false,
        }
    }

    /// Did the remote certainly not act on the request, so that sending it
    /// again cannot do the work twice? (No connection; or a status saying
    /// the request was not taken there. A timeout, or 504, may hide work
    /// under way.)
    pub fn nothing_was_done(&self) -> bool {
        match self {
            RemoteError::Connect(_)
            | RemoteError::ForeignOrigin { .. }
            | RemoteError::NotInV03(_) => true,
            RemoteError::Status(s) => matches!(s, 404 | 405 | 410 | 421 | 502 | 503),
            _ => false,
        }
    }
}

impl From<reqwest::Error> for RemoteError {
    fn from(e: reqwest::Error) -> Self {
        // Without the URL: it may carry credentials in its query.
        let connect = e.is_connect();
        let text = e.without_url().to_string();
        if connect {
            RemoteError::Connect(text)
        } else {
            RemoteError::Http(text)
        }
    }
}

/// How the gateway talks to remotes.
#[derive(Debug, Clone)]
pub struct RpcOptions {
    /// Bound of a unary call (a blocking `SendMessage` waits for the
    /// remote task to settle, so it is long).
    pub call_timeout: Duration,
    /// Bound of connecting, and of a card fetch.
    pub connect_timeout: Duration,
    /// Longest silence on an open event stream before it is given up
    /// (then the bridge polls the task instead).
    pub stream_idle: Duration,
    /// Bounds of the card refresh period (see [`refresh_after`]).
    pub refresh_min: Duration,
    pub refresh_max: Duration,
}

impl Default for RpcOptions {
    fn default() -> Self {
        RpcOptions {
            call_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            stream_idle: crate::limits::REMOTE_STREAM_IDLE,
            refresh_min: Duration::from_secs(30),
            refresh_max: Duration::from_secs(600),
        }
    }
}

/// Where one remote's calls and its bearer token may go. Origins are
/// `scheme://host[:port]` as [`origin_of`] writes them.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    /// The origin the remote was added by: its card's. Calls and the token
    /// go there.
    pub remote: String,
    /// Further origins calls may go to (`remote add --allow-origin`): a
    /// remote whose card names its interface on another origin.
    pub calls: Vec<String>,
    /// Further origins the token may go to (`--bearer-origin`); calls
    /// may go there too (an origin trusted with the credential is trusted
    /// with the calls).
    pub bearer: Vec<String>,
}

impl Origins {
    /// Only the origin of `url` (the remote's URL as added): `None` if
    /// it is not an http(s) URL.
    #[cfg(test)]
    pub fn of(url: &str) -> Option<Origins> {
        Some(Origins {
            remote: origin_of(url)?,
            ..Origins::default()
        })
    }

    /// May a call go to `url`?
    pub fn allows_call(&self, url: &str) -> bool {
        origin_of(url).is_some_and(|o| {
            o == self.remote || self.calls.contains(&o) || self.bearer.contains(&o)
        })
    }

    /// May the bearer token go to `url`?
    pub fn allows_token(&self, url: &str) -> bool {
        origin_of(url).is_some_and(|o| o == self.remote || self.bearer.contains(&o))
    }

    /// The refusal of a call to `url`, naming both origins.
    fn refuse(&self, url: &str) -> RemoteError {
        RemoteError::ForeignOrigin {
            card: self.remote.clone(),
            target: origin_of(url).unwrap_or_else(|| url.to_owned()),
        }
    }
}

/// A connection pool and request counter shared by the calls to one remote.
#[derive(Debug)]
pub struct RemoteRpc {
    http: reqwest::Client,
    /// Sent as `Authorization: Bearer ...` when the remote wants one, to
    /// the origins `origins` allows it.
    bearer: Option<String>,
    /// Where calls and the token may go: every request is checked.
    origins: Origins,
    opts: RpcOptions,
    next_id: AtomicU64,
}

/// The outcome of a card fetch.
#[derive(Debug)]
pub enum CardFetch {
    /// A new (or first) card.
    Fresh(CachedCard),
    /// The cached one is still valid (HTTP 304); fresh for this long.
    NotModified(Duration),
}

impl RemoteRpc {
    /// A client for the remote at `origins.remote`, with an optional
    /// bearer token.
    pub fn new(
        bearer: Option<String>,
        origins: Origins,
        opts: RpcOptions,
    ) -> Result<RemoteRpc, RemoteError> {
        let http = reqwest::Client::builder()
            .connect_timeout(opts.connect_timeout)
            // Small JSON-RPC writes must leave at once: with Nagle's
            // algorithm a kept-alive connection waits for the peer's
            // delayed ACK (~40 ms) before the next one.
            .tcp_nodelay(true)
            // A redirect could take a call (and its bearer token) to another
            // host than the one the operator added.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(RemoteRpc {
            http,
            bearer,
            origins,
            opts,
            next_id: AtomicU64::new(1),
        })
    }

    /// The options it was made with.
    pub fn options(&self) -> &RpcOptions {
        &self.opts
    }

    /// The headers of a request to `url`: the bearer token only if `url`
    /// is at one of the origins it may go to.
    fn headers(&self, url: &str, accept: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("A2A-Version", HeaderValue::from_static(A2A_VERSION));
        h.insert(ACCEPT, HeaderValue::from_static(accept));
        if let (Some(token), true) = (&self.bearer, self.origins.allows_token(url)) {
            if let Ok(v) = HeaderValue::from_str(&format!("Bearer {token}")) {
                h.insert(reqwest::header::AUTHORIZATION, v);
            }
        }
        h
    }

    /// Refuses a call to `url` unless its origin is allowed (checked
    /// before anything is sent, whatever the card said).
    fn check_target(&self, url: &str) -> Result<(), RemoteError> {
        if self.origins.allows_call(url) {
            Ok(())
        } else {
            Err(self.origins.refuse(url))
        }
    }

    /// Fetches the card of the remote at `base`, conditionally when
    /// `cached` holds validators. A card whose interface is on an origin
    /// calls may not go to is refused (at `remote add`, and at every
    /// refresh: the card in use stays).
    pub async fn fetch_card(
        &self,
        base: &str,
        cached: Option<&CachedCard>,
    ) -> Result<CardFetch, RemoteError> {
        self.check_target(&card_url(base))?;
        let mut req = self
            .http
            .get(card_url(base))
            .headers(self.headers(&card_url(base), "application/json"))
            .timeout(self.opts.connect_timeout * 2);
        if let Some(c) = cached {
            if let Some(e) = &c.etag {
                req = req.header(reqwest::header::IF_NONE_MATCH, e);
            }
            if let Some(l) = &c.last_modified {
                req = req.header(reqwest::header::IF_MODIFIED_SINCE, l);
            }
        }
        let resp = req.send().await?;
        let header = |name| {
            resp.headers()
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
                .map(str::to_owned)
        };
        let cache_control = header(reqwest::header::CACHE_CONTROL);
        let after = refresh_after(
            cache_control.as_deref(),
            self.opts.refresh_min,
            self.opts.refresh_max,
        );
        if resp.status() == StatusCode::NOT_MODIFIED && cached.is_some() {
            return Ok(CardFetch::NotModified(after));
        }
        if !resp.status().is_success() {
            return Err(RemoteError::Status(resp.status().as_u16()));
        }
        let etag = header(reqwest::header::ETAG);
        let last_modified = header(reqwest::header::LAST_MODIFIED);
        let body = read_bounded(resp, MAX_CARD_BYTES).await?;
        let raw: Value = serde_json::from_slice(&body)
            .map_err(|e| RemoteError::BadResponse(format!("agent card: {e}")))?;
        let card = RemoteCard::parse(raw)?;
        self.check_target(&card.endpoint.url)?;
        Ok(CardFetch::Fresh(CachedCard {
            card,
            etag,
            last_modified,
            refresh_after: after,
        }))
    }

    fn envelope(&self, method: &str, params: Value) -> (u64, Value) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        (
            id,
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
    }

    /// A unary call: the `result` of the response, or its error.
    pub async fn call(
        &self,
        endpoint: &Endpoint,
        method: &str,
        params: Value,
    ) -> Result<Value, RemoteError> {
        self.call_within(endpoint, method, params, self.opts.call_timeout)
            .await
    }

    /// A unary call bounded by `timeout` (a probe: `GetTask`, `CancelTask`).
    pub async fn call_within(
        &self,
        endpoint: &Endpoint,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, RemoteError> {
        let resp = self
            .send(endpoint, method, params, "application/json", Some(timeout))
            .await?;
        let bytes = read_bounded(resp, MAX_BODY_BYTES).await?;
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| RemoteError::BadResponse(format!("not JSON: {e}")))?;
        match endpoint.binding {
            Binding::JsonRpc => unwrap_response(v),
            // The answer is the result itself.
            Binding::HttpJson => Ok(v),
            Binding::JsonRpcV03 => {
                let m = v03_method(method)?;
                v03_remote::result_in(m, &unwrap_response(v)?).map_err(v03_bad)
            }
        }
    }

    /// Sends one call in the endpoint's binding: the response, if its
    /// status is a success (else the error it carries).
    async fn send(
        &self,
        endpoint: &Endpoint,
        method: &str,
        params: Value,
        accept: &'static str,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, RemoteError> {
        let (req, url) = match endpoint.binding {
            Binding::JsonRpc => {
                let (_, body) = self.envelope(method, params);
                (
                    self.http.post(&endpoint.url).json(&body),
                    endpoint.url.clone(),
                )
            }
            Binding::JsonRpcV03 => {
                // The v1.0 request the bridge wrote, in v0.3's name and shape.
                let m = v03_method(method)?;
                let params = v03_remote::params_out(m, &params)
                    .map_err(|e| RemoteError::NotInV03(format!("{method}: {e}")))?;
                let (_, body) = self.envelope(m.name(), params);
                (
                    self.http.post(&endpoint.url).json(&body),
                    endpoint.url.clone(),
                )
            }
            Binding::HttpJson => {
                let r = rest::request(&endpoint.url, method, params)?;
                let mut req = self.http.request(r.verb, &r.url);
                if let Some(body) = &r.body {
                    req = req.json(body);
                }
                (req, r.url)
            }
        };
        self.check_target(&url)?;
        // (`json` set the Content-Type of a body; a GET has none.)
        let mut headers = self.headers(&url, accept);
        if endpoint.binding == Binding::JsonRpcV03 {
            headers.insert("A2A-Version", HeaderValue::from_static(A2A_VERSION_V03));
        }
        let mut req = req.headers(headers);
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        let resp = req.send().await?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status().as_u16();
        Err(match endpoint.binding {
            Binding::JsonRpc | Binding::JsonRpcV03 => RemoteError::Status(status),
            // The binding's errors are statuses with a body naming them.
            Binding::HttpJson => match read_bounded(resp, MAX_ERROR_BYTES).await {
                Ok(body) => rest::error(status, &body),
                Err(_) => RemoteError::Status(status),
            },
        })
    }

    /// A streaming call: the SSE stream of its responses. A remote that
    /// answers with plain JSON (an error before the stream started, as
    /// v1.0 allows) gets that error, or its single result as a one-event
    /// stream.
    pub async fn stream(
        &self,
        endpoint: &Endpoint,
        method: &str,
        params: Value,
    ) -> Result<EventStream, RemoteError> {
        let resp = self
            .send(endpoint, method, params, "text/event-stream", None)
            .await?;
        let bare = endpoint.binding == Binding::HttpJson;
        let v03 = endpoint.binding == Binding::JsonRpcV03;
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.contains("text/event-stream"));
        if !is_sse {
            let bytes = read_bounded(resp, MAX_BODY_BYTES).await?;
            let v: Value = serde_json::from_slice(&bytes)
                .map_err(|e| RemoteError::BadResponse(format!("not JSON: {e}")))?;
            let one = if bare { v } else { unwrap_response(v)? };
            let one = if v03 { event_from_v03(&one)? } else { one };
            return Ok(EventStream {
                resp: None,
                decoder: SseDecoder::new(MAX_BODY_BYTES),
                ready: VecDeque::from([one]),
                failed: None,
                idle: self.opts.stream_idle,
                bare,
                v03,
            });
        }
        Ok(EventStream {
            resp: Some(resp),
            decoder: SseDecoder::new(MAX_BODY_BYTES),
            ready: VecDeque::new(),
            failed: None,
            idle: self.opts.stream_idle,
            bare,
            v03,
        })
    }
}

/// The v0.3 method of a v1.0 one the bridge calls (refused, before
/// anything is sent, when v0.3 has none it is used for).
fn v03_method(v1_name: &str) -> Result<v03::Method, RemoteError> {
    v03_remote::method_of(v1_name)
        .ok_or_else(|| RemoteError::NotInV03(format!("{v1_name} is not called on a v0.3 remote")))
}

/// A v0.3 answer that is not what v0.3 promises.
fn v03_bad(e: crate::mapping::GatewayError) -> RemoteError {
    RemoteError::BadResponse(format!("v0.3 answer: {e}"))
}

/// One v0.3 stream event as the v1.0 `StreamResponse` the bridge reads.
fn event_from_v03(ev: &Value) -> Result<Value, RemoteError> {
    v03_remote::event_in(ev).map_err(v03_bad)
}

/// The largest error body read from an HTTP+JSON remote (an AIP-193
/// error is a few hundred bytes; a bigger one is taken as its status).
const MAX_ERROR_BYTES: usize = 64 << 10;

/// The origin of an http(s) URL (`scheme://host[:port]`, the port only
/// when not the scheme's default), as the call and token rules compare
/// them; `None` for any other URL.
pub fn origin_of(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url.trim()).ok()?;
    if !matches!(u.scheme(), "http" | "https") {
        return None;
    }
    let o = u.origin();
    o.is_tuple().then(|| o.ascii_serialization())
}

/// The `result` of a JSON-RPC response, or its `error` as [`RemoteError::Rpc`].
pub fn unwrap_response(mut v: Value) -> Result<Value, RemoteError> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(RemoteError::Rpc {
            code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            data: err.get("data").cloned(),
        });
    }
    match v.get_mut("result") {
        Some(r) => Ok(r.take()),
        None => Err(RemoteError::BadResponse(
            "neither result nor error in the response".into(),
        )),
    }
}

async fn read_bounded(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>, RemoteError> {
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(RemoteError::TooLarge(max));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if body.len() + chunk.len() > max {
            return Err(RemoteError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The responses of a streaming call, one `StreamResponse` at a time.
#[derive(Debug)]
pub struct EventStream {
    /// `None` once the body ended (or for a plain JSON answer).
    resp: Option<reqwest::Response>,
    decoder: SseDecoder,
    /// Results decoded but not yet taken.
    ready: VecDeque<Value>,
    /// An error event that came after results still in `ready`: reported
    /// once they are taken.
    failed: Option<RemoteError>,
    idle: Duration,
    /// HTTP+JSON: each event is the `StreamResponse` itself (or an
    /// `{"error": ...}` object), not a JSON-RPC response.
    bare: bool,
    /// A v0.3 remote: each result is a v0.3 event, read as v1.0's.
    v03: bool,
}

impl EventStream {
    /// Lets the stream go once its caller has what it wanted (the task's
    /// last event): the rest of the body, the end of the stream that the
    /// remote sends right behind its last event, is read in the
    /// background (within [`REMOTE_STREAM_DRAIN`] and
    /// [`REMOTE_STREAM_DRAIN_BYTES`]) so the kept-alive connection goes
    /// back to the client's pool. A body dropped unread closes its
    /// connection, and the next forward paid a new one (a profile of
    /// federation showed a TCP connect and accept per round trip).
    pub fn release(mut self) {
        let Some(mut resp) = self.resp.take() else {
            return;
        };
        tokio::spawn(async move {
            let _ = tokio::time::timeout(REMOTE_STREAM_DRAIN, async move {
                let mut left = REMOTE_STREAM_DRAIN_BYTES;
                while let Ok(Some(c)) = resp.chunk().await {
                    left = left.saturating_sub(c.len());
                    if left == 0 {
                        // More than an end: not worth keeping.
                        break;
                    }
                }
            })
            .await;
        });
    }

    /// The next `StreamResponse`; `None` when the stream ended; an error
    /// for a JSON-RPC error event, a broken stream, or a silence longer
    /// than the idle bound.
    pub async fn next(&mut self) -> Option<Result<Value, RemoteError>> {
        loop {
            if let Some(v) = self.ready.pop_front() {
                return Some(Ok(v));
            }
            if let Some(e) = self.failed.take() {
                return Some(Err(e));
            }
            let resp = self.resp.as_mut()?;
            let chunk = match tokio::time::timeout(self.idle, resp.chunk()).await {
                Err(_) => {
                    self.resp = None;
                    return Some(Err(RemoteError::Http(format!(
                        "event stream silent for {} s",
                        self.idle.as_secs()
                    ))));
                }
                Ok(Err(e)) => {
                    self.resp = None;
                    return Some(Err(e.into()));
                }
                Ok(Ok(None)) => {
                    self.resp = None;
                    return None;
                }
                Ok(Ok(Some(c))) => c,
            };
            let mut datas = Vec::new();
            if let Err(e) = self.decoder.feed(&chunk, &mut datas) {
                self.resp = None;
                return Some(Err(e.into()));
            }
            for d in datas {
                let v: Value = match serde_json::from_str(&d) {
                    Ok(v) => v,
                    Err(e) => {
                        self.resp = None;
                        return Some(Err(RemoteError::BadResponse(format!(
                            "stream event is not JSON: {e}"
                        ))));
                    }
                };
                let event = match (self.bare, v.get("error")) {
                    (false, _) if self.v03 => unwrap_response(v).and_then(|r| event_from_v03(&r)),
                    (false, _) => unwrap_response(v),
                    (true, Some(err)) => Err(rest::error_object(500, err)),
                    (true, None) => Ok(v),
                };
                match event {
                    Ok(r) => self.ready.push_back(r),
                    Err(e) => {
                        // An error event ends the stream, after the results
                        // before it.
                        self.resp = None;
                        self.failed = Some(e);
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jsonrpc(url: &str) -> Endpoint {
        Endpoint {
            url: url.to_owned(),
            binding: Binding::JsonRpc,
        }
    }

    #[test]
    fn responses_unwrap_to_their_result_or_error() {
        assert_eq!(
            unwrap_response(json!({"jsonrpc": "2.0", "id": 1, "result": {"task": {}}})).unwrap(),
            json!({"task": {}})
        );
        let e = unwrap_response(
            json!({"id": 1, "error": {"code": -32001, "message": "Task not found", "data": [1]}}),
        )
        .unwrap_err();
        assert!(
            matches!(&e, RemoteError::Rpc { code: -32001, message, data: Some(_) } if message == "Task not found")
        );
        assert!(!e.suggests_card_refresh());
        assert!(matches!(
            unwrap_response(json!({"id": 1})),
            Err(RemoteError::BadResponse(_))
        ));
        assert!(RemoteError::Status(404).suggests_card_refresh());
        assert!(!RemoteError::Status(400).suggests_card_refresh());
        // A timeout may hide work under way: refresh, but never resend.
        let timeout = RemoteError::Http("timed out".into());
        assert!(timeout.suggests_card_refresh() && !timeout.nothing_was_done());
        assert!(RemoteError::Connect("refused".into()).nothing_was_done());
        assert!(!RemoteError::Status(504).nothing_was_done());
    }

    /// A keep-alive HTTP/1.1 server answering every POST with an SSE
    /// stream of one event, its end sent a little later (as a gateway's
    /// stream ends right behind its last event); counts the connections
    /// it accepted.
    async fn sse_server() -> (String, std::sync::Arc<AtomicU64>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/rpc", listener.local_addr().unwrap());
        let accepted = std::sync::Arc::new(AtomicU64::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        // One request: headers, then Content-Length bytes.
                        let head_end = loop {
                            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                break i + 4;
                            }
                            let mut chunk = [0u8; 4096];
                            match tcp.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        while buf.len() < head_end + len {
                            let mut chunk = [0u8; 4096];
                            match tcp.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.drain(..head_end + len);
                        let event = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{}}}\n\n";
                        let first = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
                            event.len()
                        );
                        if tcp.write_all(first.as_bytes()).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        if tcp.write_all(b"0\r\n\r\n").await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_released_stream_gives_its_connection_back() {
        let (url, accepted) = sse_server().await;
        let rpc = RemoteRpc::new(None, Origins::of(&url).unwrap(), RpcOptions::default()).unwrap();
        for _ in 0..3 {
            let mut stream = rpc
                .stream(&jsonrpc(&url), "SendStreamingMessage", json!({}))
                .await
                .expect("stream");
            // The caller stops at the event it wanted, before the end.
            assert!(stream.next().await.expect("event").is_ok());
            stream.release();
            // The next forward comes after the end has arrived (the
            // remote sends it right behind the last event; here 20 ms).
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        // Three forwards, one connection.
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_stream_dropped_unread_costs_a_new_connection() {
        // What `release` avoids (and what the bridge did before it).
        let (url, accepted) = sse_server().await;
        let rpc = RemoteRpc::new(None, Origins::of(&url).unwrap(), RpcOptions::default()).unwrap();
        for _ in 0..2 {
            let mut stream = rpc
                .stream(&jsonrpc(&url), "SendStreamingMessage", json!({}))
                .await
                .expect("stream");
            assert!(stream.next().await.expect("event").is_ok());
            drop(stream);
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn the_token_goes_to_the_added_origin_only() {
        let rpc = RemoteRpc::new(
            Some("tok".into()),
            Origins::of("http://127.0.0.1:9000/a").unwrap(),
            RpcOptions::default(),
        )
        .unwrap();
        let auth = |url: &str| {
            rpc.headers(url, "application/json")
                .contains_key("authorization")
        };
        assert!(auth("http://127.0.0.1:9000/rpc"));
        assert!(auth("HTTP://127.0.0.1:9000/.well-known/agent-card.json"));
        assert!(!auth("http://127.0.0.1:9001/rpc"));
        assert!(!auth("https://127.0.0.1:9000/rpc"));
        assert!(!auth("http://localhost:9000/rpc"));
        assert!(!auth("not a url"));
        assert_eq!(origin_of("https://h:443/x").as_deref(), Some("https://h"));
    }

    /// Every request is checked, whatever card put its URL there: a call
    /// or a stream to another origin fails before any connection.
    #[tokio::test(flavor = "current_thread")]
    async fn a_call_to_another_origin_fails_before_connecting() {
        // A listener that counts its connections, as the other origin.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let other = format!("http://{}/rpc", listener.local_addr().unwrap());
        let rpc = RemoteRpc::new(
            Some("tok".into()),
            Origins::of("http://127.0.0.1:9/").unwrap(),
            RpcOptions::default(),
        )
        .unwrap();
        let e = rpc
            .call(&jsonrpc(&other), "GetTask", json!({}))
            .await
            .unwrap_err();
        assert!(matches!(e, RemoteError::ForeignOrigin { .. }), "{e}");
        let e = rpc
            .stream(&jsonrpc(&other), "SendStreamingMessage", json!({}))
            .await
            .unwrap_err();
        assert!(matches!(e, RemoteError::ForeignOrigin { .. }), "{e}");
        let accepted = tokio::time::timeout(Duration::from_millis(100), listener.accept()).await;
        assert!(accepted.is_err(), "a connection reached the other origin");
    }

    #[test]
    fn calls_go_to_the_remote_origin_and_allowed_ones_only() {
        let mut o = Origins::of("http://127.0.0.1:9000/a").unwrap();
        o.calls.push(origin_of("http://127.0.0.1:9001").unwrap());
        o.bearer.push(origin_of("https://other.example").unwrap());
        for ok in [
            "http://127.0.0.1:9000/rpc",
            "HTTP://127.0.0.1:9000/x",
            "http://127.0.0.1:9001/rpc",
            "https://other.example:443/rpc",
        ] {
            assert!(o.allows_call(ok), "{ok}");
        }
        for refused in [
            "http://127.0.0.1:9002/rpc",
            "http://[::1]:9000/rpc",
            "http://localhost:9000/rpc",
            "https://127.0.0.1:9000/rpc",
            "http://other.example/rpc",
            "file:///etc/passwd",
            "ftp://127.0.0.1:9000/",
            "not a url",
        ] {
            assert!(!o.allows_call(refused), "{refused}");
        }
        // The token: the remote's own origin and the bearer ones, not the
        // origins allowed for calls only.
        assert!(o.allows_token("http://127.0.0.1:9000/rpc"));
        assert!(o.allows_token("https://other.example/rpc"));
        assert!(!o.allows_token("http://127.0.0.1:9001/rpc"));
        let e = o.refuse("http://[::1]:9000/rpc").to_string();
        assert!(
            e.contains("served at http://127.0.0.1:9000 ") && e.contains("at http://[::1]:9000,"),
            "{e}"
        );
        assert!(RemoteError::ForeignOrigin {
            card: String::new(),
            target: String::new()
        }
        .nothing_was_done());
    }

    /// The client's own rules against a real HTTP server (axum, as the
    /// inbound side uses): redirects, bounds, the token, error events.
    mod against_a_server {
        use super::super::*;
        use axum::http::{HeaderMap, StatusCode};
        use axum::response::IntoResponse;
        use axum::routing::{get, post};
        use axum::{Json, Router};
        use parking_lot::Mutex;
        use std::sync::Arc;

        const TIMEOUT: Duration = Duration::from_secs(20);

        /// A server for the client's own rules: a redirecting card, an oversized
        /// card, a card that records the Authorization header, and an SSE answer
        /// whose error event follows a result.
        async fn serve_odd() -> (String, Arc<Mutex<Vec<String>>>) {
            let auth = Arc::new(Mutex::new(Vec::new()));
            let seen = auth.clone();
            let app = Router::new()
                .route(
                    "/redirect/.well-known/agent-card.json",
                    get(|| async { (StatusCode::FOUND, [("location", "http://127.0.0.1:9/elsewhere")]).into_response() }),
                )
                .route(
                    "/big/.well-known/agent-card.json",
                    get(|| async { format!("{{\"name\":\"{}\"}}", "x".repeat(2 << 20)) }),
                )
                .route(
                    "/auth/.well-known/agent-card.json",
                    get(move |h: HeaderMap| async move {
                        let a = h.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                        seen.lock().push(a);
                        // Its interface on its own origin (another is refused).
                        let host = h.get("host").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                        Json(json!({"name": "auth", "url": format!("http://{host}/rpc")}))
                    }),
                )
                .route(
                    "/sse",
                    post(|| async {
                        let body = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"taskId\":\"t\"}}}\n\n\
                                    data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32603,\"message\":\"boom\"}}\n\n";
                        ([("content-type", "text/event-stream")], body).into_response()
                    }),
                );
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = l.local_addr().unwrap().port();
            tokio::spawn(async move {
                let _ = axum::serve(l, app).await;
            });
            (format!("http://127.0.0.1:{port}"), auth)
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn the_remote_client_follows_no_redirect_reads_bounded_and_sends_its_token() {
            let (base, auth) = serve_odd().await;
            let origins = Origins::of(&base).expect("origin");
            let rpc = RemoteRpc::new(Some("s3cret".into()), origins, RpcOptions::default())
                .expect("client");
            // A redirect could carry the token to another host: it is an error.
            let e = rpc
                .fetch_card(&format!("{base}/redirect"), None)
                .await
                .expect_err("redirect refused");
            assert!(matches!(e, RemoteError::Status(302)), "{e}");
            let e = rpc
                .fetch_card(&format!("{base}/big"), None)
                .await
                .expect_err("big card refused");
            assert!(
                matches!(e, RemoteError::TooLarge(n) if n == MAX_CARD_BYTES),
                "{e}"
            );
            rpc.fetch_card(&format!("{base}/auth"), None)
                .await
                .expect("card");
            assert_eq!(auth.lock().as_slice(), ["Bearer s3cret"]);
            // An error event after a result: the result first, then the error.
            let mut s = rpc
                .stream(
                    &super::jsonrpc(&format!("{base}/sse")),
                    "SendStreamingMessage",
                    json!({}),
                )
                .await
                .expect("stream");
            let first = tokio::time::timeout(TIMEOUT, s.next())
                .await
                .expect("in time");
            assert!(
                matches!(first, Some(Ok(ref v)) if v["statusUpdate"]["taskId"] == "t"),
                "{first:?}"
            );
            let second = tokio::time::timeout(TIMEOUT, s.next())
                .await
                .expect("in time");
            assert!(
                matches!(second, Some(Err(RemoteError::Rpc { code: -32603, .. }))),
                "{second:?}"
            );
            assert!(tokio::time::timeout(TIMEOUT, s.next())
                .await
                .expect("in time")
                .is_none());
        }
    }
}
