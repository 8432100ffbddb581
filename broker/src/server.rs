//! `a2a-broker serve`: open the store, start the writer, serve stdio and/or
//! the local socket, and shut down cleanly (exit 0) on end of stdin,
//! SIGTERM or SIGINT, after the commits in flight, checkpointed into the
//! database file; or exit non-zero if the database file is removed under it.

use crate::broker::Broker;
use crate::core::CoreError;
use crate::delivery::Timer;
use crate::engine::{self, Shared};
use crate::store::{self, Durability, OpenError};
use crate::transport::socket::{self, SocketError};
use crate::transport::stdio;
use parking_lot::RwLock;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Why a broker cannot start or had to stop (one line each: `a2a-broker
/// serve` prints it after `a2a-broker: `).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// `--no-stdio` without `--socket`.
    #[error("--no-stdio leaves nothing to serve: add --socket NAME")]
    NothingToServe,
    /// The database cannot be locked, opened or migrated.
    #[error(transparent)]
    Store(#[from] OpenError),
    /// The writer could not start on the database.
    #[error(transparent)]
    Writer(#[from] CoreError),
    /// The local socket cannot be served.
    #[error(transparent)]
    Socket(#[from] SocketError),
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    /// A thread of the broker could not be started.
    #[error("cannot start the {0} thread: {1}")]
    Thread(&'static str, std::io::Error),
    /// The database file was removed or replaced while the broker ran.
    #[error("database {} was removed or replaced while the broker ran: the writes since were refused (\"{}\"), none acknowledged; stopping", .0.display(), store::REMOVED_REASON)]
    DatabaseRemoved(PathBuf),
}

/// Settings of `serve`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub db: PathBuf,
    pub durability: Durability,
    pub batch_max: usize,
    /// `--socket NAME`: also listen on a local socket.
    pub socket: Option<String>,
    /// `--no-stdio`: do not serve stdin/stdout.
    pub no_stdio: bool,
    /// `--max-connections`: socket connections held at once.
    pub max_connections: usize,
    /// A line for stderr once the broker serves, after its ready line (so
    /// that a start that fails prints its one line and nothing else).
    pub serving_note: Option<String>,
}

impl ServeConfig {
    /// Defaults for a database path (stdio only).
    pub fn new(db: PathBuf) -> Self {
        Self {
            db,
            durability: Durability::Full,
            batch_max: a2a_proto::limits::DEFAULT_BATCH_MAX,
            socket: None,
            no_stdio: false,
            max_connections: a2a_proto::limits::DEFAULT_MAX_CONNECTIONS,
            serving_note: None,
        }
    }
}

/// Opens the store and starts the writer: a broker ready for sessions of
/// any transport (also used in-process by benchmarks and tests).
pub fn start(cfg: &ServeConfig) -> Result<Arc<Broker>, ServeError> {
    let store = store::open(&cfg.db, cfg.durability)?;
    start_on(cfg, store.conn)
}

/// Starts the writer on an open write connection.
fn start_on(cfg: &ServeConfig, conn: rusqlite::Connection) -> Result<Arc<Broker>, ServeError> {
    let shared = Arc::new(Shared {
        registry: RwLock::new(Default::default()),
        tasks: RwLock::new(Default::default()),
        timer: Timer::start(),
        stats: Default::default(),
    });
    let engine = engine::start(conn, shared.clone(), cfg.batch_max)?;
    Ok(Arc::new(Broker::new(shared, engine, cfg.db.clone())))
}

/// Runs the broker until stdin ends, a signal arrives, or the database file
/// is removed under it (then `Err`). `Err` displays as the one line to print.
///
/// Start-up order: whatever can be refused without side effects is checked
/// before the database is touched (the lock file, the only thing created
/// before, goes with the lock), and a database this start created is
/// removed again if a later step fails: a failed start leaves nothing behind.
pub fn serve(cfg: ServeConfig) -> Result<(), ServeError> {
    if cfg.no_stdio && cfg.socket.is_none() {
        return Err(ServeError::NothingToServe);
    }
    let locked = store::lock(&cfg.db)?;
    if let Some(name) = &cfg.socket {
        socket::check(name)?;
    }
    raise_fd_limit();
    let store = locked.open(cfg.durability)?;
    for note in &store.notes {
        eprintln!("a2a-broker: {note}");
    }
    let guard = store.guard.clone();
    let created = store.created.clone();
    let broker = match start_on(&cfg, store.conn) {
        Ok(b) => b,
        Err(e) => {
            store::remove_created(&created);
            return Err(e);
        }
    };
    let engine = broker.engine.clone();
    // Undoes a start that fails from here on.
    let abandon = |e: ServeError| {
        engine.shutdown();
        store::remove_created(&created);
        e
    };
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(3);
    // What stopped the broker, for the shutdown log line (the first wins).
    let why: Arc<std::sync::OnceLock<&'static str>> = Arc::default();
    guard.on_removed(stop_tx.clone());

    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .map_err(|e| abandon(ServeError::Signals(e)))?;
    {
        let stop_tx = stop_tx.clone();
        let why = why.clone();
        std::thread::Builder::new()
            .name("a2a-signals".into())
            .spawn(move || {
                if signals.forever().next().is_some() {
                    let _ = why.set("signal");
                    let _ = stop_tx.send(());
                }
            })
            .map_err(|e| abandon(ServeError::Thread("signal", e)))?;
    }

    let server = match &cfg.socket {
        Some(name) => Some(
            socket::listen(broker.clone(), name, cfg.max_connections)
                .map_err(|e| abandon(e.into()))?,
        ),
        None => None,
    };

    eprintln!("{}", ready_line(server.as_ref()));
    if let Some(note) = &cfg.serving_note {
        eprintln!("{note}");
    }

    let stdio_out = if cfg.no_stdio {
        None
    } else {
        let out = serve_stdio(&broker, stop_tx, why.clone())
            .map_err(|e| abandon(ServeError::Thread("stdin", e)))?;
        Some(out)
    };

    // Stdin closed, a signal arrived, or the database file is gone.
    let _ = stop_rx.recv();
    let removed = guard.removed();
    let reason = if removed {
        "database removed"
    } else {
        why.get().copied().unwrap_or("stop")
    };
    tracing::info!(reason, "shutdown begun");
    if removed {
        // Info: the exit line says so at every level, as the only line.
        tracing::info!(db = %cfg.db.display(), "database removed or replaced under the broker");
        // The writer refuses every commit from now on. Let it answer the
        // batch that found the file gone (a connection closed behind it is
        // a barrier), then stop answering altogether: a call the writer
        // has not refused yet gets no answer rather than one without the
        // reason, and none is ever acknowledged.
        broker.barrier();
        if let Some((outbox, _)) = &stdio_out {
            outbox.close();
        }
    }
    // Stop taking connections, finish the commits in flight (checkpointed
    // into the database file), flush stdout.
    drop(server);
    engine.shutdown();
    if let Some((outbox, writer)) = stdio_out {
        outbox.close();
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let _ = writer.join();
            let _ = done_tx.send(());
        });
        // A host that stopped reading stdout must not keep us alive.
        let _ = done_rx.recv_timeout(Duration::from_secs(5));
    }
    // Also when the file went while the last commits ran.
    if removed || guard.removed() {
        tracing::info!(reason, "shutdown finished: database removed");
        return Err(ServeError::DatabaseRemoved(cfg.db));
    }
    tracing::info!(reason, "shutdown finished");
    Ok(())
}

