//! JS-thread helpers every other module may use: the lowest layer of the
//! addon (it imports nothing of this crate). `JSON.parse` through V8 with
//! the function looked up once per environment.

use napi::sys;
use std::cell::RefCell;
use std::ptr;

/// Why a JS-thread helper failed (the callers turn it into their error).
#[derive(Debug)]
pub(crate) struct JsError(pub(crate) &'static str);

thread_local! {
    /// `(env, reference to JSON.parse)` of this thread's environment.
    static JSON_PARSE: RefCell<Option<(sys::napi_env, sys::napi_ref)>> = const { RefCell::new(None) };
}

/// A reference to `JSON.parse` of `env` (made on first use).
#[allow(unsafe_code)]
fn json_parse_ref(env: sys::napi_env) -> Result<sys::napi_ref, JsError> {
    if let Some((e, r)) = JSON_PARSE.with(|c| *c.borrow()) {
        if e == env {
            return Ok(r);
        }
    }
    // SAFETY: on the JS thread of `env` (every caller is); the values are
    // used at once and the function is kept by a reference.
    unsafe {
        let mut global = ptr::null_mut();
        let mut json = ptr::null_mut();
        let mut parse = ptr::null_mut();
        let mut r = ptr::null_mut();
        if sys::napi_get_global(env, &mut global) != sys::Status::napi_ok
            || sys::napi_get_named_property(env, global, c"JSON".as_ptr(), &mut json)
                != sys::Status::napi_ok
            || sys::napi_get_named_property(env, json, c"parse".as_ptr(), &mut parse)
                != sys::Status::napi_ok
            || sys::napi_create_reference(env, parse, 1, &mut r) != sys::Status::napi_ok
        {
            return Err(JsError("cannot find JSON.parse"));
        }
        JSON_PARSE.with(|c| *c.borrow_mut() = Some((env, r)));
        Ok(r)
    }
}

/// `JSON.parse(s)` through V8 (JS thread only).
pub(crate) fn parse_json(env: sys::napi_env, s: &str) -> Result<sys::napi_value, JsError> {
    parse_json_bytes(env, s.as_bytes())
}

/// `JSON.parse` of UTF-8 bytes through V8 (JS thread only; invalid UTF-8
/// is replaced, as V8 reads it).
#[allow(unsafe_code)]
pub(crate) fn parse_json_bytes(env: sys::napi_env, s: &[u8]) -> Result<sys::napi_value, JsError> {
    let parse_ref = json_parse_ref(env)?;
    // SAFETY: on the JS thread, with live handles.
    unsafe {
        let js = json_text(env, s)?;
        let mut parse = ptr::null_mut();
        sys::napi_get_reference_value(env, parse_ref, &mut parse);
        let mut undefined = ptr::null_mut();
        sys::napi_get_undefined(env, &mut undefined);
        let mut out = ptr::null_mut();
        let args = [js];
        if sys::napi_call_function(env, undefined, parse, 1, args.as_ptr(), &mut out)
            != sys::Status::napi_ok
        {
            let mut exc = ptr::null_mut();
            sys::napi_get_and_clear_last_exception(env, &mut exc);
            return Err(JsError("JSON.parse failed on an answer"));
        }
        Ok(out)
    }
}

/// A JS string of JSON text for V8 to parse (JS thread only). ASCII text
/// (most answers: ids, states, times, English text) is copied as Latin-1,
/// so V8 makes its one-byte string with a copy, not a UTF-8 decode; text
/// with any other byte takes the UTF-8 path (V8 replaces invalid bytes).
#[allow(unsafe_code)]
fn json_text(env: sys::napi_env, s: &[u8]) -> Result<sys::napi_value, JsError> {
    let mut js = ptr::null_mut();
    // SAFETY: on the JS thread; `s` is valid for its length. ASCII is
    // Latin-1 byte for byte.
    let status = unsafe {
        if s.is_ascii() {
            sys::napi_create_string_latin1(env, s.as_ptr().cast(), s.len() as isize, &mut js)
        } else {
            sys::napi_create_string_utf8(env, s.as_ptr().cast(), s.len() as isize, &mut js)
        }
    };
    if status != sys::Status::napi_ok {
        return Err(JsError("cannot create a string"));
    }
    Ok(js)
}

/// A JS string (JS thread only; `undefined`-free: a failure yields null,
/// which napi setters then refuse harmlessly).
#[allow(unsafe_code)]
pub(crate) fn string(env: sys::napi_env, s: &str) -> sys::napi_value {
    let mut v = ptr::null_mut();
    // SAFETY: the caller is on the JS thread.
    unsafe { sys::napi_create_string_utf8(env, s.as_ptr().cast(), s.len() as isize, &mut v) };
    v
}

/// The length of a JS array (JS thread only).
#[allow(unsafe_code)]
pub(crate) fn array_len(env: sys::napi_env, a: sys::napi_value) -> Option<u32> {
    let mut n = 0;
    // SAFETY: on the JS thread; a non-array is an error status.
    (unsafe { sys::napi_get_array_length(env, a, &mut n) } == sys::Status::napi_ok).then_some(n)
}

/// Element `i` of a JS array (JS thread only).
#[allow(unsafe_code)]
pub(crate) fn element(env: sys::napi_env, a: sys::napi_value, i: u32) -> Option<sys::napi_value> {
    let mut v = ptr::null_mut();
    // SAFETY: on the JS thread.
    (unsafe { sys::napi_get_element(env, a, i, &mut v) } == sys::Status::napi_ok).then_some(v)
}
