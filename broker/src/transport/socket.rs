//! The local socket (ext): a Unix socket file in a directory only the owner
//! can enter (0700), the socket itself 0600, served with tokio through the
//! `interprocess` crate. Each connection chooses its codec with its first
//! bytes: `A2AB` + codec version for binary frames, anything else NDJSON.
//!
//! Per connection: one task reads and dispatches (reads answered inline,
//! writes queued to the writer thread), one writes the connection's outbox,
//! coalescing what is ready into one write. Rule for a client that stops
//! reading: its events beyond `OUTBOX_EVENT_BOUND`, or beyond
//! `OUTBOX_EVENT_BYTES` of them, are dropped oldest first and reported
//! with `a2a.lagged`; if it also leaves more than `OUTBOX_RESPONSE_BOUND`
//! responses, or more than `OUTBOX_RESPONSE_BYTES` of them, unread, the
//! connection is closed (its agents' tokens die, their tasks stay open).
//! The broker never waits on it.
//!
//! Connections take `--max-connections` places (`super::places`); at the
//! bound a new connection evicts the oldest one that has not completed its
//! handshake. A connection that queued calls to the writer thread waits,
//! as it ends, for the writer to kill its agents' tokens, on the runtime's
//! small blocking pool, whose idle threads end within a second; never by
//! turning a worker into a blocking thread, which under churn spawned a
//! replacement worker per connection: hundreds of threads, each keeping
//! its allocator heap.

use super::binary;
use super::ndjson::{self, AsyncLineReader, Line};
use super::places::{Place, Places, Taken};
use crate::broker::Broker;
use crate::delivery::outbox::Overflow;
use crate::delivery::ring::{self, RingStats};
use crate::delivery::{Outbox, Outgoing, Responder};
use crate::rpc_errors;
use crate::secret::Secret;
use crate::session::Session;
use a2a_proto::binary::{decode_payload, next_frame, preamble, ClientFrame, FrameError, MAGIC};
use a2a_proto::error::RpcError;
use a2a_proto::jsonrpc::Id;
use a2a_proto::limits::{
    HANDSHAKE_TIMEOUT_SECONDS, MAX_FRAME_BYTES, OUTBOX_EVENT_BOUND, OUTBOX_RESPONSE_BOUND,
    OUTBOX_RESPONSE_BYTES, PRE_HANDSHAKE_FRAME_BYTES,
};
use a2a_proto::secret::{secret_file, SECRET_ENV};
use interprocess::local_socket::tokio::{prelude::*, Stream};
use interprocess::local_socket::{GenericFilePath, ListenerOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};

/// Frames (responses and notifications) one server wrote to its
/// connections, and the write calls that carried them: their ratio is the
/// write coalescing. Held by the server and handed to each connection's
/// writer, so two servers in one process count apart.
#[derive(Debug, Default)]
struct WriteStats {
    frames: AtomicU64,
    calls: AtomicU64,
    /// The event rings of this server's connections.
    rings: Arc<RingStats>,
}

