//! Transcript tests: the readable record of what the protocol does.
//!
//! A transcript is a text file of lines:
//!
//! ```text
//! # a comment, kept as written
//! > {"jsonrpc":"2.0","id":1,"method":"app.handshake","params":{"protocolVersion":10}}
//! < {"id":1,"jsonrpc":"2.0","result":{...}}
//! ```
//!
//! `>` lines are sent to a broker as written (after placeholders are
//! replaced, below); `<` lines are what it answered, notifications
//! included, in the order it wrote them. Running a transcript sends each
//! `>` line and waits for its reply (none for a notification), then, at the
//! end, ends the input and collects whatever else the broker writes until
//! it closes; the `<` lines of the file are the expected output and are
//! never sent.
//!
//! Volatile values become placeholders so the files are stable: minted task
//! and message ids (UUIDs) become `$task1`, `$msg1`, … (lease ids `$lease1`), tokens the client
//! did not write itself `$token1`, …, cursors `$cursor1`, timestamps
//! `$time`, the host version `$version`. A later `>` line may use a
//! numbered placeholder, which is replaced by the value it stands for.
//! Responses are rendered as compact JSON with sorted keys.
//!
//! With `UPDATE_EXPECT=1` in the environment, a run that differs rewrites
//! the file (the `expect-test`/`insta` habit) instead of failing; review the
//! diff before committing it.
//!
//! The runner is generic over [`Lines`], so one transcript runs in memory
//! (the broker library's `MemoryConnection`) and over a child's stdio
//! ([`StdioLines`]) alike.

use crate::process::{BrokerProcess, Spawn, SpawnError};
use crate::TIMEOUT;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

/// The variable that turns a mismatch into a rewrite of the expected file.
pub const UPDATE_ENV: &str = "UPDATE_EXPECT";

/// What waiting for a line gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Recv {
    /// One line, without its `\n`.
    Line(String),
    /// Nothing within the timeout.
    Timeout,
    /// The broker's side is closed: nothing more will come.
    Closed,
}

/// An NDJSON connection a transcript can run over.
pub trait Lines {
    /// Sends one line (the implementation appends `\n`).
    fn send_line(&mut self, line: &str) -> std::io::Result<()>;
    /// The next line the broker wrote, waiting at most `timeout`.
    fn recv_line(&mut self, timeout: Duration) -> Recv;
    /// Ends the input; the broker then finishes and closes its side.
    fn close(&mut self);
}

/// Why a transcript could not run or did not match.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// The file could not be read or rewritten.
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A line of the file is neither a comment, blank, `>` nor `<`.
    #[error("{path}:{line}: a transcript line starts with `#`, `>` or `<`")]
    Syntax { path: String, line: usize },
    /// A `>` line names a placeholder no earlier reply defined.
    #[error("{path}:{line}: unknown placeholder `{name}`")]
    Placeholder {
        path: String,
        line: usize,
        name: String,
    },
    /// Sending failed (the broker's side is gone).
    #[error("{path}:{line}: send failed: {source}")]
    Send {
        path: String,
        line: usize,
        source: std::io::Error,
    },
    /// No reply to a `>` line within the timeout.
    #[error("{path}:{line}: no reply within {timeout:?}; so far:\n{so_far}")]
    NoReply {
        path: String,
        line: usize,
        timeout: Duration,
        so_far: String,
    },
    /// The broker did not close its side after the input ended.
    #[error("{path}: the broker did not close after the input ended")]
    NotClosed { path: String },
    /// The run differs from the file (and `UPDATE_EXPECT` is not set).
    #[error("{path}: the transcript differs (rerun with UPDATE_EXPECT=1 to accept):\n{diff}")]
    Mismatch { path: String, diff: String },
}

/// Runs the transcript at `path` over `conn` and compares (or, with
/// `UPDATE_EXPECT=1`, rewrites) it. Returns the rendered transcript.
pub fn check(path: &Path, conn: &mut dyn Lines) -> Result<String, TranscriptError> {
    let name = path.display().to_string();
    let expected = std::fs::read_to_string(path).map_err(|source| TranscriptError::Io {
        path: name.clone(),
        source,
    })?;
    let actual = run(&name, &expected, conn)?;
    if actual == expected {
        return Ok(actual);
    }
    if std::env::var_os(UPDATE_ENV).is_some_and(|v| !v.is_empty() && v != "0") {
        std::fs::write(path, &actual).map_err(|source| TranscriptError::Io {
            path: name.clone(),
            source,
        })?;
        return Ok(actual);
    }
    Err(TranscriptError::Mismatch {
        path: name,
        diff: diff(&expected, &actual),
    })
}

