//! The database is the broker's alone (docs/protocol.md §10 Durability), against the real
//! binary over stdio: one broker per file (the read-only audit still works
//! beside it), another user's file refused and loose permission bits
//! removed, refused files left byte-identical, clear errors for bad paths,
//! a file removed under a running broker fails every later write and stops
//! it, a clean exit checkpoints into the file, and a failed start leaves
//! nothing behind.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

const TIMEOUT: Duration = Duration::from_secs(30);
const REMOVED: &str = "database file removed";

fn bin() -> Command {
    Command::new(a2a_testkit::broker_bin())
}

/// A running `a2a-broker serve`, driven over stdio NDJSON.
struct Broker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    stderr: Receiver<String>,
    /// Stderr lines printed before the ready line.
    before_ready: Vec<String>,
    next_id: u64,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(db: &Path) -> Broker {
    let mut child = bin()
        .args(["serve", "--db"])
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn broker");
    let (tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let v: Value = serde_json::from_str(&line).expect("stdout is NDJSON");
            if tx.send(v).is_err() {
                return;
            }
        }
    });
    let (etx, stderr) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if etx.send(line).is_err() {
                return;
            }
        }
    });
    let mut before_ready = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match stderr.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) if l.contains("\"ready\":true") => break,
            Ok(l) => before_ready.push(l),
            Err(e) => panic!("broker did not start ({e:?}): {before_ready:?}"),
        }
    }
    let stdin = child.stdin.take();
    Broker {
        child,
        stdin,
        lines,
        stderr,
        before_ready,
        next_id: 0,
    }
}

impl Broker {
    fn write(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// The next line on stdout, `None` once stdout ends.
    fn next_line(&self) -> Option<Value> {
        match self.lines.recv_timeout(TIMEOUT) {
            Ok(v) => Some(v),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!("no line from the broker in {TIMEOUT:?}"),
        }
    }

    /// One call and its response (events in between are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write(&format!("{line}\n"));
        loop {
            let v = self.next_line().expect("the broker answers");
            if v["id"] == id {
                return v;
            }
        }
    }

    fn ok(&mut self, method: &str, params: Value) -> Value {
        let v = self.call(method, params);
        assert!(v.get("result").is_some(), "{method} failed: {v}");
        v["result"].clone()
    }

    /// Handshake, a worker and a requester: the requester's token.
    fn setup(&mut self) -> String {
        self.ok("app.handshake", json!({"protocolVersion": 10}));
        self.ok(
            "a2a.agents.register",
            json!({"contextId": "w", "card": {"name": "worker"}}),
        );
        self.ok(
            "a2a.agents.register",
            json!({"contextId": "c1", "card": {"name": "req"}}),
        )["token"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// An acknowledged task creation: its id.
    fn create_task(&mut self, token: &str, mid: &str) -> String {
        let r = self.ok("a2a.message.send", send_params(token, mid));
        r["task"]["id"].as_str().unwrap().to_owned()
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "the broker did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stderr lines printed after the ready line, until stderr ends.
    fn rest_of_stderr(&self) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(l) = self.stderr.recv_timeout(TIMEOUT) {
            out.push(l);
        }
        out
    }
}

fn send_params(token: &str, mid: &str) -> Value {
    json!({"token": token, "message": {"role": "user", "parts": [{"kind": "text", "text": "job"}],
           "messageId": mid, "to": "worker"}})
}

/// Runs a command that must fail: its status and stderr.
fn run(cmd: &mut Command) -> (ExitStatus, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).unwrap();
        s
    });
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{cmd:?} did not exit in {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (status, reader.join().unwrap())
}

fn serve_refused(db: &Path) -> String {
    let (status, err) = run(bin().args(["serve", "--db"]).arg(db));
    assert!(!status.success(), "the broker started on {db:?}: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    err
}

/// Every file in `dir`: bytes, mtime, mode, owner.
type Snapshot = BTreeMap<String, (Vec<u8>, SystemTime, u32, u32)>;

fn snapshot(dir: &Path) -> Snapshot {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            let bytes = if m.is_file() {
                std::fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            (
                e.file_name().to_string_lossy().into_owned(),
                (bytes, m.modified().unwrap(), m.mode(), m.uid()),
            )
        })
        .collect()
}

