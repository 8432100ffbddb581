//! The protocol reference in `docs/` is executed: every fenced block
//! labelled `ndjson` in every page under `docs/` is a transcript (the
//! format of `a2a_testkit::transcript`) run against a fresh broker, and the
//! test fails when the broker's replies differ from the page. With
//! `UPDATE_EXPECT=1` the `<` lines are rewritten inside the markdown
//! instead (review the diff).
//!
//! The conventions (documented for authors in `docs/README.md`):
//! - ```` ```ndjson ```` starts a session: a fresh database and one
//!   in-memory connection (`a2a_broker::memory`, the stdio
//!   session, so the handshake takes no secret).
//! - ```` ```ndjson socket ```` starts a session over the local socket of a
//!   real `a2a-broker serve` started with `A2A_BROKER_SECRET` set to
//!   [`SOCKET_SECRET`].
//! - ```` ```ndjson continue ```` goes on with the session of the previous
//!   executed block of the same page (its agents, tokens, placeholders).
//! - `# repeat N` sends the next `>` line N times, with `{{i}}` in it
//!   replaced by 1..N; `{{S*N}}` in a `>` line is the text `S` N times.
//!   The page keeps the short form.
//!
//! A block is matched line for line, as a transcript file is; the runner is
//! the kit's ([`transcript::run`]), this module only cuts pages into
//! sessions and pastes the results back. It also checks coverage: every
//! method name of `proto/src/methods.rs` is sent in some block, every
//! notification and both event kinds come back in some block, and every
//! A2A `errorCode` of `proto/src/error.rs` is answered in some block, so a
//! new method or error without an example fails here.

use crate::transcripts::Memory;
use a2a_testkit::transcript::{self, LineQueue, Lines, Recv, UPDATE_ENV};
use a2a_testkit::{socket_path_for, BrokerProcess, Spawn, TestDb, SECRET_ENV, TIMEOUT};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The secret the `socket` sessions' broker is started with (the pages
/// show it in their handshakes).
const SOCKET_SECRET: &str = "docs-example-secret";

/// The method and notification names, from the source that defines them.
const METHODS_RS: &str = include_str!("../../../proto/src/methods.rs");
/// The A2A error codes, from the source that defines them.
const ERRORS_RS: &str = include_str!("../../../proto/src/error.rs");

fn docs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("docs")
}

/// Every `*.md` under `dir`, sorted.
fn pages(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("read {}: {e}", d.display()));
        for e in entries {
            let p = e
                .unwrap_or_else(|e| panic!("read {}: {e}", d.display()))
                .path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Memory,
    Socket,
}

/// One executed fenced block of a page.
#[derive(Debug)]
struct Block {
    /// Index (0-based) of its first content line in the page.
    start: usize,
    /// Index one past its last content line (the closing fence's).
    end: usize,
    /// `None` for `continue`.
    starts: Option<Transport>,
}

/// The `ndjson` blocks of a page. A fence is three backticks at the start
/// of a line; the info string's first word picks the blocks.
fn blocks(page: &str, name: &str) -> Vec<Block> {
    let lines: Vec<&str> = page.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(info) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let mut words = info.split_whitespace();
        let lang = words.next();
        let flags: Vec<&str> = words.collect();
        let close = (i + 1..lines.len())
            .find(|&j| lines[j].trim_end() == "```")
            .unwrap_or_else(|| panic!("{name}:{}: unclosed fence", i + 1));
        if lang == Some("ndjson") {
            let starts = match flags.as_slice() {
                [] => Some(Transport::Memory),
                ["socket"] => Some(Transport::Socket),
                ["continue"] => None,
                other => panic!("{name}:{}: unknown ndjson flags {other:?}", i + 1),
            };
            out.push(Block {
                start: i + 1,
                end: close,
                starts,
            });
        }
        i = close + 1;
    }
    out
}

