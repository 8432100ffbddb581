//! The wire core: the one codec and demultiplexer of the broker's local
//! protocol (docs/protocol.md §1 Framing), sans I/O. It encodes calls into
//! a caller's buffer, splits the bytes a caller read into whole frames, and
//! matches answers to the calls waiting for them; it owns no socket, no
//! thread and no runtime, so any driver (this crate's threads, the
//! gateway's tokio tasks, the Node addon's event loop, test harnesses)
//! feeds it bytes and acts on what comes out.
//!
//! - [`Codec`]: one framing of §1, [`Binary`] frames or [`Ndjson`] lines:
//!   how a request is encoded, how frames are split off a buffer, how a
//!   frame is read as an answer or an event.
//! - [`Framer`]: bytes in, whole frames out, each within a bound (the
//!   broker's `A2A_MAX_OUT_FRAME_BYTES` unless the driver sets another); a
//!   frame past it is a [`WireError`] the driver turns into a close reason.
//! - [`Calls`]: the calls waiting for an answer, by id, generic over what
//!   the driver keeps per call; closed once, with the first reason.
//! - [`Session`]: all three for a driver that owns its connection from one
//!   thread: `call` encodes and registers, `feed` takes bytes, `poll`
//!   yields answers (with their waiters) and events in the broker's order.
//!   Drivers that share a connection between threads use the pieces, each
//!   under the lock that suits it.
//! - [`json`]: a scanner of one NDJSON answer's envelope (its `id`, where
//!   its `result` or `error` lies) that never builds the value.

mod calls;
mod codec;
mod error;
mod framer;
pub mod json;
mod session;

#[cfg(test)]
mod tests;

pub use calls::Calls;
pub use codec::{Binary, Codec, Inbound, Line, Ndjson};
pub use error::WireError;
pub use framer::Framer;
pub use session::{Polled, Session};

/// The fuzz target's entry point (`fuzz/fuzz_targets/wire.rs`): arbitrary
/// bytes, in chunks whose size the first byte picks, through both framers
/// (with a small bound, so oversized frames are exercised too) and both
/// decoders, and the JSON envelope scanner. Must never panic. Not part of
/// the supported surface.
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let Some((&first, data)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(first % 64) + 1;
    let max = 4096;
    let mut binary: Session<Binary, ()> = Session::with_framer(Framer::with_max(max));
    let mut ndjson: Session<Ndjson, ()> = Session::with_framer(Framer::with_max(max));
    let (mut binary_ok, mut ndjson_ok) = (true, true);
    for piece in data.chunks(chunk) {
        if binary_ok {
            binary.feed(piece);
            binary_ok = drain(&mut binary);
        }
        if ndjson_ok {
            let room = ndjson.read_buf(piece.len());
            room[..piece.len()].copy_from_slice(piece);
            ndjson.filled(piece.len());
            ndjson_ok = drain(&mut ndjson);
        }
    }
    let _ = json::envelope(data);
    let _ = json::answer_quick(data);
    let _ = json::member_quick(data, "result");
    let _ = json::member(data, "id");
}

/// Polls until nothing is left; false once the session must close.
fn drain<C: Codec>(s: &mut Session<C, ()>) -> bool {
    loop {
        let e = match s.poll() {
            Ok(Some(_)) => continue,
            Ok(None) => return true,
            Err(e) => e,
        };
        s.close(e.close_reason());
        return false;
    }
}
