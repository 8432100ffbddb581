//! Assertions on responses: JSON-RPC error codes, A2A `data.errorCode`s,
//! bound errors, results, timestamps. Each returns what it checked, so a
//! test can look further.

use crate::proto::A2A_ERROR;
use serde_json::Value;

/// Asserts a response is a JSON-RPC error with `code`; returns the error.
pub fn assert_rpc_error(resp: &Value, code: i64) -> Value {
    let err = resp
        .get("error")
        .unwrap_or_else(|| panic!("expected error {code}, got {resp}"));
    assert_eq!(
        err["code"].as_i64(),
        Some(code),
        "wrong error code in {resp}"
    );
    assert!(err["message"].is_string(), "error without message: {resp}");
    err.clone()
}

/// Asserts a response (or an error object) is an A2A error with this
/// `data.errorCode`; returns the error object.
pub fn assert_a2a_error(resp_or_err: &Value, error_code: &str) -> Value {
    let err = resp_or_err.get("error").unwrap_or(resp_or_err);
    assert_eq!(
        err["code"].as_i64(),
        Some(A2A_ERROR),
        "expected A2A error {error_code}, got {resp_or_err}"
    );
    assert_eq!(
        err["data"]["errorCode"], error_code,
        "wrong A2A error in {resp_or_err}"
    );
    assert!(
        err["message"].as_str().is_some_and(|m| !m.is_empty()),
        "A2A error without message: {resp_or_err}"
    );
    err.clone()
}

/// Asserts a bound error: `A2A_*` code, `data.limit`, `data.max`, and
/// `data.actual` when `actual` is given.
pub fn assert_bound_error(
    resp_or_err: &Value,
    error_code: &str,
    limit: &str,
    max: u64,
    actual: Option<u64>,
) {
    let err = assert_a2a_error(resp_or_err, error_code);
    assert_bound_data(&err, limit, max, actual);
}

/// Asserts a JSON-RPC bound error (`-32602`/`-32600`, not an A2A one): the
/// code, `data.limit`, `data.max`, and `data.actual` when given (every
/// bound error carries them).
pub fn assert_rpc_bound(resp: &Value, code: i64, limit: &str, max: u64, actual: Option<u64>) {
    let err = assert_rpc_error(resp, code);
    assert_bound_data(&err, limit, max, actual);
}

fn assert_bound_data(err: &Value, limit: &str, max: u64, actual: Option<u64>) {
    assert_eq!(err["data"]["limit"], limit, "wrong data.limit in {err}");
    assert_eq!(
        err["data"]["max"].as_u64(),
        Some(max),
        "wrong data.max in {err}"
    );
    if let Some(actual) = actual {
        assert_eq!(
            err["data"]["actual"].as_u64(),
            Some(actual),
            "wrong data.actual in {err}"
        );
    }
}

/// The `result` of a response, failing on an error.
pub fn result(resp: &Value) -> Value {
    match resp.get("result") {
        Some(r) if resp.get("error").is_none() => r.clone(),
        _ => panic!("expected a result, got {resp}"),
    }
}

/// Is `s` RFC 3339 UTC with milliseconds: `YYYY-MM-DDTHH:MM:SS.mmmZ` (a
/// `+00:00` offset counts as UTC too)?
pub fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        r.into_iter()
            .all(|i| b.get(i).is_some_and(u8::is_ascii_digit))
    };
    b.len() >= 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && (&s[23..] == "Z" || &s[23..] == "+00:00")
}

/// Asserts [`is_timestamp`] of a JSON string.
pub fn assert_timestamp(ts: &Value) {
    let s = ts
        .as_str()
        .unwrap_or_else(|| panic!("timestamp is not a string: {ts}"));
    assert!(
        is_timestamp(s),
        "timestamp {s:?} is not RFC 3339 UTC with milliseconds"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_of_the_contract_shape_only() {
        assert!(is_timestamp("2026-11-30T03:24:21.123Z"));
        assert!(is_timestamp("2026-11-30T03:24:21.123+00:00"));
        assert!(!is_timestamp("2026-11-30T03:24:21Z"));
        assert!(!is_timestamp("2026-11-30 03:24:21.123Z"));
        assert!(!is_timestamp("2026-11-30T03:24:21.123+01:00"));
    }
}
