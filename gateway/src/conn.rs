//! The gateway's connection to the broker, driven on the gateway's own
//! tokio runtime: binary frames (docs/protocol.md §1 Framing) over the
//! local socket, with no thread of its own.
//!
//! Why not `a2a-client`'s [`a2a_client::Client`]: that client owns a
//! reader and a writer OS thread per connection (it serves plain threads,
//! the C ABI and Node), so every answer crossed from its reader thread to a
//! tokio worker: about four reader wake-ups and as many cross-thread wakes
//! per HTTP call (BENCHMARKS.md, "A2A gateway"). Here a
//! call is written by the task that makes it (a non-blocking write; what
//! the socket cannot take at once is finished by a short-lived flush task),
//! and one reader task per connection decodes the broker's frames and hands
//! each answer to its waiting future through a oneshot: the socket's
//! readiness wakes the reader on whichever worker polls the runtime's
//! driver, and the answer's waker usually runs on that same worker.
//!
//! What it keeps of `a2a-client`'s contract (the gateway's fairness and
//! durability rules lean on it, SECURITY.md's gateway section):
//! - one connection per identity (made by [`crate::core::Core`]), so the
//!   broker's per-connection bounds stay per identity;
//! - the connect, the handshake and every write are bounded by
//!   `io_timeout` (a broker that stops reading closes the connection);
//! - no call outlives the connection: when it ends, every waiting call
//!   fails with [`ClientError::Closed`], and later calls at once;
//! - answers are completed, and events handed to their agent's
//!   handler, in the order the broker sent them, on the reader task: a
//!   call's [`Hook`] runs there before its caller resumes (the core
//!   publishes a follow-up's result that way, in version order with the
//!   events);
//! - a frame the broker sends past `A2A_MAX_OUT_FRAME_BYTES`, or one that
//!   does not decode, ends the connection with a reason (never a panic);
//!   a request past `MAX_FRAME_BYTES` is refused before it is sent.
//!
//! The codec, the framer and the table of waiting calls are `a2a-client`'s
//! wire core ([`a2a_client::wire`], sans I/O): this file is only its tokio
//! driver (the socket, the writing turn, the reader task, the routes of
//! events). The calls' types are `a2a-proto`'s; errors are `a2a-client`'s
//! [`ClientError`], so the gateway maps them as before.

use a2a_client::wire::{Binary, Calls, Codec, Framer, Inbound};
use a2a_client::TaskQuery;
use a2a_client::{ClientError, ClientOptions, CloseReason};
use a2a_proto::call::{Call, Outcome};
use a2a_proto::params::{
    ArtifactParams, CancelParams, GetParams, ListTasksParams, RegisterParams, SendConfiguration,
    SendParams, StatusParams, TaskListResult, TokenParams,
};
use a2a_proto::types::{AgentCard, Artifact, Delivery, Message, Notification, State, Task};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot, Notify};

/// Bytes asked of each read (a frame larger than this is reassembled).
const READ_CHUNK: usize = 64 * 1024;

/// A buffer (read or write) that grew past this is given back once empty.
const KEEP_BUF: usize = 1 << 20;

/// A call's answer.
pub type Answer = Result<Outcome, ClientError>;

/// Run on the reader task when a call's answer arrives, before the caller
/// gets it, in the order of the broker's frames.
pub type Hook = Box<dyn FnOnce(&Answer) + Send + 'static>;

/// Run on the reader task with a task a call returned (see [`Hook`]).
pub type TaskHook = Box<dyn FnOnce(&Task) + Send + 'static>;

/// An agent's events: run on the reader task for every notification
/// addressed to it, in the broker's order. Must not block.
pub type EventHandler = Arc<dyn Fn(Notification) + Send + Sync + 'static>;

/// Where the broker is and how to greet it.
#[derive(Clone)]
pub struct BrokerAddr {
    pub socket: PathBuf,
    pub secret: String,
    /// `client_name`, `client_version` and `io_timeout` are used (no event
    /// ring is asked for: events come on the socket, to the reader task).
    pub options: ClientOptions,
}

/// One call waiting for its answer.
struct Waiter {
    tx: oneshot::Sender<Answer>,
    hook: Option<Hook>,
}

impl Waiter {
    fn complete(self, answer: Answer) {
        if let Some(hook) = self.hook {
            hook(&answer);
        }
        // The caller may have gone (its HTTP request dropped): the hook ran.
        let _ = self.tx.send(answer);
    }
}