/// Runs transcript `text` (named `name` in errors) over `conn`; returns it
/// rendered with the broker's actual replies in place of its `<` lines.
pub fn run(name: &str, text: &str, conn: &mut dyn Lines) -> Result<String, TranscriptError> {
    let mut out = String::new();
    let mut norm = Normaliser::default();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            out.push_str(raw);
            out.push('\n');
            continue;
        }
        if trimmed.starts_with('<') {
            continue;
        }
        let Some(request) = trimmed.strip_prefix('>') else {
            return Err(TranscriptError::Syntax {
                path: name.into(),
                line: line_no,
            });
        };
        let request = request.strip_prefix(' ').unwrap_or(request);
        out.push_str("> ");
        out.push_str(request);
        out.push('\n');
        let wire = norm
            .substitute(request)
            .map_err(|p| TranscriptError::Placeholder {
                path: name.into(),
                line: line_no,
                name: p,
            })?;
        norm.sent.push_str(&wire);
        conn.send_line(&wire)
            .map_err(|source| TranscriptError::Send {
                path: name.into(),
                line: line_no,
                source,
            })?;
        if !expects_reply(&wire) {
            continue;
        }
        // Everything before the reply (the events its call routed, which
        // the broker writes before the response) and the reply itself.
        loop {
            match conn.recv_line(TIMEOUT) {
                Recv::Line(l) => {
                    let is_reply = !is_notification_line(&l);
                    out.push_str(&norm.render(&l));
                    out.push('\n');
                    if is_reply {
                        break;
                    }
                }
                Recv::Timeout | Recv::Closed => {
                    return Err(TranscriptError::NoReply {
                        path: name.into(),
                        line: line_no,
                        timeout: TIMEOUT,
                        so_far: out,
                    })
                }
            }
        }
    }
    // The end: whatever the broker still writes until it closes.
    conn.close();
    loop {
        match conn.recv_line(TIMEOUT) {
            Recv::Line(l) => {
                out.push_str(&norm.render(&l));
                out.push('\n');
            }
            Recv::Closed => break,
            Recv::Timeout => return Err(TranscriptError::NotClosed { path: name.into() }),
        }
    }
    Ok(out)
}

/// Does a sent line get a reply line? Not a notification (an object with a
/// `method` and no `id`), nor a batch of only notifications, nor a blank
/// line; everything else does, unparseable text included (`-32700`).
fn expects_reply(line: &str) -> bool {
    if line.trim().is_empty() {
        return false;
    }
    let is_note = |v: &Value| v.get("method").is_some() && v.get("id").is_none();
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Array(items)) => items.is_empty() || !items.iter().all(is_note),
        Ok(v) => !is_note(&v),
        Err(_) => true,
    }
}

fn is_notification_line(line: &str) -> bool {
    serde_json::from_str::<Value>(line)
        .map(|v| v.get("method").is_some() && v.get("id").is_none())
        .unwrap_or(false)
}

/// Volatile values to placeholders and back.
#[derive(Default)]
struct Normaliser {
    /// Actual value → placeholder (`$task1`).
    names: BTreeMap<String, String>,
    /// Placeholder name (`task1`) → actual value.
    values: BTreeMap<String, String>,
    /// Counters per kind.
    counts: BTreeMap<&'static str, usize>,
    /// Everything sent so far: a token the client wrote itself (a push
    /// config's) is not volatile.
    sent: String,
}

