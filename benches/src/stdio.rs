//! A child process spoken to over NDJSON on its stdin/stdout, and the
//! pipelining client used for both the broker and the raw baseline.
//!
//! The client is two threads: a writer that keeps at most `depth` requests
//! unanswered (buffering its lines and flushing only when it runs out of
//! credit or of lines), and a reader that counts response lines (lines
//! without an `id`, the notifications, are skipped) and hands credit back
//! in chunks, whenever its buffer drains. Both sides of a comparison use
//! this same client, so its cost is in both. Its lines are cut where the
//! client's wire core says ([`FrameReader`]).

use crate::frames::{Codec, FrameReader};
use crate::workload::{Client, RESPONSE_PREFIX};
use serde_json::Value;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A child process on pipes; killed when dropped.
pub struct Proc {
    child: Child,
    stdin: Option<BufWriter<ChildStdin>>,
    stdout: FrameReader<ChildStdout>,
    next_id: u64,
}

impl Proc {
    /// Spawns `cmd` with its three standard streams piped; the process,
    /// and its stderr for the caller to forward.
    fn piped(mut cmd: Command) -> (Proc, BufReader<ChildStderr>) {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let stdin = BufWriter::with_capacity(64 * 1024, child.stdin.take().expect("piped stdin"));
        let stdout = FrameReader::new(child.stdout.take().expect("piped stdout"), Codec::Ndjson);
        let stderr = BufReader::new(child.stderr.take().expect("piped stderr"));
        let proc = Proc {
            child,
            stdin: Some(stdin),
            stdout,
            // Seven-digit ids everywhere, so every line of a run has the same length.
            next_id: 1_000_000,
        };
        (proc, stderr)
    }

    /// Forwards the child's stderr on a thread, except the broker's
    /// `{"ready":...}` line.
    fn forward(stderr: BufReader<ChildStderr>) {
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if !line.starts_with("{\"ready\"") {
                    eprintln!("child: {line}");
                }
            }
        });
    }

    /// Spawns `cmd` with piped stdin/stdout. Its stderr is forwarded,
    /// except the broker's `{"ready":...}` line.
    pub fn spawn(cmd: Command) -> Proc {
        let (proc, stderr) = Self::piped(cmd);
        Self::forward(stderr);
        proc
    }

    /// Spawns `cmd` as [`Proc::spawn`] does, and waits for the broker's
    /// ready line on stderr: the process and the time from spawning it to
    /// that line (start-up to ready). Panics if stderr closes first.
    pub fn spawn_until_ready(cmd: Command) -> (Proc, Duration) {
        let start = Instant::now();
        let (proc, mut stderr) = Self::piped(cmd);
        let mut line = String::new();
        loop {
            line.clear();
            let n = stderr.read_line(&mut line).expect("read stderr");
            assert!(n > 0, "the broker exited before its ready line");
            if line.starts_with("{\"ready\"") {
                break;
            }
            eprint!("child: {line}");
        }
        let ready = start.elapsed();
        Self::forward(stderr);
        (proc, ready)
    }

    /// The child's resident memory (`VmRSS`), in KiB.
    pub fn rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    fn io(&mut self) -> (&mut BufWriter<ChildStdin>, &mut FrameReader<ChildStdout>) {
        (self.stdin.as_mut().expect("stdin open"), &mut self.stdout)
    }

    /// One request, answered before returning; the raw response line
    /// (without `\n`). Notifications met on the way are skipped.
    pub fn call_line(&mut self, method: &str, params: Value) -> String {
        let id = self.next_id();
        let line =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (w, r) = self.io();
        serde_json::to_writer(&mut *w, &line).expect("encode request");
        w.write_all(b"\n").expect("write request");
        w.flush().expect("flush request");
        loop {
            let line = match r.next_frame() {
                Ok(Some(line)) => line,
                Ok(None) => panic!("child closed its stdout while answering {method}"),
                Err(e) => panic!("reading the answer to {method}: {e}"),
            };
            let v: Value = serde_json::from_slice(line).expect("child writes JSON lines");
            if v.get("id") == Some(&Value::from(id)) {
                let text = std::str::from_utf8(line).expect("utf-8");
                return text.trim_end().to_owned();
            }
        }
    }

    /// Runs `lines` through the pipelining client with at most `depth`
    /// unanswered; `on_response` sees each response line (without its
    /// `\n`).
    pub fn pipeline(
        &mut self,
        lines: &[Vec<u8>],
        depth: usize,
        on_response: impl FnMut(&[u8]) + Send,
    ) -> Duration {
        let (w, r) = self.io();
        pipeline(w, r, lines, depth, on_response)
    }

    /// CPU time the child has used so far (user + system, all threads),
    /// from `/proc/PID/stat` (in USER_HZ = 1/100 s ticks).
    pub fn cpu_time(&self) -> Duration {
        cpu_of(&format!("/proc/{}/stat", self.child.id()))
    }

    /// Closes stdin (the broker exits 0 at end of input) and waits.
    pub fn finish(mut self) {
        self.stdin.take();
        let status = self.child.wait().expect("wait for child");
        assert!(status.success(), "child exited with {status}");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Client for Proc {
    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let line = self.call_line(method, params);
        let v: Value = serde_json::from_str(&line).expect("JSON response");
        match v.get("result") {
            Some(r) => r.clone(),
            None => panic!("{method} failed: {line}"),
        }
    }

    fn collect(&mut self, lines: &[Vec<u8>], depth: usize) -> Vec<Value> {
        let mut out = Vec::with_capacity(lines.len());
        self.pipeline(lines, depth, |l| {
            out.push(serde_json::from_slice(l).expect("JSON response"));
        });
        out
    }

    fn timed(&mut self, lines: &[Vec<u8>], depth: usize) -> Duration {
        let mut first_error: Option<String> = None;
        let d = self.pipeline(lines, depth, |l| {
            if first_error.is_none() && !crate::workload::is_ok_response(l) {
                first_error = Some(String::from_utf8_lossy(l).into_owned());
            }
        });
        if let Some(e) = first_error {
            panic!("a request failed during the measurement: {e}");
        }
        d
    }
}