/// A line as sent, and the page line it stands for.
struct Echo {
    /// What the runner echoes for it (`> ` + the expanded request, or a
    /// comment or blank line as written).
    rendered: String,
    /// The page's line, written back in its place (`None`: a repetition
    /// beyond the first, dropped).
    page_line: Option<String>,
    block: usize,
}

/// Expands a block's lines (`# repeat N`, `{{i}}`, `{{S*N}}`) into the
/// transcript text to run, recording what each run line stands for.
fn expand(lines: &[&str], block: usize, text: &mut String, echoes: &mut Vec<Echo>, at: &str) {
    let mut repeat: Option<usize> = None;
    for raw in lines {
        let trimmed = raw.trim_start();
        if trimmed.starts_with('<') {
            continue;
        }
        if let Some(n) = trimmed.strip_prefix("# repeat ") {
            repeat = Some(
                n.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{at}: `# repeat N` wants a number: {raw}")),
            );
        }
        let Some(request) = trimmed.strip_prefix('>') else {
            text.push_str(raw);
            text.push('\n');
            echoes.push(Echo {
                rendered: raw.to_string(),
                page_line: Some(raw.to_string()),
                block,
            });
            continue;
        };
        let request = request.strip_prefix(' ').unwrap_or(request);
        let times = repeat.take().unwrap_or(1);
        for i in 1..=times {
            let wire = macros(&request.replace("{{i}}", &i.to_string()), at);
            text.push_str("> ");
            text.push_str(&wire);
            text.push('\n');
            echoes.push(Echo {
                rendered: format!("> {wire}"),
                page_line: (i == 1).then(|| raw.to_string()),
                block,
            });
        }
    }
    assert!(
        repeat.is_none(),
        "{at}: `# repeat` is not followed by a `>` line"
    );
}