/// A registered agent's route: its events go to `handler`.
struct Route {
    context_id: String,
    /// Which registration made it (a peer id is registered again, on the
    /// same connection, when a context is freed or re-registered).
    generation: u64,
    handler: EventHandler,
}

#[derive(Default)]
struct Table {
    /// The calls waiting (the wire core's table), closed once: the first
    /// reason wins.
    calls: Calls<Waiter>,
    /// By peer id, unique among the broker's live agents.
    routes: HashMap<String, Route>,
}

/// Frames not yet written, and whether some task holds the writing turn.
#[derive(Default)]
struct Outgoing {
    buf: Vec<u8>,
    writing: bool,
}

struct Shared {
    stream: UnixStream,
    table: Mutex<Table>,
    out: Mutex<Outgoing>,
    next_id: AtomicU64,
    /// Wakes the reader when this side closes.
    closing: Notify,
    io_timeout: Duration,
}

/// Registrations' generations (process-wide: unique is all they need).
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

impl Shared {
    fn closed_error(&self) -> ClientError {
        let reason = self.table.lock().calls.closed().cloned();
        ClientError::Closed(reason.unwrap_or(CloseReason::ByBroker))
    }

    /// Records why the connection ends (the first reason wins) and wakes
    /// the reader, which fails the waiting calls.
    fn close(&self, reason: CloseReason) {
        self.table.lock().calls.mark_closed(reason);
        self.out.lock().buf = Vec::new();
        self.closing.notify_one();
    }

    /// The reader's last act: every waiting call fails, no route is fed.
    fn finish(&self, reason: CloseReason) {
        self.close(reason);
        let (calls, reason) = {
            let mut t = self.table.lock();
            t.routes.clear();
            let calls = t.calls.close(CloseReason::ByBroker);
            let reason = t.calls.closed().cloned().unwrap_or(CloseReason::ByBroker);
            (calls, reason)
        };
        for (_, w) in calls {
            w.complete(Err(ClientError::Closed(reason.clone())));
        }
    }

