//! The imports between a crate's own modules, and their cycles (the
//! rule: no import cycle inside a crate). Each crate's `tests/layering.rs` calls
//! [`assert_no_import_cycle`] on itself.
//!
//! Read from the sources, not the compiler: a crate root (`src/lib.rs`,
//! `src/main.rs`, `src/bin/*.rs`, each its own crate) and the module files
//! its `mod` declarations reach (`#[path]` honoured, directories' `mod.rs`
//! and nested files alike). Every file counts as its top-level module
//! (`engine/context.rs` is `engine`), and so does an inline `mod name { }`
//! at the root. An edge `a -> b` is a path in `a`'s code that names `b`:
//! `crate::b::..`, each item of a brace group (`crate::{b::X, c::Y}`),
//! `super::` resolved against the module it is written in (in a top-level
//! file, `super::b` is `crate::b`), `$crate::b` in a macro `a` defines, and
//! a name the root imports or re-exports (`crate::X` after the root's
//! `pub use b::X`) or a `#[macro_export]` macro (`crate::m!`, defined in
//! `b`) counted as `b`'s. Comments, string literals and `#[cfg(test)]`
//! items (test modules) are left out. The root's own code is not a module:
//! it is the crate's facade and names every module.
//!
//! Not seen: a macro used by its bare name through `#[macro_use]` textual
//! scope (none of ours cross modules that way).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a path that makes an edge is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// The file, relative to the crate's directory (`src/engine/mod.rs`).
    pub file: String,
    /// Its line, from 1.
    pub line: usize,
    /// The path as written, up to the name that decides the edge
    /// (`crate::{store::write`, `super::reply`).
    pub path: String,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} `{}`", self.file, self.line, self.path)
    }
}

/// The top-level modules of one crate root and the imports between them.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// The root file (`src/lib.rs`).
    pub root: String,
    /// Every top-level module.
    pub modules: BTreeSet<String>,
    /// `(from, to)` and every place that makes that edge, in file order.
    pub edges: BTreeMap<(String, String), Vec<Site>>,
}

/// A set of modules that import one another in a circle (a strongly
/// connected component), with one shortest cycle through it and every
/// edge between its modules.
#[derive(Debug, Clone)]
pub struct Cycle {
    /// One cycle, first module repeated at the end (`a -> b -> a`).
    pub path: Vec<String>,
    /// Every edge between the modules of the component, with its sites.
    pub edges: Vec<((String, String), Vec<Site>)>,
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  cycle: {}", self.path.join(" -> "))?;
        for ((from, to), sites) in &self.edges {
            let more = match sites.len() {
                1 => String::new(),
                n => format!(" (+{} more)", n - 1),
            };
            writeln!(f, "    {from} -> {to}: {}{more}", sites[0])?;
        }
        Ok(())
    }
}

impl Graph {
    /// The modules `from` imports.
    pub fn imports(&self, from: &str) -> BTreeSet<&str> {
        self.edges
            .keys()
            .filter(|(f, _)| f == from)
            .map(|(_, t)| t.as_str())
            .collect()
    }

    /// Every cycle: one per strongly connected component of two or more
    /// modules (a module naming itself is no cycle).
    pub fn cycles(&self) -> Vec<Cycle> {
        let mut out = Vec::new();
        for component in self.components() {
            if component.len() < 2 {
                continue;
            }
            let edges: Vec<_> = self
                .edges
                .iter()
                .filter(|((f, t), _)| component.contains(f) && component.contains(t))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let start = component.iter().next().expect("a module").clone();
            out.push(Cycle {
                path: self.shortest_cycle(&start, &component),
                edges,
            });
        }
        out
    }

