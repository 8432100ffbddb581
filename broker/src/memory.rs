//! In-memory connections: a broker in this process, spoken to in NDJSON
//! lines with no pipe, socket or child process (the shape of lsp-server's
//! `Connection::memory()`), for tests, transcripts and benchmarks.
//!
//! A [`MemoryConnection`] is a stdio session with its two ends swapped for
//! channels: [`stdio::serve_lines`] reads the lines sent with
//! [`MemoryConnection::send_line`] on a thread of its own, and
//! [`stdio::spawn_writer`] drains the session's outbox into a sink whose
//! complete lines [`MemoryConnection::recv_line`] returns. Everything
//! between (framing, dispatch, the writer thread, SQLite, routing) is the
//! code the stdio transport runs; like stdio, the handshake takes no secret.
//!
//! Architecture invariant: this module adds no protocol behaviour. A
//! transcript that passes here passes over the real stdio transport.

use crate::broker::Broker;
use crate::server::{self, ServeConfig};
use crate::transport::stdio;
use std::io::{self, Read, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

/// Why an in-memory broker or connection cannot do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The broker could not open its database or start its writer.
    #[error("the broker could not start: {0}")]
    Start(#[source] crate::server::ServeError),
    /// No complete line arrived within the timeout.
    #[error("no line within {0:?}")]
    Timeout(Duration),
    /// The connection is closed: its input was ended (sending), or the
    /// broker's side has written everything it will write (receiving).
    #[error("the connection is closed")]
    Closed,
    /// A thread of the connection could not be started.
    #[error("cannot start a connection thread: {0}")]
    Thread(#[from] io::Error),
}

/// A broker running in this process. Its writer stops (after the commits in
/// flight) when this is dropped; connections still open then get `-32603`
/// for their mutating calls.
pub struct MemoryBroker {
    broker: Arc<Broker>,
}

impl std::fmt::Debug for MemoryBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBroker").finish_non_exhaustive()
    }
}

impl MemoryBroker {
    /// Opens the store at `cfg.db` and starts the writer, as `serve` does;
    /// `cfg.socket` and `cfg.no_stdio` are not used (nothing listens).
    pub fn start(cfg: &ServeConfig) -> Result<MemoryBroker, MemoryError> {
        let broker = server::start(cfg).map_err(MemoryError::Start)?;
        Ok(MemoryBroker { broker })
    }

    /// Opens a new connection (a session of its own, handshake not done).
    pub fn connect(&self) -> Result<MemoryConnection, MemoryError> {
        MemoryConnection::open(self.broker.clone())
    }

    /// The writer's commit counters and the number of live agents.
    #[doc(hidden)]
    pub fn stats(&self) -> crate::BrokerStats {
        self.broker.stats()
    }

    /// [`MemoryBroker::start`] and one [`MemoryBroker::connect`].
    pub fn pair(cfg: &ServeConfig) -> Result<(MemoryBroker, MemoryConnection), MemoryError> {
        let broker = Self::start(cfg)?;
        let conn = broker.connect()?;
        Ok((broker, conn))
    }
}

impl Drop for MemoryBroker {
    fn drop(&mut self) {
        self.broker.engine.shutdown();
    }
}

/// One NDJSON connection to a [`MemoryBroker`]. Dropping it ends its input
/// (the session closes as on end of stdin: its agents' tokens die).
#[derive(Debug)]
pub struct MemoryConnection {
    /// Lines to the broker; `None` once the input is ended.
    input: Option<Sender<Vec<u8>>>,
    /// Complete lines from the broker, without their `\n`.
    output: Receiver<String>,
}

impl MemoryConnection {
    fn open(broker: Arc<Broker>) -> Result<MemoryConnection, MemoryError> {
        let (in_tx, in_rx) = mpsc::channel();
        let (out_tx, out_rx) = mpsc::channel();
        let outbox = stdio::outbox();
        let writer = stdio::spawn_writer(
            outbox.clone(),
            LineSink {
                partial: Vec::new(),
                lines: out_tx,
            },
        );
        let closer = outbox.clone();
        let served = std::thread::Builder::new()
            .name("a2a-memory".into())
            .spawn(move || {
                let source = ChunkSource {
                    chunks: in_rx,
                    chunk: Vec::new(),
                    at: 0,
                };
                let session = stdio::serve_lines(&broker, source, outbox.clone());
                // As at the end of stdin: the calls sent before still run,
                // then the outbox closes and the writer flushes what is left,
                // which ends the output channel.
                broker.close(session);
                outbox.close();
                let _ = writer.join();
            });
        if let Err(e) = served {
            // No session will run: let the writer thread end.
            closer.close();
            return Err(e.into());
        }
        Ok(MemoryConnection {
            input: Some(in_tx),
            output: out_rx,
        })
    }

