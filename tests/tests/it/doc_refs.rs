//! The docs are true to the tree: what they cite exists, and the lists
//! they keep agree with the sources that define them.
//!
//! - Every repository path cited in backticks (`broker/src/engine/mod.rs`,
//!   `gateway/tests/`) and every relative Markdown link of the README,
//!   ARCHITECTURE.md, SECURITY.md, BENCHMARKS.md and the pages under
//!   `docs/` names a file or directory that exists, and a link's `#anchor`
//!   a heading of its page.
//! - Every `§N` that cites docs/protocol.md, in those docs and in the
//!   sources' comments, is a section number of docs/protocol.md; where the
//!   citation names its topic (`§9 Bounds`, `the bound (§9)`, `§6 Events`),
//!   the topic is that section's.
//! - Every quoted section of a doc (`BENCHMARKS.md, "Sustained load"`,
//!   `ARCHITECTURE.md ("Storage")`), anywhere in the tree, is a heading of
//!   that doc.
//! - Every list of the A2A tool's actions written anywhere in the tree
//!   (`discover | send | ...`, `discover, send, ...`) is the schema's
//!   `ACTIONS` (`tool/src/schema.rs`), all of them in its order.
//! - The method table of docs/protocol.md §5 and its `###` sections name
//!   exactly the methods of `proto/src/methods.rs`, and every `a2a.x.y`
//!   name the docs cite is a method or a notification of it.
//! - No source, script or doc cites an issue by its number (`issue N`,
//!   `issues N and M`, `#N`): readers cannot look one up, so the text says
//!   the reason or the fact instead.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const METHODS_RS: &str = include_str!("../../../proto/src/methods.rs");
const SCHEMA_RS: &str = include_str!("../../../tool/src/schema.rs");

/// Names the docs use for a method that does not exist on purpose (the
/// throwaway method of ARCHITECTURE.md's "Adding a method").
const HYPOTHETICAL_METHODS: &[&str] = &["a2a.tasks.touch"];

use crate::tree::root;