/// Why the local socket cannot be served (one line each, printed after
/// `a2a-broker: `); none leaves a file behind.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("cannot create socket directory {}: {source}", .dir.display())]
    CreateDir { dir: PathBuf, source: io::Error },
    #[error("cannot restrict socket directory {}: {source}", .dir.display())]
    RestrictDir { dir: PathBuf, source: io::Error },
    #[error("socket directory {}: {source}", .dir.display())]
    ReadDir { dir: PathBuf, source: io::Error },
    #[error("socket directory {} belongs to another user", .0.display())]
    DirOfAnotherUser(PathBuf),
    #[error("socket directory {} is open to other users (mode {mode:o}); it must be 0700", .dir.display())]
    DirOpenToOthers { dir: PathBuf, mode: u32 },
    #[error("{} exists and is not a socket", .0.display())]
    NotASocket(PathBuf),
    #[error("socket {} is in use by a live broker", .0.display())]
    InUse(PathBuf),
    #[error("cannot remove stale socket {}: {source}", .path.display())]
    RemoveStale { path: PathBuf, source: io::Error },
    #[error("socket path {} is {len} bytes; a Unix socket path holds at most {SUN_PATH_MAX}: use a shorter --socket name or directory", .path.display())]
    PathTooLong { path: PathBuf, len: usize },
    #[error("random source: {0}")]
    Random(getrandom::Error),
    #[error("cannot write secret file {}: {source}", .file.display())]
    WriteSecret { file: PathBuf, source: io::Error },
    #[error("cannot start the socket runtime: {0}")]
    Runtime(io::Error),
    #[error("bad socket path {}: {source}", .path.display())]
    BadPath { path: PathBuf, source: io::Error },
    #[error("cannot listen on {}: {source}", .path.display())]
    Listen { path: PathBuf, source: io::Error },
    #[error("cannot restrict socket {}: {source}", .path.display())]
    RestrictSocket { path: PathBuf, source: io::Error },
    #[error("the socket runtime is gone")]
    RuntimeGone,
}

/// A listening socket; dropping it stops serving and removes its files.
pub struct SocketServer {
    pub path: PathBuf,
    /// Set when the broker minted the secret and wrote it there.
    pub secret_file: Option<PathBuf>,
    runtime: Option<tokio::runtime::Runtime>,
    stats: Arc<WriteStats>,
}

impl SocketServer {
    /// `(frames, write calls)` over this server's connections so far.
    #[doc(hidden)]
    pub fn write_stats(&self) -> (u64, u64) {
        (
            self.stats.frames.load(Ordering::Relaxed),
            self.stats.calls.load(Ordering::Relaxed),
        )
    }

    /// `(events staged, futex wake-ups issued, publishes)` over this
    /// server's event rings so far: wake-up system calls per event, events
    /// per publish.
    #[doc(hidden)]
    pub fn ring_wake_stats(&self) -> (u64, u64, u64) {
        self.stats.rings.snapshot()
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        // Connection tasks can outlive the runtime's shutdown; their
        // event-ring segments must not outlive the broker.
        ring::remove_live();
        let _ = std::fs::remove_file(&self.path);
        if let Some(f) = &self.secret_file {
            let _ = std::fs::remove_file(f);
        }
    }
}

// Where `--socket NAME` lives: one rule, shared with every client.
use a2a_proto::socket_path::own_uid;
pub use a2a_proto::socket_path::socket_path;

/// Creates the socket's directory 0700, or checks that an existing one is
/// ours and closed to others.
fn prepare_dir(dir: &Path) -> Result<(), SocketError> {
    let dir_buf = || dir.to_path_buf();
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| SocketError::CreateDir {
                dir: dir_buf(),
                source,
            })?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| SocketError::RestrictDir {
                dir: dir_buf(),
                source,
            },
        )?;
        return Ok(());
    }
    let meta = std::fs::metadata(dir).map_err(|source| SocketError::ReadDir {
        dir: dir_buf(),
        source,
    })?;
    if meta.uid() != own_uid() {
        return Err(SocketError::DirOfAnotherUser(dir_buf()));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(SocketError::DirOpenToOthers {
            dir: dir_buf(),
            mode: meta.mode() & 0o777,
        });
    }
    Ok(())
}

/// A socket file left by a dead broker is removed; a live one is an error.
fn clear_stale(path: &Path) -> Result<(), SocketError> {
    if !check_existing(path)? {
        return Ok(());
    }
    std::fs::remove_file(path).map_err(|source| SocketError::RemoveStale {
        path: path.to_path_buf(),
        source,
    })
}

/// Is a socket file left by a dead broker at `path` (`false`: nothing
/// there)? Anything else there, or a live broker, is an error.
fn check_existing(path: &Path) -> Result<bool, SocketError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(false);
    };
    use std::os::unix::fs::FileTypeExt;
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotASocket(path.to_path_buf()));
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(SocketError::InUse(path.to_path_buf()));
    }
    Ok(true)
}