impl Normaliser {
    /// Replaces `$kindN` placeholders in a line to send by their values.
    fn substitute(&self, line: &str) -> Result<String, String> {
        let mut out = String::with_capacity(line.len());
        let mut rest = line;
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            let len = after
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(after.len());
            let name = &after[..len];
            if name.is_empty() {
                out.push('$');
            } else {
                match self.values.get(name) {
                    Some(v) => out.push_str(v),
                    None => return Err(format!("${name}")),
                }
            }
            rest = &after[len..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// A received line, normalised and rendered compactly (or as written,
    /// marked, if it is not JSON).
    fn render(&mut self, line: &str) -> String {
        let Ok(mut v) = serde_json::from_str::<Value>(line) else {
            return format!("< (not JSON) {line}");
        };
        self.collect(&v, None);
        self.replace(&mut v, None);
        format!("< {v}")
    }

    fn name_for(&mut self, kind: &'static str, value: &str) {
        if self.names.contains_key(value) {
            return;
        }
        let n = self.counts.entry(kind).or_insert(0);
        *n += 1;
        let name = format!("{kind}{n}");
        self.names.insert(value.to_string(), format!("${name}"));
        self.values.insert(name, value.to_string());
    }

    /// Finds the volatile values in `v` (keys decide their kind).
    fn collect(&mut self, v: &Value, key: Option<&str>) {
        match v {
            Value::Object(m) => {
                // A lease's `id` is a lease id (`$lease1`), as `leaseId` is.
                let lease = matches!(key, Some("lease" | "leases"));
                for (k, x) in m {
                    let k = if lease && k == "id" { "leaseId" } else { k };
                    self.collect(x, Some(k));
                }
            }
            Value::Array(a) => {
                for x in a {
                    self.collect(x, key);
                }
            }
            Value::String(s) => match key {
                Some("token") if !self.sent.contains(s.as_str()) => self.name_for("token", s),
                Some("nextCursor") => self.name_for("cursor", s),
                _ if is_uuid(s) => {
                    let kind = match key {
                        Some("id" | "taskId") => "task",
                        Some("messageId") => "msg",
                        Some("artifactId") => "artifact",
                        Some("leaseId") => "lease",
                        _ => "uuid",
                    };
                    self.name_for(kind, s);
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// Puts placeholders in: whole values, and known values inside text
    /// (an error message naming a task).
    fn replace(&self, v: &mut Value, key: Option<&str>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    self.replace(x, Some(k));
                }
            }
            Value::Array(a) => {
                for x in a {
                    self.replace(x, key);
                }
            }
            Value::String(s) => {
                if key == Some("hostVersion") {
                    *s = "$version".into();
                } else if crate::assert::is_timestamp(s) {
                    *s = "$time".into();
                } else if let Some(name) = self.names.get(s.as_str()) {
                    *s = name.clone();
                } else {
                    let mut t = s.clone();
                    for (value, name) in &self.names {
                        if value.len() >= 8 && t.contains(value.as_str()) {
                            t = t.replace(value.as_str(), name);
                        }
                    }
                    *s = t;
                }
            }
            _ => {}
        }
    }
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, lowercase hex.
fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(c),
        })
}

/// The lines that differ, `-` expected and `+` actual, with line numbers.
fn diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    let mut out = String::new();
    // Skip the common head and tail; show the middle.
    let head = e.iter().zip(&a).take_while(|(x, y)| x == y).count();
    let tail = e[head..]
        .iter()
        .rev()
        .zip(a[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    for (i, l) in e[head..e.len() - tail].iter().enumerate() {
        out.push_str(&format!("{:>4} - {l}\n", head + i + 1));
    }
    for (i, l) in a[head..a.len() - tail].iter().enumerate() {
        out.push_str(&format!("{:>4} + {l}\n", head + i + 1));
    }
    out
}

/// The transcripts in a directory (`*.ndjson`), sorted by name.
pub fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ndjson"))
        .collect();
    v.sort();
    v
}

/// The lines a thread of its own reads from a broker's output, for a
/// [`Lines::recv_line`] to wait on.
#[derive(Debug)]
pub struct LineQueue(Receiver<String>);

impl LineQueue {
    /// Reads `output`'s lines (cut by the client's wire core, see
    /// [`crate::lines`]) until it ends (or fails, or the queue is dropped).
    pub fn spawn(output: impl std::io::Read + Send + 'static) -> LineQueue {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = crate::lines::for_each_line(output, |line| match std::str::from_utf8(line) {
                Ok(text) => tx.send(text.to_owned()).is_ok(),
                Err(_) => false,
            });
        });
        LineQueue(rx)
    }

    /// The next line, waiting `timeout` at most.
    pub fn recv(&self, timeout: Duration) -> Recv {
        match self.0.recv_timeout(timeout) {
            Ok(l) => Recv::Line(l),
            Err(RecvTimeoutError::Timeout) => Recv::Timeout,
            Err(RecvTimeoutError::Disconnected) => Recv::Closed,
        }
    }
}

/// [`Lines`] over a broker child's stdin/stdout.
#[derive(Debug)]
pub struct StdioLines {
    process: BrokerProcess,
    stdin: Option<std::process::ChildStdin>,
    lines: LineQueue,
}

impl StdioLines {
    /// Starts `a2a-broker serve --db <db>` and waits for its ready line.
    pub fn start(db: &Path) -> Result<StdioLines, SpawnError> {
        let mut process = Spawn::new(db).start(TIMEOUT)?;
        let stdin = process.take_stdin();
        let stdout = process.take_stdout().expect("stdout is piped");
        Ok(StdioLines {
            process,
            stdin,
            lines: LineQueue::spawn(stdout),
        })
    }

    /// The broker process (its stderr, its exit).
    pub fn process(&mut self) -> &mut BrokerProcess {
        &mut self.process
    }
}

