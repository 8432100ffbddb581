//! Checking the database: what every start checks, when a start also reads
//! every page, `a2a-broker check`, and what the broker does when a read
//! finds a damaged page while it runs (docs/protocol.md §10).
//!
//! Every start checks the header (SQLite reads it to open the file), the
//! schema version and the schema itself (the broker's tables are there),
//! and holds the one-broker lock (`store::lock`). Reading every page
//! (`PRAGMA quick_check`: 2.2 s of a 2.4 s start at 1,000,000 tasks) is
//! done only when the file may hold a half-finished write or is about to
//! be migrated, i.e. when
//!
//! - the write-ahead log is not empty (a clean exit empties it), or
//! - the database has no clean-exit record ([`CLEAN_EXIT_TABLE`]: a clean
//!   exit writes it last, before emptying the log; a start removes it
//!   before its first write, so a broker killed at any point leaves none),
//!   or
//! - the schema version is not the broker's (a migration follows).
//!
//! A clean exit leaves a file SQLite itself wrote and synced whole: what
//! the full read would find there is what the disk did to the file since,
//! which no check at start-up can rule out for the time after it either.
//! That case is caught where it shows: `a2a-broker check --db PATH` reads
//! every page on demand (read-only, beside a running broker too), and the
//! first statement that meets a damaged page marks the database damaged
//! ([`note`]): that read fails, and from then on every commit is refused
//! (`FileGuard::refuse_commit`) with `data.reason` [`DAMAGED_REASON`](crate::core::error::DAMAGED_REASON), so
//! no write lands in a file whose pages are known bad.

use super::OpenError;
use crate::core::CoreError;
use rusqlite::Connection;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The clean-exit record: one row, present only while no broker runs on
/// the database and the last one stopped cleanly. Created at every open
/// (a no-op once it exists), beside schema 12's tables, as
/// `store::START_INDEXES` are; a database from an earlier broker has none,
/// so its first start reads every page.
pub const CLEAN_EXIT_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS a2a_clean_exit (id INTEGER PRIMARY KEY CHECK (id = 0), at TEXT NOT NULL);";

/// Run by a start before its first write (after the checks): from now on a
/// kill leaves no record.
pub const MARK_RUNNING: &str = "DELETE FROM a2a_clean_exit;";

/// Written by a clean exit, before the log is emptied.
pub fn record_clean_exit(c: &Connection, at: &str) -> rusqlite::Result<()> {
    c.execute(
        "INSERT OR REPLACE INTO a2a_clean_exit (id, at) VALUES (0, ?1)",
        [at],
    )?;
    Ok(())
}

/// When the last clean exit was recorded; `None` if there is no record
/// (or no table: a database no broker of this rule has closed).
pub fn clean_exit_at(c: &Connection) -> Option<String> {
    c.query_row("SELECT at FROM a2a_clean_exit WHERE id = 0", [], |r| {
        r.get(0)
    })
    .ok()
}

/// The schema check every start makes: reading the schema parses every
/// entry of `sqlite_master`, and each of the broker's tables is there.
/// Returns what is missing or unreadable.
pub fn schema_problem(c: &Connection) -> Result<Option<String>, rusqlite::Error> {
    let mut st = c.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
    let names: Vec<String> = st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    let missing: Vec<&str> = a2a_proto::SCHEMA_TABLES
        .iter()
        .copied()
        .filter(|t| !names.iter().any(|n| n == t))
        .collect();
    Ok((!missing.is_empty()).then(|| format!("schema 12 without table {}", missing.join(", "))))
}

/// Why a start reads every page, if it does.
pub fn full_check_reason(
    wal_len: u64,
    version: i64,
    clean_exit: Option<&str>,
) -> Option<&'static str> {
    if version != a2a_proto::SCHEMA_VERSION {
        Some("the database is to be migrated")
    } else if wal_len > 0 {
        Some("the write-ahead log is not empty: the last run did not end cleanly")
    } else if clean_exit.is_none() {
        Some("no clean-exit record: the last run did not end cleanly")
    } else {
        None
    }
}

/// What a start's check did, for its log line.
#[derive(Debug, Clone)]
pub struct StartCheck {
    /// Why every page was read; `None`: header, schema and lock only.
    pub full: Option<&'static str>,
    pub took: Duration,
}

impl StartCheck {
    pub fn log(&self, path: &str) {
        let ms = self.took.as_secs_f64() * 1e3;
        match self.full {
            Some(why) => tracing::info!(
                db = path,
                took_ms = format!("{ms:.1}"),
                "database check: every page read ({why})"
            ),
            None => tracing::info!(
                db = path,
                took_ms = format!("{ms:.1}"),
                "database check: header, schema and lock (clean exit recorded, log empty); pages not read"
            ),
        }
    }
}

