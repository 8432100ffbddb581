//! The client's modules import one another without a cycle (issue 25):
//! the reader side (`conn`, `demux`, `events`) holds queues and weak
//! handles, never the facade (`client`, `agent`) that builds on it. Read
//! from the sources: a module's edges are the `crate::<module>` paths of
//! its code (comments and its test module left out), with the crate
//! root's re-exports (`crate::Agent`) counted as their module's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect("a source file");
    let mut sources = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("src/") {
        let name = entry
            .expect("an entry")
            .file_name()
            .into_string()
            .expect("utf-8");
        if let Some(module) = name.strip_suffix(".rs").filter(|m| *m != "lib") {
            sources.insert(module.to_owned(), code_of(&read(&name)));
        }
    }
    // `pub use module::{A, B};` at the root: `crate::A` is `module`'s.
    let mut reexported = BTreeMap::new();
    for line in code_of(&read("lib.rs")).split(';') {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        if let Some((module, names)) = rest.split_once("::") {
            if sources.contains_key(module) {
                for n in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                    reexported.insert(n.to_owned(), module.to_owned());
                }
            }
        }
    }
    let mut edges = BTreeMap::new();
    for (module, code) in &sources {
        let mut to = BTreeSet::new();
        for (i, _) in code.match_indices("crate::") {
            let name: String = code[i + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let target = reexported.get(&name).cloned().unwrap_or(name);
            if target != *module && sources.contains_key(&target) {
                to.insert(target);
            }
        }
        edges.insert(module.clone(), to);
    }
    edges
}

/// The code of a source: no comments, no `#[cfg(test)]` module.
fn code_of(source: &str) -> String {
    let before_tests = source.split("#[cfg(test)]\nmod ").next().unwrap_or("");
    before_tests
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A cycle through `from`, if there is one (depth-first).
fn cycle(
    edges: &BTreeMap<String, BTreeSet<String>>,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    let here = path.last().expect("a start").clone();
    for next in &edges[&here] {
        if let Some(at) = path.iter().position(|m| m == next) {
            let mut c = path[at..].to_vec();
            c.push(next.clone());
            return Some(c);
        }
        if done.contains(next) {
            continue;
        }
        path.push(next.clone());
        if let Some(c) = cycle(edges, path, done) {
            return Some(c);
        }
        path.pop();
    }
    done.insert(here);
    None
}

#[test]
fn the_modules_import_one_another_without_a_cycle() {
    let edges = graph();
    assert!(edges.len() >= 10, "modules read: {:?}", edges.keys());
    assert!(
        edges["agent"].contains("client"),
        "the reading sees imports: {edges:?}"
    );
    let mut done = BTreeSet::new();
    for start in edges.keys() {
        if let Some(c) = cycle(&edges, &mut vec![start.clone()], &mut done) {
            panic!("import cycle: {}", c.join(" -> "));
        }
    }
}
