//! The canonical transport: NDJSON on stdin/stdout (logs go to stderr).
//!
//! The calling thread reads and dispatches lines; a writer thread drains the
//! connection's outbox, serializes, and flushes only when the outbox is
//! empty, so a burst of responses costs one write system call, not one each.

use super::ndjson::{write_outgoing, Line, LineReader};
use crate::broker::Broker;
use crate::delivery::Outbox;
use crate::session::Session;
use a2a_proto::limits::{MAX_FRAME_BYTES, OUTBOX_EVENT_BOUND};
use std::io::{self, BufWriter, Read, Write};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Starts the writer thread for `outbox` onto `out`.
pub fn spawn_writer<W: Write + Send + 'static>(outbox: Arc<Outbox>, out: W) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("a2a-stdout".into())
        .spawn(move || {
            let mut w = BufWriter::with_capacity(64 * 1024, out);
            let mut items = Vec::new();
            let mut line = Vec::with_capacity(64 * 1024);
            let mut broken = false;
            while outbox.drain_blocking(&mut items) {
                loop {
                    for item in items.drain(..) {
                        line.clear();
                        let encoded = write_outgoing(&mut line, &item);
                        debug_assert!(encoded.is_ok(), "encoding into memory cannot fail");
                        if !broken && w.write_all(&line).is_err() {
                            // The reader is gone; keep draining so nobody blocks.
                            broken = true;
                        }
                    }
                    if line.capacity() > 4 << 20 {
                        line = Vec::with_capacity(64 * 1024);
                    }
                    outbox.drain_now(&mut items);
                    if items.is_empty() {
                        break;
                    }
                }
                if !broken && w.flush().is_err() {
                    broken = true;
                }
            }
            let _ = w.flush();
        })
        .expect("spawn stdout writer")
}

/// Serves one NDJSON connection on `input` until end of file; `outbox` is
/// drained by a writer started with [`spawn_writer`].
pub fn serve_lines<R: Read>(broker: &Broker, input: R, outbox: Arc<Outbox>) -> Session {
    let mut session = broker.session(outbox);
    let mut lines = LineReader::new(
        io::BufReader::with_capacity(256 * 1024, input),
        MAX_FRAME_BYTES,
    );
    loop {
        match lines.next_line() {
            Ok(Line::Line(l)) => broker.handle_line(&mut session, l),
            Ok(Line::TooLarge) => broker.frame_too_large(&session),
            Ok(Line::Eof) | Err(_) => break,
        }
    }
    session
}

/// Creates the stdio outbox.
pub fn outbox() -> Arc<Outbox> {
    Arc::new(Outbox::new(OUTBOX_EVENT_BOUND))
}
