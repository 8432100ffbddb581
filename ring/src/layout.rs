//! The segment layout shared by both processes: the header (identity, the
//! head and tail indices, the eventcount words) and the record framing in the
//! data area behind it.
//!
//! ```text
//! offset   0  magic u64 | version u32 | header_bytes u32 | capacity u64   (written once by the creator)
//! offset  64  head u64      byte position one past the last published record (producer writes)
//! offset 128  tail u64      byte position one past the last released record  (consumer writes)
//! offset 192  epoch u32     the eventcount word the consumer futex-waits on  (producer bumps)
//! offset 256  sleeping u64  the consumer's park ticket while it parks, else 0 (consumer writes, producer reads)
//! offset 320  dropped u64   events dropped by the producer's overflow queue   (diagnostics only)
//! offset 384  space u32     the reverse eventcount word the producer waits on (consumer bumps)
//! offset 448  waiting u64   the producer's wait ticket while it waits for room, else 0 (producer writes, consumer reads)
//! offset 512  data area, `capacity` bytes (a power of two)
//! ```
//!
//! `head` and `tail` are free-running byte counters (never masked in the
//! header; `u64` does not wrap in practice), so `head - tail` is the number of
//! bytes in use and the ring never confuses full with empty.
//!
//! A record is an 8-byte header, `len: u32 LE | kind: u8 | 3 zero bytes`,
//! then `len` payload bytes, padded with zeroes to a multiple of 8. Records
//! therefore start at multiples of 8 and a record header never straddles the
//! end of the data area; a payload that reaches the end continues at offset 0
//! (a split copy, not a padding record, so any record up to the whole
//! capacity fits into an empty ring).

use crate::sync::{AtomicU32, AtomicU64, Line, Ordering};

/// `b"A2ARING\0"` read as a little-endian `u64`.
pub const MAGIC: u64 = u64::from_le_bytes(*b"A2ARING\0");
/// The layout version; a consumer refuses any other. Version 2 added the
/// reverse eventcount (`space`, `waiting`): a consumer that did not signal
/// freed space would leave a waiting producer's backlog stuck.
pub const VERSION: u32 = 2;
/// Bytes reserved for the header; the data area starts here.
pub const HEADER_BYTES: usize = 512;
/// Bytes of the per-record header (`len`, `kind`, reserved).
pub const RECORD_HEADER_BYTES: usize = 8;
/// The smallest data area [`ring_capacity`] grants.
pub const MIN_CAPACITY: usize = 4096;
/// The largest data area [`ring_capacity`] grants (a bound on what one client
/// can make the broker map).
pub const MAX_CAPACITY: usize = 256 << 20;

/// Record kind: an event payload (the socket's binary frame encoding).
pub(crate) const KIND_EVENT: u8 = 1;
/// Record kind: a lag marker whose 8-byte LE payload is the number of events
/// the producer dropped just before the next record.
pub(crate) const KIND_LAG: u8 = 2;

/// The data-area size granted for a request of `requested` bytes: clamped to
/// [`MIN_CAPACITY`]..=[`MAX_CAPACITY`] and rounded up to a power of two (so
/// that positions are masked, never divided).
pub fn ring_capacity(requested: usize) -> usize {
    requested
        .clamp(MIN_CAPACITY, MAX_CAPACITY)
        .next_power_of_two()
        .min(MAX_CAPACITY)
}

/// The bytes a record of `payload_len` bytes occupies in the data area, or
/// `None` if that does not fit in a `u32` length.
pub(crate) fn framed_len(payload_len: usize) -> Option<usize> {
    if payload_len > u32::MAX as usize - 8 {
        return None;
    }
    Some(RECORD_HEADER_BYTES + ((payload_len + 7) & !7))
}

/// Encodes a record header.
pub(crate) fn encode_record_header(len: u32, kind: u8) -> [u8; RECORD_HEADER_BYTES] {
    let l = len.to_le_bytes();
    [l[0], l[1], l[2], l[3], kind, 0, 0, 0]
}

/// Decodes a record header: `(len, kind)`, or `None` when its reserved bytes
/// are not zero (a corrupt ring).
pub(crate) fn decode_record_header(bytes: [u8; RECORD_HEADER_BYTES]) -> Option<(u32, u8)> {
    if bytes[5..] != [0, 0, 0] {
        return None;
    }
    Some((
        u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
        bytes[4],
    ))
}

/// Fields written once by the creator, before the segment's name is handed
/// out. Atomics (read `Relaxed`) rather than plain integers because the other
/// process can write them at any time: a plain read of memory that another
/// party mutates is a data race, an atomic read is just a value to validate.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Ident {
    pub(crate) magic: AtomicU64,
    pub(crate) version: AtomicU32,
    pub(crate) header_bytes: AtomicU32,
    pub(crate) capacity: AtomicU64,
}