/// The docs whose paths and links are checked, as repo-relative paths.
fn doc_files() -> Vec<String> {
    let mut out: Vec<String> = [
        "README.md",
        "ARCHITECTURE.md",
        "SECURITY.md",
        "BENCHMARKS.md",
    ]
    .map(String::from)
    .to_vec();
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("read docs/")
        .map(|e| {
            e.expect("read docs/")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    pages.sort();
    out.extend(pages);
    out
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// Every text file of the tree that may carry a citation (sources, docs,
/// scripts), repo-relative; build outputs and installed packages left out.
fn tree_files() -> Vec<String> {
    const EXTS: [&str; 12] = [
        "rs", "md", "js", "mjs", "ts", "toml", "h", "c", "py", "sh", "yml", "json",
    ];
    const SKIP: [&str; 6] = [
        "target",
        "node_modules",
        ".git",
        ".venv",
        "corpus",
        "artifacts",
    ];
    crate::tree::files(&SKIP, |name| {
        name != "package-lock.json"
            && Path::new(name)
                .extension()
                .is_some_and(|x| EXTS.contains(&x.to_string_lossy().as_ref()))
    })
}

/// A piece of a Markdown text and the line (1-based) it starts on.
type Piece = (usize, String);

/// A Markdown text cut into its code spans and its prose, outside fenced
/// blocks, each piece with the line it starts on. A span opens with a run
/// of backticks and closes with the next run of the same length, on the
/// same line or a later one (a span may wrap).
fn split_markdown(text: &str) -> (Vec<Piece>, Vec<Piece>) {
    let (mut spans, mut prose) = (Vec::new(), Vec::new());
    let mut fenced = false;
    // The open span: its run length, its first line, its text so far.
    let mut open: Option<(usize, usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if open.is_none() && line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        let mut outside = String::new();
        while !rest.is_empty() {
            let Some(at) = rest.find('`') else {
                match &mut open {
                    Some((_, _, span)) => span.push_str(rest),
                    None => outside.push_str(rest),
                }
                break;
            };
            let run = rest[at..].chars().take_while(|c| *c == '`').count();
            match &mut open {
                Some((n, start, span)) if *n == run => {
                    span.push_str(&rest[..at]);
                    spans.push((*start, span.trim().to_string()));
                    open = None;
                }
                Some((_, _, span)) => span.push_str(&rest[..at + run]),
                None => {
                    outside.push_str(&rest[..at]);
                    outside.push(' ');
                    open = Some((run, i + 1, String::new()));
                }
            }
            rest = &rest[at + run..];
        }
        if let Some((_, _, span)) = &mut open {
            span.push(' ');
        }
        prose.push((i + 1, outside));
    }
    (spans, prose)
}

/// The `code` spans of a Markdown text, with the line each starts on.
fn code_spans(text: &str) -> Vec<(usize, String)> {
    split_markdown(text).0
}

/// The words of a Markdown text outside fenced blocks and code spans,
/// with their line numbers, the punctuation around them taken off.
fn prose_words(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (line, outside) in split_markdown(text).1 {
        for word in outside.split_whitespace() {
            if word.contains("](") || word.contains("://") {
                continue;
            }
            let w = word.trim_matches(|c: char| "()[],.;:*\"'".contains(c));
            out.push((line, w.to_string()));
        }
    }
    out
}

/// `a/{b,c}.rs` → `a/b.rs`, `a/c.rs` (one level of braces).
fn expand_braces(path: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (path.find('{'), path.find('}')) else {
        return vec![path.to_string()];
    };
    if close < open {
        return vec![path.to_string()];
    }
    path[open + 1..close]
        .split(',')
        .map(|alt| format!("{}{alt}{}", &path[..open], &path[close + 1..]))
        .collect()
}

/// The repository path a code span cites, if it reads as one: its first
/// segment is a top-level directory of the tree. Placeholders (`<handler>`,
/// `*`, `NAME`, `…`) are not paths to check.
fn cited_path(span: &str, top_dirs: &BTreeSet<String>) -> Option<String> {
    let span = span.trim();
    if span.contains(char::is_whitespace) || !span.contains('/') {
        return None;
    }
    let first = span.split('/').next().unwrap();
    if !top_dirs.contains(first) {
        return None;
    }
    if span.contains(['<', '*', '…', '$', '?', '[']) || span.contains("NAME") {
        return None;
    }
    // What a build or an install makes is not in the tree.
    if span
        .split('/')
        .any(|seg| [".venv", "node_modules", "target"].contains(&seg))
    {
        return None;
    }
    // A line number or a symbol after the path (`a.rs:12`, `a.rs#L3`),
    // or a possessive (`docs/gateway.md's quick start`).
    let path = span.split([':', '#']).next().unwrap();
    let path = path.strip_suffix("'s").unwrap_or(path);
    Some(path.trim_end_matches(['.', ',', ')']).to_string())
}

fn top_dirs() -> BTreeSet<String> {
    std::fs::read_dir(root())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|n| n != "target" && n != ".git")
        .collect()
}

/// GitHub's anchor of a heading: lowercase, punctuation dropped (but `-`
/// and `_`), spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The headings of a Markdown text (outside fences), without the `#`s.
fn headings(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(line.trim_start_matches('#').trim().to_string());
        }
    }
    out
}

/// The targets of the inline links `[text](target)` of a Markdown text.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// What is wrong with the paths and links of one doc (`rel` is its path).
fn broken_citations(rel: &str, text: &str, top: &BTreeSet<String>) -> Vec<String> {
    let mut broken = Vec::new();
    for (line, span) in code_spans(text).into_iter().chain(prose_words(text)) {
        let Some(path) = cited_path(&span, top) else {
            continue;
        };
        for p in expand_braces(&path) {
            if !root().join(&p).exists() {
                broken.push(format!("{rel}:{line}: `{span}`: no {p} in the tree"));
            }
        }
    }
    let dir = Path::new(rel).parent().unwrap_or(Path::new(""));
    for (line, target) in link_targets(text) {
        if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((f, a)) => (f, Some(a)),
            None => (target.as_str(), None),
        };
        let file_rel = if file.is_empty() {
            PathBuf::from(rel)
        } else {
            dir.join(file)
        };
        let on_disk = root().join(&file_rel);
        if !on_disk.exists() {
            broken.push(format!(
                "{rel}:{line}: link ({target}): no {}",
                file_rel.display()
            ));
            continue;
        }
        if let Some(anchor) = anchor.filter(|_| on_disk.extension().is_some_and(|x| x == "md")) {
            let page = std::fs::read_to_string(&on_disk).unwrap();
            if !headings(&page).iter().any(|h| slug(h) == anchor) {
                broken.push(format!(
                    "{rel}:{line}: link ({target}): no heading #{anchor} in {}",
                    file_rel.display()
                ));
            }
        }
    }
    broken
}

