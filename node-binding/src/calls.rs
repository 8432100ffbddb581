//! Calls on the JS thread's own event loop: a second connection to the
//! broker, for calls only, that the JS thread writes and reads itself
//! through libuv. No thread hop: a call is written into this
//! connection's buffer by the JS method that makes it, the buffer is
//! written once per turn of the loop (a burst of calls costs one `send`),
//! and the answers are read and their promises settled in the poll
//! callback that sees the socket readable.
//!
//! It speaks NDJSON (docs/protocol.md §1 Framing), not binary frames,
//! because the answer's JSON text is what the promise needs: V8 parses
//! the result's bytes as they came (the wire core's `json` finds them in the line),
//! where binary frames cost the JS thread a decode into Rust values and a
//! rendering back to JSON before the same parse (measured: the JS thread
//! spent about a quarter of its time per call on those two).
//!
//! Why a second connection: the broker authorises calls by token, not by
//! connection (docs/protocol.md §4: "Every other `a2a.*` method takes it as
//! `token`"), so an agent registered on the client's connection (which
//! keeps carrying its events, on the client's reader thread) can call on
//! this one. Its tokens still die with the client's connection; a closed
//! client connection is checked before each call here (see `agent`).
//!
//! Which calls come here: those whose answer has no order to keep with
//! the agent's events (`send`, `get`, `status`, `artifact`, `cancel`, the
//! push config, the lists, the leases). `stream` and `resubscribe` answer
//! after the events they emit, which only one connection can keep, and
//! `deregister` updates the client's agent when answered: those stay on
//! the client's connection.
//!
//! Turns of the loop: the buffer is flushed at the end of the poll
//! callback (the promise reactions run inside it, in its callback scope,
//! and usually submit the next calls), or else by a prepare handle (before
//! the loop blocks: calls made in timers, at start-up) or a check handle
//! (calls made by other I/O callbacks), both started only while the buffer
//! holds something. A socket that takes less than all is polled for
//! `UV_WRITABLE` until the rest is written.
//!
//! Keep-alive: the poll handle is referenced while a call is pending (a
//! pending call keeps the process alive, as a pending socket read would)
//! and unreferenced otherwise; the other two never keep it alive.
//!
//! Architecture invariant: every call is settled exactly once, on the JS
//! thread: by its answer, or, when the connection ends (closed here, the
//! broker gone, a bad frame), with `closed` and the reason, all of them at
//! once. The one exception is the environment's teardown (its cleanup
//! hook), when no JS can run: the promises are dropped with it.
//!
//! Architecture invariant: no use after free. Each libuv handle holds one
//! count of the `Rc<Conn>` it points to (its data), released in its close
//! callback; the socket is closed when the `Conn` drops, so after every
//! handle is closed. Nothing here borrows the state across a JS call (the
//! callback scope runs JS that may call back in).

use crate::settle::{self, Shape};
use crate::uv::{self, Handle, Uv, UV_CHECK, UV_POLL, UV_PREPARE, UV_READABLE, UV_WRITABLE};
use crate::wire::{offset, rpc_error, settle_answers, Answer};
use a2a_client::proto::call::Call;
use a2a_client::proto::limits::A2A_MAX_OUT_FRAME_BYTES;
use a2a_client::wire::{json, Calls, Codec, Framer, Line, Ndjson};
use a2a_client::{ClientError, ClientOptions, CloseReason};
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi::{sys, Env};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::io::{Read, Write};

use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::ptr;
use std::rc::{Rc, Weak};
use std::time::Duration;

/// Bytes asked of each `read`.
const READ_CHUNK: usize = 64 * 1024;

/// Most bytes one poll callback reads before settling what it has (the
/// rest waits one turn of the loop, so timers and other I/O get their
/// turn under a flood of answers).
const READ_BUDGET: usize = 1024 * 1024;

