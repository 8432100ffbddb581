//! A broker child and the test's connection to it, over a chosen
//! [`Transport`]: the child's stdio, or its local socket (`--socket
//! <db dir>/run/sock`, the handshake carrying the secret the broker minted
//! into its secret file). Protocol tests take a `Transport` and run on both
//! through [`on_both_transports!`](crate::on_both_transports); tests of the
//! process itself (stdin EOF, signals, start-up refusals) use
//! [`Broker::start`] / [`Broker::expect_start_failure`].
//!
//! The connection's methods ([`Conn`]) are callable on the [`Broker`]
//! directly; [`Broker::connect`] opens further socket connections. The
//! child is killed when the `Broker` is dropped.

use crate::process::{socket_path_for, BrokerProcess, Spawn, SpawnError};
use crate::{Conn, TIMEOUT};
use serde_json::Value;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

/// The transport a test speaks the protocol over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// NDJSON on the child's stdin/stdout (the canonical transport).
    Stdio,
    /// NDJSON on the local socket; the child's stdin stays open (its EOF
    /// still stops the broker) and its stdout unused.
    Socket,
}

/// Runs protocol tests over both transports. For each `fn name(t: Transport)`
/// listed, makes a module `name` holding the tests `stdio` and `socket`
/// (so `cargo test ::socket` runs one transport). A test fn that is written
/// but not listed is dead code, which the lints refuse.
#[macro_export]
macro_rules! on_both_transports {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[test]
            fn stdio() {
                super::$name($crate::Transport::Stdio)
            }
            #[test]
            fn socket() {
                super::$name($crate::Transport::Socket)
            }
        }
    )+};
}

/// A running broker child process and the test's connection to it.
#[derive(Debug)]
pub struct Broker {
    process: BrokerProcess,
    /// The child's pid.
    pub pid: u32,
    /// The transport of the test's connection.
    pub transport: Transport,
    /// The test's connection (stdio, or the first socket connection).
    conn: Conn,
    /// The ready line the broker wrote on stderr (`Null` before it).
    pub ready: Value,
    /// Socket transport: the socket path and the secret.
    socket: Option<(PathBuf, String)>,
}

impl Deref for Broker {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        &self.conn
    }
}

impl DerefMut for Broker {
    fn deref_mut(&mut self) -> &mut Conn {
        &mut self.conn
    }
}

impl Broker {
    /// Spawns the broker (stdio transport) without waiting for it to be ready.
    pub fn spawn(db: &Path, extra_args: &[&str]) -> Broker {
        Broker::spawn_on(Transport::Stdio, db, extra_args)
    }

    /// Spawns the broker for a transport without waiting for it to be ready
    /// (on the socket, nothing is connected yet).
    pub fn spawn_on(transport: Transport, db: &Path, extra_args: &[&str]) -> Broker {
        let mut spawn = Spawn::new(db).args(extra_args);
        if transport == Transport::Socket {
            spawn = spawn.socket(socket_path_for(db));
        }
        let mut process = spawn
            .spawn()
            .unwrap_or_else(|e| panic!("spawn a2a-broker: {e}"));
        let conn = match transport {
            Transport::Stdio => {
                let stdin = process.take_stdin().expect("stdin is piped");
                let stdout = process.take_stdout().expect("stdout is piped");
                Conn::stdio(stdin, stdout)
            }
            Transport::Socket => Conn::detached(),
        }
        .with_diagnostics(process.stderr.shared());
        Broker {
            pid: process.pid,
            process,
            transport,
            conn,
            ready: Value::Null,
            socket: None,
        }
    }

    /// Spawns the broker (stdio transport) and waits for its ready line.
    pub fn start(db: &Path, extra_args: &[&str]) -> Broker {
        Broker::start_on(Transport::Stdio, db, extra_args)
    }

    /// Spawns the broker and waits for its `{"ready": true, ...}` stderr line;
    /// on the socket, then reads the secret file and connects (no handshake).
    pub fn start_on(transport: Transport, db: &Path, extra_args: &[&str]) -> Broker {
        let mut b = Broker::spawn_on(transport, db, extra_args);
        b.ready = b
            .process
            .wait_ready(TIMEOUT)
            .unwrap_or_else(|e| panic!("{e}"))
            .clone();
        if transport == Transport::Socket {
            let path = socket_path_for(db);
            assert_eq!(
                b.ready["socket"].as_str(),
                Some(path.to_str().expect("utf-8 path")),
                "ready line: {}",
                b.ready
            );
            let secret = b
                .process
                .secret()
                .unwrap_or_else(|| panic!("no readable secret file: {}", b.ready));
            assert!(!secret.is_empty(), "empty secret file: {}", b.ready);
            b.socket = Some((path, secret));
            b.conn = b.connect();
        }
        b
    }

