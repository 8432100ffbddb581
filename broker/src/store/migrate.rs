//! Schema migrations: numbered SQL files under `migrations/`, embedded at
//! build time and applied in one transaction with `PRAGMA user_version`.
//!
//! A fresh database (0) and a host-core database at 11 both reach 12 by the
//! same `migrate_v11_to_v12` (the broker owns none of host-core's tables of
//! versions 1 to 11, so there is nothing else to create). Anything newer
//! than 12 is refused before a byte is written.

use super::OpenError;
use a2a_proto::SCHEMA_VERSION;
use rusqlite::{Connection, TransactionBehavior};

/// One migration step.
pub struct Migration {
    /// Versions it applies to.
    pub from: &'static [i64],
    pub to: i64,
    pub sql: &'static str,
}

/// Every migration, in order.
pub const MIGRATIONS: &[Migration] = &[
    // migrate_v11_to_v12
    Migration {
        from: &[0, 11],
        to: 12,
        sql: include_str!("../../../migrations/0012_a2a.sql"),
    },
];

/// The ext tables (numbered apart from the schema's own migrations):
/// created at every open with `IF NOT EXISTS`, without changing
/// `user_version` (docs/protocol.md §10 fixes it at 12; an older broker
/// opens the file and ignores them).
pub const EXT_TABLES: &[&str] = &[include_str!("../../../migrations/ext_0001_leases.sql")];

/// Creates the ext tables a database lacks.
pub fn ext_tables(conn: &Connection) -> rusqlite::Result<()> {
    EXT_TABLES
        .iter()
        .try_for_each(|sql| conn.execute_batch(sql))
}

/// Refuses versions this broker cannot open.
pub fn check_version(path: &str, v: i64) -> Result<(), OpenError> {
    if v > SCHEMA_VERSION {
        return Err(OpenError::TooNew {
            path: path.into(),
            found: v,
            supported: SCHEMA_VERSION,
        });
    }
    if v == SCHEMA_VERSION || MIGRATIONS.iter().any(|m| m.from.contains(&v)) {
        return Ok(());
    }
    Err(OpenError::Unsupported {
        path: path.into(),
        found: v,
    })
}

/// Brings the database to `SCHEMA_VERSION`.
pub fn migrate(conn: &mut Connection, path: &str) -> Result<(), OpenError> {
    let sql = |source| OpenError::Sqlite {
        path: path.into(),
        source,
    };
    let current: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql)?;
    if current == SCHEMA_VERSION {
        // Nothing to do, so nothing written: not even the version again.
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    let mut v: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql)?;
    check_version(path, v)?;
    for m in MIGRATIONS {
        if m.from.contains(&v) {
            tx.execute_batch(m.sql).map_err(sql)?;
            v = m.to;
        }
    }
    tx.execute_batch(&format!("PRAGMA user_version = {v};"))
        .map_err(sql)?;
    tx.commit().map_err(sql)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(c: &Connection) -> Vec<String> {
        let mut st = c
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn fresh_database_reaches_12_and_reopens() {
        let mut c = Connection::open_in_memory().unwrap();
        migrate(&mut c, "mem").unwrap();
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, 12);
        assert_eq!(
            tables(&c),
            [
                "a2a_agents",
                "a2a_artifacts",
                "a2a_messages",
                "a2a_push_configs",
                "a2a_task_log",
                "a2a_tasks"
            ]
        );
        migrate(&mut c, "mem").unwrap();
    }

    #[test]
    fn ext_tables_leave_the_version_alone_and_run_twice() {
        let mut c = Connection::open_in_memory().unwrap();
        migrate(&mut c, "mem").unwrap();
        ext_tables(&c).unwrap();
        ext_tables(&c).unwrap();
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, 12);
        assert!(tables(&c).contains(&"a2a_ext_leases".to_string()));
    }

    #[test]
    fn v11_keeps_its_tables() {
        let mut c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE plans (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO plans VALUES (1, 'x'); PRAGMA user_version = 11;")
            .unwrap();
        migrate(&mut c, "mem").unwrap();
        let body: String = c
            .query_row("SELECT body FROM plans WHERE id = 1", [], |r| r.get(0))
            .unwrap();
        assert_eq!(body, "x");
        assert!(tables(&c).contains(&"a2a_tasks".to_string()));
    }

    #[test]
    fn newer_and_odd_versions_are_refused() {
        assert!(matches!(
            check_version("p", 13),
            Err(OpenError::TooNew { found: 13, .. })
        ));
        assert!(matches!(
            check_version("p", 5),
            Err(OpenError::Unsupported { found: 5, .. })
        ));
        assert!(check_version("p", 0).is_ok());
        assert!(check_version("p", 11).is_ok());
        assert!(check_version("p", 12).is_ok());
    }
}
