//! The ring in POSIX shared memory: [`Segment::create`] (the broker: a new
//! object with a random name, owner-only, removed when the segment is
//! dropped), [`Segment::open`] (the client: maps an existing object, removes
//! nothing), and [`cleanup_stale`] (the broker at start-up: removes what a
//! crashed broker left behind).
//!
//! Every page of a new segment is allocated when it is created
//! (`posix_fallocate`), never on first touch: a sparse segment on a full
//! `/dev/shm` would kill the broker with SIGBUS on its first write to an
//! unbacked page. A full `/dev/shm` is [`SegmentError::NoSpace`] at
//! creation instead, which the broker answers by granting no ring.
//!
//! Names are `/<prefix><pid>-<32 hex digits>`: the creator's pid lets the
//! cleanup tell a dead creator's segment from a live one, and 128 random bits
//! make the name unguessable (together with `O_EXCL`, another user cannot
//! pre-create it, and with mode 0600, cannot open it).

// Mapping memory, the shm_* calls and the header cast are the unsafe parts of
// this crate; each block states what it relies on.
#![allow(unsafe_code)]

use crate::consumer::Consumer;
use crate::layout::{ring_capacity, Header, HeaderError, HEADER_BYTES, MAX_CAPACITY, MIN_CAPACITY};
use crate::memory::RingMemory;
use crate::producer::Producer;
use memmap2::{MmapOptions, MmapRaw};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::Duration;

/// The name prefix the broker uses (without the leading `/`).
pub const NAME_PREFIX: &str = "a2a-ring-";

/// Where Linux exposes POSIX shared-memory objects as files.
const SHM_DIR: &str = "/dev/shm";

/// Why a segment could not be created, opened or cleaned up.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    /// The name is not `/<prefix>...` with a valid prefix and no other `/`.
    #[error("invalid segment name or prefix {0:?}")]
    BadName(String),
    /// A system call failed (`shm_open`, `ftruncate`, `fstat`, `mmap`, the
    /// directory listing).
    #[error("{op}: {source}")]
    Os {
        op: &'static str,
        source: std::io::Error,
    },
    /// The announced capacity is not one `create` grants (a power of two
    /// within [`MIN_CAPACITY`]..=[`MAX_CAPACITY`]).
    #[error("invalid ring capacity {0}")]
    BadCapacity(usize),
    /// The object is not owned by this user or is accessible to others: not
    /// ours to trust.
    #[error("segment is not private to this user (uid {uid}, mode {mode:o})")]
    NotPrivate { uid: u32, mode: u32 },
    /// Shared memory is short: the segment's pages could not all be
    /// allocated (`/dev/shm` full: `ENOSPC`, or over a size or memory
    /// limit: `EFBIG`, `ENOMEM`). Nothing is left behind.
    #[error("shared memory is short: cannot allocate {bytes} bytes ({source})")]
    NoSpace { bytes: u64, source: std::io::Error },
    /// The object's size is not the header plus the announced capacity.
    #[error("segment size {found} differs from the expected {expected}")]
    SizeMismatch { expected: u64, found: u64 },
    /// The header is not a valid ring header for that capacity.
    #[error(transparent)]
    Header(#[from] HeaderError),
}

fn os(op: &'static str) -> impl FnOnce(std::io::Error) -> SegmentError {
    move |source| SegmentError::Os { op, source }
}

/// A mapped ring segment. The creator's copy removes the name on drop; the
/// mapping itself stays valid until this value is dropped in each process.
pub struct Segment {
    /// Shared with the [`SpaceWord`]s a [`crate::SpaceWatcher`] waits on,
    /// so that a watched word stays mapped until its watch is gone.
    map: Arc<MmapRaw>,
    /// The POSIX name, with its leading `/`.
    name: String,
    capacity: usize,
    /// True for the creator: drop removes the name.
    owner: bool,
}

// SAFETY: the mapping is plain shared memory; all access goes through the
// header's atomics and the ring protocol's byte ranges (see `RingMemory`).
unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

impl Segment {
    /// Creates a segment of `ring_capacity(bytes)` data bytes under
    /// [`NAME_PREFIX`]. Returns the producer (which owns the segment) and the
    /// name to put in the handshake result.
    pub fn create(bytes: usize) -> Result<(Producer<Segment>, String), SegmentError> {
        Self::create_with_prefix(NAME_PREFIX, bytes)
    }