/// The shared header. `repr(C)` and cache-line aligned fields: its layout is
/// the wire format between the two processes (see the module doc).
#[derive(Debug)]
#[repr(C)]
pub struct Header {
    pub(crate) ident: Line<Ident>,
    pub(crate) head: Line<AtomicU64>,
    pub(crate) tail: Line<AtomicU64>,
    pub(crate) epoch: Line<AtomicU32>,
    pub(crate) sleeping: Line<AtomicU64>,
    pub(crate) dropped: Line<AtomicU64>,
    pub(crate) space: Line<AtomicU32>,
    pub(crate) waiting: Line<AtomicU64>,
}

#[cfg(not(loom))]
const _: () = {
    assert!(core::mem::size_of::<Header>() <= HEADER_BYTES);
    assert!(core::mem::align_of::<Header>() == 64);
    assert!(core::mem::offset_of!(Header, head) == 64);
    assert!(core::mem::offset_of!(Header, tail) == 128);
    assert!(core::mem::offset_of!(Header, epoch) == 192);
    assert!(core::mem::offset_of!(Header, sleeping) == 256);
    assert!(core::mem::offset_of!(Header, dropped) == 320);
    assert!(core::mem::offset_of!(Header, space) == 384);
    assert!(core::mem::offset_of!(Header, waiting) == 448);
};

impl Header {
    /// A fresh header for an in-process ring (the shared-memory one is
    /// initialised in place by [`Header::init`]).
    pub(crate) fn new(capacity: usize) -> Self {
        let header = Header {
            ident: Line(Ident {
                magic: AtomicU64::new(0),
                version: AtomicU32::new(0),
                header_bytes: AtomicU32::new(0),
                capacity: AtomicU64::new(0),
            }),
            head: Line(AtomicU64::new(0)),
            tail: Line(AtomicU64::new(0)),
            epoch: Line(AtomicU32::new(0)),
            sleeping: Line(AtomicU64::new(0)),
            dropped: Line(AtomicU64::new(0)),
            space: Line(AtomicU32::new(0)),
            waiting: Line(AtomicU64::new(0)),
        };
        header.init(capacity);
        header
    }

    /// Writes the identity fields. Relaxed: the consumer learns the segment's
    /// name only from the handshake result, which the broker sends after this
    /// returns, and that message (socket write -> read) orders these stores
    /// before the consumer's loads.
    pub(crate) fn init(&self, capacity: usize) {
        let ident = &self.ident.0;
        ident.capacity.store(capacity as u64, Ordering::Relaxed);
        ident
            .header_bytes
            .store(HEADER_BYTES as u32, Ordering::Relaxed);
        ident.version.store(VERSION, Ordering::Relaxed);
        ident.magic.store(MAGIC, Ordering::Relaxed);
    }

    /// Checks the identity fields against what the opener expects.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn validate(&self, capacity: usize) -> Result<(), HeaderError> {
        let ident = &self.ident.0;
        // SYNC POINT (none needed): Relaxed, see `init`.
        if ident.magic.load(Ordering::Relaxed) != MAGIC {
            return Err(HeaderError::BadMagic);
        }
        let version = ident.version.load(Ordering::Relaxed);
        if version != VERSION {
            return Err(HeaderError::BadVersion(version));
        }
        if ident.header_bytes.load(Ordering::Relaxed) != HEADER_BYTES as u32 {
            return Err(HeaderError::BadLayout);
        }
        let found = ident.capacity.load(Ordering::Relaxed);
        if found != capacity as u64 {
            return Err(HeaderError::CapacityMismatch {
                expected: capacity,
                found,
            });
        }
        Ok(())
    }
}

/// Why a segment's header was refused on open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The first word is not [`MAGIC`]: not an a2a event ring.
    #[error("not an a2a event ring (bad magic)")]
    BadMagic,
    /// A layout version this build does not speak.
    #[error("unsupported ring layout version {0}")]
    BadVersion(u32),
    /// The recorded header size differs from [`HEADER_BYTES`].
    #[error("unexpected ring header size")]
    BadLayout,
    /// The recorded capacity is not the one the handshake announced.
    #[error("ring capacity mismatch: expected {expected}, found {found}")]
    CapacityMismatch { expected: usize, found: u64 },
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_clamped_and_a_power_of_two() {
        assert_eq!(ring_capacity(0), MIN_CAPACITY);
        assert_eq!(ring_capacity(5000), 8192);
        assert_eq!(ring_capacity(8192), 8192);
        assert_eq!(ring_capacity(usize::MAX), MAX_CAPACITY);
    }

    #[test]
    fn framing_rounds_to_eight_and_refuses_overflow() {
        assert_eq!(framed_len(0), Some(8));
        assert_eq!(framed_len(1), Some(16));
        assert_eq!(framed_len(8), Some(16));
        assert_eq!(framed_len(9), Some(24));
        assert_eq!(framed_len(u32::MAX as usize), None);
        let h = encode_record_header(300, KIND_LAG);
        assert_eq!(decode_record_header(h), Some((300, KIND_LAG)));
        let mut bad = h;
        bad[6] = 1;
        assert_eq!(decode_record_header(bad), None);
    }
}
