//! The writer is shared fairly between connections: a connection that
//! queued a flood of calls (a thousand pipelined sends, or sends of 1 MiB
//! files) does not hold another connection's call behind all of them.
//!
//! Deterministic: the test holds SQLite's write lock from its own
//! connection, so the writer stops at its next `BEGIN IMMEDIATE` while
//! both connections queue their calls; then it lets go and reads the order
//! in which the tasks were created (`seq`, which the writer gives out in
//! the order it runs the calls, its commit order).

mod common;

use a2a_proto::limits::WRITER_SHARE_CALLS;
use base64::Engine;
use common::{request, Conn};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;

fn send(id: u64, token: &str, mid: &str, file: Option<&str>) -> Value {
    let mut parts = vec![json!({"kind": "text", "text": "go"})];
    if let Some(b64) = file {
        parts.push(json!({"kind": "file", "file": {"name": "f.bin", "bytes": b64}}));
    }
    request(
        id,
        "a2a.message.send",
        json!({"token": token, "message": {"parts": parts, "messageId": mid, "to": "wrk"}}),
    )
}

/// Reads until every id in `ids` is answered (notifications skipped); each must succeed.
fn answered(c: &Conn, ids: impl IntoIterator<Item = u64>) -> Vec<Value> {
    let mut want: HashSet<u64> = ids.into_iter().collect();
    let mut got = Vec::new();
    while !want.is_empty() {
        let v = c.next();
        if v.get("method").is_some() {
            continue;
        }
        let id = v["id"].as_u64().expect("a response id");
        assert!(v.get("result").is_some(), "call {id} failed: {v}");
        if want.remove(&id) {
            got.push(v);
        }
    }
    got
}

/// Registers the flooder's agents (`setup`: their tokens), then, while the
/// writer is held, queues `flood` (request lines the flooding connection
/// sends: their ids) and one small send from another connection; lets the
/// writer go; returns how many of the flood's tasks (contexts `a*`) were
/// created before the other connection's task, and the flood's size.
fn flood_ahead_of_one_call(
    dir: &tempfile::TempDir,
    setup: impl FnOnce(&mut Conn) -> Vec<String>,
    flood: impl FnOnce(&mut Conn, &[String]) -> Vec<u64>,
) -> (usize, usize) {
    let b = common::broker(dir, "f.db", None);
    let db = dir.path().join("f.db");
    let mut flooder = Conn::open(&b);
    let mut other = Conn::open(&b);
    let blocker = Conn::open(&b);
    let vreq = other.register("v", "v-req");
    other.register("v", "wrk");
    let tokens = setup(&mut flooder);

    // The writer stops at its next transaction, which the blocker's call opens.
    let hold = rusqlite::Connection::open(&db).unwrap();
    hold.busy_timeout(Duration::from_secs(30)).unwrap();
    hold.execute_batch("BEGIN IMMEDIATE").unwrap();
    let bid = blocker.next_id();
    blocker.send(&request(
        bid,
        "a2a.agents.register",
        json!({"contextId": "b", "card": {"name": "b"}}),
    ));
    std::thread::sleep(Duration::from_millis(200));

    let ids = flood(&mut flooder, &tokens);
    // A read answered without the writer: once it is, every line before it
    // on that connection has been queued.
    flooder.call("a2a.agents.list", json!({}));
    other.send(&send(9_999, &vreq, "v-1", None));
    other.call("a2a.agents.list", json!({}));
    hold.execute_batch("ROLLBACK").unwrap();

    let theirs = answered(&other, [9_999]);
    let task = theirs[0]["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    answered(&flooder, ids.iter().copied());
    answered(&blocker, [bid]);
    let ahead = flood_tasks_before(&hold, &task);
    (ahead, ids.len())
}

#[test]
fn a_thousand_pipelined_calls_do_not_go_ahead_of_another_connections_call() {
    let dir = tempfile::tempdir().unwrap();
    // 8 requesters of 128 sends each (the open-task bound per context).
    let setup = |c: &mut Conn| {
        (0..8)
            .map(|k| {
                c.register(&format!("a{k}"), "wrk");
                c.register(&format!("a{k}"), "req")
            })
            .collect()
    };
    let (ahead, flood) = flood_ahead_of_one_call(&dir, setup, |c, tokens| {
        let mut ids = Vec::new();
        for (k, t) in tokens.iter().enumerate() {
            for i in 0..128u64 {
                let id = 100_000 + k as u64 * 1000 + i;
                c.send(&send(id, t, &format!("m{k}-{i}"), None));
                ids.push(id);
            }
        }
        ids
    });
    eprintln!("{ahead} of {flood} pipelined calls went before the other connection's call");
    assert_eq!(flood, 1024);
    // At most the flooder's share of one group (two, should the writer have
    // taken the blocker late): never the whole flood.
    assert!(
        ahead <= 2 * WRITER_SHARE_CALLS,
        "{ahead} of the flood's {flood} calls were written before the other connection's call"
    );
}

#[test]
fn one_mib_files_do_not_go_ahead_of_another_connections_small_call() {
    let dir = tempfile::tempdir().unwrap();
    let file = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 1 << 20]);
    let setup = |c: &mut Conn| {
        c.register("a0", "wrk");
        vec![c.register("a0", "req")]
    };
    let (ahead, flood) = flood_ahead_of_one_call(&dir, setup, |c, tokens| {
        (0..12u64)
            .map(|i| {
                let id = 100_000 + i;
                c.send(&send(id, &tokens[0], &format!("big{i}"), Some(&file)));
                id
            })
            .collect()
    });
    eprintln!("{ahead} of {flood} 1 MiB sends went before the other connection's small call");
    // A large call goes in a group of its own, taking turns with groups of
    // small calls: at most one is written ahead.
    assert!(
        ahead <= 1,
        "{ahead} of {flood} 1 MiB sends were written before the other connection's small call"
    );
}

