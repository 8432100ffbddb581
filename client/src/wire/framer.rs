//! Bytes in, whole frames out: the buffer between a driver's reads and the
//! codec. A driver either reads straight into [`Framer::read_buf`] (no copy:
//! frames are decoded where the read put them) or hands over bytes it read
//! elsewhere with [`Framer::feed`].

use super::{Codec, WireError};
use a2a_proto::limits::A2A_MAX_OUT_FRAME_BYTES;
use std::marker::PhantomData;

/// A buffer that grew past this for one large frame is given back once
/// that frame is consumed, so one huge frame does not pin its memory for
/// the connection's life.
const KEEP_BYTES: usize = 1 << 20;

/// The frames of one connection's incoming bytes, in codec `C`.
#[derive(Debug)]
pub struct Framer<C: Codec> {
    /// Initialised bytes: `buf[start..end]` is data not yet framed,
    /// `buf[end..]` room for the next read.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// How much of `buf[start..end]` the codec already searched.
    scanned: usize,
    max: usize,
    /// The frame handed out last: consumed when the next one is asked for.
    taken: usize,
    _codec: PhantomData<C>,
}

impl<C: Codec> Default for Framer<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Codec> Framer<C> {
    /// Frames of at most `A2A_MAX_OUT_FRAME_BYTES`, the largest the broker
    /// sends (docs/protocol.md §1 Framing, §9 Bounds).
    pub fn new() -> Self {
        Self::with_max(A2A_MAX_OUT_FRAME_BYTES)
    }

    /// Frames of at most `max` bytes (payload, or line without its end).
    pub fn with_max(max: usize) -> Self {
        Framer {
            buf: Vec::new(),
            start: 0,
            end: 0,
            scanned: 0,
            max,
            taken: 0,
            _codec: PhantomData,
        }
    }

    /// The bound in force.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Bytes received and not yet handed out as frames.
    pub fn buffered(&self) -> usize {
        self.end - self.start - self.taken
    }

    /// Copies `bytes` in.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.read_buf(bytes.len())[..bytes.len()].copy_from_slice(bytes);
        self.filled(bytes.len());
    }

    /// Room for a read of at least `at_least` bytes (more when a frame
    /// known to be longer is under way); report what was read with
    /// [`Framer::filled`]. Frames handed out before are invalid after this.
    pub fn read_buf(&mut self, at_least: usize) -> &mut [u8] {
        self.consume_taken();
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.scanned = 0;
        }
        let left = self.end - self.start;
        if self.buf.len() > KEEP_BYTES && left + at_least <= KEEP_BYTES / 2 {
            // The large frame is gone: what is left moves to a small buffer.
            let mut small = Vec::with_capacity(left + at_least);
            small.extend_from_slice(&self.buf[self.start..self.end]);
            self.buf = small;
            self.start = 0;
            self.end = left;
        }
        if self.buf.len() - self.end < at_least {
            // Move what is left to the front before growing.
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < at_least {
                self.buf.resize(self.end + at_least, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes were read into the front of [`Framer::read_buf`].
    pub fn filled(&mut self, n: usize) {
        assert!(
            self.end + n <= self.buf.len(),
            "filled past the read buffer"
        );
        self.end += n;
    }

    fn consume_taken(&mut self) {
        self.start += self.taken;
        self.taken = 0;
    }

    /// The next whole frame, if all of it is here (its payload, or its line
    /// without the line end). It stays valid until the next call on the
    /// framer. A frame past the bound is an error; so is every later call,
    /// since neither framing resynchronises on a client's side.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, WireError> {
        self.consume_taken();
        loop {
            let data = &self.buf[self.start..self.end];
            let Some((range, used)) = C::split(data, &mut self.scanned, self.max)? else {
                return Ok(None);
            };
            if C::is_filler(&data[range.clone()]) {
                self.start += used;
                continue;
            }
            self.taken = used;
            let at = self.start;
            return Ok(Some(&self.buf[at + range.start..at + range.end]));
        }
    }
}
