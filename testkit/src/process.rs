//! A broker child process: spawned over stdio and/or a local socket, its
//! ready line read from stderr with a deadline, its stderr collected, its
//! exit waited for with a deadline, SIGKILL/SIGTERM, and a kill on drop.
//!
//! Every wait here has a deadline, so no user of the kit can hang on a
//! broker that misbehaves; the stderr pipe is owned by a thread so that
//! reading it never blocks (and the child never blocks writing it).

use crate::bin::{broker_bin, BinError};
use serde_json::Value;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The variable through which a broker's starter may hand it its socket
/// secret (docs/protocol.md §2 Opening a connection). Spawned brokers never inherit it from the
/// test's environment; [`Spawn::env`] sets it explicitly.
pub const SECRET_ENV: &str = "A2A_BROKER_SECRET";

/// Why a broker did not come up.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The binary could not be found or built.
    #[error(transparent)]
    Bin(#[from] BinError),
    /// The process could not be started.
    #[error("cannot spawn a2a-broker: {0}")]
    Spawn(#[from] std::io::Error),
    /// It exited before writing its ready line (`status` is `None` if it
    /// did not finish exiting within the deadline and was killed).
    #[error("a2a-broker exited before its ready line ({status:?}); stderr: {stderr:?}")]
    Exited {
        status: Option<ExitStatus>,
        stderr: Vec<String>,
    },
    /// No ready line within the deadline (the child was killed).
    #[error("a2a-broker wrote no ready line within {timeout:?}; stderr: {stderr:?}")]
    NotReady {
        timeout: Duration,
        stderr: Vec<String>,
    },
}

/// How to start `a2a-broker serve`.
#[derive(Clone, Debug)]
pub struct Spawn {
    bin: Option<PathBuf>,
    db: PathBuf,
    socket: Option<PathBuf>,
    stdio: bool,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

impl Spawn {
    /// `serve --db <db>` on stdio (stdin and stdout piped).
    pub fn new(db: impl Into<PathBuf>) -> Spawn {
        Spawn {
            bin: None,
            db: db.into(),
            socket: None,
            stdio: true,
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Also listen on the local socket at `path` (`--socket`).
    pub fn socket(mut self, path: impl Into<PathBuf>) -> Spawn {
        self.socket = Some(path.into());
        self
    }

    /// `--no-stdio`: stdin and stdout are not connected (a socket-only broker).
    pub fn no_stdio(mut self) -> Spawn {
        self.stdio = false;
        self
    }

    /// One more command-line argument after the others.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Spawn {
        self.args.push(arg.into());
        self
    }

    /// More command-line arguments.
    pub fn args<I, S>(mut self, args: I) -> Spawn
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// An environment variable for the child (e.g. [`SECRET_ENV`]).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Spawn {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Another binary than [`broker_bin`]'s.
    pub fn bin(mut self, path: impl Into<PathBuf>) -> Spawn {
        self.bin = Some(path.into());
        self
    }

    /// Starts the child without waiting for its ready line.
    pub fn spawn(self) -> Result<BrokerProcess, SpawnError> {
        let bin = match self.bin {
            Some(b) => b,
            None => broker_bin().to_path_buf(),
        };
        let mut cmd = Command::new(bin);
        cmd.arg("serve").arg("--db").arg(&self.db);
        if let Some(s) = &self.socket {
            cmd.arg("--socket").arg(s);
        }
        if !self.stdio {
            cmd.arg("--no-stdio");
        }
        cmd.args(&self.args).env_remove(SECRET_ENV);
        let env_secret = self
            .env
            .iter()
            .find(|(k, _)| k == SECRET_ENV)
            .map(|(_, v)| v.to_string_lossy().into_owned());
        cmd.envs(self.env);
        // The stdin of a stdio broker is its life line (EOF stops it), so it
        // is piped even when the test talks over the socket only.
        let (stdin, stdout) = if self.stdio {
            (Stdio::piped(), Stdio::piped())
        } else {
            (Stdio::null(), Stdio::null())
        };
        cmd.stdin(stdin).stdout(stdout).stderr(Stdio::piped());
        let mut child = cmd.spawn()?;
        let stderr = StderrLog::collect(child.stderr.take().expect("stderr is piped"));
        Ok(BrokerProcess {
            pid: child.id(),
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            stderr,
            ready: Value::Null,
            env_secret,
        })
    }

    /// [`Spawn::spawn`], then [`BrokerProcess::wait_ready`].
    pub fn start(self, timeout: Duration) -> Result<BrokerProcess, SpawnError> {
        let mut p = self.spawn()?;
        p.wait_ready(timeout)?;
        Ok(p)
    }
}

/// The child's stderr lines: all of them so far (shared, for diagnostics
/// of connections), and a channel to wait for the next ones.
#[derive(Debug)]
pub struct StderrLog {
    /// In a mutex so that a [`BrokerProcess`] can be shared by threads.
    lines: Mutex<Receiver<String>>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl StderrLog {
    fn collect(stderr: std::process::ChildStderr) -> StderrLog {
        let (tx, rx) = mpsc::channel();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let text = String::from_utf8_lossy(&buf)
                    .trim_end_matches(['\n', '\r'])
                    .to_string();
                if let Ok(mut l) = log.lock() {
                    l.push(text.clone());
                }
                if tx.send(text).is_err() {
                    break;
                }
            }
        });
        StderrLog {
            lines: Mutex::new(rx),
            seen,
        }
    }

    /// Every line so far (shared; grows as the child writes).
    pub fn shared(&self) -> Arc<Mutex<Vec<String>>> {
        self.seen.clone()
    }

    /// Every line so far.
    pub fn all(&self) -> Vec<String> {
        self.seen.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The next line not yet taken from the channel, waiting at most
    /// `timeout`; `None` on timeout or once stderr is closed.
    pub fn next(&self, timeout: Duration) -> Option<String> {
        self.recv(timeout).ok()
    }

    fn recv(&self, timeout: Duration) -> Result<String, RecvTimeoutError> {
        match self.lines.lock() {
            Ok(rx) => rx.recv_timeout(timeout),
            Err(_) => Err(RecvTimeoutError::Disconnected),
        }
    }

    /// Waits until stderr closes (the child exited) or `timeout` passes;
    /// returns every line so far.
    pub fn drain(&self, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left) {
                Ok(_) => {}
                Err(_) => return self.all(),
            }
        }
    }
}