    /// Strongly connected components (Tarjan), each as a set.
    fn components(&self) -> Vec<BTreeSet<String>> {
        struct State<'g> {
            graph: &'g Graph,
            index: BTreeMap<&'g str, usize>,
            low: BTreeMap<&'g str, usize>,
            stack: Vec<&'g str>,
            on_stack: BTreeSet<&'g str>,
            out: Vec<BTreeSet<String>>,
        }
        fn visit<'g>(s: &mut State<'g>, v: &'g str) {
            let i = s.index.len();
            s.index.insert(v, i);
            s.low.insert(v, i);
            s.stack.push(v);
            s.on_stack.insert(v);
            let graph = s.graph;
            for w in graph.imports(v) {
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if s.on_stack.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if s.low[v] == s.index[v] {
                let mut component = BTreeSet::new();
                while let Some(w) = s.stack.pop() {
                    s.on_stack.remove(w);
                    component.insert(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                s.out.push(component);
            }
        }
        let mut s = State {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            out: Vec::new(),
        };
        for m in &self.modules {
            if !s.index.contains_key(m.as_str()) {
                visit(&mut s, m);
            }
        }
        s.out
    }

    /// The shortest way from `start` back to itself inside `within` (BFS).
    fn shortest_cycle(&self, start: &str, within: &BTreeSet<String>) -> Vec<String> {
        let mut came_from: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = VecDeque::from([start.to_owned()]);
        while let Some(v) = queue.pop_front() {
            for w in self.imports(&v) {
                if !within.contains(w) {
                    continue;
                }
                if w == start {
                    // Back from `v` to `start` through the search's steps.
                    let mut path = vec![v.clone()];
                    while let Some(p) = came_from.get(path.last().expect("a step")) {
                        path.push(p.clone());
                    }
                    if path.last().map(String::as_str) != Some(start) {
                        path.push(start.to_owned());
                    }
                    path.reverse();
                    path.push(start.to_owned());
                    return path;
                }
                if w != start && !came_from.contains_key(w) {
                    came_from.insert(w.to_owned(), v.clone());
                    queue.push_back(w.to_owned());
                }
            }
        }
        vec![start.to_owned()]
    }
}

/// Panics, naming every cycle and the sites of its edges, if a module of
/// the crate in `crate_dir` (its `CARGO_MANIFEST_DIR`) imports one that
/// imports it back, under any of its roots.
pub fn assert_no_import_cycle(crate_dir: impl AsRef<Path>) {
    let crate_dir = crate_dir.as_ref();
    let graphs = crate_graphs(crate_dir);
    assert!(!graphs.is_empty(), "no crate root under {crate_dir:?}/src");
    let mut report = String::new();
    for graph in &graphs {
        for cycle in graph.cycles() {
            report.push_str(&format!(
                "{} ({}):\n{cycle}",
                crate_dir.display(),
                graph.root
            ));
        }
    }
    assert!(
        report.is_empty(),
        "import cycles inside the crate:\n{report}"
    );
}

/// The module graph of each crate root under `crate_dir/src`.
pub fn crate_graphs(crate_dir: &Path) -> Vec<Graph> {
    let src = crate_dir.join("src");
    let mut roots = Vec::new();
    for name in ["lib.rs", "main.rs"] {
        if src.join(name).is_file() {
            roots.push(src.join(name));
        }
    }
    if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = bins
            .map(|e| e.expect("a src/bin entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    roots.iter().map(|r| graph_of(crate_dir, r)).collect()
}

/// One module file, tokenized, and the module path its code sits in.
struct File {
    rel: String,
    /// `[]` for the root, `["engine"]` for `engine/mod.rs`,
    /// `["engine", "context"]` for `engine/context.rs`.
    module: Vec<String>,
    tokens: Vec<Token>,
}

/// Every identifier in the code of the module files under one root
/// (`src/lib.rs`: the library), with where it stands: to hold that a
/// module tree does not name a crate or a macro (comments, strings and
/// test items left out, as for the edges).
pub fn names_used(crate_dir: &Path, root: &str) -> Vec<(String, Site)> {
    let mut out = Vec::new();
    for f in module_files(crate_dir, &crate_dir.join(root)) {
        for t in &f.tokens {
            if let Tok::Ident(w) = &t.tok {
                let site = Site {
                    file: f.rel.clone(),
                    line: t.line,
                    path: w.clone(),
                };
                out.push((w.clone(), site));
            }
        }
    }
    out
}

/// The files a root's `mod` declarations reach, tokenized, by path.
fn module_files(crate_dir: &Path, root: &Path) -> Vec<File> {
    let rel = |p: &Path| {
        p.strip_prefix(crate_dir)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    // Walk the `mod` declarations from the root.
    let mut files = Vec::new();
    let mut todo = vec![(root.to_path_buf(), Vec::<String>::new())];
    while let Some((path, module)) = todo.pop() {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let tokens = without_test_items(tokenize(&text));
        // Where `mod x;` looks for `x`: beside a root or a mod.rs, else in
        // the directory named as the file.
        let file_name = path.file_name().expect("a file").to_string_lossy();
        let dir = path.parent().expect("a directory");
        let own_dir = if module.is_empty() || file_name == "mod.rs" {
            dir.to_path_buf()
        } else {
            dir.join(path.file_stem().expect("a stem"))
        };
        for decl in mod_declarations(&tokens) {
            let mut child = module.clone();
            child.extend(decl.inline.iter().cloned());
            child.push(decl.name.clone());
            let mut base = own_dir.clone();
            for m in &decl.inline {
                base.push(m);
            }
            let found = match &decl.path_attr {
                Some(p) => dir.join(p),
                None => {
                    let flat = base.join(format!("{}.rs", decl.name));
                    if flat.is_file() {
                        flat
                    } else {
                        base.join(&decl.name).join("mod.rs")
                    }
                }
            };
            assert!(
                found.is_file(),
                "{}: `mod {};` has no file at {}",
                rel(&path),
                decl.name,
                found.display()
            );
            todo.push((found, child));
        }
        files.push(File {
            rel: rel(&path),
            module,
            tokens,
        });
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    files
}

fn graph_of(crate_dir: &Path, root: &Path) -> Graph {
    let rel = |p: &Path| {
        p.strip_prefix(crate_dir)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    let files = module_files(crate_dir, root);
    let root_file = files
        .iter()
        .find(|f| f.module.is_empty())
        .expect("the root");
    let mut modules: BTreeSet<String> = files
        .iter()
        .filter_map(|f| f.module.first().cloned())
        .collect();
    modules.extend(inline_root_modules(&root_file.tokens));
    // Names at the root that stand for a module's item.
    let mut at_root = root_imports(&root_file.tokens, &modules);
    for f in &files {
        if let Some(top) = f.module.first() {
            for m in exported_macros(&f.tokens) {
                at_root.insert(m, top.clone());
            }
        }
    }

    let mut graph = Graph {
        root: rel(root),
        modules,
        edges: BTreeMap::new(),
    };
    for f in &files {
        for (from, to, site) in references(f, &graph.modules, &at_root) {
            if from != to {
                graph.edges.entry((from, to)).or_default().push(site);
            }
        }
    }
    graph
}

// ---- tokens --------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// A string literal's contents (raw strings as written).
    Str(String),
    /// `::`
    PathSep,
    Punct(char),
    /// A char literal, a lifetime or a number: nothing a path is made of.
    Other,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

/// The code's tokens, comments left out.
fn tokenize(text: &str) -> Vec<Token> {
    let b: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let ident_char = |c: char| c.is_alphanumeric() || c == '_';
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if let Some((end, body)) = raw_string(&b, i) {
            line += body.matches('\n').count();
            out.push(Token {
                tok: Tok::Str(body),
                line,
            });
            i = end;
        } else if c == '"' || (c == 'b' && next == Some('"')) {
            let start_line = line;
            i += if c == 'b' { 2 } else { 1 };
            let mut body = String::new();
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    body.push(b[i]);
                    i += 1;
                }
                if i < b.len() {
                    if b[i] == '\n' {
                        line += 1;
                    }
                    body.push(b[i]);
                    i += 1;
                }
            }
            i += 1;
            out.push(Token {
                tok: Tok::Str(body),
                line: start_line,
            });
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < b.len() && ident_char(b[i]) {
                    i += 1;
                }
            }
            out.push(Token {
                tok: Tok::Other,
                line,
            });
        } else if ident_char(c) {
            let start = i;
            while i < b.len() && ident_char(b[i]) {
                i += 1;
            }
            let word: String = b[start..i].iter().collect();
            let tok = if c.is_ascii_digit() {
                Tok::Other
            } else {
                Tok::Ident(word.trim_start_matches("r#").to_owned())
            };
            out.push(Token { tok, line });
        } else if c == ':' && next == Some(':') {
            out.push(Token {
                tok: Tok::PathSep,
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::Punct(c),
                line,
            });
            i += 1;
        }
    }
    out
}

/// A raw string (`r"..."`, `r#"..."#`, `br#"..."#`) starting at `i`: where
/// it ends and its contents.
fn raw_string(b: &[char], i: usize) -> Option<(usize, String)> {
    if i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_') {
        return None;
    }
    let mut j = i;
    if b.get(j) == Some(&'b') || b.get(j) == Some(&'c') {
        j += 1;
    }
    if b.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while b.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if b.get(j) != Some(&'"') {
        return None;
    }
    let body_start = j + 1;
    let mut k = body_start;
    while k < b.len() {
        if b[k] == '"' && (1..=hashes).all(|h| b.get(k + h) == Some(&'#')) {
            return Some((k + 1 + hashes, b[body_start..k].iter().collect()));
        }
        k += 1;
    }
    None
}

fn is_ident(t: Option<&Token>, word: &str) -> bool {
    matches!(t, Some(Token { tok: Tok::Ident(w), .. }) if w == word)
}

fn is_punct(t: Option<&Token>, c: char) -> bool {
    matches!(t, Some(Token { tok: Tok::Punct(p), .. }) if *p == c)
}

/// The index just past the group that opens at `i` (`(`, `[` or `{`).
fn past_group(tokens: &[Token], i: usize) -> usize {
    let mut depth = 0i32;
    let mut j = i;
    while j < tokens.len() {
        match tokens[j].tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
        j += 1;
    }
    tokens.len()
}

/// An attribute `#[...]` at `i`: its tokens (inside the brackets) and the
/// index past it.
fn attribute(tokens: &[Token], i: usize) -> Option<(&[Token], usize)> {
    if !is_punct(tokens.get(i), '#') {
        return None;
    }
    let open = if is_punct(tokens.get(i + 1), '!') {
        i + 2
    } else {
        i + 1
    };
    if !is_punct(tokens.get(open), '[') {
        return None;
    }
    let end = past_group(tokens, open);
    Some((&tokens[open + 1..end.saturating_sub(1)], end))
}

/// `cfg(test)`, `cfg(all(test, ..))`, `cfg(doctest)`: the item is a test's.
fn is_test_cfg(attr: &[Token]) -> bool {
    let words: Vec<&str> = attr
        .iter()
        .filter_map(|t| match &t.tok {
            Tok::Ident(w) => Some(w.as_str()),
            _ => None,
        })
        .collect();
    matches!(
        words.as_slice(),
        ["cfg", "test" | "doctest"] | ["cfg", "all", "test", ..]
    )
}

/// The tokens without the items under a test `#[cfg]` (test modules, and
/// any other item so marked).
fn without_test_items(tokens: Vec<Token>) -> Vec<Token> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let Some((attr, after)) = attribute(&tokens, i) else {
            out.push(tokens[i].clone());
            i += 1;
            continue;
        };
        if !is_test_cfg(attr) || is_punct(tokens.get(i + 1), '!') {
            out.extend(tokens[i..after].iter().cloned());
            i = after;
            continue;
        }
        i = past_item(&tokens, after);
    }
    out
}

