//! Schema: a fresh database and a host-core v11 database are migrated to
//! `user_version` 12; a newer or unreadable database is refused with one
//! stderr line and left untouched.

use a2a_testkit::*;

fn assert_a2a_tables(path: &std::path::Path) {
    let tables = table_names(path);
    for t in a2a_proto::SCHEMA_TABLES {
        assert!(
            tables.iter().any(|n| n == t),
            "table {t} missing: {tables:?}"
        );
    }
}

fn assert_one_line_refusal(status: std::process::ExitStatus, stderr: &[String]) {
    assert!(
        !status.success(),
        "broker started on a refused database: {status:?}"
    );
    let lines: Vec<_> = stderr.iter().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "expected one clear stderr line, got {stderr:?}"
    );
}

#[test]
fn fresh_database_is_migrated_to_12() {
    let db = TestDb::new();
    let mut b = Broker::open(&db.path);
    let (req, wrk) = pair(&mut b);
    b.create_task(&req, &wrk, "x");
    assert!(b.close_stdin_and_wait(TIMEOUT).success());
    assert_eq!(user_version(&db.path), 12);
    assert_a2a_tables(&db.path);
    // a2a_messages is keyed by (task_id, message_id).
    let c = open_db(&db.path);
    let mut st = c
        .prepare("SELECT name, pk FROM pragma_table_info('a2a_messages') WHERE pk > 0 ORDER BY pk")
        .unwrap();
    let pk: Vec<String> = st
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(pk, ["task_id", "message_id"]);
    // Reopening a v12 database works and keeps it at 12.
    let mut b = Broker::open(&db.path);
    let (req, _) = pair(&mut b);
    assert_eq!(listed_task_ids(&mut b, &req).len(), 1);
    assert!(b.close_stdin_and_wait(TIMEOUT).success());
    assert_eq!(user_version(&db.path), 12);
}

#[test]
fn host_core_v11_database_is_migrated_keeping_its_tables() {
    let db = TestDb::new();
    {
        let c = open_db(&db.path);
        c.execute_batch(
            "CREATE TABLE host_sessions (id TEXT PRIMARY KEY, title TEXT NOT NULL, created_at INTEGER);
             INSERT INTO host_sessions VALUES ('s1', 'first session', 1700000000), ('s2', 'second', 1700000100);
             CREATE TABLE host_settings (key TEXT PRIMARY KEY, value TEXT);
             INSERT INTO host_settings VALUES ('theme', 'dark'), ('locale', 'en');
             CREATE INDEX host_sessions_created ON host_sessions(created_at);
             PRAGMA user_version = 11;",
        )
        .unwrap();
    }
    let mut b = Broker::open(&db.path);
    let (req, wrk) = pair(&mut b);
    let t = b.create_task(&req, &wrk, "x");
    assert!(b.close_stdin_and_wait(TIMEOUT).success());
    assert_eq!(user_version(&db.path), 12);
    assert_a2a_tables(&db.path);
    let c = open_db(&db.path);
    let sessions: Vec<(String, String, i64)> = c
        .prepare("SELECT id, title, created_at FROM host_sessions ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        sessions,
        [
            ("s1".to_string(), "first session".to_string(), 1_700_000_000),
            ("s2".to_string(), "second".to_string(), 1_700_000_100)
        ]
    );
    let settings: Vec<(String, String)> =
        a2a_testkit::db::pairs(&c, "SELECT key, value FROM host_settings ORDER BY key");
    assert_eq!(
        settings,
        [
            ("locale".to_string(), "en".to_string()),
            ("theme".to_string(), "dark".to_string())
        ]
    );
    let idx: i64 = c
        .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'host_sessions_created'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(idx, 1);
    let n: i64 = c
        .query_row(
            "SELECT count(*) FROM a2a_tasks WHERE id = ?1",
            [t["id"].as_str().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn newer_schema_is_refused_and_the_file_left_untouched() {
    let db = TestDb::new();
    {
        let c = open_db(&db.path);
        c.execute_batch(
            "CREATE TABLE future (x INTEGER); INSERT INTO future VALUES (42);
             PRAGMA user_version = 13;",
        )
        .unwrap();
    }
    let before = std::fs::read(&db.path).unwrap();
    let (status, stderr) = Broker::expect_start_failure(&db.path, &[]);
    assert_one_line_refusal(status, &stderr);
    let after = std::fs::read(&db.path).unwrap();
    assert!(before == after, "the refused database file was modified");
    assert_eq!(user_version(&db.path), 13);
}

#[test]
fn unreadable_database_is_refused_with_one_line() {
    let db = TestDb::new();
    std::fs::write(
        &db.path,
        b"this is not a sqlite database, not at all. ".repeat(200),
    )
    .unwrap();
    let before = std::fs::read(&db.path).unwrap();
    let (status, stderr) = Broker::expect_start_failure(&db.path, &[]);
    assert_one_line_refusal(status, &stderr);
    assert!(
        std::fs::read(&db.path).unwrap() == before,
        "the unreadable file was modified"
    );
}