/// The same over the real binary and its socket: one client pipelines 512
/// sends and then four sends of 1 MiB files; another client's one send,
/// queued after all of them, is written after at most one share of them.
#[test]
fn over_the_socket_a_pipelining_client_does_not_go_ahead_of_another() {
    use a2a_testkit::raw::RawConn;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let p = a2a_testkit::Spawn::new(&db)
        .socket(dir.path().join("run").join("b.sock"))
        .args(["--durability", "normal"])
        .start(a2a_testkit::TIMEOUT)
        .expect("broker ready");
    let (path, secret) = (p.socket().unwrap(), p.secret().unwrap());
    let open = || RawConn::socket(&path, &secret).expect("connect");
    let (mut flooder, mut other, mut blocker) = (open(), open(), open());
    let tokens: Vec<(String, String)> = (0..5)
        .map(|k| {
            let (w, _) = flooder.register(&format!("a{k}"), "wrk");
            (flooder.register(&format!("a{k}"), "req").1, w)
        })
        .collect();
    let (vw, _) = other.register("v", "wrk");
    let (_, vreq) = other.register("v", "req");
    let file = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 1 << 20]);
    let send = |token: &str, to: &str, mid: String, file: Option<&str>| {
        let mut parts = vec![json!({"kind": "text", "text": "go"})];
        if let Some(b64) = file {
            parts.push(json!({"kind": "file", "file": {"bytes": b64}}));
        }
        json!({"token": token, "message": {"parts": parts, "messageId": mid, "to": to}})
    };

    let hold = rusqlite::Connection::open(&db).unwrap();
    hold.busy_timeout(Duration::from_secs(30)).unwrap();
    hold.execute_batch("BEGIN IMMEDIATE").unwrap();
    blocker.request(
        "a2a.agents.register",
        json!({"contextId": "b", "card": {"name": "b"}}),
    );
    std::thread::sleep(Duration::from_millis(200));
    let mut last = 0;
    for (k, (req, w)) in tokens.iter().take(4).enumerate() {
        for i in 0..128 {
            last = flooder.request("a2a.message.send", send(req, w, format!("m{k}-{i}"), None));
        }
    }
    let (req, w) = &tokens[4];
    for i in 0..4 {
        last = flooder.request(
            "a2a.message.send",
            send(req, w, format!("big{i}"), Some(&file)),
        );
    }
    flooder.ok("a2a.agents.list", json!({"token": tokens[0].0}));
    let mine = other.request("a2a.message.send", send(&vreq, &vw, "v-1".into(), None));
    other.ok("a2a.agents.list", json!({"token": vreq}));
    hold.execute_batch("ROLLBACK").unwrap();

    let answer = other.response(mine);
    let task = answer["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    assert!(flooder.raw_response(last).contains("\"result\""));
    let ahead = flood_tasks_before(&hold, &task);
    eprintln!("{ahead} of 516 pipelined calls went before the other client's call");
    assert!(
        ahead <= 2 * WRITER_SHARE_CALLS,
        "{ahead} of the 516 pipelined calls were written before the other client's call"
    );
}

/// How many of the flood's tasks (its contexts start with `a`) were written
/// before `task`: the writer's order is the tasks' `seq`.
fn flood_tasks_before(db: &rusqlite::Connection, task: &str) -> usize {
    let ahead: i64 = db
        .query_row(
            "SELECT count(*) FROM a2a_tasks WHERE context_id LIKE 'a%'
               AND seq < (SELECT seq FROM a2a_tasks WHERE id = ?1)",
            [task],
            |r| r.get(0),
        )
        .unwrap();
    ahead as usize
}
