//! Raw napi entry points of the task calls (`get`, `send`, `status`,
//! `artifact`, `cancel`) of an agent that has the loop's calls connection:
//! the same `NativeAgent` methods, reached without napi-rs's method
//! wrapper. That wrapper costs each call a type-tag check of the receiver
//! (a private-symbol lookup), a native-borrow record under a global mutex,
//! and argument conversions through a length query: measured at about a
//! tenth of the JS thread's time per `get` (BENCHMARKS.md "Node addon").
//!
//! The agent is named by its slot number (`NativeAgent::call_slot`, which
//! index.js reads once per agent), not by its JS object: a number cannot
//! name a value of another type, and a slot is emptied when its agent
//! drops, so no type tag is needed. Arguments are read as napi-rs reads
//! them (a string must be a string; `undefined` and `null` are an absent
//! option); one that cannot be read throws, as napi-rs does, and index.js
//! turns the throw into an `invalid_params` rejection.

use crate::agent::{JsPromise, NativeAgent};
use napi::bindgen_prelude::Unknown;
use napi::{sys, Env, JsValue};
use std::ffi::c_char;
use std::ptr;

/// Arguments read at most per call (the slot and four).
const MAX_ARGS: usize = 5;

/// A string argument this long or shorter is read in one napi call, on
/// the stack (ids are 36 bytes); a longer one asks its length first.
const INLINE_STRING: usize = 128;

/// Why an argument could not be read (thrown as a JS `Error`).
struct Bad(String);

/// The call's arguments after the slot.
struct Args {
    env: sys::napi_env,
    argv: [sys::napi_value; MAX_ARGS],
    argc: usize,
}

impl Args {
    fn arg(&self, i: usize) -> Option<sys::napi_value> {
        (i < self.argc).then(|| self.argv[i])
    }

    #[allow(unsafe_code)]
    fn is_absent(&self, v: sys::napi_value) -> bool {
        let mut t = 0;
        // SAFETY: on the JS thread, a live argument.
        unsafe { sys::napi_typeof(self.env, v, &mut t) };
        t == sys::ValueType::napi_undefined || t == sys::ValueType::napi_null
    }

    /// Argument `i` as a string (required).
    fn string(&self, i: usize, what: &str) -> Result<String, Bad> {
        let v = self
            .arg(i)
            .ok_or_else(|| Bad(format!("{what}: a string is required")))?;
        self.read_string(v, what)
    }

    /// Argument `i` as an optional string.
    fn opt_string(&self, i: usize, what: &str) -> Result<Option<String>, Bad> {
        match self.arg(i) {
            Some(v) if !self.is_absent(v) => self.read_string(v, what).map(Some),
            _ => Ok(None),
        }
    }

    #[allow(unsafe_code)]
    fn read_string(&self, v: sys::napi_value, what: &str) -> Result<String, Bad> {
        let not_a_string = || Bad(format!("{what}: expected a string"));
        let mut buf = [0u8; INLINE_STRING + 1];
        let mut len = 0usize;
        // SAFETY: on the JS thread; napi writes at most `buf.len()` bytes
        // (the last a NUL) and says how many it wrote before the NUL.
        let status = unsafe {
            sys::napi_get_value_string_utf8(
                self.env,
                v,
                buf.as_mut_ptr() as *mut c_char,
                buf.len(),
                &mut len,
            )
        };
        if status != sys::Status::napi_ok {
            return Err(not_a_string());
        }
        if len + 4 <= INLINE_STRING {
            // Room was left for any next character (at most 4 bytes; V8
            // writes whole characters only): this is the whole string.
            return String::from_utf8(buf[..len].to_vec()).map_err(|_| not_a_string());
        }
        // Maybe longer: its length, then all of it.
        let mut full = 0usize;
        // SAFETY: as above; a null buffer asks for the length in bytes.
        unsafe { sys::napi_get_value_string_utf8(self.env, v, ptr::null_mut(), 0, &mut full) };
        let mut big = vec![0u8; full + 1];
        // SAFETY: as above, into a buffer of the string's length and a NUL.
        let status = unsafe {
            sys::napi_get_value_string_utf8(
                self.env,
                v,
                big.as_mut_ptr() as *mut c_char,
                big.len(),
                &mut len,
            )
        };
        if status != sys::Status::napi_ok {
            return Err(not_a_string());
        }
        big.truncate(len);
        String::from_utf8(big).map_err(|_| not_a_string())
    }

    /// Argument `i` as an optional number.
    #[allow(unsafe_code)]
    fn opt_f64(&self, i: usize, what: &str) -> Result<Option<f64>, Bad> {
        match self.arg(i) {
            Some(v) if !self.is_absent(v) => {
                let mut n = 0.0;
                // SAFETY: on the JS thread; a non-number is an error status.
                if unsafe { sys::napi_get_value_double(self.env, v, &mut n) }
                    != sys::Status::napi_ok
                {
                    return Err(Bad(format!("{what}: expected a number")));
                }
                Ok(Some(n))
            }
            _ => Ok(None),
        }
    }

    /// Argument `i` as an optional boolean.
    #[allow(unsafe_code)]
    fn opt_bool(&self, i: usize, what: &str) -> Result<Option<bool>, Bad> {
        match self.arg(i) {
            Some(v) if !self.is_absent(v) => {
                let mut b = false;
                // SAFETY: on the JS thread; a non-boolean is an error status.
                if unsafe { sys::napi_get_value_bool(self.env, v, &mut b) } != sys::Status::napi_ok
                {
                    return Err(Bad(format!("{what}: expected a boolean")));
                }
                Ok(Some(b))
            }
            _ => Ok(None),
        }
    }
}

