//! Every row of the method table (`proto/src/methods.rs`) is present in
//! each binding it names: the Rust client's typed method, the C header's
//! function (`ffi/include/a2a.h`, itself held to the Rust source by the
//! header drift test), the Node addon's method in `index.d.ts`, and the
//! model's tool action. And the other way round: every tool action is some
//! row's, so the tool's list and the table cannot drift apart. A method
//! added to the table without its bindings, or a binding renamed without
//! its row, fails here with the row and the file named.

/// One row's bindings, as the table writes them (`_`: none).
#[derive(Debug)]
struct Row {
    method: &'static str,
    rust: Option<(&'static str, &'static str)>,
    c: Option<&'static str>,
    node: Option<&'static str>,
    tool: Option<&'static str>,
}

macro_rules! opt {
    (_) => {
        None
    };
    ($x:ident) => {
        Some(stringify!($x))
    };
}

macro_rules! rows {
    ($( $variant:ident($params:ty) $konst:ident, $route:ident, $result:ident, $h:ident,
        { rust: $($ty:ident :: $f:ident)? $(_)?, c: $c:tt, node: $node:tt, tool: $tool:tt }; )*) => {
        vec![$(Row {
            method: a2a_proto::methods::$konst,
            rust: None $(.or(Some((stringify!($ty), stringify!($f)))))?,
            c: opt!($c),
            node: opt!($node),
            tool: opt!($tool),
        }),*]
    };
}

fn rows() -> Vec<Row> {
    a2a_proto::method_table!(rows)
}

use crate::tree::root;

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The Rust sources of a crate, concatenated.
fn sources(dir: &str) -> String {
    let mut out = String::new();
    let mut stack = vec![root().join(dir)];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    out
}

#[test]
fn every_row_is_in_every_binding_it_names() {
    let rows = rows();
    assert_eq!(
        rows.len(),
        a2a_proto::methods::ALL.len(),
        "one row per method"
    );
    let client = sources("client/src");
    let header = read("ffi/include/a2a.h");
    let node = read("node-binding/index.d.ts");
    let tool: Vec<&str> = a2a_tool::schema::ACTIONS.to_vec();
    let mut missing = Vec::new();
    for row in &rows {
        if let Some((ty, f)) = row.rust {
            // The typed method is defined on its type (`impl Agent` or
            // `impl Client`): written out, or made by the client's
            // `blocking!` from its `_async` form.
            let defined = client.contains(&format!("pub fn {f}("))
                || client.contains(&format!("pub fn {f}<"))
                || (client.contains(&format!("{f} => {f}_async("))
                    && client.contains(&format!("pub fn {f}_async(")));
            if !defined {
                missing.push(format!("{}: {ty}::{f} in client/src", row.method));
            }
        }
        if let Some(c) = row.c {
            if !header.contains(&format!(" {c}(")) {
                missing.push(format!("{}: {c} in ffi/include/a2a.h", row.method));
            }
        }
        if let Some(n) = row.node {
            // A method of a declared class (`  name(`), or a static one.
            let declared =
                node.contains(&format!("\n  {n}(")) || node.contains(&format!("\n  static {n}("));
            if !declared {
                missing.push(format!("{}: {n} in node-binding/index.d.ts", row.method));
            }
        }
        if let Some(t) = row.tool {
            if !tool.contains(&t) {
                missing.push(format!("{}: action {t} in the tool's ACTIONS", row.method));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "bindings missing:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_tool_action_is_a_rows() {
    let named: Vec<&str> = rows().iter().filter_map(|r| r.tool).collect();
    for action in a2a_tool::schema::ACTIONS {
        assert!(
            named.contains(&action),
            "the tool's action {action} is no row's `tool:` in proto/src/methods.rs"
        );
    }
}

/// The test itself: a name that no binding has is reported (the check can
/// fail).
#[test]
fn a_missing_name_is_found() {
    let header = read("ffi/include/a2a.h");
    assert!(header.contains(" a2a_agent_renew_lease("));
    assert!(!header.contains(" a2a_agent_no_such_call("));
}
