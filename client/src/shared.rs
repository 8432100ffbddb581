//! What the submitters, the writer thread and the reader thread of one
//! connection share ([`Shared`]): the socket, the calls waiting for their
//! answers, the frames waiting to be written. The reader side (`conn`'s
//! loops, the event `ring`) works on this, never on the [`crate::Client`].

use crate::demux::Demux;
use crate::error::{ClientError, CloseReason};
use crate::pending::{Answer, Slot};
use crate::wire::{Binary, Calls, Codec};
use a2a_proto::call::Call;
use interprocess::local_socket::Stream;
use parking_lot::{Condvar, Mutex};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bookkeeping run on the reader thread when a call's answer arrives,
/// before it is published (e.g. a deregistration closes the agent's
/// queue, so nothing can be read as live after `deregister` returned).
pub(crate) type Hook = Box<dyn FnOnce(&Answer) + Send + 'static>;

/// One call waiting for its answer.
pub(crate) struct Waiter {
    pub(crate) slot: Arc<Slot>,
    pub(crate) hook: Option<Hook>,
}

impl Waiter {
    pub(crate) fn complete(self, answer: Answer) {
        if let Some(hook) = self.hook {
            hook(&answer);
        }
        self.slot.complete(answer);
    }
}

/// The encoded frames the writer thread has not taken yet.
#[derive(Default)]
pub(crate) struct Outgoing {
    pub(crate) buf: Vec<u8>,
    /// Frames in `buf`.
    pub(crate) frames: u64,
    /// Some thread (the writer, or a submitter on an idle connection) is
    /// sending bytes taken out of `buf`: nobody else may send meanwhile.
    pub(crate) writing: bool,
    /// Set when the connection ends: the writer exits, nothing more queues.
    pub(crate) closed: bool,
}

/// `send(2)` flags of every write: no `SIGPIPE` on a closed socket.
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
const NOSIGNAL: libc::c_int = libc::MSG_NOSIGNAL;
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
const NOSIGNAL: libc::c_int = 0;

