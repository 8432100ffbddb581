//! One local-socket connection speaking binary frames (docs/protocol.md §1 Framing):
//! submitters encode requests into a shared outgoing buffer, one writer
//! thread writes whatever has gathered there in one system call, and one
//! reader thread reads everything the broker sends.
//!
//! Architecture invariant: submitting never blocks on the socket. A call is
//! encoded straight into the outgoing buffer and registered in the table of
//! calls waiting for an answer, both under the buffer's lock (so the answer
//! cannot arrive before the call is registered); the writer thread, woken
//! when the buffer stops being empty, swaps it out and writes it whole: a
//! burst of submissions costs one `write`, as in the broker's own socket
//! writer. One shortcut: a call submitted on an idle connection (no other
//! call in flight, nothing being written) is sent by its submitter with a
//! non-blocking `send`, saving the hand-off to the writer thread on the
//! latency of a lone call; whatever that `send` cannot take at once is left
//! to the writer. Only one thread writes at a time (`Outgoing::writing`),
//! so frames reach the socket whole and in submission order.
//!
//! Every send uses `MSG_NOSIGNAL` where the platform has it: a broker that
//! died never raises `SIGPIPE` in the host process.
//!
//! Architecture invariant: the reader thread never blocks on anything but
//! the socket (and the user code it runs: event handlers and completion
//! callbacks). Responses complete the [`Slot`] registered under their id,
//! however the broker orders its answers; notifications go to the demux.
//!
//! Architecture invariant: no call can outlive the connection. Closing
//! (from any thread) records the reason and shuts the socket down; the
//! reader then wakes, and empties the table under its lock, failing every
//! waiting call with [`ClientError::Closed`]; any later submission sees the
//! closed table before it queues anything.

use crate::demux::Demux;
use crate::error::{ClientError, CloseReason};
use crate::pending::{mark_reader_thread, on_reader_thread, Answer, Convert, Pending};
use crate::shared::{send_all, Hook, Outgoing, Shared, Stats, Waiter};
use crate::wire::{Binary, Calls, Codec, Framer, Inbound};
use a2a_proto::call::{Call, Outcome};
use interprocess::local_socket::{prelude::*, ConnectOptions, GenericFilePath, Stream};
use interprocess::ConnectWaitMode;
use parking_lot::{Condvar, Mutex};
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Stack of the reader thread: it decodes frames and runs the
/// callers' handlers, and a process may hold hundreds of connections.
const READER_STACK: usize = 512 * 1024;

/// Stack of the writer thread, which only copies bytes to the socket.
const WRITER_STACK: usize = 64 * 1024;

/// Bytes asked of each `read`; frames larger than this are reassembled
/// (by the wire core's framer, which the reads fill directly).
const READ_CHUNK: usize = 64 * 1024;

/// A writer's buffer that grew past this is given back after its write.
const KEEP_OUT_BUF: usize = 1 << 20;