/// The index past the item that starts at `i` (its attributes included):
/// past its `;` or its body's closing brace, whichever comes first.
fn past_item(tokens: &[Token], mut i: usize) -> usize {
    while let Some((_, after)) = attribute(tokens, i) {
        i = after;
    }
    let ends_at_semicolon = tokens[i..]
        .iter()
        .take(3)
        .any(|t| matches!(&t.tok, Tok::Ident(w) if ["use", "const", "static", "type"].contains(&w.as_str())));
    while i < tokens.len() {
        match tokens[i].tok {
            Tok::Punct(';') => return i + 1,
            Tok::Punct('{') if !ends_at_semicolon => return past_group(tokens, i),
            Tok::Punct('(' | '[' | '{') => i = past_group(tokens, i),
            _ => i += 1,
        }
    }
    i
}

// ---- modules -------------------------------------------------------------

struct ModDecl {
    /// The inline modules (`mod a { mod b; }`) it is declared in.
    inline: Vec<String>,
    name: String,
    path_attr: Option<String>,
}

/// Walks the tokens keeping the stack of inline modules: calls `each` with
/// the index and the stack at every token.
fn walk_inline(tokens: &[Token], mut each: impl FnMut(usize, &[String])) {
    let mut stack: Vec<(String, i32)> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut depth = 0;
    for i in 0..tokens.len() {
        each(i, &names);
        match &tokens[i].tok {
            Tok::Punct('{') => {
                depth += 1;
                if i >= 2 && is_ident(tokens.get(i - 2), "mod") {
                    if let Tok::Ident(name) = &tokens[i - 1].tok {
                        stack.push((name.clone(), depth));
                        names.push(name.clone());
                    }
                }
            }
            Tok::Punct('}') => {
                if stack.last().is_some_and(|(_, d)| *d == depth) {
                    stack.pop();
                    names.pop();
                }
                depth -= 1;
            }
            _ => {}
        }
    }
}

