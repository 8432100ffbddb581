//! NDJSON framing (docs/protocol.md §1 Framing): the async line reader of socket
//! connections (a thin wrapper over `a2a_proto::lines::Splitter`, whose
//! blocking `LineReader` serves stdio), and writing the outbox's typed
//! items as JSON lines.

use crate::delivery::Outgoing;
use a2a_proto::jsonrpc::{write_notification, write_response, write_response_body};
use a2a_proto::limits::A2A_MAX_OUT_FRAME_BYTES;
use a2a_proto::lines::Splitter;
pub(crate) use a2a_proto::lines::{Line, LineReader};
use a2a_proto::types::Notification;
use std::io;

/// The async twin of `a2a_proto::lines::LineReader`, for socket connections.
pub struct AsyncLineReader<R> {
    inner: R,
    split: Splitter,
}

impl<R: tokio::io::AsyncBufRead + Unpin> AsyncLineReader<R> {
    pub fn new(inner: R, max: usize) -> Self {
        Self {
            inner,
            split: Splitter::new(max),
        }
    }

    /// Changes the line bound from the next line on; `eager` reports a
    /// line over it as soon as it passes the bound (before a handshake).
    pub fn set_max(&mut self, max: usize, eager: bool) {
        self.split.set_max(max, eager);
    }

    /// The next line; same rules as `LineReader::next_line`.
    pub async fn next_line(&mut self) -> io::Result<Line<'_>> {
        use tokio::io::AsyncBufReadExt;
        self.split.start();
        loop {
            let avail = self.inner.fill_buf().await?;
            let (used, done) = self.split.take(avail);
            self.inner.consume(used);
            if done {
                return Ok(self.split.done());
            }
        }
    }
}

/// Appends one outbox item as a JSON line (a batch as one array line),
/// never longer than `A2A_MAX_OUT_FRAME_BYTES` (§1 Framing, §9 Bounds): a response that
/// would be is answered `-32603` instead, and in a batch each response that
/// would take the reply past the bound is replaced by `-32600`.
pub fn write_outgoing(out: &mut Vec<u8>, item: &Outgoing) -> io::Result<()> {
    let start = out.len();
    match item {
        Outgoing::Response(r) => {
            write_response(out, &r.id, r.result.as_ref())?;
            if out.len() - start > A2A_MAX_OUT_FRAME_BYTES {
                out.truncate(start);
                write_response::<_, ()>(out, &r.id, Err(&crate::rpc_errors::response_too_large()))?;
            }
            Ok(())
        }
        Outgoing::Batch(rs) => {
            out.push(b'[');
            for (i, r) in rs.iter().enumerate() {
                let at = out.len();
                if i > 0 {
                    out.push(b',');
                }
                write_response_body(out, &r.id, r.result.as_ref())?;
                // Room for the closing `]\n` and for the remaining
                // responses' replacements, which are small.
                if out.len() - start + 2 + 256 * (rs.len() - i) > A2A_MAX_OUT_FRAME_BYTES {
                    out.truncate(at);
                    if i > 0 {
                        out.push(b',');
                    }
                    let e = crate::rpc_errors::batch_reply_too_large();
                    write_response_body::<_, ()>(out, &r.id, Err(&e))?;
                }
            }
            out.extend_from_slice(b"]\n");
            Ok(())
        }
        Outgoing::Fatal(e) => write_response::<_, ()>(out, &a2a_proto::jsonrpc::Id::Null, Err(e)),
        Outgoing::Event(n) => {
            match &**n {
                Notification::TaskEvent(p) => {
                    write_notification(out, a2a_proto::methods::TASK_EVENT, p)?
                }
                Notification::Push(p) => write_notification(out, a2a_proto::methods::PUSH, p)?,
                Notification::Lagged(p) => write_notification(out, a2a_proto::methods::LAGGED, p)?,
                Notification::LeaseReleased(p) => {
                    write_notification(out, a2a_proto::methods::LEASE_RELEASED, p)?
                }
            }
            // The task bounds keep every event far below this; one that is
            // not is never written (a client may resubscribe for it).
            if out.len() - start > A2A_MAX_OUT_FRAME_BYTES {
                out.truncate(start);
            }
            Ok(())
        }
    }
}
