//! `a2a-broker serve`: open the store, start the writer, serve stdio, and
//! shut down cleanly (exit 0) on end of input, SIGTERM or SIGINT, after the
//! commits in flight.

use crate::delivery::Timer;
use crate::dispatch::Broker;
use crate::engine::{self, Shared};
use crate::store::{self, Durability};
use crate::transport::stdio;
use parking_lot::RwLock;
use std::path::PathBuf;
use std::sync::Arc;

/// Settings of `serve`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub db: PathBuf,
    pub durability: Durability,
    pub batch_max: usize,
}

/// Opens the store and starts the writer: a broker ready for sessions of
/// any transport (also used in-process by benchmarks and tests).
pub fn start(cfg: &ServeConfig) -> Result<Arc<Broker>, String> {
    let conn = store::open_writer(&cfg.db, cfg.durability).map_err(|e| e.to_string())?;
    let shared = Arc::new(Shared {
        registry: RwLock::new(Default::default()),
        tasks: RwLock::new(Default::default()),
        timer: Timer::start(),
    });
    let engine = engine::start(conn, shared.clone(), cfg.batch_max).map_err(|e| e.to_string())?;
    Ok(Arc::new(Broker::new(shared, engine, cfg.db.clone())))
}

/// Runs the broker until stdin ends or a signal arrives. `Err` carries the
/// one line to print when it cannot start.
pub fn serve(cfg: ServeConfig) -> Result<(), String> {
    let broker = start(&cfg)?;
    let engine = broker.engine.clone();

    let outbox = stdio::outbox();
    let writer = stdio::spawn_writer(outbox.clone(), std::io::stdout());

    // SIGTERM / SIGINT: finish the commits in flight, flush, exit 0.
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    {
        let engine = engine.clone();
        let outbox = outbox.clone();
        std::thread::Builder::new()
            .name("a2a-signals".into())
            .spawn(move || {
                if signals.forever().next().is_some() {
                    engine.shutdown();
                    outbox.close();
                    // Give the writer a moment to flush what is queued.
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    std::process::exit(0);
                }
            })
            .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    }

    eprintln!("{{\"ready\":true,\"pid\":{}}}", std::process::id());
    let session = stdio::serve_lines(&broker, std::io::stdin().lock(), outbox.clone());
    broker.close(session);
    engine.shutdown();
    outbox.close();
    let _ = writer.join();
    Ok(())
}