/// Every `mod name;` (a module in a file of its own).
fn mod_declarations(tokens: &[Token]) -> Vec<ModDecl> {
    let mut out = Vec::new();
    walk_inline(tokens, |i, inline| {
        if !(is_ident(tokens.get(i), "mod") && is_punct(tokens.get(i + 2), ';')) {
            return;
        }
        let Some(Tok::Ident(name)) = tokens.get(i + 1).map(|t| &t.tok) else {
            return;
        };
        // `#[path = "x.rs"]` among the attributes just before.
        let mut path_attr = None;
        let mut j = i;
        while j > 0 && !matches!(tokens[j - 1].tok, Tok::Punct(';' | '{' | '}')) {
            j -= 1;
            if is_ident(tokens.get(j), "path") && is_punct(tokens.get(j + 1), '=') {
                if let Some(Tok::Str(p)) = tokens.get(j + 2).map(|t| &t.tok) {
                    path_attr = Some(p.clone());
                }
            }
        }
        out.push(ModDecl {
            inline: inline.to_vec(),
            name: name.clone(),
            path_attr,
        });
    });
    out
}

/// The `mod name { .. }` written in the root file itself.
fn inline_root_modules(tokens: &[Token]) -> Vec<String> {
    let mut out = Vec::new();
    walk_inline(tokens, |i, inline| {
        if inline.is_empty() && is_ident(tokens.get(i), "mod") && is_punct(tokens.get(i + 2), '{') {
            if let Some(Tok::Ident(name)) = tokens.get(i + 1).map(|t| &t.tok) {
                out.push(name.clone());
            }
        }
    });
    out
}

