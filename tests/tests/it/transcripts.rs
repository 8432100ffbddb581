//! Transcript tests: `tests/transcripts/*.ndjson`, the readable record of
//! what the protocol does (format and placeholders: `a2a_testkit::transcript`).
//! Each runs twice against a fresh database: in memory (the broker library's
//! `MemoryConnection`, no process) and over the real binary's stdio; both
//! must match the file. `UPDATE_EXPECT=1 cargo test -p a2a-integration
//! transcripts` rewrites the files when a change is intended.

use a2a_broker::server::ServeConfig;
use a2a_broker::Durability;
use a2a_broker::{MemoryBroker, MemoryConnection, MemoryError};
use a2a_testkit::transcript::{self, Lines, Recv, StdioLines};
use a2a_testkit::TestDb;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The transcripts, each run by a module of that name (`memory`, `stdio`).
macro_rules! transcripts {
    ($($name:ident),+ $(,)?) => {
        const LISTED: &[&str] = &[$(stringify!($name)),+];
        $(
            mod $name {
                #[test]
                fn memory() {
                    super::in_memory(stringify!($name))
                }
                #[test]
                fn stdio() {
                    super::over_stdio(stringify!($name))
                }
            }
        )+
    };
}

transcripts!(handshake, agents, task_lifecycle, errors, batch);

fn path_of(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("transcripts")
        .join(format!("{name}.ndjson"))
}

/// A [`MemoryConnection`] as the runner's [`Lines`]; holds its broker and
/// its database (also the docs examples' runner, `docs.rs`).
pub(crate) struct Memory {
    conn: MemoryConnection,
    _broker: MemoryBroker,
    _db: TestDb,
}

impl Memory {
    /// A broker in this process on a fresh database, and a connection to it.
    pub(crate) fn start() -> Memory {
        let db = TestDb::new();
        let cfg = ServeConfig {
            // Nothing here survives the test; the fsyncs would only slow it.
            durability: Durability::Normal,
            ..ServeConfig::new(db.path.clone())
        };
        let (broker, conn) = MemoryBroker::pair(&cfg).expect("start an in-memory broker");
        Memory {
            conn,
            _broker: broker,
            _db: db,
        }
    }
}

impl Lines for Memory {
    fn send_line(&mut self, line: &str) -> std::io::Result<()> {
        self.conn
            .send_line(line)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::BrokenPipe, e))
    }

    fn recv_line(&mut self, timeout: Duration) -> Recv {
        match self.conn.recv_line(timeout) {
            Ok(l) => Recv::Line(l),
            Err(MemoryError::Closed) => Recv::Closed,
            Err(_) => Recv::Timeout,
        }
    }

    fn close(&mut self) {
        self.conn.close();
    }
}

fn in_memory(name: &str) {
    if let Err(e) = transcript::check(&path_of(name), &mut Memory::start()) {
        panic!("{e}");
    }
}

fn over_stdio(name: &str) {
    let db = TestDb::new();
    let mut lines = StdioLines::start(&db.path).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = transcript::check(&path_of(name), &mut lines) {
        panic!("{e}; stderr: {:?}", lines.process().stderr.all());
    }
}

/// A transcript file that no module runs would be a record nobody checks.
#[test]
fn every_transcript_file_is_run() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("transcripts");
    let mut on_disk: Vec<String> = transcript::files(&dir)
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = LISTED.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "tests/transcripts/*.ndjson vs transcripts!(..)"
    );
}
