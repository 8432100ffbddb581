//! The calls connection's NDJSON lines (docs/protocol.md §1 Framing): the
//! request line a call writes, and how the answer lines of one read
//! settle their promises on the JS thread (`calls` reads them; `envelope`
//! finds the values in them).

use crate::envelope;
use crate::error::Failure;
use crate::js;
use crate::settle;
use a2a_client::proto::call::Call;
use a2a_client::proto::limits::MAX_FRAME_BYTES;
use a2a_client::{ClientError, RpcError};
use napi::sys;
use std::cell::RefCell;
use std::ptr;

/// The most answer bytes parsed in one `JSON.parse`: V8 puts a string
/// over 128 KiB in its large-object space, a fresh mapping each time
/// (page faults on the JS thread: measured), so a read's answers are
/// parsed in strings below that.
pub(crate) const BATCH_BYTES: usize = 48 * 1024;

/// Appends the NDJSON request line of `call` under `id` to `out`.
pub(crate) fn request(out: &mut Vec<u8>, id: u64, call: &Call) -> Result<(), ClientError> {
    let start = out.len();
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    push_u64(out, id);
    out.extend_from_slice(b",\"method\":\"");
    out.extend_from_slice(call.method().as_bytes());
    out.extend_from_slice(b"\",\"params\":");
    let written = call.write_params_json(&mut *out);
    if let Err(e) = written {
        out.truncate(start);
        return Err(ClientError::Protocol(format!(
            "cannot encode the request: {e}"
        )));
    }
    out.extend_from_slice(b"}\n");
    let bytes = out.len() - start;
    if bytes > MAX_FRAME_BYTES {
        out.truncate(start);
        return Err(ClientError::FrameTooLarge {
            bytes,
            max: MAX_FRAME_BYTES,
        });
    }
    Ok(())
}

/// Appends `n` in decimal (without `fmt`'s machinery: twice per call).
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

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

thread_local! {
    /// `(env, batch, one)`: index.js's two functions that settle the
    /// loop's calls (`settleBatch`, `settleOne`), registered once per
    /// environment by `setCallSettlers`.
    static SETTLERS: RefCell<Option<(sys::napi_env, sys::napi_ref, sys::napi_ref)>> =
        const { RefCell::new(None) };
}

/// Keeps `batch` and `one` as this environment's settlers (JS thread).
#[allow(unsafe_code)]
pub(crate) fn set_settlers(
    env: sys::napi_env,
    batch: sys::napi_value,
    one: sys::napi_value,
) -> Result<(), js::JsError> {
    let mut refs = [ptr::null_mut(); 2];
    for (r, f) in refs.iter_mut().zip([batch, one]) {
        // SAFETY: on the JS thread of `env`, with live values.
        if unsafe { sys::napi_create_reference(env, f, 1, r) } != sys::Status::napi_ok {
            return Err(js::JsError("cannot keep the call settlers"));
        }
    }
    let old = SETTLERS.with(|c| c.borrow_mut().replace((env, refs[0], refs[1])));
    if let Some((e, b, o)) = old.filter(|(e, _, _)| *e == env) {
        // SAFETY: references of this environment, replaced above.
        unsafe {
            sys::napi_delete_reference(e, b);
            sys::napi_delete_reference(e, o);
        }
    }
    Ok(())
}

/// Has this environment registered its settlers? (The loop's calls
/// connection is only used where it has: see `calls::attach`.)
pub(crate) fn has_settlers(env: sys::napi_env) -> bool {
    SETTLERS.with(|c| matches!(*c.borrow(), Some((e, _, _)) if e == env))
}

/// The settlers as values (JS thread, inside a handle scope).
#[allow(unsafe_code)]
fn settlers(env: sys::napi_env) -> Option<Settlers> {
    let (e, b, o) = SETTLERS.with(|c| *c.borrow())?;
    if e != env {
        return None;
    }
    let mut s = Settlers {
        batch: ptr::null_mut(),
        one: ptr::null_mut(),
        undefined: ptr::null_mut(),
    };
    // SAFETY: on the JS thread; the references are live (never deleted
    // but on replacement).
    unsafe {
        sys::napi_get_reference_value(env, b, &mut s.batch);
        sys::napi_get_reference_value(env, o, &mut s.one);
        sys::napi_get_undefined(env, &mut s.undefined);
    }
    (!s.batch.is_null() && !s.one.is_null()).then_some(s)
}

/// index.js's settlers, for one read.
pub(crate) struct Settlers {
    /// `settleBatch(text)`: `text` is `[id, value, id, value, …, count]`;
    /// resolves each call `id` with its `value` and returns true, or
    /// returns false (or throws) having settled nothing.
    batch: sys::napi_value,
    /// `settleOne(id, ok, value)`: resolves (`ok`) or rejects call `id`.
    one: sys::napi_value,
    undefined: sys::napi_value,
}

