//! One frame codec and one demultiplexer in the tree: the wire protocol's
//! byte stream (docs/protocol.md §1: NDJSON lines, binary frames) is split
//! into frames, and server frames decoded, only by the client's wire core
//! (`client/src/wire/`), the broker's transport (`broker/src/transport/`)
//! and the codec's own definitions (`proto/src/`). Every other driver
//! (the test kit, the load generator, the benches, the Node addon, the
//! gateway's broker connection) feeds its bytes to the core instead of
//! keeping a copy of the splitting, the bounds and the id matching.
//!
//! The check reads every `.rs` file outside `tests/` directories (test
//! files may poke at raw bytes on purpose) for the marks a hand-written
//! splitter leaves: a search for `'\n'` in a byte buffer, `read_until`
//! a newline, `lines()` over an I/O reader, and the binary codec's
//! splitting and server-side decoding functions. A file that must keep
//! one for a reason that is not our protocol's stream (a child's stderr,
//! MCP's own lines, the raw stdio baseline the benches compare with) is listed
//! in [`ALLOWED`] with that reason, and each listed file must still hold
//! a mark (a stale entry fails too, so the list stays true).

/// Where splitting and decoding our protocol's frames belongs.
const HOMES: &[&str] = &["client/src/wire/", "broker/src/transport/", "proto/src/"];

/// Files that read lines or frames of something else, with the reason.
const ALLOWED: &[(&str, &str)] = &[
    (
        "cli/src/mcp/stdio.rs",
        "MCP's own JSON-RPC lines between rmcp and the model's host, not ours",
    ),
    (
        "testkit/src/process.rs",
        "a broker child's stderr log lines (the ready line, diagnostics)",
    ),
    (
        "fanout/src/run.rs",
        "a worker child's progress lines on its stdout",
    ),
    (
        "gateway/src/tck/harness.rs",
        "the TCK runner's stderr lines",
    ),
    (
        "benches/src/bin/raw_echo.rs",
        "the raw stdio baseline: reads request lines the way any server must",
    ),
    (
        "benches/src/stdio.rs",
        "a broker child's stderr (its ready line)",
    ),
    (
        "benches/examples/reply_rate.rs",
        "a broker child's stderr (its ready line)",
    ),
    (
        "gateway/examples/federation_bench.rs",
        "the gateway children's ready lines on stdout and stderr",
    ),
    (
        "gateway/examples/remote_delegate.rs",
        "the gateway child's ready line on stdout",
    ),
];

/// The marks a hand-written splitter or decoder leaves, as written in the
/// source (one line at a time, with the next line for context).
fn marks(line: &str, next: &str) -> Option<&'static str> {
    let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.contains("split_frames_within(") || compact.contains("split_frames(") {
        return Some("splits binary frames");
    }
    if compact.contains("decode_server_payload")
        || compact.contains("decode_payload::<ServerFrame>")
    {
        return Some("decodes server frames");
    }
    if compact.contains("memchr(b'\\n'") {
        return Some("searches a buffer for '\\n'");
    }
    if compact.contains("read_until(b'\\n'") {
        return Some("reads up to '\\n'");
    }
    if compact.contains(".lines()") {
        // `str::lines` of a text in memory is fine; `BufRead::lines` of a
        // reader yields `io::Result`s, which the code then unwraps.
        let window = format!("{compact}{}", next.replace(' ', ""));
        if window.contains("BufReader")
            || window.contains("Result::ok")
            || window.contains("letOk(")
        {
            return Some("reads lines from an I/O reader");
        }
    }
    None
}

use crate::tree::root;

/// Every `.rs` file of the tree outside `tests/` directories and build
/// outputs, repo-relative.
fn sources() -> Vec<String> {
    const SKIP: [&str; 6] = [
        "target",
        "node_modules",
        ".git",
        "tests",
        "corpus",
        "artifacts",
    ];
    crate::tree::files(&SKIP, |name| name.ends_with(".rs"))
}

/// `(file, line number, mark)` of every mark in `text`, up to its test
/// module (`#[cfg(test)]` then `mod`, the last item by the tree's habit:
/// unit tests check bytes on purpose, as files under `tests/` do).
fn marks_in(file: &str, text: &str) -> Vec<(String, usize, &'static str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        if code == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .is_some_and(|l| l.trim_start().starts_with("mod "))
        {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        if let Some(m) = marks(line, lines.get(i + 1).copied().unwrap_or_default()) {
            out.push((file.to_owned(), i + 1, m));
        }
    }
    out
}

#[test]
fn frames_are_split_only_by_the_wire_core_and_the_transport() {
    let files = sources();
    assert!(
        files.iter().any(|f| f.starts_with("client/src/")),
        "the walk found no client sources under {}",
        root().display()
    );
    let mut stray = Vec::new();
    let mut allowed_seen = vec![false; ALLOWED.len()];
    for file in &files {
        if HOMES.iter().any(|h| file.starts_with(h)) {
            continue;
        }
        let text = std::fs::read_to_string(root().join(file))
            .unwrap_or_else(|e| panic!("read {file}: {e}"));
        let found = marks_in(file, &text);
        if found.is_empty() {
            continue;
        }
        match ALLOWED.iter().position(|(f, _)| f == file) {
            Some(i) => allowed_seen[i] = true,
            None => stray.extend(found),
        }
    }
    let report: Vec<String> = stray
        .iter()
        .map(|(f, n, m)| format!("{f}:{n}: {m}"))
        .collect();
    assert!(
        report.is_empty(),
        "frame splitting outside the wire core (client/src/wire/) and the broker's transport; \
         feed the bytes to a2a_client::wire instead:\n{}",
        report.join("\n")
    );
    let stale: Vec<&str> = ALLOWED
        .iter()
        .zip(&allowed_seen)
        .filter(|(_, seen)| !**seen)
        .map(|((f, _), _)| *f)
        .collect();
    assert!(
        stale.is_empty(),
        "allowed files that no longer split lines (remove them from ALLOWED): {stale:?}"
    );
}

#[test]
fn the_marks_catch_the_splitters_they_name() {
    let caught = |src: &str| !marks_in("x.rs", src).is_empty();
    // Splitters as the tree wrote them before the wire core.
    assert!(caught(
        "while let Some(n) = memchr::memchr(b'\\n', &rbuf[at..]) {"
    ));
    assert!(caught("match reader.read_until(b'\\n', &mut line) {"));
    assert!(caught(
        "for line in r.lines().map_while(Result::ok) {\n    x(line);"
    ));
    assert!(caught(
        "for line in BufReader::new(output).lines() {\n    let Ok(line) = line else { break };"
    ));
    assert!(caught(
        "let (frames, used) = split_frames_within(bytes, A2A_MAX_OUT_FRAME_BYTES)"
    ));
    assert!(caught(
        "match decode_server_payload::<ServerFrame>(&bytes[range]) {"
    ));
    // Text in memory, comments and unit tests are not splitters.
    assert!(!caught("for line in text.lines() {\n    check(line);"));
    assert!(!caught("// memchr(b'\\n', buf) finds the end"));
    assert!(!caught(
        "fn f() {}\n#[cfg(test)]\nmod tests {\n    let _ = split_frames_within(b, 9);\n}"
    ));
    assert!(caught(
        "#[cfg(test)]\nfn helper() {}\nfn g() { let _ = split_frames_within(b, 9); }"
    ));
}
