//! Failures as JS sees them: every rejection is an `Error` with
//! - `code`: the JSON-RPC code (a number: `1400` for A2A domain errors,
//!   `-32602` …) when the broker answered with an error, else the client's
//!   error kind as a string (`"closed"`, `"timeout"`, `"io"`, …);
//! - `kind`: always the kind string (`"rpc"` for broker errors;
//!   `a2a_client::ErrorKind::as_str`, plus `"invalid_params"` for
//!   arguments this addon could not read and `"internal"`);
//! - `errorCode`: the `A2A_*` code of a domain error;
//! - `data`: the broker's `data` object, when it sent one.
//!
//! Arguments the addon cannot read (a message that is not a Message) reject
//! with `code` `-32602` and `kind` `"invalid_params"`, the answer the
//! broker would have given to the same value, so callers branch one way.

use crate::js;
use a2a_client::ClientError;
use napi::sys;
use std::ptr;

/// JSON-RPC "invalid params".
const INVALID_PARAMS: i64 = -32602;

/// A rejection, prepared off the JS thread (no JS values inside).
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    kind: &'static str,
    message: String,
    rpc_code: Option<i64>,
    a2a_code: Option<String>,
    data_json: Option<String>,
}

impl Failure {
    /// A fault inside the addon itself.
    pub(crate) fn internal(e: impl std::fmt::Display) -> Failure {
        Failure {
            kind: "internal",
            message: e.to_string(),
            rpc_code: None,
            a2a_code: None,
            data_json: None,
        }
    }

    /// An argument that could not be read as the type the call needs.
    pub(crate) fn invalid(what: &str, e: impl std::fmt::Display) -> Failure {
        Failure {
            kind: "invalid_params",
            message: format!("invalid {what}: {e}"),
            rpc_code: Some(INVALID_PARAMS),
            a2a_code: None,
            data_json: None,
        }
    }

    /// The JS `Error` of this failure (JS thread only).
    #[allow(unsafe_code)]
    pub(crate) fn error_value(&self, env: sys::napi_env) -> sys::napi_value {
        // SAFETY: called on the JS thread with its environment; every
        // handle is created here and used at once.
        unsafe {
            let mut msg = ptr::null_mut();
            sys::napi_create_string_utf8(
                env,
                self.message.as_ptr().cast(),
                self.message.len() as isize,
                &mut msg,
            );
            let mut err = ptr::null_mut();
            sys::napi_create_error(env, ptr::null_mut(), msg, &mut err);
            let code = match self.rpc_code {
                Some(c) => {
                    let mut v = ptr::null_mut();
                    sys::napi_create_int64(env, c, &mut v);
                    v
                }
                None => js::string(env, self.kind),
            };
            sys::napi_set_named_property(env, err, c"code".as_ptr(), code);
            sys::napi_set_named_property(env, err, c"kind".as_ptr(), js::string(env, self.kind));
            if let Some(a) = &self.a2a_code {
                sys::napi_set_named_property(env, err, c"errorCode".as_ptr(), js::string(env, a));
            }
            if let Some(d) = &self.data_json {
                if let Ok(v) = js::parse_json(env, d) {
                    sys::napi_set_named_property(env, err, c"data".as_ptr(), v);
                }
            }
            err
        }
    }
}

impl From<js::JsError> for Failure {
    fn from(e: js::JsError) -> Failure {
        Failure::internal(e.0)
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        let kind = e.kind().as_str();
        match e.rpc() {
            Some(rpc) => Failure {
                kind,
                // A refused secret says whose secret and what to do; other
                // broker errors are the broker's message.
                message: match &e {
                    ClientError::Secret(_) => e.to_string(),
                    _ => rpc.message.clone(),
                },
                rpc_code: Some(rpc.code),
                a2a_code: rpc.a2a_code().map(str::to_owned),
                data_json: rpc.data.as_ref().map(|d| d.to_string()),
            },
            None => Failure {
                kind,
                message: e.to_string(),
                rpc_code: None,
                a2a_code: None,
                data_json: None,
            },
        }
    }
}
