//! The consumer side of the shared-memory event ring (PROTOCOL.md §1.3):
//! when the broker grants the ring asked for with
//! `ClientOptions::event_ring_bytes`, the notifications of this
//! connection's push agents arrive there instead of on the socket, and one
//! thread of the client ("a2a-client-ring") hands them to the same demux
//! the socket reader feeds. Handlers, `try_events`, `events()` and `wait`
//! therefore see no difference, except that a handler fed from the ring
//! runs on this thread (blocking calls from it work: their answers come
//! through the socket reader).
//!
//! Records are the payloads of the binary codec's `ServerFrame`s (without
//! the length prefix: the ring has its own). A lag record (the broker's
//! overflow queue dropped events) becomes an `a2a.lagged` for every agent
//! of the connection, before the next event.
//!
//! An idle ring costs no CPU: the thread parks on the ring's futex and
//! wakes only for a record, or every `CLOSE_CHECK` to see whether the
//! connection ended (a wake-up a few times a second, nothing else).

use crate::conn::Shared;
use crate::error::ClientError;
use a2a_proto::binary::{decode_server_payload, ServerFrame};
use a2a_ring::{Record, Segment};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a parked ring thread looks whether its connection ended.
const CLOSE_CHECK: Duration = Duration::from_millis(200);

/// Records handed over per drain, so a flood cannot keep the close check away.
const DRAIN_BATCH: usize = 4096;

/// Opens the ring `name` of `bytes` and starts its reader thread.
pub(crate) fn start(
    shared: Arc<Shared>,
    name: &str,
    bytes: usize,
) -> Result<JoinHandle<()>, ClientError> {
    let mut consumer = Segment::open(name, bytes)
        .map_err(|e| ClientError::Io(std::io::Error::other(format!("event ring {name}: {e}"))))?;
    let t = std::thread::Builder::new()
        .name("a2a-client-ring".into())
        .stack_size(256 * 1024)
        .spawn(move || loop {
            if shared.closed().is_some() {
                return;
            }
            if consumer.wait(Some(CLOSE_CHECK)).is_err() {
                // A corrupt ring: the socket still works; events stop.
                return;
            }
            let drained = consumer.drain(DRAIN_BATCH, |rec| match rec {
                Record::Event(payload) => {
                    if let Ok(ServerFrame::Notification(n)) =
                        decode_server_payload::<ServerFrame>(payload)
                    {
                        shared.demux.deliver(n);
                    }
                }
                Record::Lagged(dropped) => shared.demux.lagged_all(dropped),
            });
            if drained.is_err() {
                return;
            }
        })?;
    Ok(t)
}