/// The names a `#[macro_export] macro_rules!` puts at the crate root.
fn exported_macros(tokens: &[Token]) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..tokens.len() {
        let Some((attr, mut after)) = attribute(tokens, i) else {
            continue;
        };
        if !is_ident(attr.first(), "macro_export") {
            continue;
        }
        while let Some((_, a)) = attribute(tokens, after) {
            after = a;
        }
        if is_ident(tokens.get(after), "macro_rules") {
            if let Some(Tok::Ident(name)) = tokens.get(after + 2).map(|t| &t.tok) {
                out.push(name.clone());
            }
        }
    }
    out
}

/// The names the root's `use` declarations bind, to the top-level module
/// they come from (`pub use store::Durability;`: `Durability` -> `store`).
fn root_imports(tokens: &[Token], modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut depth = 0;
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth -= 1,
            _ => {}
        }
        if depth == 0 && is_ident(tokens.get(i), "use") {
            let mut bound = Vec::new();
            let mut j = i + 1;
            use_tree(tokens, &mut j, Vec::new(), &mut bound);
            for (path, name) in bound {
                let mut segs = path.iter().map(String::as_str);
                let mut first = segs.next();
                if matches!(first, Some("crate" | "self")) {
                    first = segs.next();
                }
                if let Some(m) = first.filter(|m| modules.contains(*m)) {
                    out.insert(name, m.to_owned());
                }
            }
            i = j;
        }
        i += 1;
    }
    out
}

/// Reads a use tree at `*i`: every (path, name it binds).
fn use_tree(
    tokens: &[Token],
    i: &mut usize,
    mut path: Vec<String>,
    out: &mut Vec<(Vec<String>, String)>,
) {
    while let Some(t) = tokens.get(*i) {
        match &t.tok {
            Tok::PathSep => *i += 1,
            Tok::Ident(w) => {
                path.push(w.clone());
                *i += 1;
                if matches!(tokens.get(*i).map(|t| &t.tok), Some(Tok::PathSep)) {
                    continue;
                }
                let mut name = if w == "self" && path.len() > 1 {
                    path[path.len() - 2].clone()
                } else {
                    w.clone()
                };
                if is_ident(tokens.get(*i), "as") {
                    if let Some(Tok::Ident(alias)) = tokens.get(*i + 1).map(|t| &t.tok) {
                        name = alias.clone();
                    }
                    *i += 2;
                }
                out.push((path, name));
                return;
            }
            Tok::Punct('{') => {
                *i += 1;
                while *i < tokens.len() && !is_punct(tokens.get(*i), '}') {
                    if is_punct(tokens.get(*i), ',') {
                        *i += 1;
                        continue;
                    }
                    use_tree(tokens, i, path.clone(), out);
                }
                *i += 1;
                return;
            }
            _ => return,
        }
    }
}

