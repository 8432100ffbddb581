//! The v1.0 agent cards of the exposed agents (with the v0.3 fields a
//! v0.3 client reads, `compat::v03::card`), rendered once at start
//! (the card of a local agent is read from the broker's registry) and
//! served with caching headers: `Cache-Control: max-age`, a strong `ETag`
//! (answered with 304 on `If-None-Match`), and `Last-Modified`.

use super::App;
use crate::compat::v03;
use crate::core::Exposed;
use crate::v1;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

/// How long clients may cache a card.
const MAX_AGE_SECS: u32 = 300;

/// One rendered card.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub body: String,
    pub etag: String,
}

/// The cards by agent name, and the first agent's name.
#[derive(Debug, Clone, Default)]
pub struct Cards {
    by_agent: HashMap<String, Rendered>,
    first: Option<String>,
    last_modified: String,
}

/// The URL of an exposed agent's interfaces: JSON-RPC posts to it, the
/// HTTP+JSON paths are under it.
pub fn interface_url(public_url: &str, agent: &str) -> String {
    format!("{}/agents/{agent}", public_url.trim_end_matches('/'))
}

/// The gRPC interface of `agent` for its card: the host and port of the
/// public URL (gRPC targets have no scheme or path), `tenant` the agent.
pub fn grpc_interface(public_url: &str, agent: &str) -> v1::AgentInterface {
    let rest = public_url
        .split_once("://")
        .map_or(public_url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    v1::AgentInterface {
        url: authority.to_owned(),
        protocol_binding: "GRPC".into(),
        protocol_version: "1.0".into(),
        tenant: Some(agent.to_owned()),
    }
}

/// The v1.0 card of an exposed agent.
pub fn card_of(
    e: &Exposed,
    public_url: &str,
    caps: &v1::AgentCapabilities,
    bearer: bool,
) -> v1::AgentCard {
    let c = &e.card;
    let skills = c
        .skills
        .iter()
        .map(|s| v1::AgentSkill {
            id: s.id.clone(),
            name: s.name.clone(),
            description: s.description.clone(),
            tags: s.tags.clone(),
        })
        .collect();
    let (schemes, reqs) = if bearer {
        (
            Some(json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}})),
            Some(json!([{"schemes": {"bearer": {"list": []}}}])),
        )
    } else {
        (None, None)
    };
    v1::AgentCard {
        name: c.name.clone(),
        description: if c.description.is_empty() {
            format!("{} (a local agent, served by a2a-gateway)", c.name)
        } else {
            c.description.clone()
        },
        version: if c.version.is_empty() {
            "0.0.0".into()
        } else {
            c.version.clone()
        },
        // JSON-RPC first: a client that takes the first interface keeps
        // the binding it always had.
        supported_interfaces: ["JSONRPC", "HTTP+JSON"]
            .into_iter()
            .map(|binding| v1::AgentInterface {
                url: interface_url(public_url, &e.name),
                protocol_binding: binding.into(),
                protocol_version: "1.0".into(),
                tenant: None,
            })
            .chain([grpc_interface(public_url, &e.name)])
            .collect(),
        // The gateway streams and pushes for every agent (from the
        // broker's events), whatever the local card says; the extended
        // card is the same card, answered to callers that passed the
        // bearer check.
        capabilities: caps.clone(),
        default_input_modes: c.default_input_modes.clone(),
        default_output_modes: c.default_output_modes.clone(),
        skills,
        security_schemes: schemes,
        security_requirements: reqs,
    }
}

impl Cards {
    /// Renders the cards of `exposed` (`v03_fields`: with A2A v0.3's).
    pub fn new(
        exposed: &[Exposed],
        public_url: &str,
        caps: &v1::AgentCapabilities,
        bearer: bool,
        v03_fields: bool,
    ) -> Cards {
        let mut by_agent = HashMap::new();
        for e in exposed {
            let card = card_of(e, public_url, caps, bearer);
            // With the v0.3 fields beside the v1.0 ones (one card for both).
            let body = if v03_fields {
                serde_json::to_string(&v03::card(&card))
            } else {
                serde_json::to_string(&card)
            }
            .unwrap_or_else(|_| "{}".into());
            let etag = format!("\"{:016x}\"", fnv(body.as_bytes()));
            by_agent.insert(e.name.clone(), Rendered { body, etag });
        }
        let now = jiff::Timestamp::now();
        Cards {
            by_agent,
            first: exposed.first().map(|e| e.name.clone()),
            last_modified: now.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string(),
        }
    }

    /// The card of `agent`.
    pub fn get(&self, agent: &str) -> Option<&Rendered> {
        self.by_agent.get(agent)
    }
}

fn fnv(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in b {
        h ^= u64::from(*x);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn serve(cards: &Cards, agent: Option<&str>, headers: &HeaderMap) -> Response {
    let Some(r) = agent.and_then(|a| cards.get(a)) else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": "no such agent"})),
        )
            .into_response();
    };
    let mut resp = if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == r.etag))
    {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, "application/json")], r.body.clone()).into_response()
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("public, max-age={MAX_AGE_SECS}")) {
        h.insert(header::CACHE_CONTROL, v);
    }
    if let Ok(v) = HeaderValue::from_str(&r.etag) {
        h.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::from_str(&cards.last_modified) {
        h.insert(header::LAST_MODIFIED, v);
    }
    resp
}

/// `GET /.well-known/agent-card.json`: the first exposed agent's card.
pub async fn root_card(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    serve(&app.cards, app.cards.first.as_deref(), &headers)
}

/// `GET /agents/NAME/.well-known/agent-card.json`.
pub async fn agent_card(
    State(app): State<Arc<App>>,
    Path(agent): Path<String>,
    headers: HeaderMap,
) -> Response {
    serve(&app.cards, Some(&agent), &headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interface_is_host_and_port_with_the_agent_as_tenant() {
        let i = grpc_interface("https://a2a.example.com:8443/base/", "coder");
        assert_eq!(i.url, "a2a.example.com:8443");
        assert_eq!(i.protocol_binding, "GRPC");
        assert_eq!(i.tenant.as_deref(), Some("coder"));
        assert_eq!(
            grpc_interface("http://127.0.0.1:80", "x").url,
            "127.0.0.1:80"
        );
    }
}
