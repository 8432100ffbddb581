//! The JSON-RPC binding: header checks and the envelope; the method it
//! names is run by [`ops::call`] (shared with the HTTP+JSON binding), its
//! answers framed as JSON-RPC responses. A v0.3 method name
//! (`message/send`) runs its v1.0 operation, through the translation of
//! `compat::v03` both ways.

use super::ops::{self, Framing, Who};
use super::App;
use crate::compat::v03;
use crate::mapping::GatewayError as E;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// Handles one JSON-RPC POST.
pub async fn handle(
    app: Arc<App>,
    identity: String,
    agent: String,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let started = Instant::now();
    let mut who = Who {
        log: &app.config.audit,
        identity: &identity,
        agent: &agent,
        v03: None,
    };
    let Envelope {
        id,
        method,
        params,
        v03_header,
    } = match envelope(headers, body) {
        Ok(env) => env,
        Err((e, id)) => return ops::fail(&who, "-", None, started, e, &Framing::JsonRpc(id)),
    };
    // A v0.3 name is v0.3 unless the header names another version (then
    // it is told the v1.0 name); the v0.3 header on a v1.0 name is refused.
    let v1_header = headers.contains_key("a2a-version") && !v03_header;
    who.v03 = v03::Method::from_name(&method).filter(|_| !v1_header);
    let (method, params) = match who.v03 {
        Some(m) => match v03::params_in(m, &params) {
            Ok(p) => (m.v1().to_owned(), p),
            Err(e) => return ops::fail(&who, m.v1(), None, started, e, &Framing::JsonRpc(id)),
        },
        None if v03_header => {
            let e = E::Version("0.3 (with an A2A v1.0 method name)".into());
            return ops::fail(&who, &method, None, started, e, &Framing::JsonRpc(id));
        }
        None => (method, params),
    };
    ops::call(
        &app,
        &who,
        headers,
        &method,
        &params,
        Framing::JsonRpc(id),
        started,
    )
    .await
}

/// A request's envelope, checked.
struct Envelope {
    id: Value,
    method: String,
    params: Value,
    /// The `A2A-Version` header names v0.3.
    v03_header: bool,
}

/// Checks the headers and the JSON-RPC envelope of a POST: the headers
/// first ([`ops::check_headers`]: a body that is not JSON is -32005, not
/// -32700), then the request object. The error comes with the
/// request's id once it is known.
fn envelope(headers: &HeaderMap, body: &[u8]) -> Result<Envelope, (E, Value)> {
    let version = headers.get("a2a-version").and_then(|v| v.to_str().ok());
    let v03_header = v03::is_version(version);
    if v03_header {
        ops::check_content_type(headers)
    } else {
        ops::check_headers(headers)
    }
    .map_err(|e| (e, Value::Null))?;
    let req: Value =
        serde_json::from_slice(body).map_err(|e| (E::Parse(e.to_string()), Value::Null))?;
    let Value::Object(mut obj) = req else {
        return Err((
            E::InvalidRequest("not a request object".into()),
            Value::Null,
        ));
    };
    let id = obj.remove("id").unwrap_or(Value::Null);
    if !matches!(id, Value::Null | Value::String(_) | Value::Number(_)) {
        return Err((E::InvalidRequest("bad id".into()), Value::Null));
    }
    if obj.get("jsonrpc") != Some(&json!("2.0")) {
        return Err((E::InvalidRequest("jsonrpc must be \"2.0\"".into()), id));
    }
    let Some(Value::String(method)) = obj.remove("method") else {
        return Err((E::InvalidRequest("method must be a string".into()), id));
    };
    let params = obj.remove("params").unwrap_or(Value::Null);
    Ok(Envelope {
        id,
        method,
        params,
        v03_header,
    })
}