/// Connection ids, for telling a connection's reader thread apart.
static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// A connected, preamble-sent socket with its writer and reader threads.
pub(crate) struct Conn {
    pub(crate) shared: Arc<Shared>,
    /// Joined on drop (except on the reader thread itself), so no thread of
    /// ours outlives the connection.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Conn {
    /// Connects to the socket at `path`, writes the binary preamble and
    /// starts the writer and the reader. `io_timeout` bounds the connect
    /// and every write, so a broker that stops reading cannot hold a
    /// submission's bytes forever (the connection closes instead).
    /// `connect_retry` bounds the retries of a connect refused because the
    /// broker's accept backlog is full (zero: none).
    pub(crate) fn open(
        path: &Path,
        io_timeout: Duration,
        connect_retry: Duration,
    ) -> Result<Conn, ClientError> {
        let stream = connect(path, io_timeout, connect_retry)?;
        let shared = Arc::new(Shared {
            id: NEXT_CONN.fetch_add(1, Ordering::Relaxed),
            stream,
            table: Mutex::new(Calls::new()),
            out: Mutex::new(Outgoing::default()),
            out_cv: Condvar::new(),
            next_id: AtomicU64::new(1),
            stats: Stats::default(),
            demux: Demux::default(),
        });
        let writer = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("a2a-client-writer".into())
                .stack_size(WRITER_STACK)
                .spawn(move || write_loop(&shared))?
        };
        let reader = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("a2a-client-reader".into())
                .stack_size(READER_STACK)
                .spawn(move || {
                    mark_reader_thread(shared.id);
                    let reason = read_loop(&shared);
                    shared.finish(reason);
                })
        };
        let reader = match reader {
            Ok(r) => r,
            Err(e) => {
                shared.close(CloseReason::Io(e.to_string()));
                let _ = writer.join();
                return Err(e.into());
            }
        };
        Ok(Conn {
            shared,
            threads: Mutex::new(vec![writer, reader]),
        })
    }

    /// Submits `call`; its [`Pending`] completes with the answer converted
    /// by `convert`.
    pub(crate) fn submit<T>(
        &self,
        call: Call,
        convert: Convert<T>,
        hook: Option<Hook>,
    ) -> Result<Pending<T>, ClientError> {
        let slot = self.shared.submit(call, hook)?;
        Ok(Pending::new(slot, convert, self.shared.id))
    }

    /// Submits `call` and waits for its answer, at most `timeout`.
    pub(crate) fn call(&self, call: Call, timeout: Duration) -> Result<Outcome, ClientError> {
        self.submit(call, Convert::Fn(Ok), None)?.wait(timeout)
    }

    /// Why the connection ended, if it has.
    pub(crate) fn close_reason(&self) -> Option<CloseReason> {
        self.shared.closed()
    }

    /// Closes the connection: pending calls fail (promptly, from the
    /// reader), the threads end.
    pub(crate) fn close(&self, reason: CloseReason) {
        self.shared.close(reason);
    }

    /// Closes the connection and waits until its threads have ended. On
    /// one of them (a handler or callback on the reader or the event
    /// ring's thread) it cannot wait for that one, which ends on its own
    /// once it returns (the socket is shut down already).
    pub(crate) fn close_and_join(&self, reason: CloseReason) {
        self.close(reason);
        self.join_threads();
    }

    /// Joins the threads, except the calling one; on the reader thread,
    /// none (joining it from itself would deadlock, and the others end on
    /// their own). The handles are taken out before any join, so no lock
    /// is held while waiting.
    fn join_threads(&self) {
        if on_reader_thread(self.shared.id) {
            return;
        }
        let me = std::thread::current().id();
        let threads: Vec<JoinHandle<()>> = self.threads.lock().drain(..).collect();
        for t in threads {
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }

    /// Reads the event ring the broker granted in the handshake on a
    /// thread of its own, joined with the others (see [`crate::ring`]).
    pub(crate) fn attach_ring(&self, name: &str, bytes: usize) -> Result<(), ClientError> {
        let t = crate::ring::start(self.shared.clone(), name, bytes)?;
        self.threads.lock().push(t);
        Ok(())
    }

    /// Frames queued and write system calls made so far.
    pub(crate) fn write_stats(&self) -> (u64, u64) {
        let s = &self.shared.stats;
        (
            s.frames.load(Ordering::Relaxed),
            s.writes.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // The last handle can be dropped by a handler or a callback running
        // on the reader thread (or the event ring's): that thread is left
        // to finish on its own (it is already unblocked: the socket is shut
        // down). Anywhere else the joins are short, and mean no thread of
        // ours outlives the connection.
        self.close_and_join(CloseReason::Shutdown);
    }
}

/// Connects and writes the preamble, within `io_timeout`.
///
/// A non-blocking connect to a Unix socket whose accept backlog is full
/// fails at once (`EAGAIN`) rather than waiting; `interprocess` then hands
/// back a socket that never connected, which the first write reveals
/// (`ENOTCONN`). Such a connect is retried for at most `retry` (the
/// caller's bound; zero fails at once), since a broker under a burst of
/// connections accepts them soon.
fn connect(path: &Path, io_timeout: Duration, retry: Duration) -> Result<Stream, ClientError> {
    let retry_until = Instant::now() + retry;
    loop {
        let attempt = ConnectOptions::new()
            .name(path.to_fs_name::<GenericFilePath>()?)
            .wait_mode(ConnectWaitMode::Timeout(
                io_timeout.max(Duration::from_millis(1)),
            ))
            .connect_sync()
            .and_then(|stream| {
                stream.set_send_timeout(Some(io_timeout))?;
                send_all(&stream, Binary::PREAMBLE)?;
                Ok(stream)
            });
        match attempt {
            Ok(stream) => return Ok(stream),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotConnected | std::io::ErrorKind::WouldBlock
                ) && Instant::now() < retry_until =>
            {
                // Backlog full: give the broker's accept loop a moment,
                // within the bound the caller set.
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The writer thread: takes everything queued and writes it in one call.
fn write_loop(shared: &Shared) {
    let mut spare: Vec<u8> = Vec::new();
    loop {
        let frames = {
            let mut out = shared.out.lock();
            while (out.buf.is_empty() || out.writing) && !out.closed {
                shared.out_cv.wait(&mut out);
            }
            if out.closed {
                return;
            }
            out.writing = true;
            std::mem::swap(&mut out.buf, &mut spare);
            std::mem::take(&mut out.frames)
        };
        let result = send_all(&shared.stream, &spare);
        shared.out.lock().writing = false;
        if let Err(e) = result {
            // A write that failed part-way leaves a torn frame on the wire:
            // the connection cannot be used again.
            shared.close(CloseReason::of_write(&e));
            return;
        }
        shared.stats.frames.fetch_add(frames, Ordering::Relaxed);
        shared.stats.writes.fetch_add(1, Ordering::Relaxed);
        spare.clear();
        if spare.capacity() > KEEP_OUT_BUF {
            spare = Vec::new();
        }
    }
}

/// Reads frames until the socket ends; returns why it ended.
fn read_loop(shared: &Shared) -> CloseReason {
    // Each read lands in the framer's buffer, where whole frames are
    // decoded in place; only a frame that spans reads waits there for the
    // rest (the framer bounds it: docs/protocol.md §1 Framing, §9 Bounds,
    // the broker's frames may reach A2A_MAX_OUT_FRAME_BYTES).
    let mut framer: Framer<Binary> = Framer::new();
    let mut batch = Batch::default();
    loop {
        let n = match (&shared.stream).read(framer.read_buf(READ_CHUNK)) {
            Ok(0) => return CloseReason::ByBroker,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // A broker killed with bytes of ours still unread resets the
            // socket instead of closing it: the same end, for a caller.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return CloseReason::ByBroker
            }
            Err(e) => return CloseReason::Io(e.to_string()),
        };
        framer.filled(n);
        if let Err(reason) = dispatch_frames(&mut framer, shared, &mut batch) {
            return reason;
        }
    }
}

/// Reused buffers of the reader: the answers of one read, and their
/// waiters.
#[derive(Default)]
struct Batch {
    answers: Vec<(u64, Answer)>,
    ready: Vec<(Waiter, Answer)>,
}

/// Hands every complete frame in the framer to its taker, in the order
/// received: answers to their calls (those of one read under one lock of
/// the table), events to the demux.
fn dispatch_frames(
    framer: &mut Framer<Binary>,
    shared: &Shared,
    batch: &mut Batch,
) -> Result<(), CloseReason> {
    let mut end = Ok(());
    loop {
        let inbound = match framer.next_frame() {
            Ok(Some(frame)) => Binary::decode(frame),
            Ok(None) => break,
            Err(e) => Err(e),
        };
        match inbound {
            Ok(Inbound::Answer { id, result }) => {
                batch.answers.push((id, result.map_err(ClientError::Rpc)))
            }
            Ok(Inbound::Event(n)) => {
                // Answers before an event are delivered before it.
                shared.answer_all(&mut batch.answers, &mut batch.ready);
                shared.demux.deliver(n);
            }
            Err(e) => {
                end = Err(e.into());
                break;
            }
        }
    }
    shared.answer_all(&mut batch.answers, &mut batch.ready);
    end
}