fn sibling(db: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", db.display()))
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Makes a database through a broker that exits cleanly; the task's id.
fn make_database(db: &Path) -> String {
    let mut b = spawn(db);
    let token = b.setup();
    let task = b.create_task(&token, "m-1");
    b.close_stdin();
    assert!(b.wait_exit().success());
    task
}

#[test]
fn one_broker_per_database_and_the_audit_works_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("one.db");
    let mut a = spawn(&db);
    let token = a.setup();
    let task = a.create_task(&token, "m-1");

    let err = serve_refused(&db);
    assert!(err.contains(&db.display().to_string()), "{err}");
    assert!(err.contains(&format!("pid {}", a.child.id())), "{err}");

    // The read-only audit runs beside the live broker.
    let out = bin()
        .args(["tasks", "list", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(&task));
    let out = bin()
        .args(["tasks", "show", "--db"])
        .arg(&db)
        .arg(&task)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // And the broker it ran beside still works.
    a.create_task(&token, "m-2");

    // A killed broker's lock file stays behind and blocks nobody.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    assert!(
        sibling(&db, "-lock").exists(),
        "the killed broker left its lock file"
    );
    let mut c = spawn(&db);
    let token = c.setup();
    c.create_task(&token, "m-3");
    c.close_stdin();
    assert!(c.wait_exit().success());
    assert!(!sibling(&db, "-lock").exists(), "a clean exit removes it");
}

#[test]
fn a_database_owned_by_another_user_is_refused_untouched() {
    if !is_root() {
        eprintln!("skipped: changing a file's owner to uid 65534 needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("theirs.db");
    make_database(&db);

    std::os::unix::fs::chown(&db, Some(65534), None).unwrap();
    let before = snapshot(dir.path());
    let err = serve_refused(&db);
    assert!(err.contains("uid 65534"), "{err}");
    assert!(err.contains("theirs.db"), "{err}");
    assert_eq!(
        snapshot(dir.path()),
        before,
        "a refused database is untouched"
    );

    // The same for its write-ahead log.
    std::os::unix::fs::chown(&db, Some(0), None).unwrap();
    let wal = sibling(&db, "-wal");
    std::fs::write(&wal, b"").unwrap();
    std::os::unix::fs::chown(&wal, Some(65534), None).unwrap();
    let before = snapshot(dir.path());
    let err = serve_refused(&db);
    assert!(
        err.contains("theirs.db-wal") && err.contains("uid 65534"),
        "{err}"
    );
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn loose_permission_bits_are_removed_with_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("loose.db");
    let mut b = spawn(&db);
    let token = b.setup();
    let task = b.create_task(&token, "m-1");
    // Killed: its -wal and -shm stay, holding the task.
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    drop(b);
    let files = [db.clone(), sibling(&db, "-wal"), sibling(&db, "-shm")];
    for f in &files {
        assert!(f.exists(), "{f:?} left by the killed broker");
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    let mut b = spawn(&db);
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            b.before_ready
                .iter()
                .any(|l| l.contains(&format!("/{name} "))
                    && l.contains("0644")
                    && l.contains("0600")),
            "a line about {name}: {:?}",
            b.before_ready
        );
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name}");
    }
    let out = bin()
        .args(["tasks", "list", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains(&task));
    b.setup();
    b.close_stdin();
    assert!(b.wait_exit().success());
}

#[test]
fn refused_databases_stay_byte_identical() {
    let root = tempfile::tempdir().unwrap();
    let case = |name: &str| -> PathBuf {
        let d = root.path().join(name);
        std::fs::create_dir(&d).unwrap();
        d.join("a.db")
    };

    // A schema newer than this broker's.
    let too_new = case("too-new");
    {
        let c = rusqlite::Connection::open(&too_new).unwrap();
        c.execute_batch("CREATE TABLE later (x); PRAGMA user_version = 13;")
            .unwrap();
    }
    // Not a database at all.
    let garbage = case("garbage");
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let junk: Vec<u8> = (0..16384)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&garbage, junk).unwrap();
    // A valid header, damaged pages: a host-core v11 database whose
    // table pages were overwritten.
    let damaged = case("damaged");
    {
        let c = rusqlite::Connection::open(&damaged).unwrap();
        c.execute_batch(
            "CREATE TABLE plans (id INTEGER PRIMARY KEY, body TEXT); PRAGMA user_version = 11;",
        )
        .unwrap();
        for i in 0..200 {
            c.execute(
                "INSERT INTO plans (body) VALUES (?1)",
                [format!("{i:0>500}")],
            )
            .unwrap();
        }
    }
    let mut bytes = std::fs::read(&damaged).unwrap();
    assert!(bytes.len() > 8 * 4096, "the table spans pages");
    bytes[2 * 4096..5 * 4096].fill(0xa5);
    std::fs::write(&damaged, bytes).unwrap();

    for (db, expect) in [
        (&too_new, "newer"),
        (&garbage, "damaged"),
        (&damaged, "damaged"),
    ] {
        let dir = db.parent().unwrap();
        let before = snapshot(dir);
        let err = serve_refused(db);
        assert!(err.contains(&db.display().to_string()), "{err}");
        assert!(err.contains(expect), "{db:?}: {err}");
        assert_eq!(snapshot(dir), before, "{db:?} was changed or left company");
    }
}

