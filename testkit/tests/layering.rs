//! The import-cycle check (`a2a_testkit::layering`) on a fixture with a
//! known cycle, and on the test kit itself.

use a2a_testkit::layering::{assert_no_import_cycle, crate_graphs};
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cycle")
}

#[test]
fn the_fixture_s_cycle_is_found_with_the_edges_that_make_it() {
    let graphs = crate_graphs(&fixture());
    assert_eq!(graphs.len(), 1, "one root: src/lib.rs");
    let graph = &graphs[0];
    let modules: Vec<&str> = graph.modules.iter().map(String::as_str).collect();
    assert_eq!(modules, ["alpha", "beta", "gamma"]);
    // The brace group gives both of its items; the root's re-export
    // `Beta` is `beta`'s; `super::super` from beta/inner.rs is the root.
    assert_eq!(
        graph.imports("alpha").into_iter().collect::<Vec<_>>(),
        ["beta", "gamma"]
    );
    assert_eq!(
        graph.imports("beta").into_iter().collect::<Vec<_>>(),
        ["alpha"]
    );
    // A comment, a string and a test module are no imports.
    assert!(graph.imports("gamma").is_empty(), "{:?}", graph.edges);

    let cycles = graph.cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert_eq!(cycles[0].path, ["alpha", "beta", "alpha"]);
    let shown = cycles[0].to_string();
    assert!(
        shown.contains("alpha -> beta: src/alpha.rs:1 `crate::{Beta`"),
        "{shown}"
    );
    assert!(
        shown.contains("beta -> alpha: src/beta/inner.rs:1 `super::super::alpha`"),
        "{shown}"
    );

    let failed = std::panic::catch_unwind(|| assert_no_import_cycle(fixture()));
    let message = failed.expect_err("the check fails on a cycle");
    let message = message
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(
        message.contains("cycle: alpha -> beta -> alpha"),
        "{message}"
    );
}

#[test]
fn the_modules_import_one_another_without_a_cycle() {
    assert_no_import_cycle(env!("CARGO_MANIFEST_DIR"));
}
