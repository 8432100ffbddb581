//! One local-socket connection speaking binary frames (PROTOCOL.md §1.2):
//! callers write requests themselves, under a lock, and one background
//! reader thread reads everything the broker sends.
//!
//! Architecture invariant: the reader thread never blocks on anything but
//! the socket. Responses go to one-shot channels registered per request id
//! (so pipelined calls from many threads are matched however the broker
//! orders its answers), notifications to the demux's unbounded per-agent
//! queues.
//!
//! Architecture invariant: no call can outlive the connection. When the
//! socket ends, for whatever reason, the pending table is closed and
//! emptied under one lock, which drops every waiting call's sender: each
//! caller wakes with [`ClientError::Closed`], and any later call sees the
//! closed table before it writes.

use crate::demux::Demux;
use crate::error::{ClientError, CloseReason};
use a2a_proto::binary::{
    decode_payload, encode_frame, preamble, split_frames, ClientFrame, ServerFrame,
};
use a2a_proto::call::{Call, Outcome};
use a2a_proto::error::RpcError;
use a2a_proto::limits::MAX_FRAME_BYTES;
use crossbeam_channel::{RecvTimeoutError, Sender};
use interprocess::local_socket::{prelude::*, ConnectOptions, GenericFilePath, Stream};
use interprocess::ConnectWaitMode;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a pending call is waiting for.
type Answer = Result<Outcome, RpcError>;

/// Stack of the reader thread: it only splits and decodes frames, and a
/// process may hold hundreds of connections.
const READER_STACK: usize = 256 * 1024;

/// Bytes asked of each `read`; frames larger than this are reassembled.
const READ_CHUNK: usize = 64 * 1024;

/// The calls waiting for an answer, and whether any more may wait.
#[derive(Default)]
struct Pending {
    calls: HashMap<u64, Sender<Answer>>,
    /// Set once, by whoever sees the end first; the first reason wins.
    closed: Option<CloseReason>,
}

/// State shared by the callers and the reader thread.
pub(crate) struct Shared {
    /// Calls waiting for their response, by request id.
    pending: Mutex<Pending>,
    /// Where notifications go, by recipient.
    pub(crate) demux: Demux,
}

impl Shared {
    /// Ends the connection's life: fails every pending call and closes
    /// every agent queue. Idempotent.
    fn finish(&self, reason: CloseReason) {
        let mut p = self.pending.lock();
        if p.closed.is_none() {
            p.closed = Some(reason);
        }
        // Dropping the senders wakes their callers with `Disconnected`.
        p.calls.clear();
        drop(p);
        self.demux.close();
    }

    fn closed(&self) -> Option<CloseReason> {
        self.pending.lock().closed.clone()
    }

    fn answer(&self, id: u64, result: Answer) {
        // A missing id is a call that timed out and left: drop the answer.
        if let Some(tx) = self.pending.lock().calls.remove(&id) {
            let _ = tx.send(result);
        }
    }
}

/// A connected, preamble-sent socket and its reader thread.
pub(crate) struct Conn {
    /// Shared with the reader thread, which reads through `&Stream` while
    /// callers write through it (full-duplex on a Unix socket).
    stream: Arc<Stream>,
    /// Serializes writers: a frame must reach the socket in one piece.
    write_lock: Mutex<()>,
    /// The pending calls and agent queues, also held by the reader.
    pub(crate) shared: Arc<Shared>,
    /// Request ids; unique per connection, which is all matching needs.
    next_id: AtomicU64,
    /// Joined on drop, so no thread of ours outlives the connection.
    reader: Mutex<Option<JoinHandle<()>>>,
}