/// A running `a2a-broker serve` child, killed (SIGKILL) and reaped on drop.
#[derive(Debug)]
pub struct BrokerProcess {
    child: Child,
    /// The child's pid.
    pub pid: u32,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    /// Its stderr.
    pub stderr: StderrLog,
    /// The `{"ready": true, ...}` line, once [`BrokerProcess::wait_ready`]
    /// has seen it (`Null` before).
    pub ready: Value,
    env_secret: Option<String>,
}

impl BrokerProcess {
    /// Waits for the `{"ready": true, ...}` stderr line. If the child exits
    /// first, or the deadline passes (the child is then killed), says so
    /// with its stderr.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<&Value, SpawnError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv(left) {
                Ok(line) => {
                    if let Ok(v) = serde_json::from_str::<Value>(&line) {
                        if v.get("ready") == Some(&Value::Bool(true)) {
                            self.ready = v;
                            return Ok(&self.ready);
                        }
                    }
                }
                // Stderr closed: the child exited (or is exiting).
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.wait_exit(timeout);
                    if status.is_none() {
                        self.kill();
                    }
                    let stderr = self.stderr.all();
                    return Err(SpawnError::Exited { status, stderr });
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.kill();
                    let stderr = self.stderr.all();
                    return Err(SpawnError::NotReady { timeout, stderr });
                }
            }
        }
    }

    /// The socket path from the ready line, if it listens on one.
    pub fn socket(&self) -> Option<PathBuf> {
        self.ready["socket"].as_str().map(PathBuf::from)
    }

    /// The socket secret: the one given in the environment, else the one the
    /// broker minted into the file its ready line names (trimmed).
    pub fn secret(&self) -> Option<String> {
        if let Some(s) = &self.env_secret {
            return Some(s.clone());
        }
        let file = self.ready["secretFile"].as_str()?;
        std::fs::read_to_string(file)
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// Takes the child's stdin (stdio brokers; once).
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// Takes the child's stdout (stdio brokers; once).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// Closes the child's stdin if this still holds it: end of file, which
    /// stops a stdio broker.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Is the child still running?
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the child's exit, at most `timeout`; `None` if it is still
    /// running then (it is left running).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        wait_exit(&mut self.child, timeout)
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends a signal (e.g. `libc::SIGTERM`) to the child.
    pub fn signal(&mut self, sig: i32) -> std::io::Result<()> {
        if !self.alive() {
            // Reaped or exiting: its pid may be reused, so never signal it.
            return Err(std::io::Error::other("the broker has exited"));
        }
        let pid = libc::pid_t::try_from(self.pid).map_err(std::io::Error::other)?;
        // SAFETY: kill(2) takes plain integers and touches no memory of ours;
        // the pid is our own child, not yet reaped (checked just above, and
        // only this handle reaps it).
        #[allow(unsafe_code)]
        let rc = unsafe { libc::kill(pid, sig) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// SIGTERM (a clean shutdown after the commits in flight).
    pub fn terminate(&mut self) -> std::io::Result<()> {
        self.signal(libc::SIGTERM)
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        self.stdin = None;
        self.kill();
    }
}

/// Waits for a child's exit, at most `timeout`; `None` if it is still
/// running then.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            Err(_) => return None,
        }
        if Instant::now() >= deadline {
            return None;
        }
        // Polling an exit status: a short pause between checks, bounded by
        // the deadline above (there is no portable wait-with-timeout).
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Where a test broker on `db` listens: `<db dir>/run/sock`. The broker
/// creates `run/` (0700) itself; the temporary directory's own mode depends
/// on the umask, which the broker would rightly refuse for a socket's
/// directory.
pub fn socket_path_for(db: &Path) -> PathBuf {
    db.parent()
        .unwrap_or(Path::new("."))
        .join("run")
        .join("sock")
}

/// A loopback TCP port free now, for a child told to `--listen` on it
/// (another process may take it before the child binds: tests on one
/// machine accept that race).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind a loopback port")
        .local_addr()
        .expect("its address")
        .port()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_handle_can_be_shared_by_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<BrokerProcess>();
    }

    #[test]
    fn the_socket_of_a_database_is_in_its_run_directory() {
        assert_eq!(
            socket_path_for(Path::new("/tmp/x/broker.db")),
            Path::new("/tmp/x/run/sock")
        );
    }
}
