//! No import cycle between this crate's modules (the check is
//! `a2a_testkit::layering`, which names each cycle's edges), and the
//! library is a server only: the command line is the `a2a-cli` package's
//! (`cli/`), so a program that embeds the broker does not build a client,
//! an MCP server and an argument parser with it.

use serde_json::Value;
use std::process::Command;

/// What only the command line uses: as package names (Cargo.toml) and as
/// the names the code imports them by.
const CLI_ONLY_PACKAGES: [&str; 5] = [
    "clap",
    "a2a-client",
    "a2a-tool",
    "rmcp",
    "tracing-subscriber",
];

#[test]
fn the_modules_import_one_another_without_a_cycle() {
    a2a_testkit::layering::assert_no_import_cycle(env!("CARGO_MANIFEST_DIR"));
}

/// The library's module tree names no clap, no client crate, no MCP SDK,
/// and prints nothing on stdout.
#[test]
fn the_library_holds_no_cli() {
    let cli_only = [
        "clap",
        "a2a_client",
        "a2a_tool",
        "rmcp",
        "tracing_subscriber",
        "println",
        "print",
    ];
    let found: Vec<String> =
        a2a_testkit::layering::names_used(env!("CARGO_MANIFEST_DIR").as_ref(), "src/lib.rs")
            .into_iter()
            .filter(|(name, _)| cli_only.contains(&name.as_str()))
            .map(|(_, site)| site.to_string())
            .collect();
    assert!(found.is_empty(), "the library uses the CLI's: {found:#?}");
    // The same reading sees them in the command line's tree, where they
    // belong (so an empty result above is not a reading that sees nothing).
    let cli = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli");
    let bin = a2a_testkit::layering::names_used(&cli, "src/main.rs");
    assert!(bin.iter().any(|(name, _)| name == "clap"));
    assert!(bin.iter().any(|(name, _)| name == "a2a_client"));
}

/// This package as `cargo metadata` reads its manifest.
fn this_package() -> Value {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's json");
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == env!("CARGO_PKG_NAME"))
        .cloned()
        .expect("this package in the metadata")
}

/// The library's normal dependencies (what every user of `a2a_broker`
/// builds) include none of the command line's, and the benchmarks' entry
/// points are behind a feature that is off by default.
#[test]
fn the_library_depends_on_nothing_only_the_cli_uses() {
    let pkg = this_package();
    let deps = pkg["dependencies"].as_array().expect("dependencies");
    let normal: Vec<&str> = deps
        .iter()
        .filter(|d| d["kind"].is_null())
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert!(
        normal.contains(&"rusqlite"),
        "read no dependencies: {normal:?}"
    );
    let cli_only: Vec<&&str> = normal
        .iter()
        .filter(|n| CLI_ONLY_PACKAGES.contains(n))
        .collect();
    assert!(
        cli_only.is_empty(),
        "the library depends on the command line's {cli_only:?}: they belong in cli/Cargo.toml"
    );
    assert!(
        pkg["targets"]
            .as_array()
            .expect("targets")
            .iter()
            .all(|t| t["kind"] != serde_json::json!(["bin"])),
        "the library package builds a binary: the command line is cli/'s"
    );
    let features = &pkg["features"];
    assert!(features.get("bench").is_some(), "{features}");
    let default = features["default"].as_array().cloned().unwrap_or_default();
    assert!(
        !default.iter().any(|f| f == "bench"),
        "bench is on by default: {features}"
    );
}
