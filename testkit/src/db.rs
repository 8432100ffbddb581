//! SQLite helpers for durability and migration tests: open a broker's
//! database file beside (or after) the broker, read its schema version and
//! tables. Behind the `db` feature, so kit users that never look inside a
//! database do not link SQLite.

use std::path::Path;

/// Opens a database file for inspection.
pub fn open_db(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path)
        .unwrap_or_else(|e| panic!("open {} with rusqlite: {e}", path.display()))
}

/// `PRAGMA user_version` of a database file.
pub fn user_version(path: &Path) -> i64 {
    open_db(path)
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("user_version")
}

/// Names of the tables in a database file, sorted.
pub fn table_names(path: &Path) -> Vec<String> {
    let c = open_db(path);
    let mut st = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .expect("prepare");
    let rows = st.query_map([], |r| r.get::<_, String>(0)).expect("query");
    rows.map(|r| r.expect("row")).collect()
}

/// The rows of a two-column query, as pairs (the test states the types).
pub fn pairs<A, B>(c: &rusqlite::Connection, sql: &str) -> Vec<(A, B)>
where
    A: rusqlite::types::FromSql,
    B: rusqlite::types::FromSql,
{
    let mut st = c
        .prepare(sql)
        .unwrap_or_else(|e| panic!("prepare {sql}: {e}"));
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap_or_else(|e| panic!("query {sql}: {e}"));
    rows.map(|r| r.expect("row")).collect()
}
