//! The broker in this process: `server::start` on a temporary database, one
//! session fed NDJSON lines with `Broker::handle_line`, responses drained
//! from the session's outbox. No pipes and no JSON writing of responses:
//! what is left is parsing, the writer thread and SQLite.

use crate::workload::Client;
use a2a_broker::delivery::{Outbox, Outgoing};
use a2a_broker::dispatch::{Broker, Session};
use a2a_broker::server::{start, ServeConfig};
use a2a_broker::store::Durability;
use a2a_broker::transport::ndjson::write_outgoing;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A broker running in this process, with one session.
pub struct InProc {
    pub broker: Arc<Broker>,
    session: Option<Session>,
    outbox: Arc<Outbox>,
    items: Vec<Outgoing>,
    next_id: u64,
    /// The database file.
    pub db: PathBuf,
    _dir: tempfile::TempDir,
}

impl InProc {
    /// Starts a broker on a fresh database.
    pub fn start(durability: Durability, batch_max: usize) -> InProc {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("bench.db");
        let broker = start(&ServeConfig {
            durability,
            batch_max,
            ..ServeConfig::new(db.clone())
        })
        .expect("start the broker");
        let outbox = Arc::new(Outbox::new(1 << 20));
        let session = broker.session(outbox.clone());
        InProc {
            broker,
            session: Some(session),
            outbox,
            items: Vec::new(),
            next_id: 1_000_000,
            db,
            _dir: dir,
        }
    }

    /// Pipelines `lines` with at most `depth` unanswered; `on_response`
    /// sees each response (events are drained and dropped).
    pub fn pipeline(
        &mut self,
        lines: &[Vec<u8>],
        depth: usize,
        mut on_response: impl FnMut(&Outgoing),
    ) -> Duration {
        let depth = depth.max(1);
        let session = self.session.as_mut().expect("session open");
        let start = Instant::now();
        let (mut sent, mut done) = (0, 0);
        while done < lines.len() {
            while sent < lines.len() && sent - done < depth {
                let line = &lines[sent];
                self.broker.handle_line(session, &line[..line.len() - 1]);
                sent += 1;
            }
            assert!(self.outbox.drain_blocking(&mut self.items), "outbox closed");
            for item in self.items.drain(..) {
                if let Outgoing::Response(_) = item {
                    on_response(&item);
                    done += 1;
                }
            }
        }
        start.elapsed()
    }

    /// (transactions committed, calls they held) so far.
    pub fn commits(&self) -> (u64, u64) {
        let st = &self.broker.shared.stats;
        (
            st.commits.load(std::sync::atomic::Ordering::Relaxed),
            st.calls.load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Stops the writer after its last commit.
    pub fn shutdown(mut self) {
        if let Some(s) = self.session.take() {
            self.broker.close(s);
        }
        self.broker.engine.shutdown();
    }
}

fn to_json(item: &Outgoing) -> Value {
    let mut buf = Vec::new();
    write_outgoing(&mut buf, item).expect("encode response");
    serde_json::from_slice(&buf).expect("JSON response")
}

impl Client for InProc {
    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id();
        let line = crate::workload::request_line(id, method, &params);
        let mut answer = None;
        self.pipeline(&[line], 1, |item| answer = Some(to_json(item)));
        let v = answer.expect("one response");
        match v.get("result") {
            Some(r) => r.clone(),
            None => panic!("{method} failed: {v}"),
        }
    }

    fn collect(&mut self, lines: &[Vec<u8>], depth: usize) -> Vec<Value> {
        let mut out = Vec::with_capacity(lines.len());
        self.pipeline(lines, depth, |item| out.push(to_json(item)));
        out
    }

    fn timed(&mut self, lines: &[Vec<u8>], depth: usize) -> Duration {
        let mut first_error = None;
        let d = self.pipeline(lines, depth, |item| {
            if let Outgoing::Response(r) = item {
                if first_error.is_none() && r.result.is_err() {
                    first_error = Some(to_json(item));
                }
            }
        });
        if let Some(e) = first_error {
            panic!("a request failed during the measurement: {e}");
        }
        d
    }
}
