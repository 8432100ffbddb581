//! No import cycle between this crate's modules (the check is
//! `a2a_testkit::layering`, which names each cycle's edges), a library
//! without the command line's crates and macros, and a library whose
//! exports are a facade rather than its modules.

#[test]
fn the_modules_import_one_another_without_a_cycle() {
    a2a_testkit::layering::assert_no_import_cycle(env!("CARGO_MANIFEST_DIR"));
}

/// The command line is the binary's own (`src/main.rs`, `src/remote_cli.rs`,
/// `src/tck/`), so the library is a server and a bridge with a facade of its
/// own: its module tree names no clap and prints nothing (it logs through
/// `tracing`; what a user reads on a terminal is the binary's to print).
#[test]
fn the_library_holds_no_cli() {
    let cli_only = ["clap", "println", "print", "eprintln", "eprint"];
    let dir: &std::path::Path = env!("CARGO_MANIFEST_DIR").as_ref();
    let found: Vec<String> = a2a_testkit::layering::names_used(dir, "src/lib.rs")
        .into_iter()
        .filter(|(name, _)| cli_only.contains(&name.as_str()))
        .map(|(_, site)| site.to_string())
        .collect();
    assert!(found.is_empty(), "the library uses the CLI's: {found:#?}");
    // The reading sees the binary's tree, where they belong.
    let bin = a2a_testkit::layering::names_used(dir, "src/main.rs");
    for name in ["clap", "println", "eprintln"] {
        assert!(bin.iter().any(|(n, _)| n == name), "{name} in the binary");
    }
}

/// The library's root declares its modules private and exports chosen
/// items (`pub use module::{Item, ..}`): no `pub mod`, no module re-exported
/// by name, no glob. A caller then reaches only what the root names, and a
/// module's inside can change without changing the library's face.
#[test]
fn the_library_exports_a_facade_not_its_modules() {
    let dir: &std::path::Path = env!("CARGO_MANIFEST_DIR").as_ref();
    let root = std::fs::read_to_string(dir.join("src/lib.rs")).expect("src/lib.rs");
    let found = wholesale_exports(&root);
    assert!(found.is_empty(), "src/lib.rs exports modules: {found:#?}");
}

/// The checker itself finds each kind of wholesale export (else the test
/// above could pass by reading nothing).
#[test]
fn the_facade_check_sees_pub_mod_module_reexports_and_globs() {
    let root = "//! doc: pub mod x;\nmod a;\npub mod b;\npub(crate) mod c;\n\
                pub use a::{Item, d::Other as O};\npub use c;\npub use a::*;\n\
                pub use crate::{b as bee, a::Thing};\n";
    assert_eq!(
        wholesale_exports(root),
        [
            "pub mod b",
            "pub use c",
            "pub use a::*",
            "pub use crate::{b as bee, a::Thing}"
        ]
    );
    assert!(wholesale_exports("mod a;\npub use a::{X, Y};\n").is_empty());
}

/// The statements of a crate root (line comments dropped) that export a
/// module: `pub mod m`, or a `pub use` one of whose leaves is `*` or a
/// module the root declares.
fn wholesale_exports(root: &str) -> Vec<String> {
    let code: String = root
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ");
    let statements: Vec<String> = code
        .split(';')
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|s| !s.is_empty())
        .collect();
    let modules: Vec<String> = statements
        .iter()
        .filter_map(|s| s.rsplit_once("mod ").map(|(_, m)| m.trim().to_owned()))
        .filter(|m| m.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .collect();
    statements
        .into_iter()
        .filter(|s| {
            if s.starts_with("pub mod ") {
                return true;
            }
            let Some(path) = s.strip_prefix("pub use ") else {
                return false;
            };
            leaves(path)
                .iter()
                .any(|leaf| leaf == "*" || modules.contains(leaf))
        })
        .collect()
}

/// The names a use-tree imports (before any `as`): `a::{b, c::d as e}`
/// gives `b` and `d`.
fn leaves(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut out = Vec::new();
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.extend(leaves(&inner[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.extend(leaves(&inner[start..]));
        return out;
    }
    let name = tree.split(" as ").next().unwrap_or("").trim();
    match name.rsplit("::").next() {
        Some(leaf) if !leaf.is_empty() => vec![leaf.to_owned()],
        _ => Vec::new(),
    }
}
