//! Leases (docs/protocol.md §11 Leases, §5 `a2a.leases.*`): every method,
//! each error and bound, the `a2a.lease.released` event, a parked
//! acquisition granted after a release, expiry, release on deregister and
//! on a closed connection, and the restart rule (every lease ended, its
//! record kept), against the real binary.

use a2a_testkit::measure::thread_cpu;
use a2a_testkit::*;
use std::time::{Duration, Instant};

on_both_transports!(
    acquire_conflict_list_renew_release,
    a_parked_acquisition_is_granted_when_the_lease_is_released,
);

const ACQUIRE: &str = "a2a.leases.acquire";
const RENEW: &str = "a2a.leases.renew";
const RELEASE: &str = "a2a.leases.release";
const LIST: &str = "a2a.leases.list";

/// Acquires a lease that must be granted; returns it.
fn acquire(c: &mut Conn, who: &Agent, paths: Value, exclusive: bool) -> Value {
    let r = c.ok(
        ACQUIRE,
        json!({"token": who.token, "paths": paths, "ttlSeconds": 60, "exclusive": exclusive}),
    );
    r["lease"].clone()
}

/// The ids of the leases `who` lists (optionally overlapping `path`).
fn listed(c: &mut Conn, who: &Agent, path: Option<&str>) -> Vec<String> {
    let mut params = json!({"token": who.token});
    if let Some(p) = path {
        params["path"] = json!(p);
    }
    c.ok(LIST, params)["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .map(|l| l["id"].as_str().expect("id").to_owned())
        .collect()
}

fn id(lease: &Value) -> String {
    lease["id"].as_str().expect("lease id").to_owned()
}

/// The `a2a.lease.released` notification for `recipient`, within `timeout`.
fn released_event(c: &mut Conn, recipient: &str, timeout: Duration) -> Value {
    c.wait_notification(recipient, timeout, |n| n["method"] == "a2a.lease.released")
        .unwrap_or_else(|| {
            panic!(
                "no a2a.lease.released for {recipient}; stashed: {:?}",
                c.stashed_notifications()
            )
        })
}

fn acquire_conflict_list_renew_release(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("session", "a");
    let bee = b.agent("session", "b");
    let other = b.agent("elsewhere", "c");

    let src = b.ok(
        ACQUIRE,
        json!({"token": a.token, "paths": ["src/", "Cargo.toml"], "ttlSeconds": 60, "reason": "refactor"}),
    )["lease"]
        .clone();
    assert_eq!(src["paths"], json!(["src/**", "Cargo.toml"]), "normalised");
    assert_eq!(
        (&src["holder"], &src["exclusive"], &src["reason"]),
        (&json!("a"), &json!(true), &json!("refactor"))
    );
    assert_timestamp(&src["expiresAt"]);

    // Another holder of the same context: refused, told who holds what.
    let err = b.err(
        ACQUIRE,
        json!({"token": bee.token, "paths": ["src/lib.rs", "README.md"], "ttlSeconds": 60, "exclusive": false}),
    );
    let err = assert_a2a_error(&err, "A2A_LEASE_CONFLICT");
    assert_eq!(err["data"]["holder"], "a");
    assert_eq!(err["data"]["leaseId"], src["id"]);
    assert_eq!(err["data"]["paths"], json!(["src/**"]));
    // Another context does not see the lease at all.
    let theirs = acquire(&mut b, &other, json!(["src/lib.rs"]), true);
    // The holder's own leases do not conflict with each other.
    acquire(&mut b, &a, json!(["src/main.rs"]), true);
    // Shared leases coexist; an exclusive one over them is refused.
    let docs_b = acquire(&mut b, &bee, json!(["docs/*.md"]), false);
    let docs_a = acquire(&mut b, &a, json!(["docs/**"]), false);
    let err = b.err(
        ACQUIRE,
        json!({"token": bee.token, "paths": ["docs/x.md"], "ttlSeconds": 5}),
    );
    assert_eq!(
        assert_a2a_error(&err, "A2A_LEASE_CONFLICT")["data"]["holder"],
        "a"
    );

    // The context's live leases, in the order granted; `path` filters.
    let all = listed(&mut b, &bee, None);
    assert_eq!(all.len(), 4, "{all:?}");
    assert_eq!(all[0], id(&src));
    assert_eq!(&all[2..], [id(&docs_b), id(&docs_a)]);
    assert_eq!(listed(&mut b, &bee, Some("src/x/y.rs")), [id(&src)]);
    assert_eq!(listed(&mut b, &other, None), [id(&theirs)]);

    // Renew: the holder only; another context's lease is unknown.
    let renewed = b.ok(
        RENEW,
        json!({"token": a.token, "leaseId": id(&src), "ttlSeconds": 600}),
    )["lease"]
        .clone();
    assert_eq!(renewed["id"], src["id"]);
    assert!(
        renewed["expiresAt"].as_str() > src["expiresAt"].as_str(),
        "{renewed} vs {src}"
    );
    let err = b.err(
        RENEW,
        json!({"token": bee.token, "leaseId": id(&src), "ttlSeconds": 5}),
    );
    assert_a2a_error(&err, "A2A_CROSS_CONTEXT_DENIED");
    let err = b.err(
        RENEW,
        json!({"token": other.token, "leaseId": id(&src), "ttlSeconds": 5}),
    );
    assert_eq!(
        assert_a2a_error(&err, "A2A_UNKNOWN_LEASE")["data"]["leaseId"],
        src["id"]
    );

    // Release: the holder only, idempotent for it; the refused are told.
    let err = b.err(RELEASE, json!({"token": bee.token, "leaseId": id(&src)}));
    assert_a2a_error(&err, "A2A_CROSS_CONTEXT_DENIED");
    let err = b.err(RELEASE, json!({"token": other.token, "leaseId": id(&src)}));
    assert_a2a_error(&err, "A2A_UNKNOWN_LEASE");
    assert_eq!(
        b.ok(RELEASE, json!({"token": a.token, "leaseId": id(&src)})),
        json!({"ok": true})
    );
    let ev = released_event(&mut b, "b", TIMEOUT);
    assert_eq!(ev["params"]["lease"]["id"], src["id"]);
    assert_eq!(ev["params"]["reason"], "released");
    assert_eq!(ev["params"]["recipientContextId"], "session");
    assert!(ev["params"]["seq"].as_u64().is_some(), "{ev}");
    assert_eq!(
        b.ok(RELEASE, json!({"token": a.token, "leaseId": id(&src)})),
        json!({"ok": true}),
        "a second release by the holder"
    );
    let err = b.err(RELEASE, json!({"token": bee.token, "leaseId": id(&src)}));
    assert_a2a_error(&err, "A2A_CROSS_CONTEXT_DENIED");
    let err = b.err(
        RELEASE,
        json!({"token": a.token, "leaseId": "no-such-lease"}),
    );
    assert_a2a_error(&err, "A2A_UNKNOWN_LEASE");
    // The paths are free now; nobody else was told anything.
    acquire(&mut b, &bee, json!(["src/lib.rs"]), true);
    assert!(listed(&mut b, &a, None).iter().all(|l| *l != id(&src)));
    assert!(
        b.notifications_for("a").is_empty() && b.notifications_for("c").is_empty(),
        "only the refused are told"
    );

    // A missing or dead token is refused as everywhere.
    let err = b.err(LIST, json!({}));
    assert_a2a_error(&err, "A2A_UNKNOWN_TOKEN");
    let err = b.err(
        ACQUIRE,
        json!({"token": "nope", "paths": ["x"], "ttlSeconds": 5}),
    );
    assert_a2a_error(&err, "A2A_UNKNOWN_TOKEN");
}

#[test]
fn bounds_and_bad_paths_are_refused_and_change_nothing() {
    let db = TestDb::new();
    let mut b = Broker::open(&db.path);
    let a = b.agent("s", "a");
    let held = acquire(&mut b, &a, json!(["kept"]), true);
    let call = |b: &mut Broker, params: Value| {
        let mut p = json!({"token": a.token, "paths": ["x"], "ttlSeconds": 5});
        for (k, v) in params.as_object().expect("object") {
            p[k] = v.clone();
        }
        b.call(ACQUIRE, p)
    };
    let r = call(&mut b, json!({"paths": []}));
    assert_rpc_bound(&r, -32602, "A2A_MAX_LEASE_PATHS", 64, Some(0));
    let many: Vec<String> = (0..65).map(|i| format!("f{i}")).collect();
    let r = call(&mut b, json!({"paths": many}));
    assert_rpc_bound(&r, -32602, "A2A_MAX_LEASE_PATHS", 64, Some(65));
    let r = call(&mut b, json!({"paths": ["a".repeat(1025)]}));
    assert_rpc_bound(&r, -32602, "A2A_MAX_LEASE_PATH_BYTES", 1024, Some(1025));
    for ttl in [0, -3, 3601] {
        let r = call(&mut b, json!({"ttlSeconds": ttl}));
        assert_rpc_bound(&r, -32602, "A2A_MAX_LEASE_TTL_SECONDS", 3600, None);
        assert_eq!(r["error"]["data"]["min"], 1, "{r}");
        assert_eq!(r["error"]["data"]["actual"], ttl, "{r}");
    }
    for wait in [-1, 121] {
        let r = call(&mut b, json!({"waitSeconds": wait}));
        assert_rpc_bound(&r, -32602, "A2A_MAX_LEASE_WAIT_SECONDS", 120, None);
    }
    let r = call(&mut b, json!({"reason": "r".repeat(1025)}));
    assert_rpc_bound(&r, -32602, "A2A_MAX_LEASE_REASON_BYTES", 1024, Some(1025));
    for bad in ["../x", "/etc/passwd", "a//b", "a/./b", "", "a/b**"] {
        let r = call(&mut b, json!({"paths": [bad]}));
        assert_rpc_error(&r, -32602);
    }
    let r = call(&mut b, json!({"paths": "x"}));
    assert_rpc_error(&r, -32602);
    let r = b.call(
        RENEW,
        json!({"token": a.token, "leaseId": id(&held), "ttlSeconds": 0}),
    );
    assert_rpc_bound(&r, -32602, "A2A_MAX_LEASE_TTL_SECONDS", 3600, None);
    let r = b.call(LIST, json!({"token": a.token, "path": "../x"}));
    assert_rpc_error(&r, -32602);
    let r = b.call(
        RELEASE,
        json!({"token": a.token, "leaseId": "l".repeat(257)}),
    );
    assert_rpc_bound(&r, -32602, "A2A_MAX_ID_BYTES", 256, Some(257));
    // Nothing was granted, renewed or ended by any of them.
    let leases = b.ok(LIST, json!({"token": a.token}))["leases"].clone();
    assert_eq!(leases, json!([held]));

    // A2A_MAX_LEASES_PER_AGENT: 64 live leases, the 65th refused.
    for i in 1..64 {
        acquire(&mut b, &a, json!([format!("n{i}")]), true);
    }
    let r = call(&mut b, json!({"paths": ["one-more"]}));
    assert_bound_error(&r, "A2A_SEND_CAP", "A2A_MAX_LEASES_PER_AGENT", 64, Some(65));
    // Releasing one makes room again.
    b.ok(RELEASE, json!({"token": a.token, "leaseId": id(&held)}));
    acquire(&mut b, &a, json!(["one-more"]), true);
    // The broker and the connection are fine.
    assert_eq!(listed(&mut b, &a, None).len(), 64);
}

fn a_parked_acquisition_is_granted_when_the_lease_is_released(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("s", "a");
    let w = b.agent("s", "w");
    let held = acquire(&mut b, &a, json!(["src/"]), true);
    let parked = b.request(
        ACQUIRE,
        json!({"token": w.token, "paths": ["src/lib.rs"], "ttlSeconds": 30, "waitSeconds": 30}),
    );
    // It waits (the connection reads on meanwhile).
    assert_eq!(listed(&mut b, &w, None), [id(&held)]);
    assert!(!b.has_response(parked), "granted while the conflict stands");
    let released_at = Instant::now();
    b.ok(RELEASE, json!({"token": a.token, "leaseId": id(&held)}));
    let granted = result(&b.response(parked));
    assert!(
        released_at.elapsed() < Duration::from_secs(5),
        "granted {:?} after the release",
        released_at.elapsed()
    );
    assert_eq!(granted["lease"]["holder"], "w");
    assert_eq!(granted["lease"]["paths"], json!(["src/lib.rs"]));
    // The waiter was told too, and now holds the lease.
    let ev = released_event(&mut b, "w", TIMEOUT);
    assert_eq!(ev["params"]["lease"]["id"], held["id"]);
    assert_eq!(
        listed(&mut b, &a, None),
        [granted["lease"]["id"].as_str().unwrap()]
    );

    // A wait that runs out is answered with the conflict it met.
    let started = Instant::now();
    let err = b.err(
        ACQUIRE,
        json!({"token": a.token, "paths": ["src/"], "ttlSeconds": 5, "waitSeconds": 1}),
    );
    let err = assert_a2a_error(&err, "A2A_LEASE_CONFLICT");
    assert_eq!(err["data"]["holder"], "w");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
}

#[test]
fn parked_acquisitions_count_against_the_parked_waits() {
    let db = TestDb::new();
    let mut b = Broker::open(&db.path);
    let a = b.agent("s", "a");
    let w = b.agent("s", "w");
    let held = acquire(&mut b, &a, json!(["x"]), true);
    let ids: Vec<u64> = (0..65)
        .map(|_| {
            b.request(
                ACQUIRE,
                json!({"token": w.token, "paths": ["x"], "ttlSeconds": 30, "waitSeconds": 60}),
            )
        })
        .collect();
    let last = b.response(ids[64]);
    assert_rpc_bound(&last, -32602, "A2A_MAX_PARKED_WAITS", 64, Some(65));
    // Once the lease ends every parked one is granted (the same holder's
    // leases never conflict with each other).
    b.ok(RELEASE, json!({"token": a.token, "leaseId": id(&held)}));
    for id in &ids[..64] {
        assert_eq!(result(&b.response(*id))["lease"]["holder"], "w");
    }
}

#[test]
fn a_lease_ends_at_its_ttl_and_the_refused_are_told() {
    let db = TestDb::new();
    let mut b = Broker::open(&db.path);
    let a = b.agent("s", "a");
    let w = b.agent("s", "w");
    let lease = b.ok(
        ACQUIRE,
        json!({"token": a.token, "paths": ["f"], "ttlSeconds": 1}),
    )["lease"]
        .clone();
    let err = b.err(
        ACQUIRE,
        json!({"token": w.token, "paths": ["f"], "ttlSeconds": 5}),
    );
    assert_a2a_error(&err, "A2A_LEASE_CONFLICT");
    // The broker's timer ends it: an event, with no call to prompt it.
    let ev = released_event(&mut b, "w", Duration::from_secs(10));
    assert_eq!(ev["params"]["reason"], "expired");
    assert_eq!(ev["params"]["lease"]["id"], lease["id"]);
    assert!(listed(&mut b, &w, None).is_empty());
    let err = b.err(
        RENEW,
        json!({"token": a.token, "leaseId": id(&lease), "ttlSeconds": 5}),
    );
    assert_a2a_error(&err, "A2A_UNKNOWN_LEASE");
    // Releasing it now is still the holder's no-op.
    b.ok(RELEASE, json!({"token": a.token, "leaseId": id(&lease)}));
    acquire(&mut b, &w, json!(["f"]), true);
    let c = open_db(&db.path);
    let how: String = c
        .query_row(
            "SELECT end_reason FROM a2a_ext_leases WHERE id = ?1",
            [id(&lease)],
            |r| r.get(0),
        )
        .expect("the lease's record");
    assert_eq!(how, "expired");
}

#[test]
fn deregistration_and_a_killed_holder_end_their_leases() {
    let db = TestDb::new();
    let mut b = Broker::open_on(Transport::Socket, &db.path);
    let w = b.agent("s", "w");

    // A holder on a connection of its own, which dies without a word (as
    // when its process is killed: the kernel closes the socket).
    let mut holder = b.connect();
    holder.handshake();
    let h = holder.agent("s", "h");
    let hl = acquire(&mut holder, &h, json!(["a/"]), true);
    let err = b.err(
        ACQUIRE,
        json!({"token": w.token, "paths": ["a/b"], "ttlSeconds": 5}),
    );
    assert_a2a_error(&err, "A2A_LEASE_CONFLICT");
    drop(holder);
    let ev = released_event(&mut b, "w", TIMEOUT);
    assert_eq!(ev["params"]["reason"], "disconnected");
    assert_eq!(ev["params"]["lease"]["id"], hl["id"]);
    assert!(listed(&mut b, &w, None).is_empty());

    // Deregistration ends its leases too.
    let d = b.agent("s", "d");
    let dl = acquire(&mut b, &d, json!(["b"]), true);
    let err = b.err(
        ACQUIRE,
        json!({"token": w.token, "paths": ["b"], "ttlSeconds": 5}),
    );
    assert_a2a_error(&err, "A2A_LEASE_CONFLICT");
    b.ok("a2a.agents.deregister", json!({"token": d.token}));
    let ev = released_event(&mut b, "w", TIMEOUT);
    assert_eq!(ev["params"]["reason"], "deregistered");
    assert_eq!(ev["params"]["lease"]["id"], dl["id"]);
    acquire(&mut b, &w, json!(["a/b", "b"]), true);

    let c = open_db(&db.path);
    let ends: Vec<(String, String)> = a2a_testkit::db::pairs(
        &c,
        "SELECT id, end_reason FROM a2a_ext_leases WHERE ended_at IS NOT NULL ORDER BY acquired_at",
    );
    assert_eq!(
        ends,
        [
            (id(&hl), "disconnected".to_string()),
            (id(&dl), "deregistered".to_string())
        ]
    );
}

#[test]
fn a_restart_ends_every_lease_and_keeps_the_record() {
    let db = TestDb::new();
    let (kept, released) = {
        let mut b = Broker::open(&db.path);
        let a = b.agent("s", "a");
        let kept = b.ok(
            ACQUIRE,
            json!({"token": a.token, "paths": ["x/", "y"], "ttlSeconds": 600, "exclusive": false, "reason": "why"}),
        )["lease"]
            .clone();
        let released = acquire(&mut b, &a, json!(["z"]), true);
        b.ok(RELEASE, json!({"token": a.token, "leaseId": id(&released)}));
        b.kill();
        (kept, released)
    };
    // After SIGKILL: the acknowledged lease is on disk, still open.
    {
        let c = open_db(&db.path);
        let (paths, exclusive, reason, ended): (String, bool, String, Option<String>) = c
            .query_row(
                "SELECT paths, exclusive, reason, ended_at FROM a2a_ext_leases WHERE id = ?1",
                [id(&kept)],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .expect("the acknowledged lease's row");
        assert_eq!(paths, r#"["x/**","y"]"#);
        assert!(!exclusive);
        assert_eq!(reason, "why");
        assert_eq!(ended, None);
    }
    // A restart ends it (its holder's token died) and keeps both records.
    let mut b = Broker::open(&db.path);
    let a = b.agent("s", "a");
    assert!(listed(&mut b, &a, None).is_empty());
    let c = open_db(&db.path);
    let rows: Vec<(String, String, String, String)> = c
        .prepare(
            "SELECT id, holder_peer, end_reason, ended_at FROM a2a_ext_leases ORDER BY acquired_at",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        (&rows[0].0, &rows[0].1, &rows[0].2),
        (&id(&kept), &"a".to_string(), &"restart".to_string())
    );
    assert_eq!(
        (&rows[1].0, &rows[1].2),
        (&id(&released), &"released".to_string())
    );
    assert!(
        rows.iter().all(|r| a2a_testkit::assert::is_timestamp(&r.3)),
        "{rows:?}"
    );
    assert_eq!(
        user_version(&db.path),
        12,
        "the lease table leaves the schema version"
    );
    // Its paths are free.
    acquire(&mut b, &a, json!(["x/1"]), true);
}

/// Lease comparisons run on the broker's one writer: an agent that holds
/// `A2A_MAX_LEASES_PER_AGENT` leases of `A2A_MAX_LEASE_PATHS` paths of
/// about `A2A_MAX_LEASE_PATH_BYTES`, globs of 500 stars or 500 segments,
/// and asks for overlapping ones, must not hold another context's send.
/// Before, each pair of globs filled a table of 1,000 x 1,000 bytes:
/// these calls took minutes, and every client of every context waited.
/// Now the globs are compared exactly in a few steps each, and a call past
/// `A2A_MAX_LEASE_MATCH_STEPS` (a `**` run sought along 500 segments,
/// thousands of times) is refused with that bound's error.
#[test]
fn costly_lease_paths_do_not_hold_the_writer() {
    let db = TestDb::new();
    let mut b = Broker::open_on(Transport::Socket, &db.path);
    let sender = b.agent("desk", "sender");
    let worker = b.agent("bench", "worker");

    let mut e = b.connect();
    e.handshake();
    let eve = e.agent("lab", "eve");
    let mallory = e.agent("lab", "mallory");
    // Shared, so that an exclusive acquisition is compared with them all.
    for i in 0..64 {
        let paths: Vec<String> = (0..64)
            .map(|j| {
                let body = if j % 2 == 0 { "a*" } else { "a/" };
                format!("{}{i}.{j}", body.repeat(495))
            })
            .collect();
        acquire(&mut e, &eve, json!(paths), false);
    }
    let glob_far = |k: usize| format!("{}{k}", "b*".repeat(495));
    let writer_before = thread_cpu(b.pid, "a2a-writer");
    let grab = e.request(
        ACQUIRE,
        json!({"token": mallory.token, "paths": (0..64).map(glob_far).collect::<Vec<_>>(), "ttlSeconds": 60}),
    );
    let list_globs = e.request(
        LIST,
        json!({"token": eve.token, "path": format!("{}b", "b*".repeat(500))}),
    );
    let list_runs = e.request(
        LIST,
        json!({"token": mallory.token, "path": format!("**/{}b/**", "a/".repeat(300))}),
    );
    // Let them reach the writer first.
    std::thread::sleep(Duration::from_millis(500));

    let started = Instant::now();
    let sent = b.call_within(
        "a2a.message.send",
        json!({"token": sender.token, "message": text_msg_to("still there?", &worker.id)}),
        Duration::from_secs(5),
    );
    let waited = started.elapsed();
    assert_eq!(result(&sent)["task"]["status"]["state"], "submitted");
    assert!(waited < Duration::from_secs(5), "{waited:?}");

    // The answers are the exact ones: the globs overlap nothing of eve's.
    let granted = result(&e.response(grab));
    assert_eq!(granted["lease"]["holder"], "mallory");
    assert_eq!(granted["lease"]["paths"][63], glob_far(63));
    assert_eq!(result(&e.response(list_globs))["leases"], json!([]));
    let r = e.response(list_runs);
    assert_rpc_bound(&r, -32602, "A2A_MAX_LEASE_MATCH_STEPS", 6_000_000, None);
    assert!(
        r["error"]["data"]["actual"].as_u64() > Some(6_000_000),
        "{r}"
    );
    // The writer's time for the three calls and the send (an unoptimised
    // build; before, the first call alone took minutes of it).
    let writer = thread_cpu(b.pid, "a2a-writer") - writer_before;
    assert!(writer < Duration::from_secs(2), "{writer:?} of writer time");
    // A plain question is still answered in full.
    assert_eq!(
        listed(&mut e, &eve, Some("elsewhere/x")),
        Vec::<String>::new()
    );
    assert_eq!(listed(&mut e, &eve, None).len(), 65);
}
