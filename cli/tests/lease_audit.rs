//! `a2a-broker leases list` against the real binary's database: leases
//! taken over stdio, read beside the running broker (one released, two
//! held; filters; JSON and the table), then after it stopped (the held
//! ones ended with their connection, their records kept).

#[path = "support/audit_view.rs"]
mod audit_view;

use a2a_testkit::TIMEOUT;
use audit_view::{broker, json_lines, ok_stdout, serve_stdio};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::Instant;

fn leases(db: &Path, args: &[&str]) -> Output {
    broker()
        .args(["leases", "list", "--db"])
        .arg(db)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run leases list")
}

/// `(id, end)` of each line, newest first.
fn ends(v: &[Value]) -> Vec<(String, String)> {
    v.iter()
        .map(|l| {
            (
                l["id"].as_str().expect("id").to_owned(),
                l["end"].as_str().expect("end").to_owned(),
            )
        })
        .collect()
}

fn wait_exit(child: &mut Child) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(st) = child.try_wait().expect("wait for the broker") {
            assert!(st.success(), "the broker exited with {st}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the broker did not exit within {TIMEOUT:?} of stdin closing");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn leases_list_shows_who_held_what_when_and_how_it_ended() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("host.db");
    let (mut child, mut c) = serve_stdio(&db);
    let (_, ta) = c.register("c1", "alice");
    let (_, tb) = c.register("c1", "bob");
    let (_, tc) = c.register("c2", "carol");
    let id = |v: Value| v["lease"]["id"].as_str().expect("lease id").to_owned();
    // Newest first is by acquisition time, to the millisecond: apart.
    let tick = || std::thread::sleep(std::time::Duration::from_millis(5));
    let l1 = id(c.ok(
        "a2a.leases.acquire",
        json!({"token": ta, "paths": ["src/"], "ttlSeconds": 60, "reason": "refactor the parser"}),
    ));
    c.ok("a2a.leases.release", json!({"token": ta, "leaseId": l1}));
    tick();
    let l2 = id(c.ok(
        "a2a.leases.acquire",
        json!({"token": tb, "paths": ["docs/*.md"], "ttlSeconds": 60, "exclusive": false}),
    ));
    tick();
    let l3 = id(c.ok(
        "a2a.leases.acquire",
        json!({"token": tc, "paths": ["src/main.rs"], "ttlSeconds": 60}),
    ));

    // Beside the running broker: newest first, one released, two held.
    let live = json_lines(&leases(&db, &["--json"]));
    assert_eq!(
        ends(&live),
        vec![
            (l3.clone(), "held".to_owned()),
            (l2.clone(), "held".to_owned()),
            (l1.clone(), "released".to_owned()),
        ]
    );
    let first = &live[2];
    assert_eq!(first["holder"], "alice");
    assert_eq!(first["contextId"], "c1");
    assert_eq!(first["paths"], json!(["src/**"]));
    assert_eq!(first["exclusive"], true);
    assert_eq!(first["reason"], "refactor the parser");
    assert!(first["endedAt"].is_string() && first["acquiredAt"].is_string());
    assert!(live[0]["endedAt"].is_null());
    assert_eq!(live[1]["exclusive"], false);
    // Filters.
    assert_eq!(
        ends(&json_lines(&leases(&db, &["--json", "--context", "c2"]))),
        vec![(l3.clone(), "held".to_owned())]
    );
    assert_eq!(
        ends(&json_lines(&leases(&db, &["--json", "--holder", "bob"]))),
        vec![(l2.clone(), "held".to_owned())]
    );
    assert_eq!(
        json_lines(&leases(&db, &["--json", "--limit", "1"])).len(),
        1
    );
    // The table.
    let table = ok_stdout(&leases(&db, &[]));
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("LEASE") && lines[0].contains("HOLDER (CONTEXT)"));
    assert_eq!(lines.len(), 4, "{table}");
    assert!(lines[3].contains(&l1) && lines[3].contains("alice (c1)"));
    assert!(lines[3].contains("released") && lines[3].contains("src/**"));
    assert!(lines[3].contains("\"refactor the parser\""), "{table}");
    assert!(lines[2].contains("shared") && lines[2].contains("held"));

    // Stopped: the held leases ended with their connection; every record
    // stays.
    drop(c);
    wait_exit(&mut child);
    let after = json_lines(&leases(&db, &["--json"]));
    assert_eq!(after.len(), 3);
    for l in &after[..2] {
        assert_ne!(l["end"], "held", "{l}");
        assert!(l["endedAt"].is_string(), "{l}");
    }
    assert_eq!(after[2]["end"], "released");

    // Errors: a missing database, a bad flag; nothing is created.
    let missing = dir.path().join("nope.db");
    let out = leases(&missing, &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    assert!(!missing.exists());
    let out = leases(&db, &["--limit", "0"]);
    assert!(!out.status.success());
}

#[test]
fn a_database_without_lease_records_lists_none() {
    // A database made by this broker before any lease: the table exists
    // (made at open) but is empty; the view says so.
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("host.db");
    let (mut child, c) = serve_stdio(&db);
    drop(c);
    wait_exit(&mut child);
    assert_eq!(
        ok_stdout(&leases(&db, &[])).lines().last(),
        Some("(no leases)")
    );
    assert!(json_lines(&leases(&db, &["--json"])).is_empty());
}
