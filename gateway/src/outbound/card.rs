//! A remote agent's card: fetched from `<base>/.well-known/agent-card.json`,
//! read for what the gateway needs (its name, its endpoint and that
//! endpoint's binding, whether it streams), mirrored as the card the gateway registers in the broker,
//! and cached with its validators (`ETag`, `Last-Modified`) and freshness
//! (`Cache-Control: max-age`) so that a refresh is a conditional GET.

use a2a_proto::types::{AgentCard, AgentSkill, Capabilities};
use serde_json::Value;
use std::time::Duration;

use super::translate::{field, str_field};

/// The well-known path of an agent card (A2A v1.0 §8.2).
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// The largest card the gateway reads (a bigger one is refused, not
/// truncated): the broker bounds a stored card to 64 KiB, and a remote's
/// card holds more (interfaces, security schemes) than the mirror keeps.
pub const MAX_CARD_BYTES: usize = 1 << 20;

/// Why a card is unusable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CardError {
    /// Not a JSON object.
    #[error("agent card is not a JSON object")]
    NotAnObject,
    /// No `name`, or an empty one.
    #[error("agent card has no name")]
    NoName,
    /// No interface of a binding the gateway speaks (JSON-RPC, HTTP+JSON),
    /// and no v0.3 `url` to fall back on.
    #[error("agent card declares no JSONRPC or HTTP+JSON interface")]
    NoJsonRpc,
}

/// An A2A binding the gateway speaks to remotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// JSON-RPC 2.0: every call a POST to the interface URL.
    JsonRpc,
    /// HTTP+JSON: each operation its verb and path under the interface URL.
    HttpJson,
    /// JSON-RPC 2.0 of A2A v0.3 (a remote whose card speaks v0.3): v0.3's
    /// method names and shapes, translated by `crate::compat::v03::remote`.
    JsonRpcV03,
}

impl Binding {
    /// Its `protocolBinding` name in a card.
    pub fn name(self) -> &'static str {
        match self {
            Binding::JsonRpc | Binding::JsonRpcV03 => "JSONRPC",
            Binding::HttpJson => "HTTP+JSON",
        }
    }
}

/// Does a `protocolVersion` name a version before 1.0 (`0.3`, `0.3.0`,
/// `0.2.5`)? Their JSON-RPC methods are v0.3's (`message/send`).
fn is_pre_v1(version: Option<&str>) -> bool {
    version.is_some_and(|v| v.trim().starts_with("0."))
}

/// The interface of a remote the gateway calls: its URL and binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub binding: Binding,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.binding {
            Binding::JsonRpcV03 => write!(f, "{} (JSONRPC, A2A v0.3)", self.url),
            b => write!(f, "{} ({})", self.url, b.name()),
        }
    }
}

/// What the gateway keeps of a remote card.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteCard {
    /// The card as served (for the mirror, and for comparisons).
    pub raw: Value,
    /// Its `name`: the peer id asked for in the broker.
    pub name: String,
    /// Where calls go, and in which binding.
    pub endpoint: Endpoint,
    /// `capabilities.streaming`: forward with `SendStreamingMessage`.
    pub streaming: bool,
}

