//! The gateway's security rules, each small and tested on its own:
//!
//! - **Bind**: loopback by default; any other address only with at least
//!   one bearer token configured ([`check_bind`]).
//! - **Bearer tokens** name identities; compared in constant time, every
//!   configured token tried so that the time says nothing about which one
//!   nearly matched ([`Tokens`]). Without tokens (loopback only) every
//!   caller is the identity `anonymous`.
//! - **Rate limits**: a token bucket per identity ([`RateLimiter`]).
//! - **Request size**: a bound on the body (enforced in `http`).
//! - **Push webhooks** ([`WebhookPolicy`]): only `http`/`https` URLs to
//!   allowed hosts, never to an address of a special-purpose range (SSRF:
//!   private, link-local, shared, reserved, documentation, multicast,
//!   tunnels and translators into such space; one table per family,
//!   [`SPECIAL_V4`] and [`SPECIAL_V6`], each range with its reason), and
//!   to loopback only with `--allow-loopback-webhooks`. The
//!   check is made on the URL when a config is created and again on the
//!   resolved address at each delivery (DNS may change in between).
//! - **Audit**: one line per call, without message bodies ([`audit`]).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Instant;
use subtle::ConstantTimeEq;

/// The identity of a caller when no tokens are configured.
pub const ANONYMOUS: &str = "anonymous";

/// Why the gateway refuses to start.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StartError {
    /// A non-loopback address without any bearer token.
    #[error("refusing to listen on {0} without a bearer token (--token NAME=SECRET); only loopback addresses may be served unauthenticated")]
    OpenBind(SocketAddr),
    /// A token line that is not `NAME=SECRET` with a valid name.
    #[error("bad token `{0}`: expected NAME=SECRET, NAME of [A-Za-z0-9._-] (at most 64 bytes), SECRET of at least 16 bytes")]
    BadToken(String),
}

/// Checks that `addr` may be listened on with these tokens.
pub fn check_bind(addr: SocketAddr, tokens: &Tokens) -> Result<(), StartError> {
    if addr.ip().is_loopback() || !tokens.is_empty() {
        Ok(())
    } else {
        Err(StartError::OpenBind(addr))
    }
}

/// The configured bearer tokens and the identity each names.
#[derive(Default, Clone)]
pub struct Tokens {
    entries: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets.
        f.debug_list()
            .entries(self.entries.iter().map(|(n, _)| n))
            .finish()
    }
}

/// Shortest accepted secret.
pub const MIN_SECRET_BYTES: usize = 16;

impl Tokens {
    /// Reads `NAME=SECRET` specs.
    pub fn parse<'a>(specs: impl IntoIterator<Item = &'a str>) -> Result<Tokens, StartError> {
        let mut entries = Vec::new();
        for spec in specs {
            let spec = spec.trim();
            let Some((name, secret)) = spec.split_once('=') else {
                return Err(StartError::BadToken(redact(spec)));
            };
            if !crate::mapping::valid_identity(name)
                || name == ANONYMOUS
                || secret.len() < MIN_SECRET_BYTES
            {
                return Err(StartError::BadToken(redact(spec)));
            }
            entries.push((name.to_owned(), secret.as_bytes().to_vec()));
        }
        Ok(Tokens { entries })
    }

    /// No tokens: every caller is [`ANONYMOUS`].
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The identity a request's `Authorization` header value names, or
    /// `None` if it names none. Every token is compared, in constant time.
    pub fn identify(&self, authorization: Option<&str>) -> Option<String> {
        if self.entries.is_empty() {
            return Some(ANONYMOUS.to_owned());
        }
        let presented = bearer_credentials(authorization?)?.as_bytes();
        let mut found: Option<&str> = None;
        for (name, secret) in &self.entries {
            if same_secret(secret, presented) && found.is_none() {
                found = Some(name);
            }
        }
        found.map(str::to_owned)
    }
}

/// The credentials of an `Authorization: Bearer ...` value; the scheme is
/// case-insensitive (RFC 7235 §2.1), separated by spaces or tabs.
pub fn bearer_credentials(value: &str) -> Option<&str> {
    let value = value.trim_start();
    let (scheme, rest) = value.split_once([' ', '\t'])?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim();
    (!token.is_empty()).then_some(token)
}

/// Whether `presented` is `secret`, in time that depends on the presented
/// token's length only: a slice comparison would return at once on a
/// length mismatch and so tell the secret's length. Every presented byte
/// is compared with a secret byte (cycling through the secret), and the
/// lengths' difference is folded into the same result.
fn same_secret(secret: &[u8], presented: &[u8]) -> bool {
    if secret.is_empty() {
        return false;
    }
    let mut padded = Vec::with_capacity(presented.len());
    padded.extend(secret.iter().cycle().take(presented.len()));
    let lengths_equal = (secret.len() as u64).ct_eq(&(presented.len() as u64));
    bool::from(padded.as_slice().ct_eq(presented) & lengths_equal)
}