/// How many reads a socket error gets to deliver the answers queued before
/// it and hear the end itself: [`READ_BUDGET`] each, so 64 MiB, the
/// broker's own bound on one connection's queued responses.
const ERROR_READS: usize = 64;

/// A buffer of calls this big is written at once rather than at the end
/// of the turn.
const FLUSH_AT: usize = 256 * 1024;

/// A read (or batch) buffer grown past this by huge answers is given
/// back; below it, it is kept for the next read (a buffer freed and made
/// again each turn costs page faults: measured).
const KEEP_READ_BUF: usize = 4 * READ_BUDGET;

/// The calls connection's socket, between [`open`] and [`attach`].
pub(crate) type Stream = UnixStream;

/// Connects to the broker's socket and shakes hands with `secret`, on the
/// calling thread (the connect thread, not the JS thread), within
/// `io_timeout`. The socket is left blocking; [`attach`] makes it
/// non-blocking on the JS thread.
pub(crate) fn open(
    socket: &Path,
    secret: &str,
    io_timeout: Duration,
) -> Result<UnixStream, ClientError> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(io_timeout))?;
    s.set_write_timeout(Some(io_timeout))?;
    let hello = ClientOptions {
        client_name: "a2a-node-calls".into(),
        client_version: env!("CARGO_PKG_VERSION").into(),
        ..ClientOptions::default()
    }
    .handshake(secret);
    let mut out = Vec::new();
    Ndjson::encode_request(0, &hello, &mut out)?;
    s.write_all(&out)?;
    let mut framer = Framer::<Ndjson>::new();
    loop {
        match framer.next_frame() {
            Ok(Some(line)) => {
                return match Ndjson::decode(line) {
                    Ok(Line::Answer { result: Err(e), .. }) => Err(rpc_error(e)),
                    Ok(Line::Answer { result: Ok(_), .. }) => Ok(s),
                    Ok(_) => Err(ClientError::Protocol("unexpected handshake answer".into())),
                    Err(e) => Err(ClientError::Protocol(e.to_string())),
                };
            }
            Ok(None) => {}
            Err(e) => return Err(ClientError::Protocol(format!("handshake answer: {e}"))),
        }
        let n = s.read(framer.read_buf(4096))?;
        if n == 0 {
            return Err(ClientError::Closed(CloseReason::ByBroker));
        }
        framer.filled(n);
    }
}

/// What users of the connection hold (the `NativeBroker` and its agents).
/// When the last one goes (garbage collected, or the broker closed), the
/// connection closes, as soon as no call is pending.
pub(crate) struct Link {
    conn: Rc<Conn>,
    /// Its number in [`LINKS`].
    key: u64,
}

/// A link's number, which can travel where the link cannot (a completion
/// on the client's reader thread that makes an agent: see [`Link::find`]).
pub(crate) type LinkKey = u64;

thread_local! {
    /// This thread's live links, by number.
    static LINKS: RefCell<HashMap<LinkKey, Weak<Link>>> = RefCell::new(HashMap::new());
    static NEXT_KEY: Cell<LinkKey> = const { Cell::new(1) };
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = LINKS.try_with(|l| l.borrow_mut().remove(&self.key));
        self.conn.orphan();
    }
}

impl Link {
    fn register(conn: Rc<Conn>) -> Rc<Link> {
        let key = NEXT_KEY.with(|k| {
            let n = k.get();
            k.set(n + 1);
            n
        });
        let link = Rc::new(Link { conn, key });
        LINKS.with(|l| l.borrow_mut().insert(key, Rc::downgrade(&link)));
        link
    }

    /// The number to find this link by, on this thread.
    pub(crate) fn key(&self) -> LinkKey {
        self.key
    }

    /// The live link numbered `key` (JS thread).
    pub(crate) fn find(key: LinkKey) -> Option<Rc<Link>> {
        LINKS.with(|l| l.borrow().get(&key).and_then(Weak::upgrade))
    }

