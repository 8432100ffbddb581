//! The audit view against the real binary: a database made by driving
//! `a2a-broker serve` over stdio, then read with `tasks list` (JSON, filters,
//! paging) and `tasks show` (id prefixes, counts spelled right, errors).

#[path = "support/audit_view.rs"]
mod audit_view;

use a2a_testkit::TIMEOUT;
use audit_view::{broker, json_lines, ok_stdout, serve_stdio};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Instant;

/// The tasks the database holds, as `(id, requester, worker, state)`.
struct Made {
    tasks: Vec<(String, &'static str, &'static str, &'static str)>,
}

/// Five tasks: a→b three times (one completed, one working), c→b once, b→a
/// once; then the broker is stopped by closing its stdin.
fn make_db(db: &Path) -> Made {
    let (mut child, mut c) = serve_stdio(db);
    let (_, ta) = c.register("c1", "a");
    let (_, tb) = c.register("c1", "b");
    let (_, tc) = c.register("c2", "c");
    let mut tasks = Vec::new();
    for _ in 0..3 {
        tasks.push((c.task(&ta, "b"), "a", "b", "submitted"));
    }
    tasks.push((c.task(&tc, "b"), "c", "b", "submitted"));
    tasks.push((c.task(&tb, "a"), "b", "a", "submitted"));
    c.ok(
        "a2a.tasks.status",
        json!({"token": tb, "id": tasks[0].0, "state": "working"}),
    );
    c.ok(
        "a2a.tasks.status",
        json!({"token": tb, "id": tasks[0].0, "state": "completed"}),
    );
    tasks[0].3 = "completed";
    c.ok(
        "a2a.tasks.status",
        json!({"token": tb, "id": tasks[1].0, "state": "working"}),
    );
    tasks[1].3 = "working";
    drop(c);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(st) = child.try_wait().expect("wait for the broker") {
            assert!(st.success(), "the broker exited with {st}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the broker did not exit within {TIMEOUT:?} of stdin closing");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Made { tasks }
}

fn run(db: &Path, args: &[&str]) -> Output {
    let mut cmd = broker();
    cmd.arg("tasks").arg(args[0]).arg("--db").arg(db);
    cmd.args(&args[1..]);
    cmd.stdin(Stdio::null()).output().expect("run tasks")
}

fn ids(v: &[Value]) -> Vec<String> {
    v.iter()
        .map(|t| t["id"].as_str().expect("id").to_owned())
        .collect()
}

/// The cursor on the last stderr line, if any.
fn next_cursor(out: &Output) -> Option<String> {
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines()
        .last()
        .and_then(|l| l.strip_prefix("next page: --before "))
        .map(str::to_owned)
}

#[test]
fn list_json_filters_and_paging() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let made = make_db(&db);

    let all = json_lines(&run(&db, &["list", "--json"]));
    assert_eq!(all.len(), made.tasks.len(), "{all:?}");
    for (id, req, wrk, state) in &made.tasks {
        let t = all
            .iter()
            .find(|t| t["id"] == id.as_str())
            .unwrap_or_else(|| panic!("{id} listed: {all:?}"));
        assert_eq!(t["requester"], *req, "{t}");
        assert_eq!(t["worker"], *wrk, "{t}");
        assert_eq!(t["state"], *state, "{t}");
        let want_ctx = if *req == "c" { "c2" } else { "c1" };
        assert_eq!(t["contextId"], want_ctx, "{t}");
        assert!(t["version"].as_i64().is_some(), "{t}");
        assert!(t["seq"].as_i64().is_some(), "{t}");
        assert!(t["createdAt"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(t["updatedAt"].as_str().is_some_and(|s| !s.is_empty()));
    }
    // Newest first.
    let seqs: Vec<i64> = all.iter().map(|t| t["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] > w[1]), "{seqs:?}");
    assert_eq!(all[0]["id"], made.tasks[4].0.as_str());

    let done = json_lines(&run(&db, &["list", "--json", "--state", "completed"]));
    assert_eq!(ids(&done), vec![made.tasks[0].0.clone()]);
    let working = json_lines(&run(&db, &["list", "--json", "--state", "working"]));
    assert_eq!(ids(&working), vec![made.tasks[1].0.clone()]);
    let none = json_lines(&run(&db, &["list", "--json", "--state", "failed"]));
    assert!(none.is_empty(), "{none:?}");

    let bad = run(&db, &["list", "--state", "done"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("unknown state \"done\"") && err.contains("input-required"),
        "{err}"
    );

    // An agent as requester or as worker.
    let of_c: HashSet<String> = ids(&json_lines(&run(&db, &["list", "--json", "--agent", "c"])))
        .into_iter()
        .collect();
    assert_eq!(of_c, HashSet::from([made.tasks[3].0.clone()]));
    let of_a: HashSet<String> = ids(&json_lines(&run(&db, &["list", "--json", "--agent", "a"])))
        .into_iter()
        .collect();
    let want_a: HashSet<String> = [0, 1, 2, 4]
        .iter()
        .map(|&i| made.tasks[i].0.clone())
        .collect();
    assert_eq!(of_a, want_a);
    let of_b_working = json_lines(&run(
        &db,
        &["list", "--json", "--agent", "b", "--state", "working"],
    ));
    assert_eq!(ids(&of_b_working), vec![made.tasks[1].0.clone()]);

    // Pages of two: every task exactly once, the last page without a cursor.
    let mut seen: Vec<String> = Vec::new();
    let mut before: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = vec!["list", "--json", "--limit", "2"];
        if let Some(b) = before.as_deref() {
            args.extend(["--before", b]);
        }
        let out = run(&db, &args);
        let page = json_lines(&out);
        assert!(page.len() <= 2 && !page.is_empty(), "{page:?}");
        seen.extend(ids(&page));
        pages += 1;
        assert!(pages <= made.tasks.len(), "paging does not end");
        match next_cursor(&out) {
            Some(c) => before = Some(c),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ids(&all), "pages cover the listing in order, once");

    // A page exactly as long as what is left has no next page.
    let out = run(&db, &["list", "--json", "--limit", "5"]);
    assert_eq!(json_lines(&out).len(), 5);
    assert_eq!(next_cursor(&out), None);

    // The table pages too, with the cursor on stderr.
    let out = run(&db, &["list", "--limit", "1"]);
    let text = ok_stdout(&out);
    assert_eq!(text.lines().count(), 2, "header and one row: {text}");
    assert!(text.contains(&made.tasks[4].0), "{text}");
    assert!(next_cursor(&out).is_some());

    let zero = run(&db, &["list", "--limit", "0"]);
    assert!(!zero.status.success());
}

/// The shortest prefix of `id` no other id starts with.
fn unique_prefix<'a>(id: &'a str, all: &[String]) -> &'a str {
    (1..=id.len())
        .map(|n| &id[..n])
        .find(|p| all.iter().filter(|o| o.starts_with(p)).count() == 1)
        .expect("ids are distinct")
}

#[test]
fn show_by_prefix_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let made = make_db(&db);
    let all: Vec<String> = made.tasks.iter().map(|t| t.0.clone()).collect();

    // A unique prefix (at least four characters) shows that task.
    let id = &made.tasks[0].0;
    let p = unique_prefix(id, &all);
    let p = if p.len() < 4 { &id[..4] } else { p };
    let text = ok_stdout(&run(&db, &["show", p]));
    assert!(text.starts_with(&format!("task {id}\n")), "{text}");
    // One message; submitted, working, completed.
    assert!(text.contains("history (1 message):"), "{text}");
    assert!(text.contains("log (3 transitions):"), "{text}");
    assert!(!text.contains("artifacts"), "{text}");

    let text = ok_stdout(&run(&db, &["show", &made.tasks[2].0]));
    assert!(text.contains("history (1 message):"), "{text}");
    assert!(text.contains("log (1 transition):"), "{text}");

    // A prefix several ids share (uuid v7 ids start with the time) names
    // its candidates.
    let shared = all
        .iter()
        .map(|i| &i[..4])
        .find(|p| all.iter().filter(|o| o.starts_with(p)).count() > 1)
        .expect("ids made within a second share their first characters");
    let out = run(&db, &["show", shared]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("ambiguous"), "{err}");
    for cand in all.iter().filter(|o| o.starts_with(shared)) {
        assert!(err.contains(cand.as_str()), "{cand} named: {err}");
    }

    // Too short, even where it would be unique: refused.
    let out = run(&db, &["show", &id[..3]]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no task") && err.contains("at least 4"),
        "{err}"
    );

    // Nothing starts with it.
    let out = run(&db, &["show", "zzzz"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no task zzzz"), "{err}");
    // Wildcards mean themselves.
    let out = run(&db, &["show", "%%%%"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no task"));
}

#[test]
fn show_by_unique_tail() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let made = make_db(&db);
    let all: Vec<String> = made.tasks.iter().map(|t| t.0.clone()).collect();

    // UUIDv7 ids made together share their first characters but not their
    // last: a short tail names one task.
    let id = &all[0];
    let tail = &id[id.len() - 6..];
    assert_eq!(all.iter().filter(|o| o.ends_with(tail)).count(), 1);
    let text = ok_stdout(&run(&db, &["show", tail]));
    assert!(text.starts_with(&format!("task {id}\n")), "{text}");

    // Too short a tail is refused like too short a prefix.
    let out = run(&db, &["show", &id[id.len() - 3..]]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("prefix or tail") && err.contains("at least 4"),
        "{err}"
    );
}