    /// [`Segment::create`] under another prefix (tests use their own, so that
    /// their cleanup never meets the broker's segments).
    pub fn create_with_prefix(
        prefix: &str,
        bytes: usize,
    ) -> Result<(Producer<Segment>, String), SegmentError> {
        check_prefix(prefix)?;
        let capacity = ring_capacity(bytes);
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).map_err(|e| SegmentError::Os {
            op: "getrandom",
            source: std::io::Error::other(e.to_string()),
        })?;
        let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let name = format!("/{prefix}{}-{hex}", std::process::id());
        let file = shm_open(
            &name,
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
        )?;
        // From here on, a failure must not leave the name behind.
        let segment = (|| {
            let total = (HEADER_BYTES + capacity) as u64;
            // Sets the size and backs every page now: no write to this
            // mapping can fault for want of memory later.
            allocate(&file, total)?;
            let map = MmapOptions::new()
                .len(total as usize)
                .map_raw(&file)
                .map_err(os("mmap"))?;
            Ok::<_, SegmentError>(map)
        })();
        let map = match segment {
            Ok(map) => map,
            Err(e) => {
                unlink(&name);
                return Err(e);
            }
        };
        let segment = Segment {
            map: Arc::new(map),
            name: name.clone(),
            capacity,
            owner: true,
        };
        // The object was just created (its pages are zero-filled), so every
        // header word is 0 until `init` writes the identity.
        segment.header().init(capacity);
        Ok((Producer::new(segment), name))
    }

    /// Opens the segment `name` announced with `bytes` data bytes, checking
    /// that it is private to this user, of the right size, and carries a
    /// valid header. Removes nothing: the creator does.
    pub fn open(name: &str, bytes: usize) -> Result<Consumer<Segment>, SegmentError> {
        if !name.starts_with('/') || name[1..].is_empty() || name[1..].contains('/') {
            return Err(SegmentError::BadName(name.to_owned()));
        }
        if !(MIN_CAPACITY..=MAX_CAPACITY).contains(&bytes) || !bytes.is_power_of_two() {
            return Err(SegmentError::BadCapacity(bytes));
        }
        let file = shm_open(name, libc::O_RDWR | libc::O_CLOEXEC)?;
        let meta = file.metadata().map_err(os("fstat"))?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me || meta.mode() & 0o077 != 0 {
            return Err(SegmentError::NotPrivate {
                uid: meta.uid(),
                mode: meta.mode() & 0o7777,
            });
        }
        let expected = (HEADER_BYTES + bytes) as u64;
        if meta.len() != expected {
            return Err(SegmentError::SizeMismatch {
                expected,
                found: meta.len(),
            });
        }
        let map = MmapOptions::new()
            .len(expected as usize)
            .map_raw(&file)
            .map_err(os("mmap"))?;
        let segment = Segment {
            map: Arc::new(map),
            name: name.to_owned(),
            capacity: bytes,
            owner: false,
        };
        segment.header().validate(bytes)?;
        Ok(Consumer::new(segment))
    }

    /// The POSIX name (with its leading `/`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `space` word of this segment's header, for a
    /// [`crate::SpaceWatcher`] (it keeps the mapping alive).
    pub(crate) fn space_word(&self) -> SpaceWord {
        SpaceWord {
            map: self.map.clone(),
        }
    }

    #[inline]
    fn data(&self) -> *mut u8 {
        // SAFETY: the mapping is HEADER_BYTES + capacity long.
        unsafe { self.map.as_mut_ptr().add(HEADER_BYTES) }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.owner {
            unlink(&self.name);
        }
    }
}

impl RingMemory for Segment {
    fn header(&self) -> &Header {
        // SAFETY: the mapping starts page-aligned (so 64-aligned) and is at
        // least HEADER_BYTES >= size_of::<Header>() long; every field is an
        // atomic integer, valid for any bit pattern, and lives as long as
        // the mapping, i.e. as long as `self`.
        unsafe { &*(self.map.as_ptr() as *const Header) }
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    #[inline]
    fn write(&self, offset: usize, src: &[u8]) {
        // The in-bounds test keeps the copy's length that of `src`, so a
        // fixed-size copy (the 8-byte record header) inlines to one store.
        if offset > self.capacity || src.len() > self.capacity - offset {
            return;
        }
        // SAFETY: `offset + src.len() <= capacity` bytes of the data area;
        // the ring protocol gives these bytes to the producer alone now.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.data().add(offset), src.len()) }
    }

    #[inline]
    fn read(&self, offset: usize, dst: &mut [u8]) {
        if offset > self.capacity || dst.len() > self.capacity - offset {
            return;
        }
        // SAFETY: in bounds as above. A hostile producer could write these
        // bytes while we copy; the copy is then garbage, which the caller
        // validates, never a reference into shared memory.
        unsafe {
            core::ptr::copy_nonoverlapping(self.data().add(offset), dst.as_mut_ptr(), dst.len())
        }
    }

    fn wait(&self, expected: u32, timeout: Option<Duration>) {
        crate::futex::wait(&self.header().epoch.0, expected, timeout)
    }

    fn wake(&self) {
        crate::futex::wake(&self.header().epoch.0)
    }

    fn wait_space(&self, expected: u32, timeout: Option<Duration>) {
        crate::futex::wait(&self.header().space.0, expected, timeout)
    }

    fn wake_space(&self) {
        crate::futex::wake(&self.header().space.0)
    }
}

/// A segment's `space` word (the reverse eventcount the producer waits
/// on), holding the mapping so that the word outlives any wait on it.
#[derive(Clone)]
pub(crate) struct SpaceWord {
    map: Arc<MmapRaw>,
}

impl SpaceWord {
    pub(crate) fn word(&self) -> &crate::sync::AtomicU32 {
        // SAFETY: as in `Segment::header`: the mapping is page-aligned, at
        // least HEADER_BYTES long, and lives as long as `self.map`.
        let header = unsafe { &*(self.map.as_ptr() as *const Header) };
        &header.space.0
    }
}

/// Allocates `len` bytes of `file` (its size becomes `len`), retrying when
/// a signal interrupts; shortage is [`SegmentError::NoSpace`].
fn allocate(file: &File, len: u64) -> Result<(), SegmentError> {
    let Ok(off_len) = libc::off_t::try_from(len) else {
        return Err(SegmentError::BadCapacity(len as usize));
    };
    loop {
        // SAFETY: `file` is an open descriptor for the call's duration.
        // posix_fallocate returns the error number (it does not set errno).
        let r = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, off_len) };
        match r {
            0 => return Ok(()),
            libc::EINTR => continue,
            libc::ENOSPC | libc::EFBIG | libc::ENOMEM => {
                return Err(SegmentError::NoSpace {
                    bytes: len,
                    source: std::io::Error::from_raw_os_error(r),
                })
            }
            e => {
                return Err(SegmentError::Os {
                    op: "posix_fallocate",
                    source: std::io::Error::from_raw_os_error(e),
                })
            }
        }
    }
}