impl Settlers {
    /// Settles call `id` with `value` (a JS value, or the failure).
    #[allow(unsafe_code)]
    fn one(&self, env: sys::napi_env, id: u64, value: Result<sys::napi_value, Failure>) {
        let (ok, v) = match value {
            Ok(v) => (true, v),
            Err(f) => (false, f.error_value(env)),
        };
        // SAFETY: on the JS thread, inside the caller's handle scope.
        unsafe {
            let mut args = [ptr::null_mut(); 3];
            sys::napi_create_double(env, id as f64, &mut args[0]);
            sys::napi_get_boolean(env, ok, &mut args[1]);
            args[2] = v;
            let mut out = ptr::null_mut();
            if sys::napi_call_function(env, self.undefined, self.one, 3, args.as_ptr(), &mut out)
                != sys::Status::napi_ok
            {
                clear_exception(env);
            }
        }
    }

    /// Settles the guessed values written in `batch` (`[id,value,…`) by
    /// one `settleBatch` call; false when they did not parse (nothing is
    /// settled then).
    #[allow(unsafe_code)]
    fn batch(&self, env: sys::napi_env, batch: &mut Vec<u8>, count: usize) -> bool {
        batch.push(b',');
        push_u64(batch, count as u64);
        batch.push(b']');
        let Ok(text) = js::json_text(env, batch) else {
            return false;
        };
        let mut out = ptr::null_mut();
        let mut done = false;
        // SAFETY: on the JS thread, inside the caller's handle scope.
        unsafe {
            if sys::napi_call_function(env, self.undefined, self.batch, 1, &text, &mut out)
                == sys::Status::napi_ok
            {
                sys::napi_get_value_bool(env, out, &mut done);
            } else {
                clear_exception(env);
            }
        }
        done
    }
}

/// Takes a pending JS exception out of the way (a settler that threw).
#[allow(unsafe_code)]
fn clear_exception(env: sys::napi_env) {
    let mut exc = ptr::null_mut();
    // SAFETY: on the JS thread.
    unsafe { sys::napi_get_and_clear_last_exception(env, &mut exc) };
}

/// Settles the answers of one read, in their order (JS thread, in a
/// callback scope), through index.js's settlers: the guessed values go
/// into one text `[id,value,id,value,…,count]` that `settleBatch` parses
/// with V8's `JSON.parse` and settles in a loop of JS (one call into JS
/// and one string per read, not a napi crossing per answer; no napi
/// deferred either: index.js holds each call's resolvers). A guess that
/// was wrong cannot parse (what follows a value in its object is
/// `,"name":`, which no array holds), and then each is read exactly.
/// Other answers (errors, `undefined`, values read exactly) go one by one
/// through `settleOne`, after the batch before them.
pub(crate) fn settle_answers(
    env: sys::napi_env,
    rbuf: &[u8],
    done: Vec<(u64, Answer)>,
    batch: &mut Vec<u8>,
) {
    let Some(st) = settlers(env) else {
        // Cannot happen: the connection is only attached where they are.
        return;
    };
    // The answers written into `batch`, for the exact reading if it does
    // not parse.
    let mut group: Vec<(u64, std::ops::Range<usize>, Option<&'static str>)> = Vec::new();
    let flush = |group: &mut Vec<(u64, std::ops::Range<usize>, Option<&'static str>)>,
                 batch: &mut Vec<u8>| {
        if group.is_empty() {
            return;
        }
        if !st.batch(env, batch, group.len()) {
            for (id, line, member) in group.iter() {
                st.one(env, *id, exact(env, &rbuf[line.clone()], *member));
            }
        }
        group.clear();
        batch.clear();
    };
    batch.clear();
    for (id, a) in done {
        match a {
            Answer::Value {
                guess: Some(g),
                line,
                member,
            } => {
                if batch.len() + g.len() > BATCH_BYTES {
                    flush(&mut group, batch);
                }
                batch.push(if group.is_empty() { b'[' } else { b',' });
                push_u64(batch, id);
                batch.push(b',');
                batch.extend_from_slice(&rbuf[g]);
                group.push((id, line, member));
            }
            other => {
                flush(&mut group, batch);
                let value = match other {
                    Answer::Undefined => settle::undefined(env),
                    Answer::Fail(f) => Err(f),
                    Answer::Value { line, member, .. } => exact(env, &rbuf[line], member),
                };
                st.one(env, id, value);
            }
        }
    }
    flush(&mut group, batch);
}

/// Rejects calls `ids` with `failure` (the connection ended; JS thread,
/// in a callback scope).
pub(crate) fn settle_failed(env: sys::napi_env, ids: &[u64], failure: impl Fn() -> Failure) {
    if let Some(st) = settlers(env) {
        for &id in ids {
            st.one(env, id, Err(failure()));
        }
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
    let a = envelope::answer(line).map_err(bad)?;
    let result = a.result.ok_or_else(|| bad("no result"))?;
    let v = match member {
        None => result,
        Some(k) => envelope::member(result, k).ok_or_else(|| bad(k))?,
    };
    Ok(js::parse_json_bytes(env, v)?)
}

/// Where `part` (a slice of `buf`) lies in `buf`.
pub(crate) fn offset(buf: &[u8], part: &[u8]) -> std::ops::Range<usize> {
    let start = part.as_ptr() as usize - buf.as_ptr() as usize;
    start..start + part.len()
}