/// A token spec without its secret, for error messages.
fn redact(spec: &str) -> String {
    match spec.split_once('=') {
        Some((name, _)) => format!("{name}=…"),
        None => "…".into(),
    }
}

/// A token bucket per identity: `rate` calls per second on average,
/// `burst` at once.
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl RateLimiter {
    /// `rate` per second (0 disables the limit), `burst` at once (at least 1).
    pub fn new(rate: f64, burst: u32) -> RateLimiter {
        RateLimiter {
            rate,
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one call from `identity`'s bucket: `Err(seconds to wait)` if
    /// it is empty.
    pub fn check(&self, identity: &str) -> Result<(), f64> {
        self.check_at(identity, Instant::now())
    }

    /// [`RateLimiter::check`] at a given instant (for tests).
    pub fn check_at(&self, identity: &str, now: Instant) -> Result<(), f64> {
        if self.rate <= 0.0 {
            return Ok(());
        }
        let mut buckets = self.buckets.lock();
        let (tokens, last) = buckets
            .entry(identity.to_owned())
            .or_insert((self.burst, now));
        let elapsed = now.saturating_duration_since(*last).as_secs_f64();
        *tokens = (*tokens + elapsed * self.rate).min(self.burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err((1.0 - *tokens) / self.rate)
        }
    }
}

/// Where push notifications may go.
#[derive(Debug, Clone, Default)]
pub struct WebhookPolicy {
    /// Host names (or IP literals) webhooks may target; `*` allows any
    /// host with a public address.
    pub allow_hosts: Vec<String>,
    /// Allow loopback targets (`localhost`, 127.0.0.0/8, ::1): for local
    /// tests such as the TCK's webhook receiver.
    pub allow_loopback: bool,
}

/// Why a webhook URL or address is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookRefused {
    #[error("webhook url is not a valid http(s) url")]
    BadUrl,
    #[error("webhook host `{0}` is not allowed")]
    HostNotAllowed(String),
    #[error("webhook address {0} is loopback (allowed only with --allow-loopback-webhooks)")]
    Loopback(IpAddr),
    #[error("webhook address {0} is not public: {1}")]
    NotPublic(IpAddr, SpecialRange),
}

impl WebhookPolicy {
    /// Push notifications are offered at all.
    pub fn enabled(&self) -> bool {
        self.allow_loopback || !self.allow_hosts.is_empty()
    }

    /// Checks a URL as given: scheme, no credentials, and its host.
    pub fn check_url(&self, url: &str) -> Result<reqwest::Url, WebhookRefused> {
        let u = reqwest::Url::parse(url).map_err(|_| WebhookRefused::BadUrl)?;
        if !matches!(u.scheme(), "http" | "https")
            || !u.username().is_empty()
            || u.password().is_some()
        {
            return Err(WebhookRefused::BadUrl);
        }
        let host = u.host_str().ok_or(WebhookRefused::BadUrl)?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if let Ok(ip) = host.parse::<IpAddr>() {
            self.check_addr(&host, ip)?;
        } else if host == "localhost" || host.ends_with(".localhost") {
            if !self.allow_loopback {
                return Err(WebhookRefused::HostNotAllowed(host));
            }
        } else if !self.host_listed(&host) {
            return Err(WebhookRefused::HostNotAllowed(host));
        }
        Ok(u)
    }

    fn host_listed(&self, host: &str) -> bool {
        self.allow_hosts
            .iter()
            .any(|h| h == "*" || h.eq_ignore_ascii_case(host))
    }

    /// Checks one address `host` resolved to.
    pub fn check_addr(&self, host: &str, ip: IpAddr) -> Result<(), WebhookRefused> {
        let ip = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        if ip.is_loopback() {
            return if self.allow_loopback {
                Ok(())
            } else {
                Err(WebhookRefused::Loopback(ip))
            };
        }
        if let Some(range) = special_range(ip) {
            return Err(WebhookRefused::NotPublic(ip, range));
        }
        let is_literal = host.parse::<IpAddr>().is_ok();
        if self.host_listed(host) || (is_literal && self.host_listed(&ip.to_string())) {
            Ok(())
        } else {
            Err(WebhookRefused::HostNotAllowed(host.to_owned()))
        }
    }
}

/// The IPv4 address an IPv6 address reaches, for the forms that are
/// routed to one: IPv4-mapped `::ffff:0:0/96` (a dual-stack socket
/// connects to the IPv4 address), NAT64 `64:ff9b::/96` (the well-known
/// prefix, RFC 6052: the translator connects to it) and 6to4 `2002::/16`
/// (the IPv4 address in bits 16..48, RFC 3056). Other forms that carry an
/// IPv4 address (IPv4-compatible `::/96`, IPv4-translated
/// `::ffff:0:0:0/96`, Teredo `2001::/32`, the local-use NAT64 prefix
/// `64:ff9b:1::/48`) are refused whole by [`SPECIAL_V6`].
pub fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let low = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(low(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(low(s[1], s[2]));
    }
    None
}

/// A range of addresses no webhook may target, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Special<A> {
    /// The range's first address.
    pub net: A,
    /// Its prefix length.
    pub len: u8,
    /// What the range is for (and so why no webhook belongs there).
    pub why: &'static str,
}

