//! The HTTP edge: the accept loop in front of the router, with the bounds
//! a server on a network needs (axum's own `serve` has none of them):
//!
//! - **TCP_NODELAY** on every accepted socket: an SSE event is a small
//!   write, which Nagle's algorithm held back for the peer's delayed ACK
//!   (about 44 ms an event, measured).
//! - **Header and idle timeouts**: a connection with no request in
//!   progress and no response streaming is closed once it has been so for
//!   the header timeout: a connection that sends nothing, a request head
//!   that never completes, a keep-alive connection gone quiet (hyper's own
//!   header-read timer backs this up once a head has begun; the body has
//!   its own bound, in `http::read_body`).
//! - **A connection cap**: at most `max_connections` at once. A new
//!   connection past the cap makes room by closing the connection idle the
//!   longest (no request in progress, no response streaming); if every
//!   connection is busy, the new one is closed. So idle connections, however
//!   many are opened, cannot lock a client out, and the process never runs
//!   out of descriptors.
//! - **Graceful stop**: the listener closes, each connection finishes the
//!   request in progress (hyper's graceful shutdown) within a grace period.

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tower::ServiceExt;

/// The edge's bounds.
#[derive(Debug, Clone, Copy)]
pub struct EdgeConfig {
    pub header_timeout: Duration,
    pub max_connections: usize,
    /// How long a stop waits for connections to finish.
    pub grace: Duration,
}

/// One connection's state, as the cap sees it.
struct Conn {
    /// Requests in progress, responses streaming included.
    busy: AtomicUsize,
    /// When it last became idle (ms since the edge started).
    idle_since: AtomicU64,
    /// Asks it to close (gracefully: after a request in progress).
    close: Notify,
}

/// The live connections.
struct Conns {
    started: Instant,
    next: AtomicU64,
    live: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Conns {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Closes the connection idle the longest; false if none is idle.
    fn evict_idle(&self) -> bool {
        let live = self.live.lock();
        let oldest = live
            .iter()
            .filter(|(_, c)| c.busy.load(Ordering::Acquire) == 0)
            .min_by_key(|(_, c)| c.idle_since.load(Ordering::Relaxed));
        match oldest {
            Some((_, c)) => {
                c.close.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Marks a connection busy while alive (a request, then its response
/// body).
struct Busy {
    conn: Arc<Conn>,
    conns: Arc<Conns>,
}

impl Busy {
    fn new(conn: Arc<Conn>, conns: Arc<Conns>) -> Busy {
        conn.busy.fetch_add(1, Ordering::AcqRel);
        Busy { conn, conns }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.conn
            .idle_since
            .store(self.conns.now_ms(), Ordering::Relaxed);
        self.conn.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its connection marked busy until it ends.
struct Guarded {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for Guarded {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Serves `router` on `listener` until `stop` changes (or is dropped).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: EdgeConfig,
    mut stop: watch::Receiver<bool>,
) {
    let conns = Arc::new(Conns {
        started: Instant::now(),
        next: AtomicU64::new(0),
        live: Mutex::new(HashMap::new()),
    });
    let (closing_tx, closing) = watch::channel(false);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of descriptors or a transient error: never a busy loop.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        if conns.live.lock().len() >= config.max_connections && !conns.evict_idle() {
            // Every connection is in a call: this one waits no turn.
            drop(tcp);
            continue;
        }
        let id = conns.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            busy: AtomicUsize::new(0),
            idle_since: AtomicU64::new(conns.now_ms()),
            close: Notify::new(),
        });
        conns.live.lock().insert(id, Arc::clone(&conn));
        let (router, conns, closing) = (router.clone(), Arc::clone(&conns), closing.clone());
        tokio::spawn(async move {
            serve_one(tcp, router, &conn, &conns, config, closing).await;
            conns.live.lock().remove(&id);
        });
    }
    drop(listener);
    let _ = closing_tx.send(true);
    let deadline = tokio::time::Instant::now() + config.grace;
    while !conns.live.lock().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn serve_one(
    tcp: tokio::net::TcpStream,
    router: Router,
    conn: &Arc<Conn>,
    conns: &Arc<Conns>,
    config: EdgeConfig,
    mut closing: watch::Receiver<bool>,
) {
    let service = {
        let (conn, conns) = (Arc::clone(conn), Arc::clone(conns));
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let busy = Busy::new(Arc::clone(&conn), Arc::clone(&conns));
            let router = router.clone();
            async move {
                let resp = match router.oneshot(req.map(Body::new)).await {
                    Ok(r) => r,
                    Err(e) => match e {},
                };
                Ok::<_, Infallible>(resp.map(|inner| Body::new(Guarded { inner, _busy: busy })))
            }
        })
    };
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout)
        .keep_alive(true);
    let served = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
    tokio::pin!(served);
    let mut asked = false;
    // hyper's header timer starts only once a request begins: a connection
    // that sends nothing, or nothing more after a response, is closed
    // here when it has been idle (no request, no response) that long.
    let idle_ms = u64::try_from(config.header_timeout.as_millis()).unwrap_or(u64::MAX);
    let mut tick =
        tokio::time::interval((config.header_timeout / 4).max(Duration::from_millis(10)));
    loop {
        tokio::select! {
            _ = tick.tick(), if !asked => {
                let idle = conn.busy.load(Ordering::Acquire) == 0
                    && conns.now_ms().saturating_sub(conn.idle_since.load(Ordering::Relaxed)) >= idle_ms;
                if idle {
                    asked = true;
                    served.as_mut().graceful_shutdown();
                }
            }
            r = served.as_mut() => {
                if let Err(e) = r {
                    tracing::trace!(error = %e, "connection ended");
                }
                return;
            }
            () = conn.close.notified(), if !asked => {
                asked = true;
                served.as_mut().graceful_shutdown();
            }
            _ = closing.changed(), if !asked => {
                asked = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}
