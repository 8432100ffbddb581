//! [`Client`]: one connection to the broker, shared by every thread and
//! agent that holds a clone. It connects, shakes hands with the secret,
//! registers agents, and offers the raw typed ([`Client::call`],
//! [`Client::call_async`]) and JSON ([`Client::call_json`],
//! [`Client::call_json_async`]) escape hatches.

use crate::conn::Conn;
use crate::error::{ClientError, CloseReason};
use crate::pending::{Convert, Pending};
use crate::Event;
use a2a_proto::call::{Call, Outcome};
use a2a_proto::limits::A2A_MAX_STREAM_WAIT_SECONDS;
use a2a_proto::params::{HandshakeParams, HandshakeResult};
use a2a_proto::PROTOCOL_VERSION;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The environment variable a broker's starter passes the secret in (the
/// broker reads the same one).
pub const SECRET_ENV: &str = "A2A_BROKER_SECRET";

/// Where a broker that minted its secret wrote it: beside the socket, with
/// the extension `.secret` (owner-only).
pub fn secret_file(socket: &Path) -> PathBuf {
    socket.with_extension("secret")
}

/// The secret for the broker at `socket`: `A2A_BROKER_SECRET` if set, else
/// the contents of [`secret_file`].
pub fn read_secret(socket: &Path) -> std::io::Result<String> {
    if let Some(s) = std::env::var_os(SECRET_ENV)
        .and_then(|s| s.into_string().ok())
        .filter(|s| !s.is_empty())
    {
        return Ok(s);
    }
    Ok(std::fs::read_to_string(secret_file(socket))?
        .trim()
        .to_owned())
}

/// How a [`Client`] behaves; [`ClientOptions::default`] suits most callers.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Longest wait for any answer. The default exceeds the broker's own
    /// longest hold (`A2A_MAX_STREAM_WAIT_SECONDS`, for blocking sends), so
    /// it only fires for a broker that stopped answering.
    pub call_timeout: Duration,
    /// Bound of the connect, the handshake and every socket write (a
    /// broker that stops reading for this long closes the connection).
    pub io_timeout: Duration,
    /// How long [`Client::connect`] keeps retrying, on the calling thread,
    /// a connect refused because the broker's accept backlog is full (a
    /// burst of connections). Zero, the default, fails at once with the
    /// [`ClientError::Io`] of the refusal.
    pub connect_retry: Duration,
    /// Sent as `client` in the handshake.
    pub client_name: String,
    /// Sent as `clientVersion` in the handshake.
    pub client_version: String,
    /// Ask the broker for a shared-memory event ring of this many bytes
    /// (docs/protocol.md §1 Framing, the event ring): push agents' events then arrive through it
    /// instead of the socket. The broker may decline (see
    /// [`Client::uses_event_ring`]); events reach handlers, `try_events`,
    /// `events()` and `wait` the same way on either path.
    pub event_ring_bytes: Option<usize>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(A2A_MAX_STREAM_WAIT_SECONDS + 30),
            io_timeout: Duration::from_secs(10),
            connect_retry: Duration::ZERO,
            client_name: "a2a-client".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            event_ring_bytes: None,
        }
    }
}

impl ClientOptions {
    /// The `app.handshake` these options open a connection with, carrying
    /// `secret` (one form for every connection of ours: this crate's, the
    /// gateway's, the Node addon's calls).
    pub fn handshake(&self, secret: &str) -> Call {
        Call::Handshake(HandshakeParams {
            protocol_version: PROTOCOL_VERSION,
            client: Some(self.client_name.clone()),
            client_version: Some(self.client_version.clone()),
            locale: None,
            secret: Some(secret.to_owned()),
            event_ring: self
                .event_ring_bytes
                .map(|bytes| a2a_proto::params::EventRingRequest {
                    bytes: bytes as u64,
                }),
        })
    }
}

/// A connection to the broker.
///
/// Threads: cheap to clone (an `Arc`), `Send + Sync`: any number of threads
/// may call through it at once; their requests are pipelined on the one
/// socket (queued to its writer thread, which writes each burst in one
/// system call). Each connection owns two threads: the writer, and the
/// reader, which completes every [`Pending`] and runs every event handler
/// and `on_complete` callback.
///
/// Lifetime: the connection closes when the last clone, and the last
/// [`Agent`] made from it, is dropped, or on [`Client::close`]. Dropping
/// the last handle joins both threads, except when it happens on the
/// reader thread itself (in a handler or callback): that thread then ends
/// on its own, right after.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    /// The socket and its reader; closed when this is dropped.
    conn: Conn,
    /// What the broker said in the handshake (version, features).
    handshake: HandshakeResult,
    options: ClientOptions,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("host_version", &self.inner.handshake.host_version)
            .field("closed", &self.close_reason())
            .finish()
    }
}

impl Client {
    /// Connects to the broker's socket at `socket` and shakes hands with
    /// `secret`. A wrong secret fails with the broker's error
    /// ([`ClientError::Rpc`], code `-32600`, `data.reason = "bad secret"`).
    pub fn connect(socket: impl AsRef<Path>, secret: &str) -> Result<Client, ClientError> {
        Self::connect_with(socket, secret, ClientOptions::default())
    }