    /// Registers the call's waiter, then encodes its frame and writes it
    /// (from this task when no write is under way; never waits).
    fn submit(
        self: &Arc<Self>,
        call: Call,
        hook: Option<Hook>,
    ) -> Result<oneshot::Receiver<Answer>, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            // Registered before a byte is written: the answer cannot come
            // first.
            let mut t = self.table.lock();
            if let Err((reason, _)) = t.calls.insert(id, Waiter { tx, hook }) {
                return Err(ClientError::Closed(reason));
            }
        }
        let mut out = self.out.lock();
        // A refused request leaves the buffer as it was.
        if let Err(e) = Binary::encode_request(id, &call, &mut out.buf) {
            drop(out);
            self.table.lock().calls.take(id);
            return Err(e);
        }
        if out.writing {
            // The task holding the turn takes these bytes with its next write.
            return Ok(rx);
        }
        out.writing = true;
        let bytes = std::mem::take(&mut out.buf);
        drop(out);
        self.write(bytes);
        Ok(rx)
    }

    /// Writes `bytes` (and whatever queues meanwhile) without waiting,
    /// holding the writing turn; what the socket cannot take now goes to a
    /// flush task, which keeps the turn until all is written.
    fn write(self: &Arc<Self>, mut bytes: Vec<u8>) {
        loop {
            match write_now(&self.stream, &bytes) {
                Ok(n) if n == bytes.len() => {
                    let mut out = self.out.lock();
                    bytes.clear();
                    if out.buf.is_empty() {
                        out.writing = false;
                        if bytes.capacity() <= KEEP_BUF && out.buf.capacity() == 0 {
                            out.buf = bytes;
                        }
                        return;
                    }
                    std::mem::swap(&mut out.buf, &mut bytes);
                }
                Ok(n) => {
                    bytes.drain(..n);
                    let shared = Arc::clone(self);
                    tokio::spawn(async move { shared.flush(bytes).await });
                    return;
                }
                Err(e) => {
                    self.out.lock().writing = false;
                    self.close(CloseReason::of_write(&e));
                    return;
                }
            }
        }
    }

    /// Writes the rest of a write the socket could not take at once, and
    /// what queues behind it; each wait for room is bounded by
    /// `io_timeout`, after which the connection closes.
    async fn flush(self: Arc<Self>, mut bytes: Vec<u8>) {
        loop {
            while !bytes.is_empty() {
                match tokio::time::timeout(self.io_timeout, self.stream.writable()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return self.fail_write(&e),
                    Err(_) => {
                        let e = std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "the broker stopped reading",
                        );
                        return self.fail_write(&e);
                    }
                }
                match write_now(&self.stream, &bytes) {
                    Ok(n) => {
                        bytes.drain(..n);
                    }
                    Err(e) => return self.fail_write(&e),
                }
            }
            let mut out = self.out.lock();
            if out.buf.is_empty() || self.table.lock().calls.closed().is_some() {
                out.writing = false;
                return;
            }
            std::mem::swap(&mut out.buf, &mut bytes);
        }
    }

    fn fail_write(&self, e: &std::io::Error) {
        self.out.lock().writing = false;
        self.close(CloseReason::of_write(e));
    }

    /// Hands every complete frame in the framer to its taker, in order.
    fn dispatch(&self, framer: &mut Framer<Binary>) -> Result<(), CloseReason> {
        while let Some(frame) = framer.next_frame()? {
            match Binary::decode(frame)? {
                Inbound::Answer { id, result } => {
                    // An id answered twice (not a broker of ours) loses
                    // the second answer here.
                    let waiter = self.table.lock().calls.take(id);
                    if let Some(w) = waiter {
                        w.complete(result.map_err(ClientError::Rpc));
                    }
                }
                Inbound::Event(n) => {
                    let handler = {
                        let t = self.table.lock();
                        let (peer, ctx) = n.recipient();
                        t.routes
                            .get(peer)
                            .filter(|r| r.context_id == ctx)
                            .map(|r| Arc::clone(&r.handler))
                    };
                    // An event for no live agent (one being freed) is
                    // dropped: the gateway's record is refreshed on reads.
                    if let Some(h) = handler {
                        h(n);
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads frames until the socket ends or this side closes. Reads land
    /// in the framer's buffer (docs/protocol.md §1 Framing, §9 Bounds: the
    /// broker's frames may reach A2A_MAX_OUT_FRAME_BYTES, the framer's
    /// bound), where whole frames are decoded in place.
    async fn read_frames(&self) -> CloseReason {
        let mut framer: Framer<Binary> = Framer::new();
        loop {
            tokio::select! {
                biased;
                () = self.closing.notified() => {
                    return self.table.lock().calls.closed().cloned().unwrap_or(CloseReason::Shutdown);
                }
                r = self.stream.readable() => {
                    if let Err(e) = r {
                        return CloseReason::Io(e.to_string());
                    }
                }
            }
            match self.stream.try_read(framer.read_buf(READ_CHUNK)) {
                Ok(0) => return CloseReason::ByBroker,
                Ok(n) => framer.filled(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                // A broker killed with bytes of ours unread resets the
                // socket: the same end, for a caller.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return CloseReason::ByBroker
                }
                Err(e) => return CloseReason::Io(e.to_string()),
            }
            if let Err(reason) = self.dispatch(&mut framer) {
                return reason;
            }
        }
    }
}

/// Writes what the socket takes of `bytes` now; how many bytes it took.
fn write_now(stream: &UnixStream, bytes: &[u8]) -> std::io::Result<usize> {
    let mut sent = 0;
    while sent < bytes.len() {
        match stream.try_write(&bytes[sent..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// Closes the connection when the last handle goes (the reader task holds
/// the shared state, not a handle).
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.close(CloseReason::Shutdown);
    }
}

/// A connection to the broker on the current tokio runtime. Cheap to
/// clone; it closes when the last clone and the last [`Peer`] made
/// on it are dropped.
#[derive(Clone)]
pub struct BrokerConn {
    handle: Arc<Handle>,
}

impl BrokerConn {
    /// Connects, writes the binary preamble, starts the reader task and
    /// shakes hands with the secret, each step within `io_timeout`. A wrong
    /// secret fails with the broker's error ([`ClientError::Rpc`]).
    pub async fn connect(addr: &BrokerAddr) -> Result<BrokerConn, ClientError> {
        let io_timeout = addr.options.io_timeout.max(Duration::from_millis(1));
        let timed_out = || {
            ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the broker did not answer in time",
            ))
        };
        let mut stream = tokio::time::timeout(io_timeout, UnixStream::connect(&addr.socket))
            .await
            .map_err(|_| timed_out())??;
        tokio::time::timeout(io_timeout, stream.write_all(Binary::PREAMBLE))
            .await
            .map_err(|_| timed_out())??;
        let shared = Arc::new(Shared {
            stream,
            table: Mutex::new(Table::default()),
            out: Mutex::new(Outgoing::default()),
            next_id: AtomicU64::new(1),
            closing: Notify::new(),
            io_timeout,
        });
        let reader = Arc::clone(&shared);
        tokio::spawn(async move {
            let reason = reader.read_frames().await;
            reader.finish(reason);
        });
        let conn = BrokerConn {
            handle: Arc::new(Handle { shared }),
        };
        // No event ring, whatever the options say: events come on the
        // socket, to the reader task.
        let hello = ClientOptions {
            event_ring_bytes: None,
            ..addr.options.clone()
        }
        .handshake(&addr.secret);
        // On failure `conn` drops here, which closes the connection.
        match tokio::time::timeout(io_timeout, conn.call(hello, None)).await {
            Err(_) => Err(timed_out()),
            Ok(Ok(Outcome::Handshake(_))) => Ok(conn),
            Ok(Ok(other)) => Err(ClientError::unexpected("app.handshake", &other)),
            Ok(Err(e)) => Err(e),
        }
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.handle.shared
    }

    /// Sends one call and waits for its answer; `hook` runs on the reader
    /// task with the answer first. Submitted when first polled.
    pub async fn call(&self, call: Call, hook: Option<Hook>) -> Answer {
        let rx = self.shared().submit(call, hook)?;
        match rx.await {
            Ok(answer) => answer,
            Err(_) => Err(self.shared().closed_error()),
        }
    }

    /// Why the connection ended, or `None` while it is open.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.shared().table.lock().calls.closed().cloned()
    }

    /// Closes the connection now: waiting calls fail with
    /// [`ClientError::Closed`], later ones at once.
    pub fn close(&self) {
        self.shared().close(CloseReason::Shutdown);
    }

    /// Registers a push agent in `context_id`, hidden from other agents'
    /// discovery (the gateway's requesters are plumbing), whose events go
    /// to `handler` from its registration's answer on (the route is set on
    /// the reader task before any later frame is read: no event is lost).
    pub async fn register(
        &self,
        context_id: &str,
        card: AgentCard,
        handler: EventHandler,
    ) -> Result<Peer, ClientError> {
        self.register_with(context_id, card, true, handler).await
    }

    /// Registers a push agent that local agents discover (the bridge's
    /// mirror of a remote agent); its events come on the returned channel,
    /// which ends when the agent is deregistered, its [`Peer`] dropped or
    /// the connection gone. Unbounded, as `a2a-client`'s queues: the
    /// broker bounds what one connection is sent (`a2a.lagged` past it).
    pub async fn register_visible(
        &self,
        context_id: &str,
        card: AgentCard,
    ) -> Result<(Peer, mpsc::UnboundedReceiver<Notification>), ClientError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let handler: EventHandler = Arc::new(move |n| {
            let _ = tx.send(n);
        });
        let peer = self.register_with(context_id, card, false, handler).await?;
        Ok((peer, rx))
    }

    async fn register_with(
        &self,
        context_id: &str,
        card: AgentCard,
        hidden: bool,
        handler: EventHandler,
    ) -> Result<Peer, ClientError> {
        let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
        let call = Call::Register(RegisterParams {
            context_id: context_id.to_owned(),
            card,
            delivery: Some(Delivery::Push),
            hidden,
        });
        let shared: Weak<Shared> = Arc::downgrade(self.shared());
        let route_ctx = context_id.to_owned();
        let hook: Hook = Box::new(move |answer| {
            let (Ok(Outcome::Registered(r)), Some(shared)) = (answer, shared.upgrade()) else {
                return;
            };
            let route = Route {
                context_id: route_ctx,
                generation,
                handler,
            };
            shared.table.lock().routes.insert(r.agent_id.clone(), route);
        });
        match self.call(call, Some(hook)).await? {
            Outcome::Registered(r) => Ok(Peer {
                conn: self.clone(),
                id: r.agent_id,
                token: r.token,
                generation,
            }),
            other => Err(ClientError::unexpected("a2a.agents.register", &other)),
        }
    }
}

/// An agent registered on a [`BrokerConn`]: an A2A context's requester
/// (`core`), or the bridge's mirror of a remote agent (`outbound`).
pub struct Peer {
    conn: BrokerConn,
    id: String,
    token: String,
    generation: u64,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer").field("id", &self.id).finish()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        unroute(self.conn.shared(), &self.id, self.generation);
    }
}

/// Stops routing `id`'s events, if the route is still this registration's.
fn unroute(shared: &Shared, id: &str, generation: u64) {
    let mut t = shared.table.lock();
    if t.routes.get(id).is_some_and(|r| r.generation == generation) {
        t.routes.remove(id);
    }
}

impl Peer {
    /// The peer id (`agentId`).
    pub fn id(&self) -> &str {
        &self.id
    }

    fn token(&self) -> Option<String> {
        Some(self.token.clone())
    }

    /// A call answered by a task; `hook` gets the task on the reader task.
    async fn task_call(
        &self,
        method: &str,
        call: Call,
        hook: Option<TaskHook>,
    ) -> Result<Task, ClientError> {
        let hook = hook.map(|h| -> Hook {
            Box::new(move |answer| {
                if let Ok(Outcome::Task(r)) = answer {
                    h(&r.task);
                }
            })
        });
        match self.conn.call(call, hook).await? {
            Outcome::Task(r) => Ok(r.task),
            other => Err(ClientError::unexpected(method, &other)),
        }
    }

    /// `a2a.message.send`: a new task (`message.to` set) or a follow-up.
    pub async fn send(
        &self,
        message: Message,
        configuration: Option<SendConfiguration>,
        hook: Option<TaskHook>,
    ) -> Result<Task, ClientError> {
        let call = Call::Send(SendParams {
            token: self.token(),
            message,
            configuration,
        });
        self.task_call("a2a.message.send", call, hook).await
    }

    /// `a2a.tasks.get`, with the last `history_length` messages if given.
    pub async fn get_task(
        &self,
        id: &str,
        history_length: Option<u64>,
    ) -> Result<Task, ClientError> {
        let call = Call::Get(GetParams {
            token: self.token(),
            id: id.to_owned(),
            history_length,
        });
        self.task_call("a2a.tasks.get", call, None).await
    }

    /// `a2a.tasks.cancel`, optionally with a message (the reason).
    pub async fn cancel(
        &self,
        id: &str,
        message: Option<Message>,
        hook: Option<TaskHook>,
    ) -> Result<Task, ClientError> {
        let call = Call::Cancel(CancelParams {
            token: self.token(),
            id: id.to_owned(),
            message,
        });
        self.task_call("a2a.tasks.cancel", call, hook).await
    }

    /// `a2a.tasks.status` (the worker's): moves the task, optionally with
    /// a message.
    pub async fn set_status(
        &self,
        id: &str,
        state: State,
        message: Option<Message>,
    ) -> Result<Task, ClientError> {
        let call = Call::Status(StatusParams {
            token: self.token(),
            id: id.to_owned(),
            state,
            message,
        });
        self.task_call("a2a.tasks.status", call, None).await
    }

    /// `a2a.tasks.artifact` (the worker's): adds an artifact, or with
    /// `append` extends the one with the same `artifactId`.
    pub async fn add_artifact(
        &self,
        id: &str,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<Task, ClientError> {
        let call = Call::Artifact(ArtifactParams {
            token: self.token(),
            id: id.to_owned(),
            artifact,
            append,
            last_chunk,
        });
        self.task_call("a2a.tasks.artifact", call, None).await
    }

    /// `a2a.tasks.list`: one page of this agent's tasks, newest first.
    pub async fn list_tasks(&self, query: TaskQuery) -> Result<TaskListResult, ClientError> {
        let call = Call::ListTasks(ListTasksParams {
            token: self.token(),
            role: query.role,
            state: query.state,
            limit: query.limit,
            cursor: query.cursor,
        });
        match self.conn.call(call, None).await? {
            Outcome::TaskList(r) => Ok(r),
            other => Err(ClientError::unexpected("a2a.tasks.list", &other)),
        }
    }

    /// `a2a.agents.deregister`: the token dies, the broker cancels the
    /// tasks it requested; its events stop being routed (on the reader
    /// task, with the answer).
    pub async fn deregister(&self) -> Result<(), ClientError> {
        let call = Call::Deregister(TokenParams {
            token: self.token(),
        });
        let shared: Weak<Shared> = Arc::downgrade(self.conn.shared());
        let (id, generation) = (self.id.clone(), self.generation);
        let hook: Hook = Box::new(move |answer| {
            if let (Ok(Outcome::Ok(r)), Some(shared)) = (answer, shared.upgrade()) {
                if r.ok {
                    unroute(&shared, &id, generation);
                }
            }
        });
        match self.conn.call(call, Some(hook)).await? {
            Outcome::Ok(r) if r.ok => Ok(()),
            Outcome::Ok(_) => Err(ClientError::Protocol(
                "deregister answered ok: false".into(),
            )),
            other => Err(ClientError::unexpected("a2a.agents.deregister", &other)),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Against a fake broker on a real Unix socket, which sends exactly
    //! the frames each test needs.
    use super::*;
    use a2a_client::{agent_card, message_to, text_message};
    // The fake broker's side of the codec: what the broker's transport
    // reads and writes, not a client's.
    use a2a_proto::binary::{decode_payload, encode_frame, preamble, ClientFrame, ServerFrame};
    use a2a_proto::limits::MAX_FRAME_BYTES;
    use a2a_proto::params::{HandshakeResult, RegisterResult, TaskResult};
    use a2a_proto::types::{State, StatusUpdate, StreamEvent, TaskEventParams, TaskStatus};
    use tokio::io::AsyncReadExt;
    use tokio::net::UnixListener;

    /// The broker's end of the socket.
    struct Fake {
        stream: UnixStream,
    }

    impl Fake {
        async fn read_call(&mut self) -> (u64, Call) {
            let mut len = [0u8; 4];
            self.stream.read_exact(&mut len).await.expect("a frame");
            let mut payload = vec![0u8; u32::from_le_bytes(len) as usize];
            self.stream.read_exact(&mut payload).await.expect("a frame");
            match decode_payload::<ClientFrame>(&payload).expect("decodes") {
                ClientFrame::Request { id, call } => (id, call),
                ClientFrame::Notify { .. } => panic!("no notifications are sent"),
            }
        }

        /// Sends `frames` in one write.
        async fn send(&mut self, frames: &[ServerFrame]) {
            let mut buf = Vec::new();
            for f in frames {
                encode_frame(f, &mut buf).expect("encodes");
            }
            self.send_raw(&buf).await;
        }

        async fn send_raw(&mut self, bytes: &[u8]) {
            self.stream.write_all(bytes).await.expect("written");
        }
    }

    fn answer(id: u64, outcome: Outcome) -> ServerFrame {
        ServerFrame::Response {
            id,
            result: Ok(outcome),
        }
    }

    fn task(id: &str, version: u64) -> Task {
        Task {
            kind: "task".into(),
            id: id.into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: State::Working,
                message: None,
                timestamp: "2026-12-01T00:00:00Z".into(),
            },
            history: Vec::new(),
            artifacts: Vec::new(),
            agent_name: "worker".into(),
            requester_name: "req-1".into(),
            version,
        }
    }

    fn event(recipient: &str, version: u64) -> ServerFrame {
        ServerFrame::Notification(Notification::TaskEvent(TaskEventParams {
            recipient: recipient.into(),
            recipient_context_id: "ctx".into(),
            context_id: "ctx".into(),
            seq: version,
            task_version: version,
            event: StreamEvent::Status(StatusUpdate {
                task_id: "t-1".into(),
                context_id: "ctx".into(),
                status: task("t-1", version).status,
                is_final: false,
            }),
        }))
    }

    /// A connection past its handshake, and the fake broker's end.
    async fn pair(io_timeout: Duration) -> (BrokerConn, Fake, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("broker.sock");
        let listener = UnixListener::bind(&path).expect("bind");
        let addr = BrokerAddr {
            socket: path,
            secret: "s".into(),
            options: ClientOptions {
                io_timeout,
                ..ClientOptions::default()
            },
        };
        let broker = async {
            let (stream, _) = listener.accept().await.expect("accept");
            let mut fake = Fake { stream };
            let mut pre = [0u8; 6];
            fake.stream.read_exact(&mut pre).await.expect("preamble");
            assert_eq!(pre, preamble());
            let (id, call) = fake.read_call().await;
            let Call::Handshake(h) = call else {
                panic!("the handshake comes first: {call:?}")
            };
            assert_eq!(h.secret.as_deref(), Some("s"));
            let hello = HandshakeResult {
                protocol_version: a2a_proto::PROTOCOL_VERSION,
                host: "fake".into(),
                host_version: "0".into(),
                features: Vec::new(),
                capabilities: Vec::new(),
                event_ring: None,
            };
            fake.send(&[answer(id, Outcome::Handshake(hello))]).await;
            fake
        };
        let (conn, fake) = tokio::join!(BrokerConn::connect(&addr), broker);
        (conn.expect("connects"), fake, dir)
    }

    /// Registers `req-1` with `handler`.
    async fn requester(conn: &BrokerConn, fake: &mut Fake, handler: EventHandler) -> Peer {
        let broker = async {
            let (id, call) = fake.read_call().await;
            let Call::Register(p) = call else {
                panic!("a registration: {call:?}")
            };
            assert!(p.hidden, "the gateway's requesters are hidden");
            let r = RegisterResult {
                agent_id: "req-1".into(),
                token: "tok".into(),
                card: p.card,
            };
            fake.send(&[answer(id, Outcome::Registered(r))]).await;
        };
        let (r, ()) = tokio::join!(conn.register("ctx", agent_card("req-1"), handler), broker);
        r.expect("registered")
    }

    #[tokio::test]
    async fn answers_events_and_hooks_keep_the_brokers_order() {
        let (conn, mut fake, _dir) = pair(Duration::from_secs(5)).await;
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let events = Arc::clone(&log);
        let handler: EventHandler = Arc::new(move |n| {
            if let Notification::TaskEvent(p) = n {
                events.lock().push(format!("event {}", p.task_version));
            }
        });
        let req = requester(&conn, &mut fake, handler).await;
        let hooked = Arc::clone(&log);
        let hook: TaskHook = Box::new(move |t| hooked.lock().push(format!("hook {}", t.version)));
        let calls = async {
            tokio::join!(
                req.send(message_to("worker", "hi"), None, Some(hook)),
                req.get_task("t-2", None)
            )
        };
        let broker = async {
            let (a, call_a) = fake.read_call().await;
            let (b, _) = fake.read_call().await;
            let (send_id, get_id) = match call_a {
                Call::Send(_) => (a, b),
                _ => (b, a),
            };
            // One read's worth: an event, the second call's answer first,
            // an event for nobody here, then the first call's answer.
            fake.send(&[
                event("req-1", 1),
                answer(
                    get_id,
                    Outcome::Task(TaskResult {
                        task: task("t-2", 7),
                    }),
                ),
                event("someone-else", 9),
                answer(
                    send_id,
                    Outcome::Task(TaskResult {
                        task: task("t-1", 2),
                    }),
                ),
            ])
            .await;
        };
        let ((sent, got), ()) = tokio::join!(calls, broker);
        assert_eq!(sent.expect("send answered").id, "t-1");
        assert_eq!(got.expect("get answered").id, "t-2");
        // The hook ran on the reader, in frame order, before the caller
        // resumed; the event for another peer reached no handler.
        assert_eq!(*log.lock(), vec!["event 1".to_owned(), "hook 2".to_owned()]);
        // Deregistered: its events are no longer routed.
        let broker = async {
            let (id, call) = fake.read_call().await;
            assert!(matches!(call, Call::Deregister(_)));
            fake.send(&[
                answer(id, Outcome::Ok(a2a_proto::params::OkResult { ok: true })),
                event("req-1", 3),
            ])
            .await;
        };
        let (r, ()) = tokio::join!(req.deregister(), broker);
        r.expect("deregistered");
        // A call after the event proves the reader has passed it.
        let broker = async {
            let (id, _) = fake.read_call().await;
            fake.send(&[answer(
                id,
                Outcome::Task(TaskResult {
                    task: task("t-2", 7),
                }),
            )])
            .await;
        };
        let (r, ()) = tokio::join!(
            conn.call(
                Call::Get(GetParams {
                    token: None,
                    id: "t-2".into(),
                    history_length: None,
                }),
                None
            ),
            broker
        );
        r.expect("answered");
        assert_eq!(log.lock().len(), 2, "{:?}", log.lock());
    }

    #[tokio::test]
    async fn a_visible_agents_events_come_on_its_channel_until_it_is_dropped() {
        let (conn, mut fake, _dir) = pair(Duration::from_secs(5)).await;
        let broker = async {
            let (id, call) = fake.read_call().await;
            let Call::Register(p) = call else {
                panic!("a registration: {call:?}")
            };
            assert!(!p.hidden, "the bridge's mirror is discoverable");
            let r = RegisterResult {
                agent_id: "req-1".into(),
                token: "tok".into(),
                card: p.card,
            };
            // The answer and the first event in one write: the route is
            // set before the event is read.
            fake.send(&[answer(id, Outcome::Registered(r)), event("req-1", 1)])
                .await;
        };
        let (r, ()) = tokio::join!(conn.register_visible("ctx", agent_card("req-1")), broker);
        let (peer, mut events) = r.expect("registered");
        let first = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .expect("the event comes");
        assert!(
            matches!(first, Some(Notification::TaskEvent(ref p)) if p.task_version == 1),
            "{first:?}"
        );
        drop(peer);
        let end = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .expect("the channel ends");
        assert!(end.is_none(), "{end:?}");
    }

    #[tokio::test]
    async fn a_bad_frame_ends_the_connection_and_fails_its_calls() {
        for bad in [
            // A length past what the broker may send.
            u32::MAX.to_le_bytes().to_vec(),
            // A payload that is no frame.
            vec![3, 0, 0, 0, 0xff, 0xff, 0xff],
        ] {
            let (conn, mut fake, _dir) = pair(Duration::from_secs(5)).await;
            let call = Call::Get(GetParams {
                token: None,
                id: "t".into(),
                history_length: None,
            });
            let broker = async {
                fake.read_call().await;
                fake.send_raw(&bad).await;
            };
            let (r, ()) = tokio::join!(conn.call(call.clone(), None), broker);
            let reason = match r {
                Err(ClientError::Closed(reason)) => reason,
                other => panic!("the call fails with the connection: {other:?}"),
            };
            assert!(matches!(reason, CloseReason::BadFrame(_)), "{reason:?}");
            assert!(matches!(
                conn.call(call, None).await,
                Err(ClientError::Closed(CloseReason::BadFrame(_)))
            ));
        }
    }

    #[tokio::test]
    async fn a_broker_that_stops_reading_closes_the_connection_in_io_timeout() {
        let (conn, _fake, _dir) = pair(Duration::from_millis(300)).await;
        // More than the socket's buffers hold, never read.
        let big = text_message(&"x".repeat(8 << 20));
        let call = Call::Send(SendParams {
            token: None,
            message: big,
            configuration: None,
        });
        let started = std::time::Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(10), conn.call(call, None))
            .await
            .expect("ends within the io timeout, not never");
        assert!(
            matches!(r, Err(ClientError::Closed(CloseReason::Io(_)))),
            "{r:?}"
        );
        assert!(started.elapsed() >= Duration::from_millis(300));
    }

    #[tokio::test]
    async fn a_request_over_the_frame_bound_is_refused_before_it_is_sent() {
        let (conn, mut fake, _dir) = pair(Duration::from_secs(5)).await;
        let call = Call::Send(SendParams {
            token: None,
            message: text_message(&"x".repeat(MAX_FRAME_BYTES + 1)),
            configuration: None,
        });
        assert!(matches!(
            conn.call(call, None).await,
            Err(ClientError::FrameTooLarge { .. })
        ));
        // Nothing of it was written: the next call is the next frame read.
        let get = Call::Get(GetParams {
            token: None,
            id: "t-2".into(),
            history_length: None,
        });
        let broker = async {
            let (id, call) = fake.read_call().await;
            assert!(matches!(call, Call::Get(_)), "{call:?}");
            fake.send(&[answer(
                id,
                Outcome::Task(TaskResult {
                    task: task("t-2", 1),
                }),
            )])
            .await;
        };
        let (r, ()) = tokio::join!(conn.call(get, None), broker);
        assert!(matches!(r, Ok(Outcome::Task(_))));
    }

    #[tokio::test]
    async fn the_last_handle_dropped_closes_the_socket() {
        let (conn, mut fake, _dir) = pair(Duration::from_secs(5)).await;
        let req = requester(&conn, &mut fake, Arc::new(|_| {})).await;
        drop(conn);
        // A requester keeps its connection open.
        let mut byte = [0u8; 1];
        let early =
            tokio::time::timeout(Duration::from_millis(200), fake.stream.read(&mut byte)).await;
        assert!(early.is_err(), "still open while a requester lives");
        drop(req);
        let n = tokio::time::timeout(Duration::from_secs(5), fake.stream.read(&mut byte))
            .await
            .expect("closed at once")
            .expect("read");
        assert_eq!(n, 0, "end of stream: the reader task let the socket go");
    }
}