#[test]
fn a_directory_or_a_missing_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = serve_refused(dir.path());
    assert!(err.contains("is a directory"), "{err}");
    assert!(!err.contains("I/O"), "{err}");

    let missing = dir.path().join("missing");
    let err = serve_refused(&missing.join("a.db"));
    assert!(
        err.contains(&format!("directory {} does not exist", missing.display())),
        "{err}"
    );
    assert!(!missing.exists());
    assert!(snapshot(dir.path()).is_empty(), "nothing created");

    // A write-ahead log without its database: a new database would replay
    // it as its own.
    let db = dir.path().join("lost.db");
    std::fs::write(sibling(&db, "-wal"), vec![7u8; 4096]).unwrap();
    let before = snapshot(dir.path());
    let err = serve_refused(&db);
    assert!(
        err.contains("lost.db-wal") && err.contains("move it away"),
        "{err}"
    );
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_removed_or_replaced_database_fails_every_later_write_and_stops_the_broker() {
    for how in ["removed", "replaced"] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("gone.db");
        let mut b = spawn(&db);
        let token = b.setup();
        for i in 0..5 {
            b.create_task(&token, &format!("before-{i}"));
        }
        if how == "removed" {
            std::fs::remove_file(&db).unwrap();
        } else {
            // Another file moved over the path (a restored backup, say).
            let other = dir.path().join("other.db");
            std::fs::copy(&db, &other).unwrap();
            std::fs::rename(&other, &db).unwrap();
        }

        // Twenty sends at once, as a client that did not notice would.
        let mut lines = String::new();
        for i in 0..20 {
            let line = json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "a2a.message.send",
                              "params": send_params(&token, &format!("after-{i}"))});
            lines.push_str(&format!("{line}\n"));
        }
        b.write(&lines);
        let mut refused = 0;
        while let Some(v) = b.next_line() {
            let Some(id) = v["id"].as_u64().filter(|id| (1000..1020).contains(id)) else {
                continue;
            };
            assert!(
                v.get("result").is_none(),
                "{how}: send {id} acknowledged: {v}"
            );
            assert_eq!(v["error"]["code"], -32603, "{v}");
            assert_eq!(v["error"]["data"]["reason"], REMOVED, "{v}");
            refused += 1;
        }
        // A send the writer had not refused when the broker stopped gets no
        // answer at all (never an acknowledgement); in practice all 20 do.
        eprintln!("{how}: {refused} of 20 sends answered, all refused with the reason");
        assert!(refused >= 1, "the sends were answered with the reason");
        let status = b.wait_exit();
        assert!(!status.success(), "exit status {status:?}");
        let err = b.rest_of_stderr();
        assert_eq!(err.len(), 1, "one line: {err:?}");
        assert!(
            err[0].contains("gone.db") && err[0].contains("removed"),
            "{err:?}"
        );
        drop(b);

        // The path takes a broker again at once.
        let mut again = spawn(&db);
        let token = again.setup();
        again.create_task(&token, "next");
        again.close_stdin();
        assert!(again.wait_exit().success());
    }
}