impl<A: std::fmt::Display> std::fmt::Display for Special<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}: {}", self.net, self.len, self.why)
    }
}

/// A refused range, either family (what [`WebhookRefused::NotPublic`]
/// names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecialRange {
    V4(&'static Special<Ipv4Addr>),
    V6(&'static Special<Ipv6Addr>),
}

impl std::fmt::Display for SpecialRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpecialRange::V4(s) => s.fmt(f),
            SpecialRange::V6(s) => s.fmt(f),
        }
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8, why: &'static str) -> Special<Ipv4Addr> {
    Special {
        net: Ipv4Addr::new(a, b, c, d),
        len,
        why,
    }
}

const fn v6(segments: [u16; 8], len: u8, why: &'static str) -> Special<Ipv6Addr> {
    let [a, b, c, d, e, f, g, h] = segments;
    Special {
        net: Ipv6Addr::new(a, b, c, d, e, f, g, h),
        len,
        why,
    }
}

/// Every IPv4 range a webhook may not target: the whole IANA IPv4
/// Special-Purpose Address Registry (RFC 6890 and its updates), multicast
/// and the limited broadcast. Some entries are globally reachable
/// (anycast services, AS112 sinks), but none holds an HTTP receiver a
/// client may name: refusing them costs no real webhook and keeps a
/// caller from aiming the gateway's POSTs at shared infrastructure. A more
/// specific range comes before the one holding it, so the reason given is
/// the most precise one.
pub const SPECIAL_V4: &[Special<Ipv4Addr>] = &[
    v4(
        0,
        0,
        0,
        0,
        8,
        "\"this network\" (RFC 791), never a destination",
    ),
    v4(10, 0, 0, 0, 8, "private-use (RFC 1918)"),
    v4(
        100,
        64,
        0,
        0,
        10,
        "shared address space of carrier-grade NAT (RFC 6598)",
    ),
    v4(127, 0, 0, 0, 8, "loopback (RFC 1122)"),
    v4(
        169,
        254,
        0,
        0,
        16,
        "link-local, where cloud metadata services answer (RFC 3927)",
    ),
    v4(172, 16, 0, 0, 12, "private-use (RFC 1918)"),
    v4(
        192,
        0,
        0,
        0,
        24,
        "IETF protocol assignments: DS-Lite, PCP and TURN anycast, NAT64 discovery (RFC 6890)",
    ),
    v4(192, 0, 2, 0, 24, "documentation, TEST-NET-1 (RFC 5737)"),
    v4(192, 31, 196, 0, 24, "AS112 DNS sink (RFC 7535)"),
    v4(192, 52, 193, 0, 24, "AMT relay anycast (RFC 7450)"),
    v4(
        192,
        88,
        99,
        0,
        24,
        "6to4 relay anycast, deprecated (RFC 7526)",
    ),
    v4(192, 168, 0, 0, 16, "private-use (RFC 1918)"),
    v4(
        192,
        175,
        48,
        0,
        24,
        "AS112 direct delegation DNS sink (RFC 7534)",
    ),
    v4(198, 18, 0, 0, 15, "benchmarking (RFC 2544)"),
    v4(198, 51, 100, 0, 24, "documentation, TEST-NET-2 (RFC 5737)"),
    v4(203, 0, 113, 0, 24, "documentation, TEST-NET-3 (RFC 5737)"),
    v4(224, 0, 0, 0, 4, "multicast (RFC 5771)"),
    v4(255, 255, 255, 255, 32, "limited broadcast (RFC 919)"),
    v4(240, 0, 0, 0, 4, "reserved for future use (RFC 1112)"),
];

