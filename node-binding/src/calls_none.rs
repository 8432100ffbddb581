//! Where there is no Unix socket to poll (Windows), no calls connection:
//! every call takes the client's connection (see `calls` on Unix).

use crate::settle::Shape;
use a2a_client::proto::call::Call;
use a2a_client::{ClientError, CloseReason};
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi::{sys, Env};
use std::rc::Rc;

pub(crate) type LinkKey = u64;

/// Never made here.
pub(crate) enum Link {}

impl Link {
    pub(crate) fn submit<'env>(
        &self,
        _env: &'env Env,
        _call: Call,
        _shape: Shape,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        match *self {}
    }
    pub(crate) fn close(&self) {
        match *self {}
    }
    pub(crate) fn closed(&self) -> Option<CloseReason> {
        match *self {}
    }
    pub(crate) fn key(&self) -> LinkKey {
        match *self {}
    }
    pub(crate) fn find(_key: LinkKey) -> Option<Rc<Link>> {
        None
    }
}

/// Never attaches.
pub(crate) fn attach(_env: sys::napi_env, _stream: Stream) -> Option<Rc<Link>> {
    None
}

/// No socket to open.
pub(crate) enum Stream {}

pub(crate) fn open(
    _socket: &std::path::Path,
    _secret: &str,
    _io_timeout: std::time::Duration,
) -> Result<Stream, ClientError> {
    Err(ClientError::Protocol(
        "no calls connection on this platform".into(),
    ))
}