// ---- references ----------------------------------------------------------

/// Every (from, to, site) of a file: the paths that name another module.
fn references(
    f: &File,
    modules: &BTreeSet<String>,
    at_root: &BTreeMap<String, String>,
) -> Vec<(String, String, Site)> {
    let t = &f.tokens;
    let mut out = Vec::new();
    walk_inline(t, |i, inline| {
        let mut here = f.module.clone();
        here.extend(inline.iter().cloned());
        let Some(from) = here.first().cloned() else {
            return; // the root's own code
        };
        let starts_path = i == 0 || !matches!(t[i - 1].tok, Tok::PathSep);
        if !starts_path || !matches!(t.get(i + 1).map(|t| &t.tok), Some(Tok::PathSep)) {
            return;
        }
        // `crate::` (or `$crate::`), or `super::super::..`
        let (at, mut j) = match &t[i].tok {
            Tok::Ident(w) if w == "crate" => (Vec::new(), i + 2),
            Tok::Ident(w) if w == "super" => {
                let mut at = here.clone();
                let mut j = i;
                while is_ident(t.get(j), "super")
                    && matches!(t.get(j + 1).map(|t| &t.tok), Some(Tok::PathSep))
                {
                    at.pop();
                    j += 2;
                }
                (at, j)
            }
            _ => return,
        };
        let mut text = t[i..j]
            .iter()
            .map(|t| match &t.tok {
                Tok::Ident(w) => w.as_str(),
                _ => "::",
            })
            .collect::<String>();
        if is_punct(t.get(i.wrapping_sub(1)), '$') {
            text.insert(0, '$');
        }
        if let Some(top) = at.first() {
            let site = Site {
                file: f.rel.clone(),
                line: t[i].line,
                path: text.trim_end_matches("::").to_owned(),
            };
            out.push((from.clone(), top.clone(), site));
            return;
        }
        // At the root: the next name, or each item of a brace group.
        let mut names = Vec::new();
        if let Some(Tok::Ident(w)) = t.get(j).map(|t| &t.tok) {
            names.push((w.clone(), t[j].line));
        } else if is_punct(t.get(j), '{') {
            let end = past_group(t, j);
            let mut expect_item = true;
            let mut depth = 0;
            j += 1;
            while j < end - 1 {
                match &t[j].tok {
                    Tok::Punct('{' | '(' | '[') => depth += 1,
                    Tok::Punct('}' | ')' | ']') => depth -= 1,
                    Tok::Punct(',') if depth == 0 => expect_item = true,
                    Tok::Ident(w) if expect_item && depth == 0 => {
                        names.push((w.clone(), t[j].line));
                        expect_item = false;
                    }
                    _ => expect_item = false,
                }
                j += 1;
            }
            text.push('{');
        }
        for (name, line) in names {
            let to = if modules.contains(&name) {
                Some(name.clone())
            } else {
                at_root.get(&name).cloned()
            };
            if let Some(to) = to {
                out.push((
                    from.clone(),
                    to,
                    Site {
                        file: f.rel.clone(),
                        line,
                        path: format!("{text}{name}"),
                    },
                ));
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(src: &str) -> Vec<String> {
        tokenize(src)
            .into_iter()
            .filter_map(|t| match t.tok {
                Tok::Ident(w) => Some(w),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn comments_strings_and_test_items_hold_no_paths() {
        let src = "// crate::a\n/* crate::b /* nested */ crate::c */ let s = \"crate::d\";\n\
                   let r = r#\"crate::e\"#; let c = '\"'; fn f<'a>() {}\n\
                   #[cfg(test)]\nmod tests { use crate::g; }\nuse crate::h;";
        let kept = words(&tokenize_and_strip(src));
        assert!(!kept.contains(&"a".to_owned()) && !kept.contains(&"e".to_owned()));
        assert!(!kept.contains(&"g".to_owned()), "{kept:?}");
        assert!(kept.contains(&"h".to_owned()), "{kept:?}");
    }

    fn tokenize_and_strip(src: &str) -> String {
        without_test_items(tokenize(src))
            .into_iter()
            .map(|t| match t.tok {
                Tok::Ident(w) => w + " ",
                _ => String::new(),
            })
            .collect()
    }
}