    /// [`Client::connect`] with explicit options.
    pub fn connect_with(
        socket: impl AsRef<Path>,
        secret: &str,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let conn = Conn::open(socket.as_ref(), options.io_timeout, options.connect_retry)?;
        let hello = options.handshake(secret);
        // On failure `conn` drops here, which closes the socket.
        let handshake = match conn.call(hello, options.io_timeout)? {
            Outcome::Handshake(h) => h,
            other => return Err(ClientError::unexpected("app.handshake", &other)),
        };
        if let Some(ring) = &handshake.event_ring {
            conn.attach_ring(&ring.name, ring.bytes as usize)?;
        }
        Ok(Client {
            inner: Arc::new(Inner {
                conn,
                handshake,
                options,
            }),
        })
    }

    /// The broker's handshake result.
    pub fn handshake_result(&self) -> &HandshakeResult {
        &self.inner.handshake
    }

    /// Did the broker grant the event ring asked for with
    /// [`ClientOptions::event_ring_bytes`]?
    pub fn uses_event_ring(&self) -> bool {
        self.inner.handshake.event_ring.is_some()
    }

    /// The options this client was made with.
    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    /// Sends one typed call and waits for its typed result (at most
    /// [`ClientOptions::call_timeout`]).
    pub fn call(&self, call: Call) -> Result<Outcome, ClientError> {
        self.call_timeout(call, self.inner.options.call_timeout)
    }

    /// [`Client::call`] with an explicit timeout.
    pub fn call_timeout(&self, call: Call, timeout: Duration) -> Result<Outcome, ClientError> {
        self.inner.conn.call(call, timeout)
    }

    /// Submits one typed call; never blocks on the socket. A failure known
    /// at submission (closed connection, frame too large) is the `Err`.
    pub fn call_async(&self, call: Call) -> Result<Pending<Outcome>, ClientError> {
        self.conn().submit(call, Convert::Fn(Ok), None)
    }

    /// The connection, whose `submit` every typed call goes through.
    pub(crate) fn conn(&self) -> &Conn {
        &self.inner.conn
    }

    /// The escape hatch: a method by name with JSON params, answered with
    /// the JSON result. Params are checked here exactly as the broker would
    /// (`-32601` unknown method, `-32602` bad params, as [`ClientError::Rpc`])
    /// and travel as the same binary frame as the typed calls.
    ///
    /// A push agent registered this way has no queue of its own: its
    /// events land in [`Client::take_unclaimed_events`].
    pub fn call_json(
        &self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, ClientError> {
        let params = match params {
            serde_json::Value::Null => "{}".to_owned(),
            p => p.to_string(),
        };
        let call = Call::from_json(method, &params)?;
        Ok(self.call(call)?.to_json())
    }

    /// [`Client::call_json`], submitted: params are checked at once (a bad
    /// method or params is the `Err`), the JSON result comes in the
    /// [`Pending`].
    pub fn call_json_async(
        &self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<Pending<serde_json::Value>, ClientError> {
        let params = match params {
            serde_json::Value::Null => "{}".to_owned(),
            p => p.to_string(),
        };
        let call = Call::from_json(method, &params)?;
        self.conn()
            .submit(call, Convert::Fn(|o| Ok(o.to_json())), None)
    }

    /// Takes the events no [`Agent`] of this client claimed (at most the
    /// latest 1024): those of agents registered through
    /// [`Client::call_json`], or of agents whose every handle was dropped.
    pub fn take_unclaimed_events(&self) -> Vec<Event> {
        self.inner.conn.shared.demux.take_unclaimed()
    }

    /// Closes the connection now: pending calls fail with
    /// [`ClientError::Closed`] (promptly, completed by the reader thread),
    /// later calls at submission, blocked [`Agent::wait`]s return. Any
    /// thread may call it, a handler too. The broker
    /// invalidates the tokens of the agents registered on it and leaves
    /// their tasks open.
    pub fn close(&self) {
        self.inner.conn.close(CloseReason::Shutdown);
    }

    /// [`Client::close`], then waits until the connection's threads have
    /// ended, so none outlives this call even while another handle (an
    /// agent, a call's callback under way) still holds the connection:
    /// what the C ABI's `a2a_client_free` promises. Called on one of those
    /// threads (from a handler or a callback), it cannot wait for that
    /// one, which ends on its own as soon as it returns.
    pub fn close_and_wait(&self) {
        self.inner.conn.close_and_join(CloseReason::Shutdown);
    }

    /// Why the connection ended, or `None` while it is open.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.inner.conn.close_reason()
    }

    /// Frames submitted and `write` system calls made by this connection's
    /// writer thread so far (their ratio is the coalescing achieved).
    pub fn write_stats(&self) -> (u64, u64) {
        self.inner.conn.write_stats()
    }

    pub(crate) fn inner_demux(&self) -> &crate::demux::Demux {
        &self.inner.conn.shared.demux
    }

    /// The connection's id, for the reader-thread check.
    pub(crate) fn conn_id(&self) -> u64 {
        self.inner.conn.shared.id
    }
}
