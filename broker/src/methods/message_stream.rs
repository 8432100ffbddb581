//! `a2a.message.stream` (docs/protocol.md §5 Methods): `a2a.message.send`
//! that also sends the caller the task's status as an event; never blocks.

use super::{message_send, WriteMethod};
use crate::core::CoreError;
use crate::engine::{Effects, WriteCtx};
use a2a_proto::params::SendParams;

pub(crate) struct Handler;

impl WriteMethod for Handler {
    type Params = SendParams;

    fn run(p: SendParams, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
        message_send::send(cx, p, true)
    }
}