/// Every IPv6 range a webhook may not target: the whole IANA IPv6
/// Special-Purpose Address Registry (RFC 6890 and its updates), the rest of
/// the address space outside global unicast (site-local, multicast, SRv6
/// SIDs...), and the forms that carry an IPv4 address without being routed
/// to it as such. IPv4-mapped addresses, the NAT64 well-known prefix and
/// 6to4 are not here: they are judged by their IPv4 address
/// ([`embedded_v4`]). A more specific range comes before the one holding
/// it; past the table, anything outside `2000::/3` is refused too
/// ([`GLOBAL_UNICAST`]).
pub const SPECIAL_V6: &[Special<Ipv6Addr>] = &[
    v6([0; 8], 128, "unspecified (RFC 4291)"),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback (RFC 4291)"),
    v6([0, 0, 0, 0, 0xffff, 0, 0, 0], 96, "IPv4-translated, SIIT (RFC 2765), not routed to its IPv4 address"),
    v6([0; 8], 96, "IPv4-compatible, deprecated (RFC 4291), not routed to its IPv4 address"),
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, "local-use IPv4/IPv6 translation, reaches a private network's IPv4 space (RFC 8215)"),
    v6([0; 8], 8, "reserved by the IETF (RFC 4291)"),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only (RFC 6666)"),
    v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64, "dummy prefix (RFC 9780)"),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, "Teredo tunnels (RFC 4380), reach IPv4 hosts behind NAT"),
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, "benchmarking (RFC 5180)"),
    v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28, "ORCHID, deprecated (RFC 4843)"),
    v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, "ORCHIDv2 identifiers, not locators (RFC 7343)"),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, "IETF protocol assignments: PCP, TURN and DNS-SD anycast, AMT, AS112, drone identifiers (RFC 2928)"),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, "documentation (RFC 3849)"),
    v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0], 48, "AS112 direct delegation DNS sink (RFC 7534)"),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "documentation (RFC 9637)"),
    v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, "SRv6 segment identifiers (RFC 9602)"),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique local, private-use (RFC 4193)"),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local (RFC 4291)"),
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "site-local, deprecated (RFC 3879), private in practice"),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast (RFC 4291)"),
];

/// The only IPv6 space allocated for global unicast (RFC 4291 §2.4, the
/// IANA IPv6 Address Space registry): an address outside it is reserved,
/// local or special whether or not [`SPECIAL_V6`] names its range.
pub const GLOBAL_UNICAST: Special<Ipv6Addr> = v6(
    [0x2000, 0, 0, 0, 0, 0, 0, 0],
    3,
    "outside 2000::/3, the only IPv6 space allocated for global unicast (RFC 4291)",
);

fn in_v4(ip: Ipv4Addr, s: &Special<Ipv4Addr>) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(s.len)).unwrap_or(0);
    u32::from(ip) & mask == u32::from(s.net) & mask
}

fn in_v6(ip: Ipv6Addr, s: &Special<Ipv6Addr>) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(s.len)).unwrap_or(0);
    u128::from(ip) & mask == u128::from(s.net) & mask
}

/// The refused range `ip` is in, or `None` for a public unicast address.
/// An IPv6 address routed to an IPv4 one is judged by that IPv4 address.
pub fn special_range(ip: IpAddr) -> Option<SpecialRange> {
    match ip {
        IpAddr::V4(a) => SPECIAL_V4
            .iter()
            .find(|s| in_v4(a, s))
            .map(SpecialRange::V4),
        IpAddr::V6(a) => {
            if let Some(v4) = embedded_v4(a) {
                return special_range(IpAddr::V4(v4));
            }
            SPECIAL_V6
                .iter()
                .find(|s| in_v6(a, s))
                .or_else(|| (!in_v6(a, &GLOBAL_UNICAST)).then_some(&GLOBAL_UNICAST))
                .map(SpecialRange::V6)
        }
    }
}

/// The audit file (`--audit FILE`): one JSON object per line, per call
/// answered and per request refused, never a message body or a secret.
/// Appended to (never truncated), written whole line by whole line with
/// `O_APPEND`, so lines of concurrent requests do not interleave; a
/// failed write is logged and does not fail the call. Without a file,
/// audit lines go to the log only (target `a2a_gateway::audit`).
#[derive(Default)]
pub struct AuditLog {
    file: Option<parking_lot::Mutex<std::fs::File>>,
}

