//! When a start reads every page (docs/protocol.md §10), against
//! the real binary: after a clean exit it checks the header, schema and
//! lock only; after a kill -9 it reads every page; a page damaged after a
//! clean exit is found by `a2a-broker check` (also beside a running
//! broker) and by the first read that touches it, and the broker then
//! refuses writes with a clear error.

use a2a_testkit::{json, pair, tid, Broker, TIMEOUT};
use std::path::Path;
use std::process::Command;

/// The `-v` line a start logs about its check.
const SKIPPED: &str = "pages not read";
const READ: &str = "every page read";

fn check_line(b: &mut Broker) -> String {
    let lines = b.stderr_now();
    lines
        .iter()
        .find(|l| l.contains("database check"))
        .unwrap_or_else(|| panic!("no check line in {lines:?}"))
        .clone()
}

/// `a2a-broker check --db PATH`: exit success, stdout, stderr.
fn check(db: &Path) -> (bool, String, String) {
    let out = Command::new(a2a_testkit::broker_bin())
        .args(["check", "--db"])
        .arg(db)
        .output()
        .expect("run a2a-broker check");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A database with `n` tasks, then a clean exit; the first task's id.
fn filled(db: &Path, n: usize) -> String {
    let mut b = Broker::open(db);
    let (req, wrk) = pair(&mut b);
    let first = tid(&b.create_task(&req, &wrk, &format!("job 0 {}", "x".repeat(300))));
    for i in 1..n {
        b.create_task(&req, &wrk, &format!("job {i} {}", "x".repeat(300)));
    }
    assert!(b.close_and_wait(TIMEOUT).success());
    first
}

#[test]
fn a_clean_exit_skips_the_page_read_and_a_kill_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let first = filled(&db, 5);

    // Clean exit, then restart: header, schema, lock; no page read.
    let mut b = Broker::start(&db, &["-v"]);
    let line = check_line(&mut b);
    assert!(line.contains(SKIPPED), "{line}");
    b.handshake();
    // `check` beside the running broker, read-only: it sees the broker's
    // committed state and changes nothing the broker notices.
    let (ok, out, err) = check(&db);
    assert!(ok, "check beside a running broker: {out} {err}");
    assert!(out.contains("ok"), "{out}");
    let (req, wrk) = pair(&mut b);
    assert_eq!(tid(&b.get_task(&req, &first)), first);
    b.create_task(&req, &wrk, "after the check");

    // Kill -9: no clean-exit record, a non-empty log: every page is read.
    b.kill();
    let mut b = Broker::start(&db, &["-v"]);
    let line = check_line(&mut b);
    assert!(line.contains(READ), "{line}");
    assert!(line.contains("did not end cleanly"), "{line}");
    b.handshake();
    let (req, _) = pair(&mut b);
    assert_eq!(tid(&b.get_task(&req, &first)), first);
    assert!(b.close_and_wait(TIMEOUT).success());

    // And clean again after that.
    let mut b = Broker::start(&db, &["-v"]);
    let line = check_line(&mut b);
    assert!(line.contains(SKIPPED), "{line}");
    assert!(b.close_and_wait(TIMEOUT).success());
}

/// A kill right after the start, before any call: the start's own first
/// write removed the record, so the next start still reads every page.
#[test]
fn a_kill_before_any_call_still_reads_every_page_next_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    filled(&db, 1);
    let mut b = Broker::start(&db, &[]);
    b.kill();
    let mut b = Broker::start(&db, &["-v"]);
    let line = check_line(&mut b);
    assert!(line.contains(READ), "{line}");
    assert!(b.close_and_wait(TIMEOUT).success());
}

#[test]
fn a_page_damaged_after_a_clean_exit_is_found_by_check_and_by_the_first_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    // Enough messages that `a2a_messages` has interior pages: damaging its
    // root page breaks every read of a message, and nothing else.
    let first = filled(&db, 60);
    let (page_size, root): (i64, i64) = {
        let c = rusqlite::Connection::open(&db).unwrap();
        let size = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
        let root = c
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'a2a_messages'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        (size, root)
    };
    assert!(root > 1);
    let mut bytes = std::fs::read(&db).unwrap();
    let at = ((root - 1) * page_size) as usize;
    bytes[at..at + page_size as usize].fill(0xa5);
    std::fs::write(&db, &bytes).unwrap();

    let (ok, out, err) = check(&db);
    assert!(!ok, "check passed a damaged database: {out}");
    assert!(err.contains("damaged"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");

    // The start reads no page of it: it starts.
    let mut b = Broker::start(&db, &["-v"]);
    assert!(check_line(&mut b).contains(SKIPPED));
    b.handshake();
    let (req, wrk) = pair(&mut b);
    // The first read of a message meets the damage: a clear error...
    let e = b.err("a2a.tasks.get", json!({"token": req.token, "id": first}));
    assert_eq!(e["code"], -32603, "{e}");
    let reason = e["data"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("malformed"), "{e}");
    // ...and from then on every write is refused, however far from the
    // damaged page it would land.
    let e = b.err(
        "a2a.agents.register",
        json!({"contextId": "later", "card": {"name": "n", "kind": "subagent"}, "delivery": "push"}),
    );
    assert_eq!(e["code"], -32603, "{e}");
    assert_eq!(e["data"]["reason"], "database damaged", "{e}");
    let e = b.err(
        "a2a.message.send",
        json!({"token": req.token, "message": a2a_testkit::text_msg_to("more", &wrk.id)}),
    );
    assert_eq!(e["code"], -32603, "{e}");
    let lines = b.stderr_now();
    assert!(
        lines.iter().any(|l| l.contains("writes are refused")),
        "{lines:?}"
    );
}
