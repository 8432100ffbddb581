//! The broker in this process: the library's in-memory connection pair
//! ([`MemoryBroker`], [`MemoryConnection`]) on a temporary database, fed
//! NDJSON lines with the same pipelining as the stdio client. No pipes and
//! no child process: what is left is parsing, the writer thread, SQLite,
//! and writing the responses as JSON lines (read here from a channel).

use crate::workload::{is_ok_response, Client, RESPONSE_PREFIX};
use a2a_broker::server::ServeConfig;
use a2a_broker::{Durability, MemoryBroker, MemoryConnection};
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Longest wait for one response line: a lost response fails the bench
/// with a message instead of hanging it.
const LINE_TIMEOUT: Duration = Duration::from_secs(60);

/// A broker running in this process, with one connection.
pub struct InProc {
    conn: MemoryConnection,
    broker: MemoryBroker,
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
        let (broker, conn) = MemoryBroker::pair(&ServeConfig {
            durability,
            batch_max,
            ..ServeConfig::new(db.clone())
        })
        .expect("start the broker");
        InProc {
            conn,
            broker,
            next_id: 1_000_000,
            db,
            _dir: dir,
        }
    }

    /// Pipelines `lines` (each ending in `\n`) with at most `depth`
    /// unanswered; `on_response` sees each response line (notifications
    /// are read and dropped).
    pub fn pipeline(
        &mut self,
        lines: &[Vec<u8>],
        depth: usize,
        mut on_response: impl FnMut(&str),
    ) -> Duration {
        let depth = depth.max(1);
        let start = Instant::now();
        let (mut sent, mut done) = (0, 0);
        while done < lines.len() {
            while sent < lines.len() && sent - done < depth {
                self.conn
                    .send_bytes(lines[sent].clone())
                    .expect("the connection is open");
                sent += 1;
            }
            let line = self
                .conn
                .recv_line(LINE_TIMEOUT)
                .unwrap_or_else(|e| panic!("no response ({done} of {}): {e}", lines.len()));
            if line.as_bytes().starts_with(RESPONSE_PREFIX) {
                on_response(&line);
                done += 1;
            }
        }
        start.elapsed()
    }

    /// (transactions committed, calls they held) so far.
    pub fn commits(&self) -> (u64, u64) {
        let st = self.broker.stats();
        (st.commits, st.calls)
    }

    /// Ends the connection, then stops the writer after its last commit.
    pub fn shutdown(self) {
        let InProc {
            mut conn, broker, ..
        } = self;
        conn.close();
        drop(broker);
    }
}

fn to_json(line: &str) -> Value {
    serde_json::from_str(line).expect("JSON response")
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
        self.pipeline(&[line], 1, |l| answer = Some(to_json(l)));
        let v = answer.expect("one response");
        match v.get("result") {
            Some(r) => r.clone(),
            None => panic!("{method} failed: {v}"),
        }
    }

    fn collect(&mut self, lines: &[Vec<u8>], depth: usize) -> Vec<Value> {
        let mut out = Vec::with_capacity(lines.len());
        self.pipeline(lines, depth, |l| out.push(to_json(l)));
        out
    }

    fn timed(&mut self, lines: &[Vec<u8>], depth: usize) -> Duration {
        let mut first_error = None;
        let d = self.pipeline(lines, depth, |l| {
            if first_error.is_none() && !is_ok_response(l.as_bytes()) {
                first_error = Some(l.to_owned());
            }
        });
        if let Some(e) = first_error {
            panic!("a request failed during the measurement: {e}");
        }
        d
    }
}