impl AuditLog {
    /// Opens (creating) `path` for appending.
    pub fn open(path: &std::path::Path) -> std::io::Result<AuditLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(AuditLog {
            file: Some(parking_lot::Mutex::new(file)),
        })
    }

    /// Writes the line `line()` makes, built only when there is a file:
    /// with none (the default) a call costs no `Value` tree, no time
    /// formatted (every call passes here).
    fn write(&self, line: impl FnOnce() -> serde_json::Value) {
        let Some(file) = &self.file else {
            return;
        };
        let mut text = line().to_string();
        text.push('\n');
        if let Err(e) = std::io::Write::write_all(&mut *file.lock(), text.as_bytes()) {
            tracing::warn!(error = %e, "audit file write failed");
        }
    }
}

/// The time now, RFC 3339 (UTC, milliseconds).
fn audit_time() -> String {
    format!("{:.3}", jiff::Timestamp::now())
}

/// Writes the audit line of a request refused before it was read (401,
/// 413, 429...): the identity if known (`-` if not), the agent of the
/// URL, the HTTP status and why.
pub fn audit_refusal(log: &AuditLog, identity: Option<&str>, agent: &str, status: u16, why: &str) {
    log.write(|| {
        serde_json::json!({
        "time": audit_time(),
        "kind": "refused",
        "identity": identity,
        "agent": agent,
        "status": status,
        "why": why,
        })
    });
    tracing::info!(
        target: "a2a_gateway::audit",
        identity = identity.unwrap_or("-"),
        agent,
        method = "-",
        task = "-",
        outcome = format!("refused {status}").as_str(),
        why,
        "refused"
    );
}