/// `{{S*N}}` → `S` repeated `N` times.
fn macros(line: &str, at: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let close = after
            .find("}}")
            .unwrap_or_else(|| panic!("{at}: unclosed {{{{ in {line}"));
        let (s, n) = after[..close]
            .rsplit_once('*')
            .unwrap_or_else(|| panic!("{at}: {{{{S*N}}}} wanted in {line}"));
        let n: usize = n
            .parse()
            .unwrap_or_else(|_| panic!("{at}: a count wanted in {line}"));
        out.push_str(&s.repeat(n));
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

/// A local-socket connection to a real broker as the runner's [`Lines`].
struct Socket {
    stream: UnixStream,
    lines: LineQueue,
    _process: BrokerProcess,
    _db: TestDb,
}

impl Socket {
    fn start() -> Socket {
        let db = TestDb::new();
        let process = Spawn::new(&db.path)
            .socket(socket_path_for(&db.path))
            .env(SECRET_ENV, SOCKET_SECRET)
            .start(TIMEOUT)
            .unwrap_or_else(|e| panic!("{e}"));
        let path = process.socket().expect("the ready line names the socket");
        let stream = UnixStream::connect(&path).unwrap_or_else(|e| panic!("connect: {e}"));
        let reader = stream.try_clone().expect("clone the socket");
        Socket {
            stream,
            lines: LineQueue::spawn(reader),
            _process: process,
            _db: db,
        }
    }
}

impl Lines for Socket {
    fn send_line(&mut self, line: &str) -> std::io::Result<()> {
        self.stream.write_all(line.as_bytes())?;
        self.stream.write_all(b"\n")
    }

    fn recv_line(&mut self, timeout: Duration) -> Recv {
        self.lines.recv(timeout)
    }

    fn close(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
    }
}

/// The message ids the broker mints for its own status messages (a
/// deregistration's), `broker-<uuid>`, become `broker-$id`: the kit's
/// normaliser names bare UUIDs only, and these change on every run.
fn broker_ids(line: &str) -> String {
    const PREFIX: &str = "broker-";
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(PREFIX) {
        let after = &rest[at + PREFIX.len()..];
        out.push_str(&rest[..at + PREFIX.len()]);
        match after.get(..36) {
            Some(id) if is_uuid(id) => {
                out.push_str("$id");
                rest = &after[36..];
            }
            _ => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, lowercase hex.
fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
        })
}

/// What one page's run gave.
struct PageRun {
    /// The page with every block's `<` lines replaced by the actual ones.
    actual: String,
    /// The actual text of every block (for the coverage checks).
    blocks: Vec<String>,
}

/// Runs every session of a page.
fn run_page(path: &Path) -> PageRun {
    let name = path
        .strip_prefix(docs_dir())
        .unwrap_or(path)
        .display()
        .to_string();
    let page = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {name}: {e}"));
    let lines: Vec<&str> = page.lines().collect();
    let found = blocks(&page, &name);
    // Sessions: a starting block and the `continue` blocks after it.
    let mut sessions: Vec<(Transport, Vec<usize>)> = Vec::new();
    for (b, block) in found.iter().enumerate() {
        match (block.starts, sessions.last_mut()) {
            (Some(t), _) => sessions.push((t, vec![b])),
            (None, Some((_, members))) => members.push(b),
            (None, None) => panic!(
                "{name}:{}: `ndjson continue` with no block before it",
                block.start
            ),
        }
    }
    let mut actual_blocks: Vec<Vec<String>> = vec![Vec::new(); found.len()];
    for (transport, members) in &sessions {
        let first = &found[members[0]];
        let label = format!("{name}:{}", first.start);
        let mut text = String::new();
        let mut echoes = Vec::new();
        for &b in members {
            let at = format!("{name}:{}", found[b].start);
            expand(
                &lines[found[b].start..found[b].end],
                b,
                &mut text,
                &mut echoes,
                &at,
            );
        }
        let rendered = match transport {
            Transport::Memory => transcript::run(&label, &text, &mut Memory::start()),
            Transport::Socket => transcript::run(&label, &text, &mut Socket::start()),
        }
        .unwrap_or_else(|e| panic!("{e}"));
        // Back to the page's lines: each echo in order stands for a page
        // line (or for nothing, a repetition); `<` lines belong to the block
        // of the line before them.
        let mut echoes = echoes.into_iter();
        let mut current = members[0];
        for line in rendered.lines() {
            if line.starts_with("< ") {
                actual_blocks[current].push(broker_ids(line));
                continue;
            }
            let echo = echoes
                .next()
                .unwrap_or_else(|| panic!("{label}: the runner echoed more than was sent: {line}"));
            assert_eq!(echo.rendered, line, "{label}: the runner's echo");
            current = echo.block;
            if let Some(l) = echo.page_line {
                actual_blocks[current].push(l);
            }
        }
    }
    // The page with the actual blocks in place of the written ones.
    let mut actual = String::new();
    let mut at = 0;
    for (b, block) in found.iter().enumerate() {
        for l in &lines[at..block.start] {
            actual.push_str(l);
            actual.push('\n');
        }
        for l in &actual_blocks[b] {
            actual.push_str(l);
            actual.push('\n');
        }
        at = block.end;
    }
    for l in &lines[at..] {
        actual.push_str(l);
        actual.push('\n');
    }
    PageRun {
        actual,
        blocks: actual_blocks.into_iter().map(|l| l.join("\n")).collect(),
    }
}

/// The lines that differ, with page line numbers (a context of equal
/// lines skipped).
fn diff(expected: &str, actual: &str) -> String {
    let mut out = String::new();
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    for i in 0..e.len().max(a.len()) {
        let (x, y) = (e.get(i), a.get(i));
        if x != y {
            if let Some(x) = x {
                out.push_str(&format!("{:>5} - {x}\n", i + 1));
            }
            if let Some(y) = y {
                out.push_str(&format!("{:>5} + {y}\n", i + 1));
            }
        }
    }
    out
}

/// The string values of `pub const NAME: &str = "value";` lines.
fn const_strings(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter(|l| l.contains(": &str"))
        .filter_map(|l| l.split('"').nth(1))
        .map(str::to_owned)
        .collect()
}

/// The wire names of the A2A error codes: the `#[serde(rename = "A2A_…")]`
/// of the error source.
fn a2a_error_codes(source: &str) -> BTreeSet<String> {
    source
        .split("rename = \"A2A_")
        .skip(1)
        .filter_map(|rest| rest.split_once('"'))
        .map(|(name, _)| format!("A2A_{name}"))
        .filter(|s| {
            s.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .collect()
}

/// What the executed blocks show: methods sent, notifications and event
/// kinds received, error codes answered.
#[derive(Default)]
struct Seen {
    sent: BTreeSet<String>,
    received: BTreeSet<String>,
    event_kinds: BTreeSet<String>,
    error_codes: BTreeSet<String>,
}

impl Seen {
    fn add_block(&mut self, block: &str) {
        for line in block.lines() {
            let (is_sent, json) = if let Some(r) = line.strip_prefix("> ") {
                (true, r)
            } else if let Some(r) = line.strip_prefix("< ") {
                (false, r)
            } else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(json) else {
                continue;
            };
            let items = match v {
                Value::Array(a) => a,
                v => vec![v],
            };
            for item in items {
                if is_sent {
                    if let Some(m) = item["method"].as_str() {
                        self.sent.insert(m.to_owned());
                    }
                    continue;
                }
                // A pull agent's events come inside an `a2a.events.wait`
                // answer, each as the notification it would have been.
                let pulled = item["result"]["events"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                for n in pulled.iter().chain([&item]) {
                    self.add_received(n);
                }
            }
        }
    }

    fn add_received(&mut self, item: &Value) {
        if let Some(m) = item["method"].as_str() {
            self.received.insert(m.to_owned());
        }
        if let Some(k) = item["params"]["event"]["kind"].as_str() {
            self.event_kinds.insert(k.to_owned());
        }
        if let Some(c) = item["error"]["data"]["errorCode"].as_str() {
            self.error_codes.insert(c.to_owned());
        }
    }
}

#[test]
fn the_examples_in_docs_are_what_the_broker_answers() {
    let dir = docs_dir();
    let pages = pages(&dir);
    assert!(!pages.is_empty(), "no pages under {}", dir.display());
    let update = std::env::var_os(UPDATE_ENV).is_some_and(|v| !v.is_empty() && v != "0");
    let mut failures = String::new();
    let mut seen = Seen::default();
    let mut executed = 0;
    for path in &pages {
        let written = std::fs::read_to_string(path).expect("read page");
        let run = run_page(path);
        executed += run.blocks.len();
        for b in &run.blocks {
            seen.add_block(b);
        }
        if run.actual == written {
            continue;
        }
        if update {
            std::fs::write(path, &run.actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        } else {
            failures.push_str(&format!(
                "{} differs (rerun with {UPDATE_ENV}=1 to accept, then review the diff):\n{}\n",
                path.display(),
                diff(&written, &run.actual)
            ));
        }
    }
    assert!(failures.is_empty(), "{failures}");
    assert!(executed > 0, "no ```ndjson blocks under {}", dir.display());

    // Coverage: every method and notification, both event kinds, every
    // A2A error code.
    let names = const_strings(METHODS_RS);
    assert!(names.len() >= 18, "methods.rs read: {names:?}");
    let notifications = [
        "a2a.task.event",
        "a2a.push",
        "a2a.lagged",
        "a2a.lease.released",
    ];
    for n in &names {
        if notifications.contains(&n.as_str()) {
            assert!(
                seen.received.contains(n),
                "no executed example in docs/ receives `{n}`"
            );
        } else {
            assert!(
                seen.sent.contains(n),
                "no executed example in docs/ calls `{n}`"
            );
        }
    }
    for kind in ["status-update", "artifact-update"] {
        assert!(
            seen.event_kinds.contains(kind),
            "no executed example in docs/ shows a `{kind}` event"
        );
    }
    let codes = a2a_error_codes(ERRORS_RS);
    assert!(codes.len() >= 9, "error.rs read: {codes:?}");
    let missing: Vec<_> = codes.difference(&seen.error_codes).collect();
    assert!(
        missing.is_empty(),
        "no executed example in docs/ answers these errorCodes: {missing:?}"
    );
}

#[test]
fn expansion_keeps_the_page_form() {
    let mut text = String::new();
    let mut echoes = Vec::new();
    let lines = [
        "# repeat 3",
        "> {\"id\":\"{{i}}\",\"t\":\"{{ab*2}}\"}",
        "< old",
    ];
    expand(&lines, 7, &mut text, &mut echoes, "t");
    assert_eq!(
        text,
        "# repeat 3\n> {\"id\":\"1\",\"t\":\"abab\"}\n> {\"id\":\"2\",\"t\":\"abab\"}\n> {\"id\":\"3\",\"t\":\"abab\"}\n"
    );
    let kept: Vec<_> = echoes.iter().map(|e| e.page_line.as_deref()).collect();
    assert_eq!(
        kept,
        [Some("# repeat 3"), Some(lines[1]), None, None],
        "one page line per written line"
    );
    assert!(echoes.iter().all(|e| e.block == 7));
}

#[test]
fn broker_minted_message_ids_become_a_placeholder() {
    assert_eq!(
        broker_ids(
            r#"< {"messageId":"broker-01a22bf9-7eb2-74a7-b525-3756ca26c555","x":"broker-x"}"#
        ),
        r#"< {"messageId":"broker-$id","x":"broker-x"}"#
    );
}

#[test]
fn coverage_sees_pulled_events_and_errors() {
    let mut seen = Seen::default();
    seen.add_block(concat!(
        "> [{\"id\":1,\"method\":\"a2a.events.wait\"}]\n",
        "< {\"result\":{\"events\":[{\"method\":\"a2a.lagged\",\"params\":{}}]}}\n",
        "< {\"method\":\"a2a.task.event\",\"params\":{\"event\":{\"kind\":\"artifact-update\"}}}\n",
        "< {\"error\":{\"data\":{\"errorCode\":\"A2A_SEND_CAP\"}}}\n",
        "# {\"method\":\"a2a.push\"}\n",
    ));
    assert_eq!(seen.sent, BTreeSet::from(["a2a.events.wait".to_string()]));
    assert_eq!(
        seen.received,
        BTreeSet::from(["a2a.lagged".to_string(), "a2a.task.event".to_string()])
    );
    assert_eq!(
        seen.event_kinds,
        BTreeSet::from(["artifact-update".to_string()])
    );
    assert_eq!(
        seen.error_codes,
        BTreeSet::from(["A2A_SEND_CAP".to_string()])
    );
}

#[test]
fn the_names_are_read_from_the_proto_sources() {
    let names = const_strings(METHODS_RS);
    assert!(names.contains(&"app.handshake".to_string()), "{names:?}");
    assert!(names.contains(&"a2a.lagged".to_string()), "{names:?}");
    let codes = a2a_error_codes(ERRORS_RS);
    assert!(codes.contains("A2A_NO_PEERS"), "{codes:?}");
    assert!(!codes.iter().any(|c| c.contains(' ')), "{codes:?}");
}

#[test]
fn blocks_are_found_by_their_info_string() {
    let page = "text\n```ndjson\n> a\n```\n```json\n{}\n```\n```ndjson continue\n> b\n< c\n```\n```ndjson socket\n```\n";
    let b = blocks(page, "p");
    let got: Vec<_> = b.iter().map(|b| (b.start, b.end, b.starts)).collect();
    assert_eq!(
        got,
        [
            (2, 3, Some(Transport::Memory)),
            (8, 10, None),
            (12, 12, Some(Transport::Socket))
        ]
    );
}