/// Serves stdin and stdout: a thread reads stdin's lines and, when stdin
/// ends, closes its session and says so on `stop_tx`.
fn serve_stdio(
    broker: &Arc<Broker>,
    stop_tx: crossbeam_channel::Sender<()>,
    why: Arc<std::sync::OnceLock<&'static str>>,
) -> std::io::Result<(Arc<crate::delivery::Outbox>, std::thread::JoinHandle<()>)> {
    let outbox = stdio::outbox();
    let writer = stdio::spawn_writer(outbox.clone(), std::io::stdout());
    let broker = broker.clone();
    let out = outbox.clone();
    std::thread::Builder::new()
        .name("a2a-stdin".into())
        .spawn(move || {
            let session = stdio::serve_lines(&broker, std::io::stdin().lock(), out);
            broker.close(session);
            let _ = why.set("stdin EOF");
            let _ = stop_tx.send(());
        })?;
    Ok((outbox, writer))
}

/// The ready line on stderr: the process id, and the socket and its
/// secret file when there is one.
fn ready_line(server: Option<&socket::SocketServer>) -> String {
    let mut ready = format!("{{\"ready\":true,\"pid\":{}", std::process::id());
    if let Some(s) = server {
        ready.push_str(&format!(
            ",\"socket\":{}",
            serde_json::to_string(&s.path.display().to_string()).expect("string")
        ));
        if let Some(f) = &s.secret_file {
            ready.push_str(&format!(
                ",\"secretFile\":{}",
                serde_json::to_string(&f.display().to_string()).expect("string")
            ));
        }
    }
    ready.push('}');
    ready
}

/// Many socket clients each hold a descriptor: take the hard limit.
#[allow(unsafe_code)]
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
