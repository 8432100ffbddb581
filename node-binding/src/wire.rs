//! How the answer lines of one read of the calls connection
//! (docs/protocol.md §1 Framing) settle their promises on the JS thread.
//! The lines themselves are the client's wire core's (`a2a_client::wire`):
//! it encodes each request, tells where a line ends, and its envelope
//! reader (`wire::json`) finds the values in an answer without parsing
//! them, for V8 to parse once.

use crate::error::Failure;
use crate::js;
use crate::settle;
use a2a_client::wire::json;
use a2a_client::{ClientError, RpcError};
use napi::sys;

/// The most answer bytes parsed in one `JSON.parse`: V8 puts a string
/// over 128 KiB in its large-object space, a fresh mapping each time
/// (page faults on the JS thread: measured), so a read's answers are
/// parsed in strings below that.
pub(crate) const BATCH_BYTES: usize = 48 * 1024;

/// The broker's error object, as the client reports it.
pub(crate) fn rpc_error(e: &[u8]) -> ClientError {
    match serde_json::from_slice::<RpcError>(e) {
        Ok(e) => ClientError::Rpc(e),
        Err(e) => ClientError::Protocol(format!("unreadable error answer: {e}")),
    }
}

/// How one answer settles its promise.
pub(crate) enum Answer {
    /// A value in the read buffer: `guess` is where the quick reading put
    /// it; `line` is read exactly when there is no guess or it does not
    /// parse.
    Value {
        guess: Option<std::ops::Range<usize>>,
        line: std::ops::Range<usize>,
        member: Option<&'static str>,
    },
    Undefined,
    Fail(Failure),
}

/// Settles the answers of one read (JS thread, in a callback scope). The
/// guessed values are parsed by V8 in one `JSON.parse` of them all as an
/// array (one call into V8 and one string per read, not per answer); a
/// guess that was wrong cannot parse (what follows a value in its object
/// is `,"name":`, which no array holds), and then each is read exactly.
pub(crate) fn settle_answers(
    env: sys::napi_env,
    rbuf: &[u8],
    done: Vec<(sys::napi_deferred, Answer)>,
    batch: &mut Vec<u8>,
) {
    let mut group = Vec::new();
    let mut bytes = 0;
    for item in done {
        let len = match &item.1 {
            Answer::Value { guess: Some(g), .. } => g.len(),
            _ => 0,
        };
        if bytes + len > BATCH_BYTES && !group.is_empty() {
            settle_group(env, rbuf, std::mem::take(&mut group), batch);
            bytes = 0;
        }
        bytes += len;
        group.push(item);
    }
    if !group.is_empty() {
        settle_group(env, rbuf, group, batch);
    }
}

/// One `JSON.parse` of at most about [`BATCH_BYTES`] of answers.
fn settle_group(
    env: sys::napi_env,
    rbuf: &[u8],
    done: Vec<(sys::napi_deferred, Answer)>,
    batch: &mut Vec<u8>,
) {
    batch.clear();
    let mut guesses = 0u32;
    for (_, a) in &done {
        if let Answer::Value { guess: Some(g), .. } = a {
            batch.push(if guesses == 0 { b'[' } else { b',' });
            batch.extend_from_slice(&rbuf[g.clone()]);
            guesses += 1;
        }
    }
    batch.push(b']');
    let array = (guesses > 0)
        .then(|| js::parse_json_bytes(env, batch).ok())
        .flatten()
        .filter(|&a| js::array_len(env, a) == Some(guesses));
    let mut k = 0;
    for (deferred, a) in done {
        let value = match a {
            Answer::Undefined => settle::undefined(env),
            Answer::Fail(f) => Err(f),
            Answer::Value {
                guess,
                line,
                member,
            } => {
                let quick = match (&guess, array) {
                    (Some(_), Some(arr)) => js::element(env, arr, k),
                    _ => None,
                };
                if guess.is_some() {
                    k += 1;
                }
                match quick {
                    Some(v) => Ok(v),
                    None => exact(env, &rbuf[line], member),
                }
            }
        };
        settle::settle_value(env, deferred, value);
    }
}

/// An answer's value read exactly from its line.
fn exact(
    env: sys::napi_env,
    line: &[u8],
    member: Option<&'static str>,
) -> Result<sys::napi_value, Failure> {
    let bad =
        |what: &str| Failure::from(ClientError::Protocol(format!("unreadable answer: {what}")));
    let a = json::envelope(line).map_err(bad)?;
    let result = a.result.ok_or_else(|| bad("no result"))?;
    let v = match member {
        None => result,
        Some(k) => json::member(result, k).ok_or_else(|| bad(k))?,
    };
    Ok(js::parse_json_bytes(env, v)?)
}

/// Where `part` (a slice of `buf`) lies in `buf`.
pub(crate) fn offset(buf: &[u8], part: &[u8]) -> std::ops::Range<usize> {
    let start = part.as_ptr() as usize - buf.as_ptr() as usize;
    start..start + part.len()
}