/// The socket as `socket2` sees it, for `send` with flags.
fn sock(stream: &Stream) -> Option<socket2::SockRef<'_>> {
    match stream {
        #[cfg(unix)]
        Stream::UdSocket(s) => Some(socket2::SockRef::from(s.inner())),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// Sends all of `bytes`, blocking (within the socket's send timeout).
pub(crate) fn send_all(stream: &Stream, mut bytes: &[u8]) -> std::io::Result<()> {
    let Some(s) = sock(stream) else {
        return (&*stream).write_all(bytes);
    };
    while !bytes.is_empty() {
        match s.send_with_flags(bytes, NOSIGNAL) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sends what the socket takes of `bytes` without blocking; returns how
/// many bytes it took.
fn send_now(stream: &Stream, bytes: &[u8]) -> std::io::Result<usize> {
    let Some(s) = sock(stream) else {
        return Ok(0);
    };
    let mut sent = 0;
    while sent < bytes.len() {
        match s.send_with_flags(&bytes[sent..], NOSIGNAL | libc::MSG_DONTWAIT) {
            Ok(0) => break,
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// Frames and write system calls of one connection, for the benchmarks.
#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) frames: AtomicU64,
    pub(crate) writes: AtomicU64,
}

/// State shared by the submitters, the writer and the reader.
pub(crate) struct Shared {
    /// This connection's id (see [`on_reader_thread`]).
    pub(crate) id: u64,
    /// Read by the reader, written by the writer (full-duplex on a Unix
    /// socket), shut down by whoever closes.
    pub(crate) stream: Stream,
    /// The calls waiting for an answer (the wire core's table), and
    /// whether any more may wait: closed once, by whoever sees the end
    /// first; the first reason wins.
    pub(crate) table: Mutex<Calls<Waiter>>,
    pub(crate) out: Mutex<Outgoing>,
    /// Wakes the writer when `out` stops being empty or closes.
    pub(crate) out_cv: Condvar,
    /// Request ids; unique per connection, which is all matching needs.
    pub(crate) next_id: AtomicU64,
    pub(crate) stats: Stats,
    /// Where notifications go, by recipient.
    pub(crate) demux: Demux,
}

impl Shared {
    /// Why the connection ended, if it has.
    pub(crate) fn closed(&self) -> Option<CloseReason> {
        self.table.lock().closed().cloned()
    }

    /// Starts closing: records the reason (the first wins), stops the
    /// writer and shuts the socket down, which wakes the reader; the reader
    /// fails the waiting calls. Safe from any thread, idempotent.
    pub(crate) fn close(&self, reason: CloseReason) {
        self.table.lock().mark_closed(reason);
        {
            let mut out = self.out.lock();
            out.closed = true;
            out.buf = Vec::new();
        }
        self.out_cv.notify_all();
        shutdown(&self.stream);
    }

    /// The reader's last act: fails every waiting call and closes every
    /// agent queue. Callbacks of the failed calls run here, on the reader.
    pub(crate) fn finish(&self, reason: CloseReason) {
        self.close(reason);
        let (calls, reason) = {
            let mut t = self.table.lock();
            let calls = t.close(CloseReason::ByBroker);
            let reason = t.closed().cloned().unwrap_or(CloseReason::ByBroker);
            (calls, reason)
        };
        for (_, w) in calls {
            w.complete(Err(ClientError::Closed(reason.clone())));
        }
        self.demux.close();
    }

    /// Encodes `call`, registers its waiter and queues the frame for the
    /// writer; never blocks on the socket.
    pub(crate) fn submit(&self, call: Call, hook: Option<Hook>) -> Result<Arc<Slot>, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = Slot::new();
        let mut out = self.out.lock();
        if out.closed {
            drop(out);
            return Err(self.closed_error());
        }
        let start = out.buf.len();
        Binary::encode_request(id, &call, &mut out.buf)?;
        let lone = {
            let mut t = self.table.lock();
            let waiter = Waiter {
                slot: slot.clone(),
                hook,
            };
            if let Err((reason, _)) = t.insert(id, waiter) {
                out.buf.truncate(start);
                return Err(ClientError::Closed(reason));
            }
            t.len() == 1
        };
        out.frames += 1;
        if lone && start == 0 && !out.writing {
            // An idle connection: send it from here, no hand-off.
            out.writing = true;
            let bytes = std::mem::take(&mut out.buf);
            let frames = std::mem::take(&mut out.frames);
            drop(out);
            self.send_inline(bytes, frames);
            return Ok(slot);
        }
        drop(out);
        // Cheap when the writer is busy (no waiter on the condvar): then it
        // finds this frame in its next swap.
        if start == 0 {
            self.out_cv.notify_one();
        }
        Ok(slot)
    }

    /// The idle-connection shortcut of `submit`: sends `bytes` without
    /// blocking, leaves any rest to the writer thread (in front of what
    /// queued meanwhile), then gives the sending turn back.
    fn send_inline(&self, mut bytes: Vec<u8>, frames: u64) {
        let result = send_now(&self.stream, &bytes);
        let mut out = self.out.lock();
        out.writing = false;
        if out.closed {
            return;
        }
        match result {
            Ok(sent) if sent == bytes.len() => {
                self.stats.frames.fetch_add(frames, Ordering::Relaxed);
                self.stats.writes.fetch_add(1, Ordering::Relaxed);
                if out.buf.is_empty() {
                    // Keep the buffer's capacity for the next submission.
                    bytes.clear();
                    out.buf = bytes;
                    return;
                }
            }
            Ok(sent) => {
                bytes.drain(..sent);
                bytes.extend_from_slice(&out.buf);
                out.buf = bytes;
                out.frames += frames;
            }
            Err(e) => {
                drop(out);
                self.close(CloseReason::of_write(&e));
                return;
            }
        }
        drop(out);
        self.out_cv.notify_one();
    }

    fn closed_error(&self) -> ClientError {
        ClientError::Closed(self.closed().unwrap_or(CloseReason::ByBroker))
    }

    /// Completes the calls answered in one read, taking the table's lock
    /// once for all of them.
    pub(crate) fn answer_all(
        &self,
        answers: &mut Vec<(u64, Answer)>,
        ready: &mut Vec<(Waiter, Answer)>,
    ) {
        {
            let mut t = self.table.lock();
            for (id, answer) in answers.drain(..) {
                // A missing id cannot happen for calls of this client (every
                // call stays registered until answered); a broker answering
                // an id twice loses the second answer here.
                if let Some(w) = t.take(id) {
                    ready.push((w, answer));
                }
            }
        }
        for (w, answer) in ready.drain(..) {
            w.complete(answer);
        }
    }
}

/// Shuts the socket down in both directions, which wakes a `read` blocked
/// in the reader thread (dropping a handle would not: the reader holds one)
/// and fails a `write` blocked in the writer.
pub(crate) fn shutdown(stream: &Stream) {
    match stream {
        #[cfg(unix)]
        Stream::UdSocket(s) => {
            let _ = s.inner().shutdown(std::net::Shutdown::Both);
        }
        #[allow(unreachable_patterns)]
        _ => {}
    }
}