/// Writes the audit line of one call (never a message body or a secret).
pub fn audit(
    log: &AuditLog,
    identity: &str,
    agent: &str,
    method: &str,
    task: Option<&str>,
    outcome: Result<(), i64>,
    micros: u128,
) {
    log.write(|| {
        serde_json::json!({
        "time": audit_time(),
        "kind": "call",
        "identity": identity,
        "agent": agent,
        "method": method,
        "task": task,
        "error": outcome.err(),
        "micros": micros as u64,
        })
    });
    let outcome: std::borrow::Cow<'static, str> = match outcome {
        Ok(()) => "ok".into(),
        Err(code) => format!("error {code}").into(),
    };
    tracing::info!(
        target: "a2a_gateway::audit",
        identity,
        agent,
        method,
        task = task.unwrap_or("-"),
        outcome = &*outcome,
        micros = micros as u64,
        "call"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn secrets_match_only_whole() {
        let s = b"0123456789abcdef0123";
        assert!(same_secret(s, s));
        // A prefix, a repetition (what the cycling pads with) and an
        // extension are all refused.
        assert!(!same_secret(s, &s[..10]));
        assert!(!same_secret(s, b"0123456789abcdef01230123456789abcdef0123"));
        assert!(!same_secret(s, b"0123456789abcdef0123x"));
        assert!(!same_secret(s, b"0123456789abcdef0124"));
        assert!(!same_secret(s, b""));
        assert!(!same_secret(b"", b""));
    }

    #[test]
    fn non_loopback_binds_need_a_token() {
        let none = Tokens::default();
        let some = Tokens::parse(["ci=0123456789abcdef0123"]).unwrap();
        let lo: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let lo6: SocketAddr = "[::1]:1".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:1".parse().unwrap();
        assert!(check_bind(lo, &none).is_ok());
        assert!(check_bind(lo6, &none).is_ok());
        assert_eq!(check_bind(any, &none), Err(StartError::OpenBind(any)));
        assert!(check_bind(any, &some).is_ok());
    }

    #[test]
    fn tokens_name_identities_and_bad_ones_are_refused_without_echoing_secrets() {
        let t = Tokens::parse(["alice=aaaaaaaaaaaaaaaaaaaa", "bob=bbbbbbbbbbbbbbbbbbbb"]).unwrap();
        assert_eq!(
            t.identify(Some("Bearer aaaaaaaaaaaaaaaaaaaa")).as_deref(),
            Some("alice")
        );
        assert_eq!(
            t.identify(Some("Bearer bbbbbbbbbbbbbbbbbbbb")).as_deref(),
            Some("bob")
        );
        assert_eq!(t.identify(Some("Bearer aaaaaaaaaaaaaaaaaaab")), None);
        assert_eq!(t.identify(Some("Bearer AAAAAAAAAAAAAAAAAAAA")), None);
        assert_eq!(t.identify(Some("aaaaaaaaaaaaaaaaaaaa")), None);
        // The scheme is case-insensitive (RFC 7235); the token is not.
        for v in [
            "bearer aaaaaaaaaaaaaaaaaaaa",
            "BEARER aaaaaaaaaaaaaaaaaaaa",
            "Bearer\taaaaaaaaaaaaaaaaaaaa",
            "bEaReR   aaaaaaaaaaaaaaaaaaaa ",
        ] {
            assert_eq!(t.identify(Some(v)).as_deref(), Some("alice"), "{v}");
        }
        assert_eq!(t.identify(Some("Bearer")), None);
        assert_eq!(t.identify(Some("Basic aaaaaaaaaaaaaaaaaaaa")), None);
        assert_eq!(t.identify(Some("Beareraaaaaaaaaaaaaaaaaaaa")), None);
        assert_eq!(t.identify(None), None);
        assert_eq!(Tokens::default().identify(None).as_deref(), Some(ANONYMOUS));
        let e = Tokens::parse(["x=short"]).unwrap_err();
        assert!(!e.to_string().contains("short"));
        assert!(Tokens::parse(["a/b=0123456789abcdef"]).is_err());
        assert!(Tokens::parse(["anonymous=0123456789abcdef"]).is_err());
        assert!(Tokens::parse(["nosecret"]).is_err());
        assert!(!format!("{t:?}").contains("aaaa"));
    }

    #[test]
    fn rate_limits_are_per_identity_and_refill() {
        let r = RateLimiter::new(10.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(r.check_at("a", t0).is_ok());
        }
        let wait = r.check_at("a", t0).unwrap_err();
        assert!(wait > 0.0 && wait <= 0.1 + 1e-9, "{wait}");
        // Another identity has its own bucket.
        assert!(r.check_at("b", t0).is_ok());
        // 0.1 s refills one call.
        assert!(r.check_at("a", t0 + Duration::from_millis(101)).is_ok());
        assert!(r.check_at("a", t0 + Duration::from_millis(101)).is_err());
        let off = RateLimiter::new(0.0, 1);
        for _ in 0..100 {
            assert!(off.check_at("a", t0).is_ok());
        }
    }

    #[test]
    fn webhooks_go_only_to_allowed_public_hosts_and_loopback_needs_the_switch() {
        let strict = WebhookPolicy {
            allow_hosts: vec!["hooks.example.com".into()],
            allow_loopback: false,
        };
        assert!(strict.enabled());
        assert!(strict.check_url("https://hooks.example.com/w").is_ok());
        assert!(matches!(
            strict.check_url("https://evil.example.com/w"),
            Err(WebhookRefused::HostNotAllowed(_))
        ));
        assert!(matches!(
            strict.check_url("http://localhost:9/w"),
            Err(WebhookRefused::HostNotAllowed(_))
        ));
        assert!(matches!(
            strict.check_url("http://127.0.0.1:9/w"),
            Err(WebhookRefused::Loopback(_))
        ));
        assert!(matches!(
            strict.check_url("http://[::1]:9/w"),
            Err(WebhookRefused::Loopback(_))
        ));
        assert!(matches!(
            strict.check_url("http://10.0.0.1/w"),
            Err(WebhookRefused::NotPublic(..))
        ));
        assert!(matches!(
            strict.check_url("http://169.254.169.254/latest"),
            Err(WebhookRefused::NotPublic(..))
        ));
        assert!(matches!(
            strict.check_url("http://[::ffff:10.0.0.1]/w"),
            Err(WebhookRefused::NotPublic(..))
        ));
        assert_eq!(
            strict.check_url("file:///etc/passwd").unwrap_err(),
            WebhookRefused::BadUrl
        );
        assert_eq!(
            strict
                .check_url("http://u:p@hooks.example.com/")
                .unwrap_err(),
            WebhookRefused::BadUrl
        );
        // A listed name that resolves to a private address is refused at delivery.
        assert!(matches!(
            strict.check_addr("hooks.example.com", "192.168.1.5".parse().unwrap()),
            Err(WebhookRefused::NotPublic(..))
        ));
        assert!(strict
            .check_addr("hooks.example.com", "93.184.216.34".parse().unwrap())
            .is_ok());
        let local = WebhookPolicy {
            allow_hosts: vec![],
            allow_loopback: true,
        };
        assert!(local.check_url("http://127.0.0.1:9/webhook").is_ok());
        assert!(local.check_url("http://localhost:9/webhook").is_ok());
        assert!(local.check_url("http://10.1.1.1/w").is_err());
        assert!(local.check_url("https://example.com/w").is_err());
        assert!(!WebhookPolicy::default().enabled());
        let any = WebhookPolicy {
            allow_hosts: vec!["*".into()],
            allow_loopback: false,
        };
        // IPv6 forms that reach IPv4 space are judged by their IPv4
        // address: mapped, compatible, NAT64 and 6to4.
        for private in [
            "http://[::ffff:192.168.0.1]/x",
            "http://[::ffff:0:a00:1]/x",
            "http://[::10.0.0.1]/x",
            "http://[::a9fe:a9fe]/x",
            "http://[64:ff9b::a9fe:a9fe]/x",
            "http://[64:ff9b::10.1.2.3]/x",
            "http://[2002:a00:1::1]/x",
            "http://[2002:c0a8:101::]/x",
            "http://[2002:7f00:1::1]/x",
            "http://[::127.0.0.1]/x",
        ] {
            assert!(any.check_url(private).is_err(), "{private}");
        }
        for public in [
            "http://[64:ff9b::5db8:d822]/x",
            "http://[2002:5db8:d822::1]/x",
            "http://[2606:4700::1111]/x",
        ] {
            assert!(any.check_url(public).is_ok(), "{public}");
        }
        assert!(any.check_url("https://example.org/x").is_ok());
        assert!(any.check_url("http://192.168.0.1/x").is_err());
    }

    /// The policy that allows every host: only the address rules refuse.
    fn any_host() -> WebhookPolicy {
        WebhookPolicy {
            allow_hosts: vec!["*".into()],
            allow_loopback: false,
        }
    }

    /// The range a literal address is refused for, as the error names it
    /// (`None`: accepted).
    fn refused_for(ip: &str) -> Option<String> {
        let host = if ip.contains(':') {
            format!("[{ip}]")
        } else {
            ip.to_owned()
        };
        let by_url = any_host().check_url(&format!("http://{host}/w"));
        // At delivery, the same address resolved from a listed name.
        let by_addr = any_host().check_addr("hooks.example.com", ip.parse().unwrap());
        assert_eq!(by_url.is_ok(), by_addr.is_ok(), "{ip}");
        match by_addr {
            Ok(()) => None,
            Err(WebhookRefused::NotPublic(_, range)) => Some(range.to_string()),
            Err(e) => panic!("{ip}: {e}"),
        }
    }

    #[test]
    fn every_special_purpose_address_is_refused_with_its_range() {
        // (address, the range the error names), IPv4 registry first.
        let cases = [
            ("0.1.2.3", "0.0.0.0/8"),
            ("10.20.30.40", "10.0.0.0/8"),
            ("100.64.0.1", "100.64.0.0/10"),
            ("100.127.255.254", "100.64.0.0/10"),
            ("169.254.169.254", "169.254.0.0/16"),
            ("172.31.255.1", "172.16.0.0/12"),
            ("192.0.0.9", "192.0.0.0/24"),
            ("192.0.0.170", "192.0.0.0/24"),
            ("192.0.2.1", "192.0.2.0/24"),
            ("192.31.196.1", "192.31.196.0/24"),
            ("192.52.193.1", "192.52.193.0/24"),
            ("192.88.99.1", "192.88.99.0/24"),
            ("192.88.99.2", "192.88.99.0/24"),
            ("192.168.1.1", "192.168.0.0/16"),
            ("192.175.48.6", "192.175.48.0/24"),
            ("198.18.0.1", "198.18.0.0/15"),
            ("198.19.255.255", "198.18.0.0/15"),
            ("198.51.100.7", "198.51.100.0/24"),
            ("203.0.113.9", "203.0.113.0/24"),
            ("224.0.0.251", "224.0.0.0/4"),
            ("239.255.255.250", "224.0.0.0/4"),
            ("240.0.0.1", "240.0.0.0/4"),
            ("255.255.255.255", "255.255.255.255/32"),
            // IPv6 registry, and the space outside global unicast.
            ("::", "::/128"),
            ("::ffff:0:a00:1", "::ffff:0:0:0/96"),
            ("::808:808", "::/96"),
            ("::8.8.8.8", "::/96"),
            ("::1:0:0:1", "::/8"),
            ("64:ff9b:1::1", "64:ff9b:1::/48"),
            ("64:ff9b:1:ffff::808:808", "64:ff9b:1::/48"),
            ("100::1", "100::/64"),
            ("100:0:0:1::1", "100:0:0:1::/64"),
            ("2001::1", "2001::/32"),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::/32"),
            ("2001:1::1", "2001::/23"),
            ("2001:1::2", "2001::/23"),
            ("2001:2::1", "2001:2::/48"),
            ("2001:3::1", "2001::/23"),
            ("2001:4:112::1", "2001::/23"),
            ("2001:10::1", "2001:10::/28"),
            ("2001:20::1", "2001:20::/28"),
            ("2001:2f:ffff::1", "2001:20::/28"),
            ("2001:30::1", "2001::/23"),
            ("2001:1ff:ffff::1", "2001::/23"),
            ("2001:db8::1", "2001:db8::/32"),
            ("2620:4f:8000::1", "2620:4f:8000::/48"),
            ("3fff::1", "3fff::/20"),
            ("3fff:fff:ffff::1", "3fff::/20"),
            ("5f00::1", "5f00::/16"),
            ("fc00::1", "fc00::/7"),
            ("fd12:3456::1", "fc00::/7"),
            ("fe80::1", "fe80::/10"),
            ("febf::1", "fe80::/10"),
            ("fec0::1", "fec0::/10"),
            ("feff::1", "fec0::/10"),
            ("ff02::1", "ff00::/8"),
            ("ff05::1:3", "ff00::/8"),
            ("4000::1", "2000::/3"),
            ("e000::1", "2000::/3"),
            ("1000::1", "2000::/3"),
            // Forms routed to an IPv4 address: that address's range.
            ("::ffff:192.88.99.1", "192.88.99.0/24"),
            ("::ffff:198.18.0.1", "198.18.0.0/15"),
            ("64:ff9b::c058:6301", "192.88.99.0/24"),
            ("64:ff9b::100.64.0.1", "100.64.0.0/10"),
            ("2002:c0a8:101::1", "192.168.0.0/16"),
            ("2002:c612:1::1", "198.18.0.0/15"),
            ("2002:f000:1::1", "240.0.0.0/4"),
            ("2002:e000:1::1", "224.0.0.0/4"),
        ];
        for (ip, range) in cases {
            let got = refused_for(ip).unwrap_or_else(|| panic!("{ip} was accepted"));
            assert!(got.starts_with(&format!("{range}: ")), "{ip}: {got}");
        }
        // Public addresses either side of the ranges stay allowed.
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.1",
            "172.32.0.1",
            "192.0.1.1",
            "192.88.98.255",
            "192.88.100.1",
            "198.17.255.255",
            "198.20.0.1",
            "223.255.255.254",
            "2606:4700::1111",
            "2001:200::1",
            "2001:4860:4860::8888",
            "2001:db9::1",
            "2620:4f:8001::1",
            "3fff:1000::1",
            "64:ff9b::808:808",
            "::ffff:8.8.8.8",
            "2002:808:808::1",
        ] {
            assert_eq!(refused_for(ip), None, "{ip}");
        }
    }

    #[test]
    fn each_table_range_is_refused_from_its_first_to_its_last_address() {
        for s in SPECIAL_V4 {
            let first = u32::from(s.net);
            let last = first | u32::MAX.checked_shr(u32::from(s.len)).unwrap_or(0);
            for a in [first, last] {
                let ip = IpAddr::V4(Ipv4Addr::from(a));
                assert!(special_range(ip).is_some(), "{ip} in {s}");
            }
        }
        for s in SPECIAL_V6 {
            let first = u128::from(s.net);
            let last = first | u128::MAX.checked_shr(u32::from(s.len)).unwrap_or(0);
            for a in [first, last] {
                let ip = IpAddr::V6(Ipv6Addr::from(a));
                assert!(special_range(ip).is_some(), "{ip} in {s}");
            }
        }
        // No row is hidden by an earlier one holding it (its reason would
        // never be given): more specific rows come first.
        for (i, later) in SPECIAL_V4.iter().enumerate() {
            for earlier in &SPECIAL_V4[..i] {
                assert!(
                    !(earlier.len <= later.len && in_v4(later.net, earlier)),
                    "{later} is hidden by {earlier}"
                );
            }
        }
        for (i, later) in SPECIAL_V6.iter().enumerate() {
            for earlier in &SPECIAL_V6[..i] {
                assert!(
                    !(earlier.len <= later.len && in_v6(later.net, earlier)),
                    "{later} is hidden by {earlier}"
                );
            }
        }
        // A table row's address is its range's first: no stray host bits.
        for s in SPECIAL_V4 {
            let host = u32::MAX.checked_shr(u32::from(s.len)).unwrap_or(0);
            assert_eq!(u32::from(s.net) & host, 0, "{s}");
        }
        for s in SPECIAL_V6 {
            let host = u128::MAX.checked_shr(u32::from(s.len)).unwrap_or(0);
            assert_eq!(u128::from(s.net) & host, 0, "{s}");
        }
    }

    #[test]
    fn a_refusal_names_the_address_and_its_range() {
        let e = any_host().check_url("http://[fec0::1]/w").unwrap_err();
        assert_eq!(
            e.to_string(),
            "webhook address fec0::1 is not public: fec0::/10: site-local, deprecated (RFC 3879), private in practice"
        );
    }
}
