//! The consumer side of the shared-memory event ring (docs/protocol.md §1
//! Framing): when the broker grants the ring asked for with
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
//!
//! Corruption is never silent (docs/protocol.md §1 Framing, the event
//! ring). A ring the consumer finds corrupt (an impossible index, a
//! malformed record header: `RingError`), or a record that is not a
//! notification frame, ends the ring: its later
//! events could never arrive, and the protocol has no call to move a
//! connection's events back to the socket. So the thread closes the
//! connection with [`CloseReason::EventRing`] saying why: every waiting
//! and later call fails with `ClientError::Closed` carrying it, every
//! agent's `wait`, `try_events` stream and `events()` stream ends with it,
//! and [`crate::Client::close_reason`] reports it. (Only a process of the
//! same user can write the segment; see SECURITY.md.)

use crate::error::{ClientError, CloseReason};
use crate::shared::Shared;
use crate::wire::{Binary, Codec, Inbound, WireError};
use a2a_ring::{Record, Segment};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a parked ring thread looks whether its connection ended.
const CLOSE_CHECK: Duration = Duration::from_millis(200);

/// Records handed over per drain, so a flood cannot keep the close check away.
const DRAIN_BATCH: usize = 4096;

/// Opens the ring `name` of `bytes` and starts its reader thread. A ring
/// that cannot be opened (not private, wrong size, bad header) fails the
/// connect with an error naming it.
pub(crate) fn start(
    shared: Arc<Shared>,
    name: &str,
    bytes: usize,
) -> Result<JoinHandle<()>, ClientError> {
    let mut consumer = Segment::open(name, bytes).map_err(|e| {
        ClientError::Io(std::io::Error::other(format!(
            "the event ring {name} the broker granted is unusable: {e}"
        )))
    })?;
    let name = name.to_owned();
    let t = std::thread::Builder::new()
        .name("a2a-client-ring".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            let failure = loop {
                if shared.closed().is_some() {
                    return;
                }
                if let Err(e) = consumer.wait(Some(CLOSE_CHECK)) {
                    break e.to_string();
                }
                let mut bad_record = None;
                let drained = consumer.drain(DRAIN_BATCH, |rec| match rec {
                    Record::Event(payload) => match Binary::decode(payload) {
                        Ok(Inbound::Event(n)) => shared.demux.deliver(n),
                        Ok(Inbound::Answer { .. }) | Err(WireError::Fatal(_)) => {
                            bad_record.get_or_insert_with(|| {
                                "a ring record that is not a notification".to_owned()
                            });
                        }
                        Err(e) => {
                            bad_record.get_or_insert_with(|| {
                                format!("a ring record that is not a frame: {e}")
                            });
                        }
                    },
                    Record::Lagged(dropped) => shared.demux.lagged_all(dropped),
                });
                if let Err(e) = drained {
                    break e.to_string();
                }
                if let Some(why) = bad_record {
                    break why;
                }
            };
            shared.close(CloseReason::EventRing(format!("{name}: {failure}")));
        })?;
    Ok(t)
}
