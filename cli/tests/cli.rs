//! The command line: help texts and start-up failures (the protocol itself is
//! tested over stdio by the workspace's `tests/` package).

use std::process::Command;

fn broker() -> Command {
    Command::new(env!("CARGO_BIN_EXE_a2a-broker"))
}

/// `serve --db DB` with stdin closed at once: it starts and stops (or
/// fails to start).
fn serve_on(db: &std::path::Path) -> std::process::Output {
    broker()
        .args(["serve", "--db"])
        .arg(db)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn help_explains_every_subcommand() {
    let out = broker().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for sub in ["serve", "demo", "tasks"] {
        assert!(text.contains(sub), "--help lists {sub}: {text}");
    }
    let out = broker().args(["serve", "--help"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for flag in ["--db", "--durability", "--batch-max", "power loss"] {
        assert!(text.contains(flag), "serve --help mentions {flag}: {text}");
    }
    let out = broker().args(["tasks", "--help"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("list") && text.contains("show"), "{text}");
}

#[test]
fn mcp_help_explains_waiting_for_a_broker() {
    let out = broker().args(["mcp", "--help"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for words in [
        "--wait <SECONDS>",
        "start this server before the broker",
        "restarted",
    ] {
        assert!(text.contains(words), "mcp --help says {words:?}: {text}");
    }
}

#[test]
fn unreadable_database_fails_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("junk.db");
    std::fs::write(&db, vec![b'x'; 4096]).unwrap();
    let out = serve_on(&db);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "one clear line: {err:?}");
    assert!(err.contains("junk.db"), "{err}");
}

#[test]
fn inspecting_a_missing_database_is_a_clear_error() {
    let out = broker()
        .args(["tasks", "list", "--db", "/nonexistent/a2a.db"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("does not exist"), "{err}");
}

#[test]
fn demo_runs_a_delegation_end_to_end() {
    let out = broker().arg("demo").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("the broker exited with status 0"), "{text}");
    assert!(text.contains("completed (final)"), "{text}");
}

#[test]
fn a_new_database_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new.db");
    let out = serve_on(&db);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in ["new.db", "new.db-wal", "new.db-shm"] {
        let p = dir.path().join(f);
        if p.exists() {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{f} is owner-only");
        }
    }
}