/// The bytes of shared memory a segment of `capacity` data bytes takes:
/// its header and data area, in whole pages.
pub fn footprint(capacity: usize) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = if page > 0 { page as u64 } else { 4096 };
    ((HEADER_BYTES + capacity) as u64).div_ceil(page) * page
}

/// The total size of the file system behind `/dev/shm` (a tmpfs: its
/// `size=`), or `None` if it cannot be read.
pub fn shm_total_bytes() -> Option<u64> {
    let path = CString::new(SHM_DIR).ok()?;
    // SAFETY: an all-zero statvfs is a valid out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid C string and `st` a writable statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // The fields' widths differ between targets (u32 on some 32-bit ones).
    #[allow(clippy::unnecessary_cast)]
    let (blocks, frsize) = (st.f_blocks as u64, st.f_frsize as u64);
    Some(blocks.saturating_mul(frsize))
}

fn check_prefix(prefix: &str) -> Result<(), SegmentError> {
    let ok = !prefix.is_empty()
        && prefix.len() <= 64
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(SegmentError::BadName(prefix.to_owned()))
    }
}

fn shm_open(name: &str, flags: libc::c_int) -> Result<File, SegmentError> {
    let c = CString::new(name).map_err(|_| SegmentError::BadName(name.to_owned()))?;
    // SAFETY: `c` is a valid C string; mode 0600 (owner read/write only; the
    // umask can only clear bits).
    let fd = unsafe { libc::shm_open(c.as_ptr(), flags, 0o600 as libc::mode_t) };
    if fd < 0 {
        return Err(SegmentError::Os {
            op: "shm_open",
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Removes a name; a name already gone is not an error (best effort on drop).
/// Removes the segment `name` (as [`Segment::create`] named it) if it is
/// still there: for a creator that must clean up at exit while its
/// producers are still held elsewhere. Returns whether it was removed.
pub fn remove(name: &str) -> bool {
    name.trim_start_matches('/').starts_with(NAME_PREFIX) && unlink(name)
}

fn unlink(name: &str) -> bool {
    let Ok(c) = CString::new(name) else {
        return false;
    };
    // SAFETY: `c` is a valid C string.
    unsafe { libc::shm_unlink(c.as_ptr()) == 0 }
}

/// Whether a process with this pid exists (signal 0 probes without sending).
fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks existence and permission.
    let r = unsafe { libc::kill(pid, 0) };
    // EPERM: it exists but belongs to someone else.
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Removes the segments named `/<prefix><pid>-...` that belong to this user
/// and whose creating pid is no longer running (the leftovers of a broker
/// that crashed). Returns the names removed. A pid reused by an unrelated
/// live process keeps its segment until that process exits: the cleanup
/// never removes a live creator's segment, at worst it is late.
pub fn cleanup_stale(prefix: &str) -> Result<Vec<String>, SegmentError> {
    check_prefix(prefix)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(SHM_DIR).map_err(os("read_dir /dev/shm"))? {
        let Ok(entry) = entry else { continue };
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        let Some(rest) = file_name.strip_prefix(prefix) else {
            continue;
        };
        let Some(pid) = rest
            .split_once('-')
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
            .filter(|&p| p > 0)
        else {
            continue;
        };
        let ours = entry.metadata().map(|m| m.uid() == me).unwrap_or(false);
        if !ours || alive(pid) {
            continue;
        }
        let name = format!("/{file_name}");
        if unlink(&name) {
            removed.push(name);
        }
    }
    Ok(removed)
}

// The broker keeps the producing end on its writer thread and the client the
// consuming end on its reader thread: both must be `Send`.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Producer<Segment>>();
    send::<crate::Publisher<Segment>>();
    send::<Consumer<Segment>>();
};