    /// Submits `call`: a promise settled with `render` of its answer.
    pub(crate) fn submit<'env>(
        &self,
        env: &'env Env,
        call: Call,
        shape: Shape,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let (deferred, promise) = settle::raw_promise(env)?;
        if let Err(e) = self.conn.submit(deferred, &call, shape) {
            settle::settle_now(env.raw(), deferred, Err(e.into()));
        }
        Ok(promise)
    }

    /// Closes the connection: pending calls reject with `closed`. JS
    /// thread, from a JS call.
    pub(crate) fn close(&self) {
        self.conn.end(CloseReason::Shutdown);
    }

    /// Why it ended, if it has.
    pub(crate) fn closed(&self) -> Option<CloseReason> {
        self.conn.st.borrow().calls.closed().cloned()
    }
}

/// One call waiting for its answer.
struct Waiting {
    deferred: sys::napi_deferred,
    shape: Shape,
}

/// The connection's mutable state (JS thread only).
struct State {
    /// Request lines not written yet.
    out: Vec<u8>,
    /// Bytes read that do not make a whole line yet.
    rbuf: Vec<u8>,
    /// How much of `rbuf` the wire core already searched for a line end.
    scanned: usize,
    /// The calls waiting, by id (the wire core's table), and why the
    /// connection ended once it has (set once; the first reason wins).
    calls: Calls<Waiting>,
    /// The events the poll handle watches.
    polling: c_int,
    /// The prepare and check handles are started.
    flush_armed: bool,
    /// The poll handle is referenced (calls are pending).
    referenced: bool,
    /// No `Link` is left: close once no call is pending.
    orphaned: bool,
}

pub(crate) struct Conn {
    env: sys::napi_env,
    uv: &'static Uv,
    /// Kept open until the `Conn` drops (after the handles are closed).
    stream: UnixStream,
    poll: Handle,
    prepare: Handle,
    check: Handle,
    async_ctx: Cell<sys::napi_async_context>,
    /// The pointer handed to the environment's cleanup hook (an `Rc`
    /// count), while the hook is registered.
    cleanup_arg: Cell<*const Conn>,
    st: RefCell<State>,
    /// The guessed values of one read, as one JSON array (kept between
    /// reads, see `settle_answers`).
    batch: RefCell<Vec<u8>>,
}

