//! The broker as its transports hold it: the writer thread's handle, the
//! shared live state, the reader threads, and the lifecycle of connections
//! (a [`Session`] each). What a connection's requests do is in
//! `crate::dispatch`.

use crate::delivery::Outbox;
use crate::engine::{EngineHandle, Shared};
use crate::read_calls::{ReadWorkers, ReaderPool};
use crate::secret::Secret;
use crate::session::Session;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A started broker (see [`crate::server::start`]): its writer thread, its
/// reader threads and its live state. Its transports hold it in an `Arc`;
/// [`Broker::shutdown`] stops the writer after the commits in flight.
pub struct Broker {
    pub(crate) shared: Arc<Shared>,
    pub(crate) engine: EngineHandle,
    pub(crate) readers: Arc<ReaderPool>,
    /// Where reads that need SQLite run (off the transports' threads).
    pub(crate) read_workers: ReadWorkers,
    next_conn: AtomicU64,
}

/// Counters of a running broker, for benchmarks and tests that check how
/// the writer grouped calls (not a stable interface).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerStats {
    /// Transactions committed so far.
    pub commits: u64,
    /// Calls those transactions held (refused calls included).
    pub calls: u64,
    /// Agents registered now.
    pub agents: usize,
}

impl Broker {
    /// Stops the writer after the commits in flight (checkpointed into the
    /// database file). Calls that arrive later are answered `-32603`.
    pub fn shutdown(&self) {
        self.engine.shutdown();
    }

    /// The writer's commit counters and the number of live agents.
    #[doc(hidden)]
    pub fn stats(&self) -> BrokerStats {
        use std::sync::atomic::Ordering::Relaxed;
        let st = &self.shared.stats;
        BrokerStats {
            commits: st.commits.load(Relaxed),
            calls: st.calls.load(Relaxed),
            agents: self.shared.registry.read().len(),
        }
    }

    pub(crate) fn new(shared: Arc<Shared>, engine: EngineHandle, db_path: PathBuf) -> Self {
        let readers = Arc::new(ReaderPool::new(db_path));
        Self {
            shared,
            engine,
            read_workers: ReadWorkers::start(readers.clone()),
            readers,
            next_conn: AtomicU64::new(1),
        }
    }

    /// A new connection writing into `outbox`.
    pub(crate) fn session(&self, outbox: Arc<Outbox>) -> Session {
        Session::new(self.next_conn.fetch_add(1, Ordering::Relaxed), outbox, None)
    }

    /// A new connection whose handshake must present `secret`.
    pub(crate) fn session_with_secret(&self, outbox: Arc<Outbox>, secret: Arc<Secret>) -> Session {
        Session::new(
            self.next_conn.fetch_add(1, Ordering::Relaxed),
            outbox,
            Some(secret),
        )
    }

    /// Returns once the writer has run everything queued before this call
    /// (a connection close with no agents, used as a barrier).
    pub(crate) fn barrier(&self) {
        let s = self.session(Arc::new(Outbox::new(1)));
        self.engine.connection_closed(s.conn);
    }

    /// The connection ended: the calls it sent before ending still run,
    /// then its agents' tokens die (their tasks stay open). Returns once
    /// they are dead, so a transport that hangs up after this leaves no
    /// moment in which another connection could still use them. A
    /// connection that never queued a call to the writer has nothing
    /// there and returns at once (see [`Session::needs_writer_to_close`]).
    pub(crate) fn close(&self, s: Session) {
        if s.needs_writer_to_close() {
            self.engine.connection_closed(s.conn);
        }
    }
}