    /// Sends one line (`\n` appended; a `line` holding `\n` is several
    /// lines, as it would be on a pipe).
    pub fn send_line(&self, line: &str) -> Result<(), MemoryError> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.send_bytes(bytes)
    }

    /// Sends raw bytes, framed by the broker's line reader like stdin.
    pub fn send_bytes(&self, bytes: Vec<u8>) -> Result<(), MemoryError> {
        let input = self.input.as_ref().ok_or(MemoryError::Closed)?;
        input.send(bytes).map_err(|_| MemoryError::Closed)
    }

    /// The next line the broker wrote (without its `\n`), waiting at most
    /// `timeout`. [`MemoryError::Closed`] once the broker's side is done.
    pub fn recv_line(&self, timeout: Duration) -> Result<String, MemoryError> {
        self.output.recv_timeout(timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => MemoryError::Timeout(timeout),
            RecvTimeoutError::Disconnected => MemoryError::Closed,
        })
    }

    /// Ends the input (end of file for the session). Lines already sent are
    /// still answered; [`MemoryConnection::recv_line`] returns them, then
    /// [`MemoryError::Closed`].
    pub fn close(&mut self) {
        self.input = None;
    }
}

/// The session's input: the chunks sent, read as one byte stream.
struct ChunkSource {
    chunks: Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    at: usize,
}

impl Read for ChunkSource {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.chunk.len() {
            match self.chunks.recv() {
                Ok(c) => {
                    self.chunk = c;
                    self.at = 0;
                }
                // Every sender is gone: end of file.
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The writer's output: bytes cut into lines, each sent whole.
struct LineSink {
    partial: Vec<u8>,
    lines: Sender<String>,
}

impl Write for LineSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.partial.extend_from_slice(buf);
        while let Some(i) = self.partial.iter().position(|&c| c == b'\n') {
            let rest = self.partial.split_off(i + 1);
            let mut line = std::mem::replace(&mut self.partial, rest);
            line.pop();
            // The broker writes UTF-8 JSON; lossy only guards the type.
            let line = String::from_utf8_lossy(&line).into_owned();
            if self.lines.send(line).is_err() {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &tempfile::TempDir) -> ServeConfig {
        ServeConfig::new(dir.path().join("memory.db"))
    }

    #[test]
    fn answers_a_handshake_and_closes_after_the_input_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_broker, mut conn) = MemoryBroker::pair(&config(&dir)).expect("start");
        conn.send_line(
            r#"{"jsonrpc":"2.0","id":1,"method":"app.handshake","params":{"protocolVersion":10}}"#,
        )
        .expect("send");
        let line = conn.recv_line(Duration::from_secs(20)).expect("response");
        let v: serde_json::Value = serde_json::from_str(&line).expect("json");
        assert_eq!(v["id"], 1, "{v}");
        assert_eq!(v["result"]["host"], "a2a-broker", "{v}");
        conn.close();
        assert!(matches!(conn.send_line("{}"), Err(MemoryError::Closed)));
        assert!(matches!(
            conn.recv_line(Duration::from_secs(20)),
            Err(MemoryError::Closed)
        ));
    }

    #[test]
    fn a_line_split_across_sends_is_one_request() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_broker, conn) = MemoryBroker::pair(&config(&dir)).expect("start");
        conn.send_bytes(br#"{"jsonrpc":"2.0","id":7,"#.to_vec())
            .expect("send");
        conn.send_bytes(b"\"method\":\"nope\"}\n".to_vec())
            .expect("send");
        let line = conn.recv_line(Duration::from_secs(20)).expect("response");
        let v: serde_json::Value = serde_json::from_str(&line).expect("json");
        assert_eq!(v["id"], 7, "{v}");
        assert_eq!(v["error"]["code"], -32600, "{v}");
        assert!(matches!(
            conn.recv_line(Duration::from_millis(50)),
            Err(MemoryError::Timeout(_))
        ));
    }
}