impl RemoteCard {
    /// Reads a served card. The first v1.0 `supportedInterfaces` entry
    /// whose binding is `JSONRPC` wins (as the official clients choose),
    /// else the first `HTTP+JSON` one (an agent that serves only REST).
    /// An agent with no v1.0 interface is spoken to in v0.3 when its card
    /// says so: a `JSONRPC` entry of `protocolVersion` 0.x, or a v0.3
    /// card's top-level `url` (its `preferredTransport` JSON-RPC, or a
    /// JSON-RPC entry of its `additionalInterfaces`) with `protocolVersion`
    /// 0.x. A top-level `url` without a version is taken as v1.0 JSON-RPC,
    /// as before versions were read.
    pub fn parse(raw: Value) -> Result<RemoteCard, CardError> {
        if !raw.is_object() {
            return Err(CardError::NotAnObject);
        }
        let name = raw
            .get("name")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .ok_or(CardError::NoName)?
            .to_owned();
        let interfaces =
            field(&raw, "supportedInterfaces", "supported_interfaces").and_then(Value::as_array);
        let of_binding = |b: Binding| {
            interfaces?
                .iter()
                .filter(|i| {
                    str_field(i, "protocolBinding", "protocol_binding")
                        .is_some_and(|x| x.eq_ignore_ascii_case(b.name()))
                        && is_pre_v1(str_field(i, "protocolVersion", "protocol_version"))
                            == (b == Binding::JsonRpcV03)
                })
                .find_map(|i| i.get("url").and_then(Value::as_str))
                .filter(|u| !u.is_empty())
                .map(|u| Endpoint {
                    url: u.to_owned(),
                    binding: b,
                })
        };
        let endpoint = of_binding(Binding::JsonRpc)
            .or_else(|| of_binding(Binding::HttpJson))
            .or_else(|| of_binding(Binding::JsonRpcV03))
            .or_else(|| v03_url(&raw))
            .ok_or(CardError::NoJsonRpc)?;
        let streaming = raw
            .get("capabilities")
            .and_then(|c| c.get("streaming"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(RemoteCard {
            raw,
            name,
            endpoint,
            streaming,
        })
    }

    /// The card the gateway registers in the broker for this remote: its
    /// name, description, version, skills and modes. Capabilities are the
    /// broker's own (local callers stream and get pushes from the broker,
    /// whatever the remote does), so they keep the broker's defaults.
    pub fn mirror(&self) -> AgentCard {
        let raw = &self.raw;
        let s = |k: &str| raw.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let modes = |camel: &str, snake: &str| {
            field(raw, camel, snake)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| vec!["text/plain".into()])
        };
        let skills = raw
            .get("skills")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(skill).collect())
            .unwrap_or_default();
        AgentCard {
            name: self.name.clone(),
            description: s("description"),
            version: s("version"),
            skills,
            capabilities: Capabilities::default(),
            default_input_modes: modes("defaultInputModes", "default_input_modes"),
            default_output_modes: modes("defaultOutputModes", "default_output_modes"),
            context_id: None,
            kind: None,
        }
    }
}

/// The JSON-RPC endpoint of a card's top-level fields (v0.3's): `url`
/// when `preferredTransport` is JSON-RPC (its default), else the first
/// JSON-RPC entry of `additionalInterfaces`. v0.3 when the card's
/// `protocolVersion` says 0.x.
fn v03_url(raw: &Value) -> Option<Endpoint> {
    let binding = if is_pre_v1(str_field(raw, "protocolVersion", "protocol_version")) {
        Binding::JsonRpcV03
    } else {
        Binding::JsonRpc
    };
    let jsonrpc = |t: Option<&str>| t.is_none_or(|t| t.eq_ignore_ascii_case("JSONRPC"));
    let url = if jsonrpc(str_field(raw, "preferredTransport", "preferred_transport")) {
        raw.get("url").and_then(Value::as_str)
    } else {
        field(raw, "additionalInterfaces", "additional_interfaces")
            .and_then(Value::as_array)?
            .iter()
            .filter(|i| {
                i.get("transport")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.eq_ignore_ascii_case("JSONRPC"))
            })
            .find_map(|i| i.get("url").and_then(Value::as_str))
    };
    url.filter(|u| !u.is_empty()).map(|u| Endpoint {
        url: u.to_owned(),
        binding,
    })
}