impl Conn {
    /// Connects to the socket at `path`, writes the binary preamble and
    /// starts the reader. `io_timeout` bounds the connect and every write,
    /// so a broker that stops reading cannot block a caller forever.
    pub(crate) fn open(path: &Path, io_timeout: Duration) -> Result<Conn, ClientError> {
        let stream = Arc::new(connect(path, io_timeout)?);
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            demux: Demux::default(),
        });
        let reader = {
            let (stream, shared) = (stream.clone(), shared.clone());
            std::thread::Builder::new()
                .name("a2a-client-reader".into())
                .stack_size(READER_STACK)
                .spawn(move || {
                    let reason = read_loop(&stream, &shared);
                    shared.finish(reason);
                })?
        };
        Ok(Conn {
            stream,
            write_lock: Mutex::new(()),
            shared,
            next_id: AtomicU64::new(1),
            reader: Mutex::new(Some(reader)),
        })
    }

    /// Sends `call` and waits for its answer, at most `timeout`.
    pub(crate) fn call(&self, call: Call, timeout: Duration) -> Result<Outcome, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut bytes = Vec::new();
        encode_frame(&ClientFrame::Request { id, call }, &mut bytes)
            .map_err(|e| ClientError::Protocol(format!("cannot encode the request: {e}")))?;
        if bytes.len() - 4 > MAX_FRAME_BYTES {
            return Err(ClientError::FrameTooLarge {
                bytes: bytes.len() - 4,
                max: MAX_FRAME_BYTES,
            });
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        {
            let mut p = self.shared.pending.lock();
            if let Some(reason) = &p.closed {
                return Err(ClientError::Closed(reason.clone()));
            }
            p.calls.insert(id, tx);
        }
        if let Err(e) = self.write(&bytes) {
            self.shared.pending.lock().calls.remove(&id);
            return Err(e);
        }
        match rx.recv_timeout(timeout) {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(e)) => Err(ClientError::Rpc(e)),
            Err(RecvTimeoutError::Timeout) => {
                self.shared.pending.lock().calls.remove(&id);
                Err(ClientError::Timeout(timeout))
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.closed_error()),
        }
    }

    fn write(&self, bytes: &[u8]) -> Result<(), ClientError> {
        let _guard = self.write_lock.lock();
        if let Err(e) = (&*self.stream).write_all(bytes) {
            // A write that failed part-way leaves a torn frame on the wire:
            // the connection cannot be used again. If the reader already
            // knows why the socket died, that is the better error.
            if let Some(reason) = self.shared.closed() {
                return Err(ClientError::Closed(reason));
            }
            use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
            if matches!(e.kind(), BrokenPipe | ConnectionReset) {
                self.close(CloseReason::ByBroker);
                return Err(ClientError::Closed(CloseReason::ByBroker));
            }
            self.close(CloseReason::Io(e.to_string()));
            return Err(ClientError::Io(e));
        }
        Ok(())
    }

    fn closed_error(&self) -> ClientError {
        ClientError::Closed(self.shared.closed().unwrap_or(CloseReason::ByBroker))
    }

    /// Why the connection ended, if it has.
    pub(crate) fn close_reason(&self) -> Option<CloseReason> {
        self.shared.closed()
    }

    /// Closes the connection: pending calls fail, the reader wakes and ends.
    pub(crate) fn close(&self, reason: CloseReason) {
        self.shared.finish(reason);
        shutdown(&self.stream);
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.close(CloseReason::Shutdown);
        // The shutdown above makes the reader's `read` return, so this join
        // is short; joining means no thread of ours outlives the client
        // (which the C ABI's `_free` promises).
        if let Some(reader) = self.reader.lock().take() {
            let _ = reader.join();
        }
    }
}

/// Connects and writes the preamble, within `io_timeout`.
///
/// A non-blocking connect to a Unix socket whose accept backlog is full
/// fails at once (`EAGAIN`) rather than waiting; `interprocess` then hands
/// back a socket that never connected, which the first write reveals
/// (`ENOTCONN`). Such a connect is retried until the deadline: a broker
/// under a burst of connections accepts them soon.
fn connect(path: &Path, io_timeout: Duration) -> Result<Stream, ClientError> {
    let deadline = Instant::now() + io_timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt = ConnectOptions::new()
            .name(path.to_fs_name::<GenericFilePath>()?)
            .wait_mode(ConnectWaitMode::Timeout(left.max(Duration::from_millis(1))))
            .connect_sync()
            .and_then(|stream| {
                stream.set_send_timeout(Some(io_timeout))?;
                (&stream).write_all(&preamble())?;
                Ok(stream)
            });
        match attempt {
            Ok(stream) => return Ok(stream),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotConnected | std::io::ErrorKind::WouldBlock
                ) && Instant::now() < deadline =>
            {
                // Backlog full: give the broker's accept loop a moment.
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Shuts the socket down in both directions, which wakes a `read` blocked
/// in another thread (dropping our handle would not: the reader holds one).
fn shutdown(stream: &Stream) {
    match stream {
        #[cfg(unix)]
        Stream::UdSocket(s) => {
            let _ = s.inner().shutdown(std::net::Shutdown::Both);
        }
        #[allow(unreachable_patterns)]
        _ => {}
    }
}

/// Reads frames until the socket ends; returns why it ended.
fn read_loop(stream: &Stream, shared: &Shared) -> CloseReason {
    // `chunk` takes each read; `partial` holds the bytes of a frame that
    // spans reads. In the common case (whole frames per read) nothing is
    // copied out of `chunk` before decoding.
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut partial: Vec<u8> = Vec::new();
    loop {
        let n = match (&*stream).read(&mut chunk) {
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
        let result = if partial.is_empty() {
            let r = dispatch_frames(&chunk[..n], shared);
            if let Ok(used) = r {
                partial.extend_from_slice(&chunk[used..n]);
            }
            r
        } else {
            partial.extend_from_slice(&chunk[..n]);
            let r = dispatch_frames(&partial, shared);
            if let Ok(used) = r {
                partial.drain(..used);
            }
            r
        };
        if let Err(reason) = result {
            return reason;
        }
        // One huge frame should not pin its buffer for the connection's life.
        if partial.capacity() > 4 * READ_CHUNK && partial.len() < READ_CHUNK {
            partial.shrink_to(READ_CHUNK);
        }
    }
}

/// Hands every complete frame at the front of `bytes` to its taker;
/// returns how many bytes they used.
fn dispatch_frames(bytes: &[u8], shared: &Shared) -> Result<usize, CloseReason> {
    let (frames, used) = split_frames(bytes).map_err(|e| CloseReason::BadFrame(e.to_string()))?;
    for range in frames {
        match decode_payload::<ServerFrame>(&bytes[range]) {
            Ok(ServerFrame::Response { id, result }) => shared.answer(id, result),
            Ok(ServerFrame::Notification(n)) => shared.demux.deliver(n),
            Ok(ServerFrame::Fatal(e)) => return Err(CloseReason::Fatal(e)),
            Err(e) => return Err(CloseReason::BadFrame(e.to_string())),
        }
    }
    Ok(used)
}