/// Reads the slot and arguments, runs `f` on the agent, returns its value
/// or throws.
#[allow(unsafe_code)]
unsafe fn trampoline(
    env: sys::napi_env,
    info: sys::napi_callback_info,
    f: impl for<'e> FnOnce(&NativeAgent, &'e Env, &Args) -> Result<JsPromise<'e>, Bad>,
) -> sys::napi_value {
    let mut all = [ptr::null_mut(); MAX_ARGS + 1];
    let mut argc = all.len();
    // SAFETY: on the JS thread, in a callback; napi fills at most `argc`.
    unsafe {
        sys::napi_get_cb_info(
            env,
            info,
            &mut argc,
            all.as_mut_ptr(),
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    let mut slot = 0u32;
    let agent = (argc > 0
        // SAFETY: as above; a non-number is an error status.
        && unsafe { sys::napi_get_value_uint32(env, all[0], &mut slot) } == sys::Status::napi_ok)
        .then(|| NativeAgent::by_slot(slot))
        .flatten();
    let Some(agent) = agent else {
        throw(env, "no agent in this slot");
        return ptr::null_mut();
    };
    let mut argv = [ptr::null_mut(); MAX_ARGS];
    argv[..MAX_ARGS].copy_from_slice(&all[1..]);
    let args = Args {
        env,
        argv,
        argc: argc.saturating_sub(1).min(MAX_ARGS),
    };
    let e = Env::from_raw(env);
    let out =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match f(agent, &e, &args) {
            Ok(Ok(v)) => Ok(v.raw()),
            Ok(Err(err)) => Err(err.reason.clone()),
            Err(Bad(m)) => Err(m),
        }));
    match out {
        Ok(Ok(v)) => v,
        Ok(Err(m)) => {
            throw(env, &m);
            ptr::null_mut()
        }
        Err(_) => {
            throw(env, "a2a-node: panic in a call");
            ptr::null_mut()
        }
    }
}

#[allow(unsafe_code)]
fn throw(env: sys::napi_env, message: &str) {
    let msg = std::ffi::CString::new(message.replace('\0', " ")).unwrap_or_default();
    // SAFETY: on the JS thread; a NUL-terminated message.
    unsafe { sys::napi_throw_error(env, ptr::null(), msg.as_ptr()) };
}

/// A raw entry point: `$name(slot, ...)` reads its arguments in
/// `trampoline` and runs the agent's method of the same name.
macro_rules! entry {
    ($(#[$doc:meta])* $name:ident, |$a:ident, $env:ident, $x:ident| $call:expr) => {
        $(#[$doc])*
        #[allow(unsafe_code)]
        unsafe extern "C" fn $name(
            env: sys::napi_env,
            info: sys::napi_callback_info,
        ) -> sys::napi_value {
            // SAFETY: napi's callback arguments.
            unsafe { trampoline(env, info, |$a, $env, $x| Ok($call)) }
        }
    };
}

entry!(
    /// `get(slot, id, historyLength)`
    get,
    |a, env, x| a.get(env, x.string(0, "id")?, x.opt_f64(1, "historyLength")?)
);
entry!(
    /// `send(slot, message, configuration)`
    send,
    |a, env, x| a.send(
        env,
        x.string(0, "message")?,
        x.opt_string(1, "configuration")?
    )
);
entry!(
    /// `status(slot, id, state, message)`
    status,
    |a, env, x| a.status(
        env,
        x.string(0, "id")?,
        x.string(1, "state")?,
        x.opt_string(2, "message")?
    )
);
entry!(
    /// `artifact(slot, id, artifact, append, lastChunk)`
    artifact,
    |a, env, x| a.artifact(
        env,
        x.string(0, "id")?,
        x.string(1, "artifact")?,
        x.opt_bool(2, "append")?,
        x.opt_bool(3, "lastChunk")?
    )
);
entry!(
    /// `cancel(slot, id, message)`
    cancel,
    |a, env, x| a.cancel(env, x.string(0, "id")?, x.opt_string(1, "message")?)
);

type Entry = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

/// The entry points as one object of functions (`{get, send, status,
/// artifact, cancel}`), made once by index.js.
#[allow(unsafe_code)]
pub(crate) fn entries(env: sys::napi_env) -> Result<sys::napi_value, &'static str> {
    let table: [(&std::ffi::CStr, Entry); 5] = [
        (c"get", get),
        (c"send", send),
        (c"status", status),
        (c"artifact", artifact),
        (c"cancel", cancel),
    ];
    let mut obj = ptr::null_mut();
    // SAFETY: on the JS thread, from a JS call; each value is used at once.
    unsafe {
        if sys::napi_create_object(env, &mut obj) != sys::Status::napi_ok {
            return Err("cannot make the raw calls");
        }
        for (name, f) in table {
            let mut func = ptr::null_mut();
            if sys::napi_create_function(
                env,
                name.as_ptr(),
                name.to_bytes().len() as isize,
                Some(f),
                ptr::null_mut(),
                &mut func,
            ) != sys::Status::napi_ok
                || sys::napi_set_named_property(env, obj, name.as_ptr(), func)
                    != sys::Status::napi_ok
            {
                return Err("cannot make the raw calls");
            }
        }
    }
    Ok(obj)
}

/// `rawCalls()`: the entry points above, for index.js (made once).
#[napi_derive::napi]
pub fn raw_calls(env: Env) -> napi::Result<Unknown<'static>> {
    let obj = entries(env.raw()).map_err(|m| napi::Error::new(napi::Status::GenericFailure, m))?;
    // SAFETY: an object just made in `env`.
    #[allow(unsafe_code)]
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), obj) })
}