fn skill(v: &Value) -> Option<AgentSkill> {
    let id = v.get("id").and_then(Value::as_str)?.to_owned();
    Some(AgentSkill {
        name: v
            .get("name")
            .and_then(Value::as_str)
            .map_or_else(|| id.clone(), str::to_owned),
        id,
        description: v
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        tags: v
            .get("tags")
            .and_then(Value::as_array)
            .map(|t| {
                t.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// The card URL of a remote added by `base` (the agent's origin, or a URL
/// already ending in the well-known path, or any other card URL ending in
/// `.json`).
pub fn card_url(base: &str) -> String {
    let base = base.trim();
    if base.ends_with(".json") {
        return base.to_owned();
    }
    format!("{}{CARD_PATH}", base.trim_end_matches('/'))
}

/// `max-age` of a `Cache-Control` header (`no-store`/`no-cache` count as
/// zero: revalidate every time).
pub fn max_age(cache_control: &str) -> Option<Duration> {
    let mut age = None;
    for directive in cache_control.split(',').map(str::trim) {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return Some(Duration::ZERO);
        }
        if let Some(v) = lower.strip_prefix("max-age=") {
            age = v
                .trim_matches('"')
                .parse::<u64>()
                .ok()
                .map(Duration::from_secs);
        }
    }
    age
}

/// How long until the next refresh: the card's `max-age` clamped to
/// `[min, max]`, else `max` (a card without freshness is revalidated at the
/// gateway's own pace, never hammered).
pub fn refresh_after(cache_control: Option<&str>, min: Duration, max: Duration) -> Duration {
    cache_control
        .and_then(max_age)
        .map_or(max, |a| a.clamp(min, max))
}

/// A card as last fetched, with what a conditional refresh sends back.
#[derive(Debug, Clone)]
pub struct CachedCard {
    pub card: RemoteCard,
    /// `ETag` of the response, sent as `If-None-Match`.
    pub etag: Option<String>,
    /// `Last-Modified`, sent as `If-Modified-Since`.
    pub last_modified: Option<String>,
    /// When to refresh it.
    pub refresh_after: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v1_card() -> Value {
        json!({
            "name": "py-remote", "description": "d", "version": "1.2.3",
            "supportedInterfaces": [
                {"url": "http://h/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
                {"url": "http://h/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {"streaming": true, "pushNotifications": false},
            "defaultInputModes": ["text/plain", "application/json"], "defaultOutputModes": [],
            "skills": [{"id": "echo", "name": "Echo", "description": "e", "tags": ["t"]}, {"name": "no id"}]
        })
    }

    #[test]
    fn the_jsonrpc_interface_is_chosen() {
        let c = RemoteCard::parse(v1_card()).unwrap();
        assert_eq!(c.name, "py-remote");
        assert_eq!(c.endpoint.url, "http://h/a2a/jsonrpc");
        assert_eq!(c.endpoint.binding, Binding::JsonRpc);
        assert!(c.streaming);
    }

    #[test]
    fn http_json_is_chosen_when_it_is_the_only_binding_spoken() {
        let mut card = v1_card();
        card["supportedInterfaces"][1] = json!({"url": "http://h/a2a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"});
        let c = RemoteCard::parse(card.clone()).unwrap();
        assert_eq!(
            c.endpoint,
            Endpoint {
                url: "http://h/a2a/rest".into(),
                binding: Binding::HttpJson
            }
        );
        // JSON-RPC still wins where both are offered, whatever the order.
        card["supportedInterfaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"url": "http://h/rpc", "protocolBinding": "JSONRPC"}));
        let c = RemoteCard::parse(card).unwrap();
        assert_eq!(c.endpoint.binding, Binding::JsonRpc);
        assert_eq!(c.endpoint.url, "http://h/rpc");
    }

    #[test]
    fn a_v03_card_falls_back_to_its_url_and_bad_cards_are_refused() {
        let c = RemoteCard::parse(json!({"name": "old", "url": "http://h/rpc"})).unwrap();
        assert_eq!(
            (c.endpoint.url.as_str(), c.endpoint.binding, c.streaming),
            ("http://h/rpc", Binding::JsonRpc, false)
        );
        assert_eq!(RemoteCard::parse(json!([])), Err(CardError::NotAnObject));
        assert_eq!(
            RemoteCard::parse(json!({"name": " "})),
            Err(CardError::NoName)
        );
        assert_eq!(
            RemoteCard::parse(
                json!({"name": "x", "supportedInterfaces": [{"url": "u", "protocolBinding": "GRPC"}]})
            ),
            Err(CardError::NoJsonRpc)
        );
    }

    /// The card a2a-sdk 0.3's server serves (its fields as it writes them).
    fn v03_card() -> Value {
        json!({
            "name": "py-v03", "description": "d", "version": "1.0.0",
            "protocolVersion": "0.3.0", "url": "http://h/rpc", "preferredTransport": "JSONRPC",
            "capabilities": {"streaming": true}, "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"], "skills": []
        })
    }

    #[test]
    fn a_v03_card_is_spoken_to_in_v03() {
        let c = RemoteCard::parse(v03_card()).unwrap();
        assert_eq!(
            c.endpoint,
            Endpoint {
                url: "http://h/rpc".into(),
                binding: Binding::JsonRpcV03
            }
        );
        assert_eq!(c.endpoint.to_string(), "http://h/rpc (JSONRPC, A2A v0.3)");
        // Its JSON-RPC interface among others when it prefers another.
        let mut card = v03_card();
        card["preferredTransport"] = json!("GRPC");
        card["additionalInterfaces"] = json!([
            {"url": "http://h/grpc", "transport": "GRPC"},
            {"url": "http://h/jsonrpc", "transport": "JSONRPC"}
        ]);
        let c = RemoteCard::parse(card.clone()).unwrap();
        assert_eq!(
            (c.endpoint.url.as_str(), c.endpoint.binding),
            ("http://h/jsonrpc", Binding::JsonRpcV03)
        );
        card["additionalInterfaces"] = json!([{"url": "http://h/grpc", "transport": "GRPC"}]);
        assert_eq!(RemoteCard::parse(card), Err(CardError::NoJsonRpc));
        // A card serving both (as the gateway's own does, and the official
        // SDKs' compat layers): v1.0 wins, whatever the order and the
        // top-level v0.3 fields.
        let mut both = v03_card();
        both["supportedInterfaces"] = json!([
            {"url": "http://h/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "http://h/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]);
        let c = RemoteCard::parse(both.clone()).unwrap();
        assert_eq!(
            (c.endpoint.url.as_str(), c.endpoint.binding),
            ("http://h/v1", Binding::JsonRpc)
        );
        // A v0.3 entry alone is v0.3.
        both["supportedInterfaces"]
            .as_array_mut()
            .unwrap()
            .truncate(1);
        let c = RemoteCard::parse(both).unwrap();
        assert_eq!(
            (c.endpoint.url.as_str(), c.endpoint.binding),
            ("http://h/v03", Binding::JsonRpcV03)
        );
    }

    #[test]
    fn the_mirror_keeps_what_the_broker_card_holds() {
        let m = RemoteCard::parse(v1_card()).unwrap().mirror();
        assert_eq!(
            (m.name.as_str(), m.description.as_str(), m.version.as_str()),
            ("py-remote", "d", "1.2.3")
        );
        assert_eq!(m.skills.len(), 1);
        assert_eq!(m.skills[0].tags, vec!["t".to_owned()]);
        assert_eq!(
            m.default_input_modes,
            vec!["text/plain".to_owned(), "application/json".to_owned()]
        );
        // An empty list takes the broker's default rather than none.
        assert_eq!(m.default_output_modes, vec!["text/plain".to_owned()]);
        assert_eq!(m.capabilities, Capabilities::default());
    }

    #[test]
    fn card_urls_and_freshness() {
        assert_eq!(
            card_url("http://h:1/"),
            "http://h:1/.well-known/agent-card.json"
        );
        assert_eq!(card_url("http://h/x/agent.json"), "http://h/x/agent.json");
        assert_eq!(max_age("public, max-age=60"), Some(Duration::from_secs(60)));
        assert_eq!(max_age("no-cache"), Some(Duration::ZERO));
        assert_eq!(max_age("public"), None);
        let (min, max) = (Duration::from_secs(5), Duration::from_secs(300));
        assert_eq!(refresh_after(Some("max-age=1"), min, max), min);
        assert_eq!(refresh_after(Some("max-age=86400"), min, max), max);
        assert_eq!(
            refresh_after(Some("max-age=60"), min, max),
            Duration::from_secs(60)
        );
        assert_eq!(refresh_after(None, min, max), max);
    }
}
