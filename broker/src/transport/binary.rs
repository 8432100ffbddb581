//! Binary frames (docs/protocol.md §1 Framing) on a local-socket connection: the
//! outbox's typed items become `ServerFrame`s (replies rendered by
//! `crate::reply::binary`).

use crate::delivery::Outgoing;
use crate::reply::binary::ResponseRef;
use a2a_proto::binary::{encode_frame, index, ServerFrame};
use a2a_proto::limits::A2A_MAX_OUT_FRAME_BYTES;
use bincode::error::EncodeError;

/// Appends one outbox item as a frame (binary clients send no batches; a
/// batch would be written response by response).
pub fn write_outgoing(out: &mut Vec<u8>, item: &Outgoing) -> Result<(), EncodeError> {
    match item {
        Outgoing::Response(r) => response(out, r),
        Outgoing::Batch(rs) => {
            for r in rs {
                response(out, r)?;
            }
            Ok(())
        }
        Outgoing::Event(n) => {
            let start = out.len();
            encode_frame(&(index::NOTIFICATION, &**n), out)?;
            // Never written past the bound (§1 Framing); the task bounds keep
            // every event far below it.
            if out.len() - start - 4 > A2A_MAX_OUT_FRAME_BYTES {
                out.truncate(start);
            }
            Ok(())
        }
        Outgoing::Fatal(e) => encode_frame(&ServerFrame::Fatal(e.clone()), out),
    }
}

/// One response frame, answered `-32603` instead if it would exceed the
/// outgoing frame bound (§1 Framing).
fn response(out: &mut Vec<u8>, r: &crate::delivery::Response) -> Result<(), EncodeError> {
    let start = out.len();
    encode_frame(&ResponseRef(&r.id, &r.result), out)?;
    if out.len() - start - 4 > A2A_MAX_OUT_FRAME_BYTES {
        out.truncate(start);
        let e = Err(crate::rpc_errors::response_too_large());
        encode_frame(&ResponseRef(&r.id, &e), out)?;
    }
    Ok(())
}