#[test]
fn a_clean_exit_leaves_everything_in_the_database_file() {
    for stop in ["stdin end", "SIGTERM"] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("kept.db");
        let mut b = spawn(&db);
        let token = b.setup();
        let mut tasks = Vec::new();
        for i in 0..40 {
            tasks.push(b.create_task(&token, &format!("m-{i}")));
            if i % 10 == 9 {
                // Reads keep SQLite connections of their own open: the
                // writer's close is then not the last, which alone would
                // have checkpointed.
                b.ok("a2a.tasks.list", json!({"token": token, "limit": 5}));
            }
        }
        if stop == "SIGTERM" {
            let ok = Command::new("kill")
                .args(["-TERM", &b.child.id().to_string()])
                .status()
                .unwrap();
            assert!(ok.success());
        } else {
            b.close_stdin();
        }
        assert!(b.wait_exit().success(), "{stop}");

        // Copy the database file alone, as a backup of "the database" would.
        let elsewhere = tempfile::tempdir().unwrap();
        let copy = elsewhere.path().join("copy.db");
        std::fs::copy(&db, &copy).unwrap();
        let c = rusqlite::Connection::open(&copy).unwrap();
        let ok: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
        for t in &tasks {
            let n: i64 = c
                .query_row("SELECT count(*) FROM a2a_tasks WHERE id = ?1", [t], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(n, 1, "{stop}: task {t} is in the copied file");
        }

        // The checkpointed file (no -wal beside it) opens again.
        let mut again = spawn(&db);
        let token = again.setup();
        again.create_task(&token, "after");
        again.close_stdin();
        assert!(again.wait_exit().success());
    }
}

#[test]
fn a_failed_start_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new.db");

    // A socket path over the 108-byte sun_path.
    let long = dir.path().join(format!("{}.sock", "s".repeat(120)));
    let (status, err) = run(bin()
        .args(["serve", "--db"])
        .arg(&db)
        .arg("--socket")
        .arg(&long));
    assert!(!status.success());
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.contains("socket path") && err.contains("107"), "{err}");
    assert!(
        snapshot(dir.path()).is_empty(),
        "left behind: {:?}",
        snapshot(dir.path()).keys()
    );

    // A socket directory open to other users.
    let open_dir = dir.path().join("shared");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (status, err) = run(bin()
        .args(["serve", "--db"])
        .arg(&db)
        .arg("--socket")
        .arg(open_dir.join("b.sock")));
    assert!(!status.success());
    assert!(err.contains("open to other users"), "{err}");
    let left: Vec<String> = snapshot(dir.path()).into_keys().collect();
    assert_eq!(left, ["shared"], "only the directory the test made");
    assert!(snapshot(&open_dir).is_empty());
    std::fs::remove_dir(&open_dir).unwrap();

    // A socket directory that cannot be created: found only when binding,
    // after the database was created; the start removes it again.
    let (status, err) = run(bin()
        .args(["serve", "--db"])
        .arg(&db)
        .arg("--socket")
        .arg("/proc/no-such-dir-a2a/b.sock"));
    assert!(!status.success());
    assert!(err.contains("cannot create socket directory"), "{err}");
    assert!(
        snapshot(dir.path()).is_empty(),
        "left behind: {:?}",
        snapshot(dir.path()).keys()
    );
}