/// Credit shared by the writer and the reader: responses counted so far,
/// and whether the writer sleeps waiting for more (also used by the
/// socket streams).
pub(crate) struct Credit {
    state: Mutex<(usize, bool)>,
    wake: Condvar,
}

impl Credit {
    pub(crate) fn new() -> Credit {
        Credit {
            state: Mutex::new((0, false)),
            wake: Condvar::new(),
        }
    }

    pub(crate) fn publish(&self, done: usize) {
        let mut st = self.state.lock().expect("credit lock");
        st.0 = done;
        if st.1 {
            st.1 = false;
            self.wake.notify_one();
        }
    }

    pub(crate) fn done(&self) -> usize {
        self.state.lock().expect("credit lock").0
    }

    /// Blocks until fewer than `depth` of `sent` are unanswered.
    pub(crate) fn wait_below(&self, sent: usize, depth: usize) -> usize {
        let mut st = self.state.lock().expect("credit lock");
        while sent - st.0 >= depth {
            st.1 = true;
            st = self.wake.wait(st).expect("credit lock");
        }
        st.0
    }
}

/// The pipelining client on any writer/reader pair.
pub fn pipeline<W: Write + Send, R: Read + Send>(
    w: &mut W,
    r: &mut FrameReader<R>,
    lines: &[Vec<u8>],
    depth: usize,
    mut on_response: impl FnMut(&[u8]) + Send,
) -> Duration {
    let n = lines.len();
    let depth = depth.max(1);
    let credit = Credit::new();
    let start = Instant::now();
    std::thread::scope(|s| {
        let credit = &credit;
        s.spawn(move || {
            let mut sent = 0;
            let mut done = 0;
            while sent < n {
                let room = depth - (sent - done);
                if room == 0 {
                    w.flush().expect("flush requests");
                    done = credit.wait_below(sent, depth);
                    continue;
                }
                let k = room.min(n - sent);
                for line in &lines[sent..sent + k] {
                    w.write_all(line).expect("write request");
                }
                sent += k;
                done = credit.done();
            }
            w.flush().expect("flush requests");
        });
        let mut got = 0;
        let mut unpublished = 0;
        while got < n {
            let line = match r.next_frame() {
                Ok(Some(line)) => line,
                Ok(None) => panic!("child closed its stdout after {got} of {n} responses"),
                Err(e) => panic!("after {got} of {n} responses: {e}"),
            };
            if line.starts_with(RESPONSE_PREFIX) {
                on_response(line);
                got += 1;
                unpublished += 1;
            }
            if unpublished > 0 && (unpublished >= 64 || r.buffered() == 0) {
                credit.publish(got);
                unpublished = 0;
            }
        }
        credit.publish(got);
    });
    start.elapsed()
}

/// User + system CPU time from a `/proc/<pid>/stat` file (USER_HZ = 1/100 s
/// ticks; all threads, ended ones included).
pub fn cpu_of(stat_path: &str) -> Duration {
    let stat = std::fs::read_to_string(stat_path).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After the command name: field 3 (state) is index 0, utime (14) index 11, stime (15) index 12.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}