/// Attaches `stream` (from [`open`]) to the JS thread's loop of `env`;
/// `None` when libuv cannot be used here (the caller keeps today's path).
#[allow(unsafe_code)]
pub(crate) fn attach(env: sys::napi_env, stream: UnixStream) -> Option<Rc<Link>> {
    let uv = uv::get()?;
    stream.set_nonblocking(true).ok()?;
    let mut lp: *mut sys::uv_loop_s = ptr::null_mut();
    // SAFETY: on the JS thread of `env`.
    if unsafe { sys::napi_get_uv_event_loop(env, &mut lp) } != sys::Status::napi_ok || lp.is_null()
    {
        return None;
    }
    let lp: uv::Loop = lp.cast();
    let fd = stream.as_raw_fd();
    // Each handle: allocated, initialised, or freed at once on failure.
    let init = |ty: c_int| -> Option<Handle> {
        let h = uv.alloc()?;
        // SAFETY: `h` is zeroed memory of the size libuv asks for `ty`.
        let rc = unsafe {
            match ty {
                UV_POLL => (uv.poll_init)(lp, h, fd),
                UV_PREPARE => (uv.prepare_init)(lp, h),
                _ => (uv.check_init)(lp, h),
            }
        };
        if rc != 0 {
            uv.free(h);
            return None;
        }
        Some(h)
    };
    let poll = init(UV_POLL)?;
    let close_now = |h: Handle| {
        // SAFETY: an initialised handle, closed once; `closed_early`
        // frees it.
        unsafe { (uv.close)(h, Some(closed_early)) }
    };
    let Some(prepare) = init(UV_PREPARE) else {
        close_now(poll);
        return None;
    };
    let Some(check) = init(UV_CHECK) else {
        close_now(poll);
        close_now(prepare);
        return None;
    };
    let conn = Rc::new(Conn {
        env,
        uv,
        stream,
        poll,
        prepare,
        check,
        async_ctx: Cell::new(ptr::null_mut()),
        cleanup_arg: Cell::new(ptr::null()),
        st: RefCell::new(State {
            out: Vec::new(),
            rbuf: Vec::new(),
            scanned: 0,
            calls: Calls::new(),
            polling: UV_READABLE,
            flush_armed: false,
            referenced: false,
            orphaned: false,
        }),
        batch: RefCell::new(Vec::new()),
    });
    // SAFETY: on the JS thread; the handles are initialised and each takes
    // one count of `conn` (released in `closed`).
    unsafe {
        for h in [poll, prepare, check] {
            (uv.set_data)(h, Rc::into_raw(conn.clone()) as *mut c_void);
            (uv.unref)(h);
        }
        let mut name = ptr::null_mut();
        sys::napi_create_string_utf8(env, c"a2a-calls".as_ptr(), 9, &mut name);
        let mut ctx = ptr::null_mut();
        if sys::napi_async_init(env, ptr::null_mut(), name, &mut ctx) == sys::Status::napi_ok {
            conn.async_ctx.set(ctx);
        }
        let arg = Rc::into_raw(conn.clone());
        if sys::napi_add_env_cleanup_hook(env, Some(env_cleanup), arg as *mut c_void)
            == sys::Status::napi_ok
        {
            conn.cleanup_arg.set(arg);
        } else {
            drop(Rc::from_raw(arg));
        }
        if conn.async_ctx.get().is_null() || (uv.poll_start)(poll, UV_READABLE, on_poll) != 0 {
            conn.shut(CloseReason::Io("cannot watch the socket".into()));
            return None;
        }
    }
    Some(Link::register(conn))
}

/// Frees a handle closed before its `Conn` existed.
#[allow(unsafe_code)]
unsafe extern "C" fn closed_early(h: Handle) {
    if let Some(uv) = uv::get() {
        uv.free(h);
    }
}

/// The `Conn` a handle points to (its data), borrowed for a callback: the
/// handle's own count keeps it alive until its close callback.
#[allow(unsafe_code)]
unsafe fn conn_of<'a>(uv: &Uv, h: Handle) -> &'a Conn {
    // SAFETY: set in `attach` to an `Rc<Conn>` count that `closed` releases
    // after the last callback of this handle.
    unsafe { &*((uv.get_data)(h) as *const Conn) }
}

#[allow(unsafe_code)]
unsafe extern "C" fn on_poll(h: Handle, status: c_int, events: c_int) {
    let Some(uv) = uv::get() else { return };
    // SAFETY: see `conn_of`.
    let conn = unsafe { conn_of(uv, h) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if status < 0 {
            // libuv reports a socket error (POLLERR: e.g. the broker was
            // killed with bytes of ours unread) as UV_EBADF. Reading says
            // what it is (a reset is the broker's end) and delivers the
            // answers that came before it; one `read_ready` stops at a
            // short read, before the reset queued behind the bytes, so it
            // reads again until the socket tells its end.
            for _ in 0..ERROR_READS {
                conn.read_ready();
                if conn.st.borrow().calls.closed().is_some() {
                    return;
                }
            }
            let reason = match conn.socket_error() {
                Some(e) if e.kind() == std::io::ErrorKind::ConnectionReset => CloseReason::ByBroker,
                Some(e) => CloseReason::Io(e.to_string()),
                None => CloseReason::Io(format!("polling the socket failed ({status})")),
            };
            conn.end(reason);
            return;
        }
        if events & UV_WRITABLE != 0 {
            conn.flush();
        }
        if events & UV_READABLE != 0 {
            conn.read_ready();
        }
    }));
}