impl Lines for StdioLines {
    fn send_line(&mut self, line: &str) -> std::io::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        // A transcript's lines are small: the pipe's buffer takes them
        // without a reader thread.
        stdin.write_all(line.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()
    }

    fn recv_line(&mut self, timeout: Duration) -> Recv {
        self.lines.recv(timeout)
    }

    fn close(&mut self) {
        self.stdin = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A scripted broker: answers each sent line with the next canned
    /// lines.
    struct Canned {
        replies: VecDeque<Vec<String>>,
        pending: VecDeque<String>,
        sent: Vec<String>,
        closed: bool,
    }

    impl Lines for Canned {
        fn send_line(&mut self, line: &str) -> std::io::Result<()> {
            self.sent.push(line.to_string());
            if let Some(r) = self.replies.pop_front() {
                self.pending.extend(r);
            }
            Ok(())
        }
        fn recv_line(&mut self, _: Duration) -> Recv {
            match self.pending.pop_front() {
                Some(l) => Recv::Line(l),
                None if self.closed => Recv::Closed,
                None => Recv::Timeout,
            }
        }
        fn close(&mut self) {
            self.closed = true;
        }
    }

    const TASK: &str = "01937c2e-8f00-7abc-8def-0123456789ab";
    const TOKEN: &str = "00000000000000010123456789abcdef0123456789abcdef";

    #[test]
    fn normalises_replies_and_substitutes_placeholders_back() {
        let mut conn = Canned {
            replies: VecDeque::from([
                vec![format!(
                    r#"{{"jsonrpc":"2.0","id":1,"result":{{"token":"{TOKEN}","t":"2026-11-30T03:24:21.123Z"}}}}"#
                )],
                vec![
                    format!(
                        r#"{{"jsonrpc":"2.0","method":"a2a.task.event","params":{{"taskId":"{TASK}"}}}}"#
                    ),
                    format!(
                        r#"{{"jsonrpc":"2.0","id":2,"error":{{"message":"task {TASK} gone"}}}}"#
                    ),
                ],
                vec![],
            ]),
            pending: VecDeque::new(),
            sent: Vec::new(),
            closed: false,
        };
        let text = "# hello\n> {\"id\":1,\"method\":\"r\"}\n< old\n> {\"id\":2,\"method\":\"s\",\"params\":{\"token\":\"$token1\"}}\n> {\"method\":\"n\"}\n";
        let out = run("t", text, &mut conn).expect("runs");
        assert_eq!(
            out,
            "# hello\n> {\"id\":1,\"method\":\"r\"}\n< {\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{\"t\":\"$time\",\"token\":\"$token1\"}}\n> {\"id\":2,\"method\":\"s\",\"params\":{\"token\":\"$token1\"}}\n< {\"jsonrpc\":\"2.0\",\"method\":\"a2a.task.event\",\"params\":{\"taskId\":\"$task1\"}}\n< {\"error\":{\"message\":\"task $task1 gone\"},\"id\":2,\"jsonrpc\":\"2.0\"}\n> {\"method\":\"n\"}\n"
        );
        assert_eq!(
            conn.sent[1],
            format!("{{\"id\":2,\"method\":\"s\",\"params\":{{\"token\":\"{TOKEN}\"}}}}")
        );
        assert_eq!(conn.sent.len(), 3);
    }

    #[test]
    fn an_unknown_placeholder_and_a_bad_line_are_errors() {
        let mut conn = Canned {
            replies: VecDeque::new(),
            pending: VecDeque::new(),
            sent: Vec::new(),
            closed: false,
        };
        assert!(matches!(
            run("t", "> {\"token\":\"$token9\"}\n", &mut conn),
            Err(TranscriptError::Placeholder { line: 1, .. })
        ));
        assert!(matches!(
            run("t", "# ok\nsend this\n", &mut conn),
            Err(TranscriptError::Syntax { line: 2, .. })
        ));
    }

    #[test]
    fn replies_are_expected_for_requests_and_junk_only() {
        assert!(expects_reply(r#"{"id":1,"method":"m"}"#));
        assert!(expects_reply("not json"));
        assert!(expects_reply("[]"));
        assert!(expects_reply(r#"[{"method":"m"},{"id":2,"method":"m"}]"#));
        assert!(!expects_reply(r#"[{"method":"m"}]"#));
        assert!(!expects_reply(r#"{"method":"m"}"#));
        assert!(!expects_reply("  "));
    }

    #[test]
    fn the_diff_shows_the_differing_middle() {
        let d = diff("a\nb\nc\n", "a\nx\nc\n");
        assert_eq!(d, "   2 - b\n   2 + x\n");
    }
}
