//! No import cycle between this crate's modules (the check is
//! `a2a_testkit::layering`, which names each cycle's edges).

#[test]
fn the_modules_import_one_another_without_a_cycle() {
    a2a_testkit::layering::assert_no_import_cycle(env!("CARGO_MANIFEST_DIR"));
}

/// The command line is the binary's own (`src/main.rs` and `src/remote_cli.rs`),
/// so the library is a server and a bridge with a facade of its own: its
/// module tree names no clap and prints nothing on stdout.
#[test]
fn the_library_holds_no_cli() {
    let cli_only = ["clap", "println", "print"];
    let dir: &std::path::Path = env!("CARGO_MANIFEST_DIR").as_ref();
    let found: Vec<String> = a2a_testkit::layering::names_used(dir, "src/lib.rs")
        .into_iter()
        .filter(|(name, _)| cli_only.contains(&name.as_str()))
        .map(|(_, site)| site.to_string())
        .collect();
    assert!(found.is_empty(), "the library uses the CLI's: {found:#?}");
    // The reading sees the binary's tree, where they belong.
    let bin = a2a_testkit::layering::names_used(dir, "src/main.rs");
    assert!(bin.iter().any(|(name, _)| name == "clap"));
    assert!(bin.iter().any(|(name, _)| name == "println"));
}