/// The prepare and check handles' callback: writes what the turn queued.
#[allow(unsafe_code)]
unsafe extern "C" fn on_turn(h: Handle) {
    let Some(uv) = uv::get() else { return };
    // SAFETY: see `conn_of`.
    let conn = unsafe { conn_of(uv, h) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| conn.flush()));
}

/// A handle's close callback: frees it and releases its count.
#[allow(unsafe_code)]
unsafe extern "C" fn closed(h: Handle) {
    let Some(uv) = uv::get() else { return };
    // SAFETY: the data is the count `attach` gave this handle; nothing of
    // libuv uses the handle after its close callback.
    unsafe {
        let conn = Rc::from_raw((uv.get_data)(h) as *const Conn);
        uv.free(h);
        drop(conn);
    }
}

/// The environment is being torn down (worker exit, process exit): close
/// the handles; pending promises go with the environment (no JS can run).
#[allow(unsafe_code)]
unsafe extern "C" fn env_cleanup(arg: *mut c_void) {
    // SAFETY: the count `attach` gave the hook; it is released here (the
    // hook runs once, and `shut` no longer removes it: `cleanup_arg` is
    // cleared first).
    let conn = unsafe { Rc::from_raw(arg as *const Conn) };
    conn.cleanup_arg.set(ptr::null());
    let dropped = conn.shut(CloseReason::Shutdown);
    // The deferreds belong to the environment and are freed with it.
    drop(dropped);
}

impl Conn {
    fn submit(
        &self,
        deferred: sys::napi_deferred,
        call: &Call,
        shape: Shape,
    ) -> Result<(), ClientError> {
        let mut st = self.st.borrow_mut();
        if let Some(r) = st.calls.closed() {
            return Err(ClientError::Closed(r.clone()));
        }
        let id = st.calls.next_id();
        Ndjson::encode_request(id, call, &mut st.out)?;
        if let Err((r, _)) = st.calls.insert(id, Waiting { deferred, shape }) {
            return Err(ClientError::Closed(r));
        }
        if !st.referenced {
            st.referenced = true;
            // SAFETY: the poll handle is open while `closed` is None.
            #[allow(unsafe_code)]
            unsafe {
                (self.uv.ref_)(self.poll)
            };
        }
        let big = st.out.len() >= FLUSH_AT;
        if !st.flush_armed && !big {
            st.flush_armed = true;
            // SAFETY: open handles (see above); starting a started handle
            // is a no-op.
            #[allow(unsafe_code)]
            unsafe {
                (self.uv.prepare_start)(self.prepare, on_turn);
                (self.uv.check_start)(self.check, on_turn);
            }
        }
        drop(st);
        if big {
            self.flush();
        }
        Ok(())
    }