    /// [`Broker::start`] with no extra flags, then `app.handshake` (stdio).
    pub fn open(db: &Path) -> Broker {
        Broker::open_on(Transport::Stdio, db)
    }

    /// [`Broker::start_on`] with no extra flags, then `app.handshake`.
    pub fn open_on(transport: Transport, db: &Path) -> Broker {
        let mut b = Broker::start_on(transport, db, &[]);
        b.handshake();
        b
    }

    /// Opens another connection to the broker's socket (no handshake yet).
    /// Its handshake carries the broker's secret; use
    /// [`Broker::connect_with_secret`] for another one.
    pub fn connect(&self) -> Conn {
        let secret = self.socket.as_ref().map(|(_, s)| s.clone());
        self.connect_with_secret(secret)
    }

    /// [`Broker::connect`] whose [`Conn::handshake`] carries `secret`
    /// (`None`: no secret field at all).
    pub fn connect_with_secret(&self, secret: Option<String>) -> Conn {
        let (path, _) = self
            .socket
            .as_ref()
            .expect("connect: the broker has no socket (Transport::Socket)");
        Conn::socket(path, secret)
            .unwrap_or_else(|e| panic!("connect to {}: {e}", path.display()))
            .with_diagnostics(self.process.stderr.shared())
    }

    /// Runs a broker (stdio) that is expected to refuse to start: returns its
    /// exit status and every stderr line. Fails if it becomes ready instead.
    pub fn expect_start_failure(db: &Path, extra_args: &[&str]) -> (ExitStatus, Vec<String>) {
        let process = Spawn::new(db)
            .args(extra_args)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn a2a-broker: {e}"));
        Self::refused(process)
    }

    fn refused(mut process: BrokerProcess) -> (ExitStatus, Vec<String>) {
        match process.wait_ready(TIMEOUT) {
            Err(SpawnError::Exited {
                status: Some(status),
                ..
            }) => (status, process.stderr.drain(TIMEOUT)),
            Ok(_) => panic!(
                "broker became ready: {}; stderr: {:?}",
                process.ready,
                process.stderr.all()
            ),
            Err(e) => panic!("{e}"),
        }
    }

    // ---------------------------------------------------------------- process

    /// Every stderr line so far (non-blocking).
    pub fn stderr_now(&mut self) -> Vec<String> {
        self.process.stderr.all()
    }

    /// Waits for the child's exit; fails (killing it) after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        match self.process.wait_exit(timeout) {
            Some(status) => status,
            None => {
                self.process.kill();
                panic!(
                    "broker did not exit within {timeout:?}; stderr: {:?}",
                    self.stderr_now()
                )
            }
        }
    }

    /// Closes the child's stdin (EOF for the broker), whatever the
    /// transport: on the socket, the connection stays open.
    pub fn close_stdin(&mut self) {
        match self.transport {
            Transport::Stdio => self.conn.close(),
            Transport::Socket => self.process.close_stdin(),
        }
    }

    /// Closes stdin and waits for the exit status (and the end of stderr).
    pub fn close_stdin_and_wait(&mut self, timeout: Duration) -> ExitStatus {
        self.close_stdin();
        let status = self.wait_exit(timeout);
        self.process.stderr.drain(Duration::from_secs(5));
        status
    }

    /// Ends the test's connection, then the broker (for restarts): on stdio
    /// that is stdin EOF; on the socket, the connection is closed first (and
    /// the broker seen closing its side, so it is done with the session),
    /// then stdin. Returns the exit status.
    pub fn close_and_wait(&mut self, timeout: Duration) -> ExitStatus {
        if self.transport == Transport::Socket {
            self.conn.close();
            assert!(
                self.conn.wait_closed(timeout),
                "the broker did not close a socket connection the client closed; stderr: {:?}",
                self.stderr_now()
            );
        }
        self.close_stdin_and_wait(timeout)
    }

    /// SIGKILL (and reap).
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Sends a signal (e.g. `libc::SIGTERM`) to the child.
    pub fn signal(&mut self, sig: i32) {
        self.process
            .signal(sig)
            .unwrap_or_else(|e| panic!("signal {sig} to the broker: {e}"));
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // Close the test's side first so the child sees EOF, then the
        // process's own drop kills and reaps it.
        self.conn.close();
    }
}