#[test]
fn every_repo_path_and_link_the_docs_cite_exists() {
    let top = top_dirs();
    let mut broken = Vec::new();
    for rel in doc_files() {
        broken.extend(broken_citations(&rel, &read(&rel), &top));
    }
    assert!(
        broken.is_empty(),
        "broken citations:\n{}",
        broken.join("\n")
    );
}

/// docs/protocol.md's numbered sections: number → title words (lowercase,
/// a trailing `s` dropped, short words left out).
fn protocol_sections() -> Vec<(u32, BTreeSet<String>)> {
    headings(&read("docs/protocol.md"))
        .iter()
        .filter_map(|h| {
            let (n, title) = h.split_once(". ")?;
            Some((n.parse().ok()?, title_words(title)))
        })
        .collect()
}

fn stem(word: &str) -> String {
    let w = word.to_lowercase();
    w.strip_suffix('s').map(str::to_string).unwrap_or(w)
}

/// The words of a title that name a topic (not `a`, `and`, `task`...).
fn title_words(title: &str) -> BTreeSet<String> {
    const COMMON: [&str; 5] = ["a", "and", "the", "task", "connection"];
    title
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 1 && !COMMON.contains(&w.to_lowercase().as_str()))
        .map(stem)
        .collect()
}

/// One `§N` citation of docs/protocol.md, with the topic it names, if any.
#[derive(Debug, PartialEq)]
struct Section {
    /// As written: `9`, or `1.3` (which the protocol's flat numbering
    /// does not have).
    number: String,
    topic: Option<String>,
}

/// The `§N` of a text that cite docs/protocol.md (not `RFC 7235 §2.1` nor
/// `A2A v1.0 §8.2`: a `§` right after another document's name is that
/// document's), and the topic each names: the word after it when that
/// word is a protocol section's title word (`§9 Bounds`, `§7's ...`), else
/// `bound` when a bound is what is cited (`the bound (§9)`, `bounds of
/// §9`, `§7's \`A2A_MAX_ID_BYTES\``).
fn section_citations(text: &str, topics: &BTreeSet<String>) -> Vec<Section> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices('§') {
        let before = &text[..at];
        let after = &text[at + '§'.len_utf8()..];
        let mut number: String = after.chars().take_while(char::is_ascii_digit).collect();
        if number.is_empty() {
            continue;
        }
        let mut rest = &after[number.len()..];
        while let Some(sub) = rest
            .strip_prefix('.')
            .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        {
            let digits: String = sub.chars().take_while(char::is_ascii_digit).collect();
            number = format!("{number}.{digits}");
            rest = &sub[digits.len()..];
        }
        let window: String = before
            .chars()
            .rev()
            .take(24)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if window.contains("RFC") || window.contains("v1.0") || window.contains("spec") {
            continue;
        }
        let rest = rest.strip_prefix("'s").unwrap_or(rest);
        let next_word: String = rest
            .trim_start_matches([' ', '\t'])
            .chars()
            .take_while(|c| c.is_alphanumeric())
            .collect();
        let prev_words: Vec<String> = before
            .trim_end_matches(['(', ' '])
            .rsplit(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .take(2)
            .map(stem)
            .collect();
        let topic = if topics.contains(&stem(&next_word)) {
            Some(stem(&next_word))
        } else if rest.trim_start().starts_with("`A2A_MAX_")
            || prev_words.first().is_some_and(|w| w == "bound")
            || (prev_words.first().is_some_and(|w| w == "of")
                && prev_words.get(1).is_some_and(|w| w == "bound"))
        {
            Some("bound".to_string())
        } else {
            None
        };
        out.push(Section { number, topic });
    }
    out
}