    /// Writes what the socket takes now; watches for writability if some
    /// is left. Ends the connection on a write error.
    fn flush(&self) {
        let mut st = self.st.borrow_mut();
        if st.calls.closed().is_some() {
            return;
        }
        let mut sent = 0;
        let mut failed = None;
        while sent < st.out.len() {
            let rest = &st.out[sent..];
            // SAFETY: a valid buffer and the connection's open socket.
            #[allow(unsafe_code)]
            let n = unsafe {
                libc::send(
                    self.stream.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    SEND_FLAGS,
                )
            };
            if n > 0 {
                sent += n as usize;
                continue;
            }
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock => break,
                _ => {
                    failed = Some(CloseReason::of_write(&e));
                    break;
                }
            }
        }
        if sent == st.out.len() {
            st.out.clear();
            if st.out.capacity() > FLUSH_AT * 4 {
                st.out = Vec::new();
            }
        } else {
            st.out.drain(..sent);
        }
        if st.flush_armed {
            st.flush_armed = false;
            // SAFETY: open handles while `closed` is None.
            #[allow(unsafe_code)]
            unsafe {
                (self.uv.prepare_stop)(self.prepare);
                (self.uv.check_stop)(self.check);
            }
        }
        let want = if st.out.is_empty() {
            UV_READABLE
        } else {
            UV_READABLE | UV_WRITABLE
        };
        if failed.is_none() && want != st.polling {
            st.polling = want;
            // SAFETY: the open poll handle; restarting changes its events.
            #[allow(unsafe_code)]
            unsafe {
                (self.uv.poll_start)(self.poll, want, on_poll)
            };
        }
        drop(st);
        if let Some(reason) = failed {
            self.end(reason);
        }
    }

    /// Reads what is there, settles the answers it completes, then writes
    /// the calls their reactions made.
    fn read_ready(&self) {
        // The read buffer is taken out of the state while its answers are
        // parsed by V8: nothing is borrowed across a call into JS.
        let mut rbuf = {
            let mut st = self.st.borrow_mut();
            if st.calls.closed().is_some() {
                return;
            }
            std::mem::take(&mut st.rbuf)
        };
        let read_end = self.read_available(&mut rbuf);
        // A bad line (or one past the bound) ends the connection, whatever
        // the read saw.
        let (done, at, bad) = self.match_answers(&rbuf);
        let end = bad.or(read_end);
        if !done.is_empty() {
            let mut batch = std::mem::take(&mut *self.batch.borrow_mut());
            self.in_callback_scope(|env| settle_answers(env, &rbuf, done, &mut batch));
            batch.clear();
            if batch.capacity() <= KEEP_READ_BUF {
                *self.batch.borrow_mut() = batch;
            }
        }
        if at == rbuf.len() {
            rbuf.clear();
            if rbuf.capacity() > KEEP_READ_BUF {
                rbuf = Vec::new();
            }
        } else {
            rbuf.drain(..at);
        }
        {
            let mut st = self.st.borrow_mut();
            if st.calls.closed().is_none() {
                st.rbuf = rbuf;
            }
        }
        if let Some(reason) = end {
            self.end(reason);
            return;
        }
        self.after_answers();
    }

    /// The error the socket holds (`SO_ERROR`), if any.
    fn socket_error(&self) -> Option<std::io::Error> {
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: an int-sized out value for SO_ERROR on our own socket.
        #[allow(unsafe_code)]
        let rc = unsafe {
            libc::getsockopt(
                self.stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        (rc == 0 && err != 0).then(|| std::io::Error::from_raw_os_error(err))
    }

    /// Reads what the socket holds (up to [`READ_BUDGET`]) onto `rbuf`;
    /// `Some` when the connection ended.
    fn read_available(&self, rbuf: &mut Vec<u8>) -> Option<CloseReason> {
        let mut end = None;
        let mut total = 0;
        while total < READ_BUDGET {
            let len = rbuf.len();
            rbuf.reserve(READ_CHUNK);
            let spare = rbuf.capacity() - len;
            // SAFETY: reads into the vector's spare capacity, then
            // publishes exactly the bytes read.
            #[allow(unsafe_code)]
            let n = unsafe {
                libc::read(
                    self.stream.as_raw_fd(),
                    rbuf.as_mut_ptr().add(len).cast(),
                    spare,
                )
            };
            if n > 0 {
                #[allow(unsafe_code)]
                unsafe {
                    rbuf.set_len(len + n as usize)
                };
                total += n as usize;
                if (n as usize) < spare {
                    // Drained (a short read): no second system call to
                    // hear EAGAIN; the poll is level-triggered, so bytes
                    // arriving meanwhile call back on the next turn.
                    break;
                }
                continue;
            }
            if n == 0 {
                end = Some(CloseReason::ByBroker);
                break;
            }
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock => break,
                // A broker killed with bytes of ours unread resets the
                // socket: the same end, for a caller.
                std::io::ErrorKind::ConnectionReset => {
                    end = Some(CloseReason::ByBroker);
                    break;
                }
                _ => {
                    end = Some(CloseReason::Io(e.to_string()));
                    break;
                }
            }
        }
        end
    }

    /// Each whole line of `rbuf` (where each ends, and the bound, are the
    /// wire core's): its call, and what settles it; then how far the lines
    /// went, and the end a bad line makes. Answers read before an end are
    /// still delivered.
    fn match_answers(
        &self,
        rbuf: &[u8],
    ) -> (
        Vec<(sys::napi_deferred, Answer)>,
        usize,
        Option<CloseReason>,
    ) {
        let mut done: Vec<(sys::napi_deferred, Answer)> = Vec::new();
        let mut end = None;
        let mut at = 0;
        {
            let mut st = self.st.borrow_mut();
            let mut scanned = st.scanned;
            loop {
                let (line_at, used) =
                    match Ndjson::split(&rbuf[at..], &mut scanned, A2A_MAX_OUT_FRAME_BYTES) {
                        Ok(Some((r, used))) => (at + r.start..at + r.end, used),
                        Ok(None) => break,
                        Err(e) => {
                            end = Some(e.close_reason());
                            break;
                        }
                    };
                let line = &rbuf[line_at.clone()];
                at += used;
                if Ndjson::is_filler(line) {
                    continue;
                }
                if let Some((id, result)) = json::answer_quick(line) {
                    // An id not waiting cannot happen (each call stays
                    // until answered); a second answer is dropped.
                    let Some(w) = st.calls.take(id) else {
                        continue;
                    };
                    let a = if w.shape.undefined {
                        Answer::Undefined
                    } else {
                        let guess = match w.shape.member {
                            None => Some(result),
                            Some(k) => json::member_quick(result, k),
                        };
                        Answer::Value {
                            guess: guess.map(|g| offset(rbuf, g)),
                            line: line_at,
                            member: w.shape.member,
                        }
                    };
                    done.push((w.deferred, a));
                    continue;
                }
                let (id, result) = match Ndjson::decode(line) {
                    Ok(Line::Answer { id, result, .. }) => (id, result),
                    // A notification: no agent is registered here.
                    Ok(Line::Event { .. }) => continue,
                    Ok(Line::Batch(_)) => {
                        end = Some(CloseReason::BadFrame(
                            "a batch answer to no batch of ours".into(),
                        ));
                        break;
                    }
                    Err(e) => {
                        end = Some(e.close_reason());
                        break;
                    }
                };
                let Some(id) = id else {
                    if let Err(e) = result {
                        // An error about no call of ours: nothing can be
                        // matched any more, so it ends the connection.
                        end = Some(match rpc_error(e) {
                            ClientError::Rpc(e) => CloseReason::Fatal(e),
                            other => CloseReason::BadFrame(other.to_string()),
                        });
                        break;
                    }
                    continue;
                };
                let Some(w) = st.calls.take(id) else {
                    continue;
                };
                let answer = match result {
                    Err(e) => Answer::Fail(rpc_error(e).into()),
                    Ok(_) if w.shape.undefined => Answer::Undefined,
                    Ok(_) => Answer::Value {
                        guess: None,
                        line: line_at,
                        member: w.shape.member,
                    },
                };
                done.push((w.deferred, answer));
            }
            // A line still arriving: the part searched is not searched again.
            st.scanned = if end.is_none() { scanned } else { 0 };
        }
        (done, at, end)
    }

    /// After settling: unreference the poll handle when nothing is
    /// pending, close an orphaned connection, write what the reactions
    /// queued.
    fn after_answers(&self) {
        let mut st = self.st.borrow_mut();
        if st.calls.closed().is_some() {
            return;
        }
        if st.calls.is_empty() {
            if st.orphaned {
                drop(st);
                self.shut(CloseReason::Shutdown);
                return;
            }
            if st.referenced {
                st.referenced = false;
                // SAFETY: the open poll handle.
                #[allow(unsafe_code)]
                unsafe {
                    (self.uv.unref)(self.poll)
                };
            }
        }
        let has_out = !st.out.is_empty();
        drop(st);
        if has_out {
            self.flush();
        }
    }

    /// Runs `f` as a callback from the loop into JS: a handle scope and a
    /// callback scope, whose closing runs the promise reactions (and
    /// `process.nextTick`s) `f` caused, as after any Node callback.
    #[allow(unsafe_code)]
    fn in_callback_scope(&self, f: impl FnOnce(sys::napi_env)) {
        let env = self.env;
        // SAFETY: on the JS thread of `env`, outside any JS call (a libuv
        // callback) or inside one (then the scopes nest and the reactions
        // run when the outer call returns).
        unsafe {
            let mut hs = ptr::null_mut();
            if sys::napi_open_handle_scope(env, &mut hs) != sys::Status::napi_ok {
                return;
            }
            let mut resource = ptr::null_mut();
            sys::napi_create_object(env, &mut resource);
            let mut cs = ptr::null_mut();
            let ctx = self.async_ctx.get();
            let scoped = !ctx.is_null()
                && sys::napi_open_callback_scope(env, resource, ctx, &mut cs)
                    == sys::Status::napi_ok;
            f(env);
            if scoped {
                sys::napi_close_callback_scope(env, cs);
            }
            sys::napi_close_handle_scope(env, hs);
        }
    }

    /// Ends the connection and rejects every pending call with `closed`
    /// and `reason` (JS thread, JS allowed).
    fn end(&self, reason: CloseReason) {
        let calls = self.shut(reason.clone());
        if calls.is_empty() {
            return;
        }
        self.in_callback_scope(|env| {
            for (_, w) in calls {
                settle::settle_now(
                    env,
                    w.deferred,
                    Err(ClientError::Closed(reason.clone()).into()),
                );
            }
        });
    }

    /// The last `Link` went: close now, or when the last pending call is
    /// answered (no JS runs here: this may be a finalizer).
    fn orphan(&self) {
        let mut st = self.st.borrow_mut();
        st.orphaned = true;
        let idle = st.calls.is_empty();
        drop(st);
        if idle {
            self.shut(CloseReason::Shutdown);
        }
    }

    /// Marks the connection ended (first reason wins), closes its handles
    /// and returns the calls still waiting (for the caller to settle, or
    /// to drop at teardown). Runs no JS.
    #[allow(unsafe_code)]
    fn shut(&self, reason: CloseReason) -> Vec<(u64, Waiting)> {
        let mut st = self.st.borrow_mut();
        if st.calls.closed().is_some() {
            return Vec::new();
        }
        st.out = Vec::new();
        st.rbuf = Vec::new();
        // In the order they were made, to be rejected in it.
        let mut calls: Vec<(u64, Waiting)> = st.calls.close(reason);
        calls.sort_unstable_by_key(|(id, _)| *id);
        drop(st);
        // SAFETY: the handles are open (closed only here, once); their
        // close callbacks free them and release their counts, later, from
        // the loop. The socket stays open until the `Conn` drops after them.
        unsafe {
            let _ = libc::shutdown(self.stream.as_raw_fd(), libc::SHUT_RDWR);
            (self.uv.poll_stop)(self.poll);
            (self.uv.prepare_stop)(self.prepare);
            (self.uv.check_stop)(self.check);
            for h in [self.poll, self.prepare, self.check] {
                (self.uv.close)(h, Some(closed));
            }
            let ctx = self.async_ctx.replace(ptr::null_mut());
            if !ctx.is_null() {
                sys::napi_async_destroy(self.env, ctx);
            }
            let arg = self.cleanup_arg.replace(ptr::null());
            if !arg.is_null() {
                sys::napi_remove_env_cleanup_hook(self.env, Some(env_cleanup), arg as *mut c_void);
                drop(Rc::from_raw(arg));
            }
        }
        calls
    }
}

/// `send(2)` flags: never block, never raise `SIGPIPE`.
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
const SEND_FLAGS: c_int = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
const SEND_FLAGS: c_int = libc::MSG_DONTWAIT;