/// The secret: from `A2A_BROKER_SECRET`, or minted (128 bits) and written
/// to an owner-only file beside the socket.
fn load_secret(path: &Path) -> Result<(Secret, Option<PathBuf>), SocketError> {
    if let Some(s) = std::env::var_os(SECRET_ENV)
        .and_then(|s| s.into_string().ok())
        .filter(|s| !s.is_empty())
    {
        return Ok((Secret::new(s), None));
    }
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(SocketError::Random)?;
    let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let file = secret_file(path);
    let _ = std::fs::remove_file(&file);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(secret.as_bytes())
        });
    match written {
        Ok(()) => Ok((Secret::new(secret), Some(file))),
        Err(source) => Err(SocketError::WriteSecret { file, source }),
    }
}

/// `sun_path` holds 108 bytes, the terminating NUL included.
const SUN_PATH_MAX: usize = 107;

/// Checks `--socket NAME` without touching anything: the path fits a Unix
/// socket address, its directory (if it exists) is ours and closed to
/// others, and no live broker listens there. Run before the database is
/// opened, so that a bad name fails a start that has created nothing.
pub(crate) fn check(name: &str) -> Result<PathBuf, SocketError> {
    let path = socket_path(name);
    let len = path.as_os_str().len();
    if len > SUN_PATH_MAX {
        return Err(SocketError::PathTooLong { path, len });
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if dir.exists() {
        prepare_dir(dir)?; // only checks a directory that exists
    }
    check_existing(&path)?;
    Ok(path)
}

/// Binds `--socket NAME` and starts serving it on a tokio runtime, holding
/// at most `max_connections` connections at once. The secret file is
/// written only once the socket is bound, and a failure after that removes
/// both: a failed start leaves nothing behind.
pub fn listen(
    broker: Arc<Broker>,
    name: &str,
    max_connections: usize,
) -> Result<SocketServer, SocketError> {
    let path = check(name)?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    prepare_dir(&dir)?;
    clear_stale(&path)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .thread_name("a2a-socket")
        .enable_all()
        .build()
        .map_err(SocketError::Runtime)?;
    let listener = {
        let _guard = runtime.enter();
        let fs_name = path
            .as_path()
            .to_fs_name::<GenericFilePath>()
            .map_err(|source| SocketError::BadPath {
                path: path.clone(),
                source,
            })?;
        ListenerOptions::new()
            .name(fs_name)
            .create_tokio()
            .map_err(|source| SocketError::Listen {
                path: path.clone(),
                source,
            })?
    };
    // From here on, dropping `server` removes the socket and the secret file.
    let mut server = SocketServer {
        path,
        secret_file: None,
        runtime: Some(runtime),
        stats: Arc::default(),
    };
    std::fs::set_permissions(&server.path, std::fs::Permissions::from_mode(0o600)).map_err(
        |source| SocketError::RestrictSocket {
            path: server.path.clone(),
            source,
        },
    )?;
    let (secret, secret_file) = load_secret(&server.path)?;
    server.secret_file = secret_file;
    let secret = Arc::new(secret);
    let Some(runtime) = server.runtime.as_ref() else {
        return Err(SocketError::RuntimeGone);
    };
    // Event rings a crashed broker left in shared memory.
    ring::cleanup_stale();
    let places = Places::new(max_connections);
    let stats = server.stats.clone();
    runtime.spawn(async move {
        loop {
            match listener.accept().await {
                Ok(conn) => {
                    // Taken before the connection is served, given back when
                    // it ends: one over the bound is answered and closed at
                    // once, never left waiting in the backlog.
                    match places.take() {
                        Taken::Free(place) | Taken::Evicted(place) => {
                            tokio::spawn(serve_connection(
                                broker.clone(),
                                secret.clone(),
                                conn,
                                place,
                                stats.clone(),
                            ));
                        }
                        Taken::Full => {
                            tracing::warn!(
                                limit = "max-connections",
                                max = max_connections,
                                "socket connection refused"
                            );
                            tokio::spawn(refuse(conn));
                        }
                    }
                }
                // Out of descriptors, or a connection that died in the
                // backlog: keep serving the others.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    });
    Ok(server)
}

/// Threads the socket's runtime may run blocking work on besides its
/// workers: connection ends waiting for the writer thread (those that
/// queued a call to it), and encodings of large tasks. The writer ends
/// all the connections waiting on it in one batch, so this many end per
/// writer cycle; more queue for a thread, and never add threads.
const BLOCKING_THREADS: usize = 16;

/// How long an idle blocking thread lives: a burst's threads end soon
/// after it, and their allocator heaps with them.
const BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(1);

/// Why an evicted connection is closed (`data.reason`).
const EVICTED: &str = "evicted before handshake";

/// Answers a connection over `--max-connections` with one NDJSON error line
/// and closes it (a binary client reads it as a malformed frame: closed
/// either way).
async fn refuse(conn: Stream) {
    let err = rpc_errors::too_many_connections();
    let mut line = Vec::new();
    let _ = a2a_proto::jsonrpc::write_response::<_, ()>(&mut line, &Id::Null, Err(&err));
    let mut w = &conn;
    let _ = tokio::time::timeout(Duration::from_secs(1), w.write_all(&line)).await;
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Codec {
    Json,
    Binary,
}

async fn serve_connection(
    broker: Arc<Broker>,
    secret: Arc<Secret>,
    conn: Stream,
    place: Place,
    stats: Arc<WriteStats>,
) {
    let outbox = Arc::new(
        Outbox::with_response_bound(OUTBOX_EVENT_BOUND, OUTBOX_RESPONSE_BOUND)
            .with_ring_slot(stats.rings.clone()),
    );
    let mut session = broker.session_with_secret(outbox.clone(), secret);
    let mut rd = BufReader::with_capacity(64 * 1024, &conn);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(HANDSHAKE_TIMEOUT_SECONDS);
    let sniffed = tokio::select! {
        // Bytes already there choose the codec first: an evicted
        // connection that has sent anything is told why.
        biased;
        c = tokio::time::timeout_at(deadline, sniff(&mut rd)) => c.ok().flatten(),
        _ = place.evicted() => {
            log_eviction(session.conn);
            return;
        }
    };
    let Some(codec) = sniffed else {
        tracing::info!(
            conn = session.conn,
            "socket connection closed before its first byte"
        );
        // Never shook hands: nothing to close behind the writer.
        return;
    };
    let conn_id = session.conn;
    tracing::info!(conn = conn_id, ?codec, "socket connection accepted");
    {
        let reader = async {
            match codec {
                Codec::Json => read_json(&broker, &mut session, rd, deadline, &place).await,
                Codec::Binary => read_binary(&broker, &mut session, rd, deadline, &place).await,
            }
            outbox.close();
        };
        let writer = write_loop(&outbox, &conn, codec, &stats);
        tokio::pin!(writer);
        tokio::select! {
            _ = &mut writer => {
                // The peer stopped taking bytes: the connection is dead.
                outbox.close();
            }
            _ = reader => {
                // Flush what is left to a peer that is still reading, but never
                // wait on one that filled its outbox: it is cut off at once.
                if !outbox.overflowed() {
                    let _ = tokio::time::timeout(Duration::from_secs(5), &mut writer).await;
                }
            }
            // Its reader may wait for a line and its writer on the client
            // to read: neither would notice.
            _ = outbox.cut_off() => {}
        }
    }
    match outbox.overflow() {
        Some(Overflow::Responses) => tracing::warn!(
            conn = conn_id,
            limit = "outbox",
            max = OUTBOX_RESPONSE_BOUND,
            "socket connection cut off: it stopped reading (more responses unread than the bound)"
        ),
        Some(Overflow::ResponseBytes) => tracing::warn!(
            conn = conn_id,
            limit = "outbox",
            max_bytes = OUTBOX_RESPONSE_BYTES,
            "socket connection cut off: it stopped reading (more bytes of responses unread than the bound)"
        ),
        None => {}
    }
    // Waits for the writer thread on the blocking pool, keeping this
    // runtime's workers for the other connections. A connection that
    // never queued a call to the writer registered nothing and does not
    // wait (see `Broker::close`).
    if session.needs_writer_to_close() {
        let b = broker.clone();
        let _ = tokio::task::spawn_blocking(move || b.close(session)).await;
    }
    if let Some(r) = outbox.ring() {
        r.close();
    }
    tracing::info!(conn = conn_id, ?codec, "socket connection closed");
}

fn log_eviction(conn: crate::core::ConnId) {
    tracing::warn!(
        conn,
        limit = "max-connections",
        "socket connection evicted before its handshake: its place went to a new connection"
    );
}

/// Looks at the first bytes: the binary preamble, or NDJSON.
async fn sniff<R: tokio::io::AsyncBufRead + Unpin>(rd: &mut R) -> Option<Codec> {
    use tokio::io::AsyncBufReadExt;
    let first = rd.fill_buf().await.ok()?;
    if first.is_empty() {
        return None;
    }
    Some(if first[0] == MAGIC[0] {
        Codec::Binary
    } else {
        Codec::Json
    })
}

/// Before its handshake, a connection costs the broker almost nothing
/// (§2): lines are bounded by `PRE_HANDSHAKE_FRAME_BYTES` and reported as
/// soon as they pass it, a batch is refused, and either closes the
/// connection, as does a handshake not done by `deadline`, or an eviction
/// (`place`) while it waits for a line.
async fn read_json<R: tokio::io::AsyncBufRead + Unpin>(
    broker: &Broker,
    session: &mut Session,
    rd: R,
    deadline: tokio::time::Instant,
    place: &Place,
) {
    let mut lines = AsyncLineReader::new(rd, PRE_HANDSHAKE_FRAME_BYTES);
    lines.set_max(PRE_HANDSHAKE_FRAME_BYTES, true);
    let mut open = false;
    loop {
        if !open && session.is_handshaken() {
            open = true;
            lines.set_max(MAX_FRAME_BYTES, false);
        }
        let next = if open {
            lines.next_line().await
        } else {
            tokio::select! {
                r = tokio::time::timeout_at(deadline, lines.next_line()) => match r {
                    Ok(r) => r,
                    Err(_) => return pre_handshake_close(session, "handshake timeout"),
                },
                _ = place.evicted() => return evicted_close(session),
            }
        };
        match next {
            Ok(Line::Line(l)) if !open && is_batch(l) => {
                return pre_handshake_close(session, "batch before handshake");
            }
            Ok(Line::Line(l)) if !open => {
                // Not evicted while it dispatches: a handshake is never
                // answered on a connection whose place went to another.
                if !place.hold() {
                    return evicted_close(session);
                }
                broker.handle_line(session, l);
                place.release(session.is_handshaken());
            }
            Ok(Line::Line(l)) => broker.handle_line(session, l),
            Ok(Line::TooLarge) if !open => {
                return pre_handshake_close(session, "frame too large before handshake");
            }
            Ok(Line::TooLarge) => {
                tracing::warn!(
                    conn = session.conn,
                    limit = "frame",
                    "NDJSON line refused: over the frame bound"
                );
                broker.frame_too_large(session)
            }
            Ok(Line::Eof) | Err(_) => break,
        }
        if session.closing || session.outbox.is_closed() {
            break;
        }
        // Lines already buffered are read without an await that yields: a
        // burst of them would hold one of the runtime's two workers until it
        // ends, while other connections' calls wait. Charged to the task's
        // cooperative budget, a burst gives way every so many lines.
        tokio::task::consume_budget().await;
    }
}

/// Does this NDJSON line hold a batch (a JSON array)?
fn is_batch(line: &[u8]) -> bool {
    line.iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'[')
}

/// Answers a connection evicted before its handshake, then closes it.
fn evicted_close(session: &Session) {
    log_eviction(session.conn);
    let err = rpc_errors::pre_handshake_closed(EVICTED, PRE_HANDSHAKE_FRAME_BYTES);
    session.outbox.push_fatal(err);
}

/// Answers a connection that broke a pre-handshake rule, then closes it.
fn pre_handshake_close(session: &Session, reason: &str) {
    tracing::info!(
        conn = session.conn,
        reason,
        "socket connection closed before its handshake"
    );
    let err = rpc_errors::pre_handshake_closed(reason, PRE_HANDSHAKE_FRAME_BYTES);
    session.outbox.push_fatal(err);
}

/// Binary frames; before the handshake a frame is bounded by
/// `PRE_HANDSHAKE_FRAME_BYTES` and the handshake must come by `deadline`
/// and before an eviction (see `read_json`).
async fn read_binary<R: tokio::io::AsyncRead + Unpin>(
    broker: &Broker,
    session: &mut Session,
    mut rd: R,
    deadline: tokio::time::Instant,
    place: &Place,
) {
    let mut pre = [0u8; 6];
    tokio::select! {
        r = tokio::time::timeout_at(deadline, rd.read_exact(&mut pre)) => match r {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return,
            Err(_) => return pre_handshake_close(session, "handshake timeout"),
        },
        _ = place.evicted() => return evicted_close(session),
    }
    if pre != preamble() {
        session.outbox.push_fatal(rpc_errors::bad_preamble());
        return;
    }
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        let open = session.is_handshaken();
        let read = if open {
            rd.read_buf(&mut buf).await
        } else {
            tokio::select! {
                r = tokio::time::timeout_at(deadline, rd.read_buf(&mut buf)) => match r {
                    Ok(r) => r,
                    Err(_) => return pre_handshake_close(session, "handshake timeout"),
                },
                _ = place.evicted() => return evicted_close(session),
            }
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        // Frame by frame: the bound changes with the handshake, which may
        // arrive in the same read as the frames that follow it.
        let mut used = 0;
        loop {
            let open = session.is_handshaken();
            let max = if open {
                MAX_FRAME_BYTES
            } else {
                PRE_HANDSHAKE_FRAME_BYTES
            };
            let range = match next_frame(&buf[used..], max) {
                Ok(Some(r)) => used + r.start..used + r.end,
                Ok(None) => break,
                Err(_) if !open => {
                    return pre_handshake_close(session, "frame too large before handshake")
                }
                Err(e) => return fatal(session, e),
            };
            used = range.end;
            // See `read_json`: never evicted while it dispatches.
            if !open && !place.hold() {
                return evicted_close(session);
            }
            match decode_payload::<ClientFrame>(&buf[range]) {
                Ok(ClientFrame::Request { id, call }) => {
                    let responder = Responder::direct(session.outbox.clone(), Id::Uint(id));
                    broker.handle_call(session, call, responder);
                }
                Ok(ClientFrame::Notify { call }) => {
                    broker.handle_call(session, call, Responder::discard())
                }
                Err(e) => return fatal(session, e),
            }
            if !open {
                place.release(session.is_handshaken());
            }
            if session.closing || session.outbox.is_closed() {
                return;
            }
            // As in `read_json`: a burst of buffered frames gives way.
            tokio::task::consume_budget().await;
        }
        buf.drain(..used);
        if buf.capacity() > 4 * 1024 * 1024 && buf.len() < 64 * 1024 {
            buf.shrink_to(64 * 1024);
        }
    }
}

fn fatal(session: &Session, e: FrameError) {
    // The decoder's words are not logged: they may quote the frame.
    match &e {
        FrameError::TooLarge(n, max) => tracing::warn!(
            conn = session.conn,
            limit = "frame",
            bytes = n,
            max,
            "binary frame refused; the connection is closed"
        ),
        FrameError::Malformed(_) => tracing::info!(
            conn = session.conn,
            "malformed binary frame; the connection is closed"
        ),
    }
    session.outbox.push_fatal(rpc_errors::bad_frame(&e));
}

/// Stored bytes past which rendering a task is worth moving off the
/// runtime's worker (a few milliseconds of encoding).
const HEAVY_TASK_BYTES: u64 = 256 * 1024;

/// Is this item a reply carrying large tasks (see `write_loop`)?
fn is_heavy(item: &Outgoing) -> bool {
    use crate::reply::Reply;
    let weight = |r: &Result<Reply, RpcError>| -> u64 {
        match r {
            Ok(Reply::Task(v)) => v.rec.stored_bytes,
            Ok(Reply::Tasks(vs)) | Ok(Reply::TaskList { tasks: vs, .. }) => {
                vs.iter().map(|v| v.rec.stored_bytes).sum()
            }
            _ => 0,
        }
    };
    match item {
        Outgoing::Response(r) => weight(&r.result) > HEAVY_TASK_BYTES,
        Outgoing::Batch(rs) => rs.iter().map(|r| weight(&r.result)).sum::<u64>() > HEAVY_TASK_BYTES,
        Outgoing::Event(_) | Outgoing::Fatal(_) => false,
    }
}

/// Writes the outbox to the socket. A connection's ring events are staged
/// and published by routing itself (`crate::delivery::ring`); this loop
/// only moves the ones queued behind a full ring in, when the ring's slot
/// says so: after the publish that first left a backlog, and then each time
/// the client frees room (its signal, never a timer: a client that stops
/// reading costs nothing).
async fn write_loop(outbox: &Outbox, conn: &Stream, codec: Codec, stats: &WriteStats) {
    let mut w = conn;
    let mut items: Vec<Outgoing> = Vec::new();
    let mut bytes: Vec<u8> = Vec::with_capacity(64 * 1024);
    let ring = outbox.ring();
    loop {
        let more = match ring {
            Some(r) => tokio::select! {
                more = outbox.drain_async(&mut items) => more,
                _ = r.backlog() => {
                    if r.service() == ring::Service::Failed {
                        outbox.push_fatal(rpc_errors::ring_corrupt());
                    }
                    continue;
                }
            },
            None => outbox.drain_async(&mut items).await,
        };
        if !more {
            break;
        }
        bytes.clear();
        let mut frames = 0u64;
        loop {
            let heavy = items.iter().any(is_heavy);
            let mut encode = || {
                for item in items.drain(..) {
                    frames += 1;
                    let ok = match codec {
                        Codec::Json => ndjson::write_outgoing(&mut bytes, &item).is_ok(),
                        Codec::Binary => binary::write_outgoing(&mut bytes, &item).is_ok(),
                    };
                    debug_assert!(ok, "encoding into memory cannot fail");
                }
            };
            // Rendering a task that holds megabytes of files takes long
            // enough to stall the other connections this runtime worker
            // serves: hand them to another worker meanwhile.
            if heavy {
                tokio::task::block_in_place(encode);
            } else {
                encode();
            }
            // Coalesce whatever else became ready, up to a sane write size.
            if bytes.len() >= 1 << 20 {
                break;
            }
            outbox.drain_now(&mut items);
            if items.is_empty() {
                break;
            }
        }
        if bytes.is_empty() {
            continue;
        }
        if w.write_all(&bytes).await.is_err() {
            return;
        }
        stats.frames.fetch_add(frames, Ordering::Relaxed);
        stats.calls.fetch_add(1, Ordering::Relaxed);
        if bytes.capacity() > 4 << 20 {
            bytes = Vec::with_capacity(64 * 1024);
        }
    }
}