/// Reads every page (`PRAGMA quick_check`, or `integrity_check` with
/// `thorough`: also every index against its table). `Ok(())` or the
/// problems on one line.
pub fn read_every_page(c: &Connection, thorough: bool) -> Result<(), String> {
    let pragma = if thorough {
        "PRAGMA integrity_check(100)"
    } else {
        "PRAGMA quick_check(1)"
    };
    let verdict: String = c
        .prepare(pragma)
        .and_then(|mut st| {
            st.query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map(|rows| rows.join("\n"))
        .map_err(|e| e.to_string())?;
    if verdict == "ok" {
        return Ok(());
    }
    // One line: SQLite's report spans several ("*** in database main ***").
    let detail: Vec<&str> = verdict.lines().filter(|l| !l.starts_with("***")).collect();
    Err(detail.join("; "))
}

/// `a2a-broker check --db PATH`: the header, the schema and every page,
/// read-only (a running broker's database too: this reads its committed
/// state, log included, and takes no lock of the broker's). `Ok` with a
/// line to print, or the problem.
pub fn check_command(path: &std::path::Path) -> Result<String, OpenError> {
    let p = path.display().to_string();
    let began = Instant::now();
    if !path.is_file() {
        return Err(OpenError::NotAFile { path: p });
    }
    let corrupt = |detail: String| OpenError::Corrupt {
        path: p.clone(),
        detail,
    };
    let sql = |e: rusqlite::Error| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt) => {
            corrupt(e.to_string())
        }
        _ => OpenError::Sqlite {
            path: p.clone(),
            source: e,
        },
    };
    let c = super::open_reader(path).map_err(sql)?;
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql)?;
    super::migrate::check_version(&p, v)?;
    if v == a2a_proto::SCHEMA_VERSION {
        if let Some(problem) = schema_problem(&c).map_err(sql)? {
            return Err(corrupt(problem));
        }
    }
    read_every_page(&c, true).map_err(corrupt)?;
    let pages: i64 = c
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .map_err(sql)?;
    Ok(format!(
        "database {p}: ok (schema {v}, {pages} pages read, every index checked, {:.0} ms)",
        began.elapsed().as_secs_f64() * 1e3
    ))
}

/// The first damage any connection of this process met (one broker, one
/// database per process).
static DAMAGED: OnceLock<String> = OnceLock::new();

/// Notes a failed SQLite call: one that found a damaged page (or a file
/// that is no database any more) marks the database damaged for the rest
/// of this process's life; commits are refused from then on.
pub fn note(e: &rusqlite::Error) {
    if matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    ) && DAMAGED.set(e.to_string()).is_ok()
    {
        tracing::error!(
            error = %e,
            "a read found the database damaged: writes are refused from now on; stop the broker and run `a2a-broker check --db PATH`"
        );
    }
}

/// What damage was found, if any.
pub fn damaged() -> Option<&'static str> {
    DAMAGED.get().map(String::as_str)
}

/// A failed SQLite call as the core's error, noted first: a damaged page
/// stops every later write. Here rather than in `core::error`, so that
/// the core never reaches up into the store.
impl From<rusqlite::Error> for CoreError {
    fn from(e: rusqlite::Error) -> Self {
        note(&e);
        CoreError::Internal(format!("database: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_check_runs_only_when_the_file_may_hold_a_half_finished_write() {
        let v = a2a_proto::SCHEMA_VERSION;
        let at = Some("2026-12-01T14:00:00.000Z");
        assert_eq!(full_check_reason(0, v, at), None);
        assert!(full_check_reason(32, v, at).unwrap().contains("log"));
        assert!(full_check_reason(0, v, None)
            .unwrap()
            .contains("clean-exit"));
        assert!(full_check_reason(0, 11, at).unwrap().contains("migrated"));
        assert!(full_check_reason(0, 0, None).unwrap().contains("migrated"));
    }

    #[test]
    fn the_record_is_there_only_after_a_clean_exit() {
        let c = Connection::open_in_memory().unwrap();
        assert_eq!(clean_exit_at(&c), None, "no table: no record");
        c.execute_batch(CLEAN_EXIT_TABLE).unwrap();
        assert_eq!(clean_exit_at(&c), None);
        record_clean_exit(&c, "t1").unwrap();
        record_clean_exit(&c, "t2").unwrap();
        assert_eq!(clean_exit_at(&c).as_deref(), Some("t2"));
        c.execute_batch(MARK_RUNNING).unwrap();
        assert_eq!(clean_exit_at(&c), None);
    }

    #[test]
    fn a_missing_table_is_a_schema_problem() {
        let mut c = Connection::open_in_memory().unwrap();
        super::super::migrate::migrate(&mut c, "mem").unwrap();
        assert_eq!(schema_problem(&c).unwrap(), None);
        c.execute_batch("DROP TABLE a2a_task_log").unwrap();
        let p = schema_problem(&c).unwrap().unwrap();
        assert!(p.contains("a2a_task_log"), "{p}");
    }
}