#[test]
fn every_section_cited_is_the_protocols_section_of_that_number() {
    let sections = protocol_sections();
    assert!(
        sections.len() >= 11,
        "docs/protocol.md's sections: {sections:?}"
    );
    let topics: BTreeSet<String> = sections.iter().flat_map(|(_, w)| w.clone()).collect();
    let mut files = doc_files();
    // Not this file: its own examples of wrong citations are on purpose.
    files.extend(
        tree_files()
            .into_iter()
            .filter(|f| f.ends_with(".rs") && !f.ends_with("doc_refs.rs")),
    );
    let mut wrong = Vec::new();
    for rel in files {
        let text = read(&rel);
        for (i, line) in text.lines().enumerate() {
            for cite in section_citations(line, &topics) {
                let Some((_, words)) = sections.iter().find(|(n, _)| n.to_string() == cite.number)
                else {
                    wrong.push(format!(
                        "{rel}:{}: §{} is no section of docs/protocol.md",
                        i + 1,
                        cite.number
                    ));
                    continue;
                };
                if let Some(topic) = cite.topic.filter(|t| !words.contains(t)) {
                    let right: Vec<u32> = sections
                        .iter()
                        .filter(|(_, w)| w.contains(&topic))
                        .map(|(n, _)| *n)
                        .collect();
                    wrong.push(format!(
                        "{rel}:{}: §{} cited for {topic:?}, which is §{right:?} of docs/protocol.md: {}",
                        i + 1,
                        cite.number,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "wrong § citations:\n{}", wrong.join("\n"));
}

/// `NAME.md` followed by a quoted section name, as the tree cites a
/// section of a doc: `BENCHMARKS.md, "Sustained load"`, `ARCHITECTURE.md
/// ("Storage")`, `BENCHMARKS.md "Node addon"`.
fn quoted_sections(text: &str, doc: &str) -> Vec<String> {
    // A root doc is also cited without its extension (`README "Resident
    // memory"`).
    let stem = doc.strip_suffix(".md").filter(|_| !doc.contains('/'));
    let mut out = Vec::new();
    for name in std::iter::once(doc).chain(stem) {
        for (at, _) in text.match_indices(name) {
            // Not `docs/README.md` when looking for `README.md`, nor the
            // name as a string of its own (`"README.md"`), nor `README.md`
            // when looking for `README`.
            if text[..at].ends_with(|c: char| c.is_alphanumeric() || "/-_\"".contains(c)) {
                continue;
            }
            let after = &text[at + name.len()..];
            if after.starts_with(|c: char| c.is_alphanumeric() || c == '.' || c == '_') {
                continue;
            }
            let rest = after.trim_start_matches(['`', ',', ' ', '(', '\n', '/', '!', '*']);
            let Some(quoted) = rest.strip_prefix('"') else {
                continue;
            };
            // A section's name: a short phrase that starts with a capital.
            let Some(title) = quoted.find('"').map(|end| &quoted[..end]) else {
                continue;
            };
            if title.len() <= 60
                && title.starts_with(|c: char| c.is_uppercase())
                && !title.contains(['(', ')', ';', '{', '[', '=', '|'])
            {
                out.push(title.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
    out
}

#[test]
fn every_quoted_section_of_a_doc_is_one_of_its_headings() {
    let docs = doc_files();
    // Headings, and the bold leads of paragraphs and list items (`**The
    // shared-memory event ring (ext)**: ...`), which the docs use as titles.
    let heads: Vec<Vec<String>> = docs
        .iter()
        .map(|d| {
            let text = read(d);
            let leads = text.lines().filter_map(|l| {
                let l = l.strip_prefix("- ").unwrap_or(l);
                l.strip_prefix("**")?
                    .split_once("**")
                    .map(|(t, _)| t.to_string())
            });
            headings(&text)
                .into_iter()
                .chain(leads)
                .map(|h| h.to_lowercase())
                .collect()
        })
        .collect();
    let mut wrong = Vec::new();
    // Not this file: its examples are on purpose.
    for rel in tree_files()
        .into_iter()
        .filter(|f| !f.ends_with("doc_refs.rs"))
    {
        let text = read(&rel);
        for (doc, heads) in docs.iter().zip(&heads) {
            for name in quoted_sections(&text, doc.as_str()) {
                let lower = name.to_lowercase();
                if !heads.iter().any(|h| h.contains(&lower)) {
                    wrong.push(format!("{rel}: {doc} \"{name}\": no such heading in {doc}"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "sections cited that are not there:\n{}",
        wrong.join("\n")
    );
}

/// The tool's actions, read from the schema's `ACTIONS`.
fn tool_actions() -> Vec<String> {
    let decl = SCHEMA_RS
        .split("pub const ACTIONS")
        .nth(1)
        .expect("tool/src/schema.rs declares ACTIONS");
    let list = &decl[decl.find("= [").expect("ACTIONS = [...]") + 3..];
    let list = &list[..list.find(']').unwrap()];
    list.split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The runs of action names in a text: `discover` then action names joined
/// by `|`, `,`, `and`, `or` (quotes, backticks and comment markers
/// between them ignored), of four names or more (three can be a story:
/// "discover, send, wait, input-required").
fn action_lists(text: &str, actions: &[String]) -> Vec<Vec<String>> {
    const JOINERS: [&str; 4] = ["|", ",", "and", "or"];
    const IGNORED: [&str; 6] = ["\"", "`", "'", "//!", "///", "//"];
    let mut tokens: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '-' || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            tokens.push(std::mem::take(&mut word));
        }
        if c == '/' && chars.peek() == Some(&'/') {
            // A comment marker at a line's start: not a joiner.
            while chars.peek() == Some(&'/') || chars.peek() == Some(&'!') {
                chars.next();
            }
            tokens.push("//".into());
        } else if !c.is_whitespace() {
            tokens.push(c.to_string());
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    let tokens: Vec<&String> = tokens
        .iter()
        .filter(|t| !IGNORED.contains(&t.as_str()) && t.as_str() != "*" && t.as_str() != "#")
        .collect();
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.as_str() != "discover" {
            continue;
        }
        let mut run = vec![t.to_string()];
        let mut j = i + 1;
        loop {
            let mut k = j;
            while tokens.get(k).is_some_and(|t| JOINERS.contains(&t.as_str())) {
                k += 1;
            }
            match tokens.get(k) {
                Some(t) if k > j && actions.contains(t) => {
                    run.push(t.to_string());
                    j = k + 1;
                }
                _ => break,
            }
        }
        if run.len() >= 4 {
            out.push(run);
        }
    }
    out
}

#[test]
fn every_list_of_the_tools_actions_is_the_schemas() {
    let actions = tool_actions();
    assert_eq!(
        actions.len(),
        8,
        "ACTIONS of tool/src/schema.rs: {actions:?}"
    );
    let mut wrong = Vec::new();
    let mut lists = 0;
    // Not this file: its own examples of wrong lists are on purpose.
    for rel in tree_files()
        .into_iter()
        .filter(|f| !f.ends_with("doc_refs.rs"))
    {
        for run in action_lists(&read(&rel), &actions) {
            lists += 1;
            if run != actions {
                wrong.push(format!(
                    "{rel}: {} (the schema has {})",
                    run.join(" | "),
                    actions.join(" | ")
                ));
            }
        }
    }
    assert!(
        lists >= 3,
        "only {lists} action lists found: the scan is broken"
    );
    assert!(
        wrong.is_empty(),
        "action lists that are not the tool's:\n{}",
        wrong.join("\n")
    );
}

/// The method names of `proto/src/methods.rs` (its name constants before
/// `ALL`), and its notification names (after).
fn methods_and_notifications() -> (BTreeSet<String>, BTreeSet<String>) {
    let (methods, notifications) = METHODS_RS
        .split_once("pub const ALL")
        .expect("methods.rs has ALL");
    let names = |src: &str| -> BTreeSet<String> {
        src.lines()
            .filter_map(|l| l.trim().strip_prefix("pub const "))
            .filter(|l| l.contains(": &str"))
            .filter_map(|l| l.split('"').nth(1))
            .filter(|n| n.starts_with("a2a."))
            .map(str::to_owned)
            .collect()
    };
    (names(methods), names(notifications))
}

/// The `a2a.x.y` names cited in code spans of a text.
fn cited_names(text: &str) -> BTreeSet<String> {
    code_spans(text)
        .into_iter()
        .flat_map(|(_, span)| {
            span.split(|c: char| !(c.is_alphanumeric() || c == '.' || c == '*'))
                .filter(|w| w.starts_with("a2a.") && w.matches('.').count() >= 2)
                .map(|w| w.trim_end_matches('.').to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_docs_list_exactly_the_methods_of_the_table() {
    let (methods, notifications) = methods_and_notifications();
    assert!(
        methods.len() >= 18,
        "methods of proto/src/methods.rs: {methods:?}"
    );
    let protocol = read("docs/protocol.md");
    let section5 = protocol
        .split("\n## 5. ")
        .nth(1)
        .and_then(|s| s.split("\n## 6. ").next())
        .expect("docs/protocol.md has §5 and §6");
    // The table: its rows' first cells.
    let table: BTreeSet<String> = section5
        .lines()
        .filter(|l| l.starts_with("| [`"))
        .filter_map(|l| l.split('`').nth(1))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        table, methods,
        "§5's method table against proto/src/methods.rs"
    );
    // The sections: every method has one (`X.set` and `.get` is two).
    let mut sectioned = BTreeSet::new();
    for h in headings(section5) {
        let names = cited_names(&h);
        let base = names
            .iter()
            .next()
            .and_then(|n| n.rsplit_once('.'))
            .map(|(b, _)| b.to_string());
        for (_, span) in code_spans(&h) {
            if let (Some(tail), Some(base)) = (span.strip_prefix('.'), &base) {
                sectioned.insert(format!("{base}.{tail}"));
            }
        }
        sectioned.extend(names);
    }
    let missing: Vec<&String> = methods.iter().filter(|m| !sectioned.contains(*m)).collect();
    assert!(
        missing.is_empty(),
        "methods without a section in §5: {missing:?}"
    );
    let stray: Vec<&String> = sectioned.iter().filter(|m| !methods.contains(*m)).collect();
    assert!(stray.is_empty(), "§5 sections of no method: {stray:?}");
    // Every name the docs cite is the table's or a notification.
    let mut unknown = Vec::new();
    for rel in doc_files() {
        for name in cited_names(&read(&rel)) {
            let known = methods.contains(&name)
                || notifications.contains(&name)
                || HYPOTHETICAL_METHODS.contains(&name.as_str())
                || name.ends_with('*');
            if !known {
                unknown.push(format!("{rel}: `{name}`"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "names that are no method nor notification:\n{}",
        unknown.join("\n")
    );
}

/// The citations of an issue by its number in `text`, each as its line
/// (1-based) and the words cited: `issue 13`, `Issues 24 and 25`, `issue
/// #8`, an `issue` whose number wraps onto the next comment line, and a
/// bare `#27` in prose (after a space or an opening bracket, a number of
/// at most five digits not starting with 0, so that neither a Markdown
/// anchor `#9-bounds` nor a colour `#000000` counts).
fn issue_citations(text: &str) -> Vec<(usize, String)> {
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let lower = text.to_ascii_lowercase();
    let mut out = Vec::new();
    for (at, _) in lower.match_indices("issue") {
        if lower[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let after = lower[at + "issue".len()..]
            .strip_prefix('s')
            .unwrap_or(&lower[at + "issue".len()..]);
        // Whitespace, then (across a wrapped comment's markers) the number.
        if !after.starts_with(char::is_whitespace) {
            continue;
        }
        let rest = after.trim_start_matches(|c: char| c.is_whitespace() || "/!*#".contains(c));
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            let end = text.len() - rest.len()
                + rest
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len());
            out.push((
                line_of(at),
                text[at..end]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            ));
        }
    }
    for (at, _) in text.match_indices('#') {
        if !(at == 0 || text[..at].ends_with(|c: char| c.is_whitespace() || c == '(' || c == '[')) {
            continue;
        }
        // `issue #8` is counted once, above.
        let before = lower[..at].trim_end();
        if before.ends_with("issue") || before.ends_with("issues") {
            continue;
        }
        let rest = &text[at + 1..];
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let next = rest[digits..].chars().next();
        if (1..=5).contains(&digits)
            && !rest.starts_with('0')
            && !next.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
        {
            out.push((line_of(at), text[at..at + 1 + digits].to_string()));
        }
    }
    out.sort();
    out
}

#[test]
fn no_comment_cites_an_issue_number() {
    let mut cited = Vec::new();
    // Not this file: its examples are on purpose.
    for rel in tree_files()
        .into_iter()
        .filter(|f| !f.ends_with("doc_refs.rs"))
    {
        for (line, words) in issue_citations(&read(&rel)) {
            cited.push(format!("{rel}:{line}: {words}"));
        }
    }
    assert!(
        cited.is_empty(),
        "issue numbers cited (write the reason instead: readers cannot look an issue up):\n{}",
        cited.join("\n")
    );
}

#[test]
fn the_scanners_find_what_they_look_for() {
    let top: BTreeSet<String> = ["broker", "gateway"].map(String::from).into();
    assert_eq!(
        cited_path("broker/src/engine/mod.rs:12", &top).as_deref(),
        Some("broker/src/engine/mod.rs")
    );
    assert_eq!(
        cited_path("gateway/tests/", &top).as_deref(),
        Some("gateway/tests/")
    );
    assert_eq!(cited_path("broker/src/methods/<handler>.rs", &top), None);
    assert_eq!(cited_path("a2a-broker serve", &top), None);
    assert_eq!(cited_path("gateway/sdk-tests/.venv", &top), None);
    assert_eq!(expand_braces("n/{a,b/c}.rs"), ["n/a.rs", "n/b/c.rs"]);
    assert_eq!(
        prose_words("see (broker/src/x.rs), and `gateway/y.rs` [z](docs/z.md)"),
        [
            (1, "see".to_string()),
            (1, "broker/src/x.rs".to_string()),
            (1, "and".to_string())
        ]
    );
    assert_eq!(
        code_spans("a `wraps\nhere` and ```` ```ndjson ```` then\n```sh\n`not` a span\n```\n`x`"),
        [
            (1, "wraps here".to_string()),
            (2, "```ndjson".to_string()),
            (6, "x".to_string())
        ]
    );
    assert_eq!(slug("9. Bounds"), "9-bounds");
    assert_eq!(slug("`a2a.tasks.get`"), "a2atasksget");
    let topics: BTreeSet<String> = ["bound", "framing", "event", "state"]
        .map(String::from)
        .into();
    let cites = section_citations("the §7 bounds; §1 Framing, §9 Bounds; RFC 7235 §2.1; the bound (§9); §7's `A2A_MAX_ID_BYTES`; §3 and", &topics);
    let got: Vec<(&str, Option<&str>)> = cites
        .iter()
        .map(|c| (c.number.as_str(), c.topic.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("7", Some("bound")),
            ("1", Some("framing")),
            ("9", Some("bound")),
            ("9", Some("bound")),
            ("7", Some("bound")),
            ("3", None)
        ]
    );
    assert_eq!(
        section_citations("a name (§1.3); A2A v1.0 §8.2", &topics),
        [Section {
            number: "1.3".into(),
            topic: None
        }]
    );
    assert_eq!(
        quoted_sections(
            "see BENCHMARKS.md, \"Sustained load\" and `BENCHMARKS.md` (\"A2A gateway\")",
            "BENCHMARKS.md"
        ),
        ["Sustained load", "A2A gateway"]
    );
    assert!(quoted_sections("[\"README.md\", \"X\"] and README.md \"], x", "README.md").is_empty());
    assert_eq!(
        quoted_sections("(~2 MB, README \"Resident memory\")", "README.md"),
        ["Resident memory"]
    );
    let actions: Vec<String> = [
        "discover", "send", "get", "wait", "complete", "cancel", "lease", "release",
    ]
    .map(String::from)
    .to_vec();
    let lists = action_lists("/// Serve the A2A tool (discover | send | get | wait | complete | cancel)\n/// to a host; discover: list peers; discover, send, wait, then", &actions);
    assert_eq!(lists, [actions[..6].to_vec()]);
    assert_eq!(
        action_lists(
            "`discover`, `send`, `get`, `wait`, `complete`, `cancel`, `lease` and `release`",
            &actions
        ),
        [actions]
    );
    assert_eq!(
        issue_citations(
            "//! A Issue 13's floor; (issues 24 and 25)\n//! (see issue #8), the\n//! issue\n//! 29 wrapped; tissue 4, Issues, #9-bounds, #000000, #27, [#3]"
        ),
        [
            (1, "Issue 13".to_string()),
            (1, "issues 24".to_string()),
            (2, "issue #8".to_string()),
            (3, "issue //! 29".to_string()),
            (4, "#27".to_string()),
            (4, "#3".to_string())
        ]
    );
}
