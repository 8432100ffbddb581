//! The shared-memory event ring (docs/protocol.md §1 Framing) through the
//! real broker: granted in the handshake, events arrive through it the same way as over
//! the socket, the segment is owner-only and goes with its connection (and
//! after a crash, at the next start), and a client that stops reading its
//! ring loses events only past the bound, with exact lag accounting, while
//! the broker serves on; a consumer process killed mid-stream stalls
//! nothing; a ring another process corrupts is reported to the
//! application, never a silent stall.

use a2a_client::{agent_card, message_to, Client, ClientOptions, Delivery, Notification, State};
use a2a_ring::{Record, Segment};
use a2a_testkit::raw::RawConn;
use a2a_testkit::{BrokerProcess, Spawn, TIMEOUT};
use serde_json::json;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn broker(dir: &Path) -> BrokerProcess {
    Spawn::new(dir.join("db"))
        .socket(dir.join("run").join("sock"))
        .no_stdio()
        .start(TIMEOUT)
        .expect("broker ready")
}

fn ring_client(p: &BrokerProcess, bytes: usize) -> Client {
    let opts = ClientOptions {
        event_ring_bytes: Some(bytes),
        ..Default::default()
    };
    Client::connect_with(p.socket().unwrap(), &p.secret().unwrap(), opts).expect("connect")
}

fn shm_path(name: &str) -> PathBuf {
    Path::new("/dev/shm").join(name.trim_start_matches('/'))
}

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn events_arrive_through_a_granted_ring_and_the_segment_goes_with_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    let p = broker(dir.path());
    let client = ring_client(&p, 1 << 20);
    assert!(client.uses_event_ring(), "the broker granted no ring");
    let info = client.handshake_result().event_ring.clone().unwrap();
    assert!(info.bytes >= 1 << 20);
    let meta = std::fs::metadata(shm_path(&info.name)).expect("the segment exists");
    assert_eq!(meta.mode() & 0o777, 0o600, "the segment must be owner-only");

    let req = client
        .register("c1", agent_card("req"), Delivery::Push)
        .unwrap();
    let wrk = client
        .register("c2", agent_card("wrk"), Delivery::Push)
        .unwrap();
    // Idle first: the reader must wake for the first event.
    std::thread::sleep(Duration::from_millis(500));
    let task = req.send(message_to("wrk", "go"), None).unwrap();
    let evs = wrk.wait(TIMEOUT).unwrap();
    assert_eq!(evs.len(), 1, "{evs:?}");
    for state in [State::Working, State::Completed] {
        wrk.set_status(&task.id, state, None).unwrap();
    }
    let mut got = Vec::new();
    eventually("the requester's two events", || {
        got.extend(req.wait(Duration::from_millis(100)).unwrap());
        got.len() >= 2
    });
    let seqs: Vec<u64> = got.iter().filter_map(|e| e.seq()).collect();
    assert_eq!(seqs, [1, 2]);
    match &got[1] {
        Notification::TaskEvent(p) => assert!(matches!(
            &p.event,
            a2a_client::proto::types::StreamEvent::Status(s) if s.status.state == State::Completed
        )),
        other => panic!("{other:?}"),
    }
    drop((req, wrk));
    drop(client);
    eventually("the segment removed with its connection", || {
        !shm_path(&info.name).exists()
    });
}

#[test]
fn a_crashed_brokers_segments_are_removed_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = broker(dir.path());
    let client = ring_client(&p, 64 * 1024);
    let name = client.handshake_result().event_ring.clone().unwrap().name;
    p.kill();
    assert!(
        shm_path(&name).exists(),
        "a SIGKILLed broker cannot clean up"
    );
    drop(client);
    let _p = broker(dir.path());
    assert!(!shm_path(&name).exists(), "the next start removes it");
}

#[test]
fn a_clean_exit_removes_every_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = broker(dir.path());
    let client = ring_client(&p, 64 * 1024);
    let name = client.handshake_result().event_ring.clone().unwrap().name;
    p.terminate().unwrap();
    assert!(p.wait_exit(TIMEOUT).is_some());
    assert!(!shm_path(&name).exists());
    drop(client);
}

/// A client that never reads its ring: past the ring and the overflow
/// bound the oldest events are dropped and counted, the count reaches the
/// client in a lag record before the next event, every event is either
/// delivered or counted, and the broker serves everyone else meanwhile.
#[test]
fn a_ring_nobody_reads_lags_exactly_and_stalls_nothing() {
    const N: u64 = 6_000;
    let dir = tempfile::tempdir().unwrap();
    let p = broker(dir.path());
    let (socket, secret) = (p.socket().unwrap(), p.secret().unwrap());
    // The stalled consumer: a raw connection that asks for a small ring
    // and registers the requester, then reads nothing.
    let mut stalled = RawConn::socket_with(&socket, &secret, json!({"bytes": 4096})).unwrap();
    let ring = stalled.handshake_result()["eventRing"].clone();
    let (name, bytes) = (
        ring["name"].as_str().unwrap().to_owned(),
        ring["bytes"].as_u64().unwrap(),
    );
    let (_, req) = stalled.register("c1", "req");
    // The worker, on a client of its own, changes the task's status N times.
    let other = Client::connect(&socket, &secret).unwrap();
    let wrk = other
        .register("c2", agent_card("wrk"), Delivery::Push)
        .unwrap();
    let task = stalled.task(&req, "wrk");
    let pendings: Vec<_> = (0..N)
        .map(|_| wrk.set_status_async(&task, State::Working, None).unwrap())
        .collect();
    for pd in pendings {
        pd.wait(TIMEOUT).expect("the broker serves on");
    }
    // Now read the ring: every event is delivered or counted as lagged.
    let mut consumer = Segment::open(&name, bytes as usize).unwrap();
    let (mut seen, mut lagged, mut last_seq, mut lag_records) = (0u64, 0u64, 0u64, 0u64);
    let mut after_lag = 0u64;
    let deadline = Instant::now() + TIMEOUT;
    while seen + lagged < N {
        assert!(
            Instant::now() < deadline,
            "seen {seen} + lagged {lagged} < {N}"
        );
        consumer.wait(Some(Duration::from_millis(50))).unwrap();
        consumer
            .drain(usize::MAX, |rec| match rec {
                Record::Event(payload) => {
                    use a2a_client::wire::{Binary, Codec, Inbound};
                    let Inbound::Event(n) = Binary::decode(payload).unwrap() else {
                        panic!("a ring record that is not a notification");
                    };
                    let seq = n.seq().expect("a task event");
                    // Seqs count every event routed to the agent, the
                    // dropped ones included: after a lag record of n, the
                    // next seq is exactly n past the last one seen.
                    let gap = std::mem::take(&mut after_lag);
                    assert_eq!(
                        seq,
                        last_seq + 1 + gap,
                        "an event was lost, reordered or miscounted"
                    );
                    last_seq = seq;
                    seen += 1;
                }
                Record::Lagged(n) => {
                    lagged += n;
                    lag_records += 1;
                    after_lag += n;
                }
            })
            .unwrap();
    }
    eprintln!("{N} events: {seen} delivered through a 4 KiB ring, {lagged} dropped and reported in {lag_records} lag records");
    assert_eq!(seen + lagged, N);
    assert!(lagged > 0, "the bound never dropped anything");
    assert_eq!(last_seq, N, "the newest event is kept");
}

/// A consumer in another process (`a2a-broker watch --event-ring`),
/// SIGKILLed in the middle of a stream of events to it: the broker answers
/// every call of the stream and serves a new client at once, and the
/// segment goes with the dead connection.
#[test]
fn a_consumer_process_killed_mid_stream_stalls_nothing() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    const REQUESTERS: usize = 8;
    const SENDS: usize = 100; // under A2A_MAX_SENDS_PER_RUN per requester
    let dir = tempfile::tempdir().unwrap();
    let p = broker(dir.path());
    let (socket, secret) = (p.socket().unwrap(), p.secret().unwrap());
    let mut watch = Command::new(a2a_testkit::broker_bin())
        .args(["watch", "--socket"])
        .arg(&socket)
        .args(["--as", "victim", "--context", "v", "--event-ring", "65536"])
        .env(a2a_testkit::SECRET_ENV, &secret)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a2a-broker watch");
    // Its first line on stderr names the ring it reads.
    let mut err = BufReader::new(watch.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let name = line
        .split("event ring ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap_or_else(|| panic!("watch reads no ring: {line}"))
        .to_owned();
    assert!(shm_path(&name).exists(), "{name} is not in /dev/shm");

    // A stream of task events to the victim: REQUESTERS x SENDS tasks,
    // pipelined from another client (those that reach the broker after the
    // victim died are refused: it is gone).
    let client = Client::connect(&socket, &secret).unwrap();
    let reqs: Vec<_> = (0..REQUESTERS)
        .map(|i| {
            client
                .register(
                    &format!("r{i}"),
                    agent_card(&format!("r{i}")),
                    Delivery::Push,
                )
                .unwrap()
        })
        .collect();
    let sends = std::thread::spawn(move || {
        let pendings: Vec<_> = reqs
            .iter()
            .flat_map(|r| (0..SENDS).map(move |_| r.send_async(message_to("victim", "go"), None)))
            .map(|p| p.expect("submitted"))
            .collect();
        let n = pendings.len();
        let mut refused = 0;
        for pd in pendings {
            // Answered: delivered, or, once the victim's connection is
            // gone, refused because it is no longer registered. Never left
            // unanswered, never a dead connection.
            match pd.wait(TIMEOUT) {
                Ok(_) => {}
                Err(a2a_client::ClientError::Rpc(e)) if e.message.contains("unknown agent") => {
                    refused += 1
                }
                Err(e) => panic!("the broker answers every send: {e}"),
            }
        }
        assert!(refused < n, "no send reached the victim");
        (n, reqs)
    });
    // Kill the consumer once it has printed a few events.
    let mut out = BufReader::new(watch.stdout.take().unwrap());
    for _ in 0..20 {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "watch ended early");
        assert!(line.contains("a2a.task.event"), "{line}");
    }
    watch.kill().unwrap();
    watch.wait().unwrap();
    let (n, _reqs) = sends.join().expect("the sender");
    assert_eq!(n, REQUESTERS * SENDS);
    // A new client is served at once, and the dead consumer's segment is gone.
    let fresh = Client::connect(&socket, &secret).unwrap();
    let a = fresh
        .register("after", agent_card("after"), Delivery::Push)
        .unwrap();
    assert!(a.list_agents(None).is_ok());
    eventually("the dead consumer's segment removed", || {
        !shm_path(&name).exists()
    });
}

/// A connection that leaves with a blocking send still parked in the
/// broker (it waits up to 30 s for its task to settle): its segment goes
/// with the connection at once, not when that wait ends.
#[test]
fn a_parked_blocking_send_does_not_keep_a_closed_connections_segment() {
    let dir = tempfile::tempdir().unwrap();
    let p = broker(dir.path());
    let (socket, secret) = (p.socket().unwrap(), p.secret().unwrap());
    let other = Client::connect(&socket, &secret).unwrap();
    let wrk = other
        .register("c2", agent_card("wrk"), Delivery::Push)
        .unwrap();
    let mut conn = RawConn::socket_with(&socket, &secret, json!({"bytes": 65536})).unwrap();
    let name = conn.handshake_result()["eventRing"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, token) = conn.register("c1", "req");
    let m = json!({"role": "user", "messageId": "m-parked", "to": "wrk",
        "parts": [{"kind": "text", "text": "go"}]});
    conn.request(
        "a2a.message.send",
        json!({"token": token, "message": m, "configuration": {"blocking": true}}),
    );
    // The send is parked once the worker has its task.
    let evs = wrk.wait(TIMEOUT).unwrap();
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert!(shm_path(&name).exists());
    let left = Instant::now();
    conn.close();
    eventually("the segment removed with its connection", || {
        !shm_path(&name).exists()
    });
    assert!(
        left.elapsed() < Duration::from_secs(10),
        "the segment outlived its connection by {:?}",
        left.elapsed()
    );
}

/// A process of the same user writes a malformed record into a live ring
/// (as a rogue producer: a record of an unknown kind, and `head` moved past
/// it). The client never stalls silently (docs/protocol.md §1 Framing): its
/// ring thread finds the record, and the connection closes with
/// `CloseReason::EventRing` naming the ring and the fault, which the
/// agent's `wait` returns at once, every later call returns, and
/// `close_reason` reports. The broker serves the others on.
#[test]
fn a_corrupt_ring_is_reported_to_the_application_never_a_silent_stall() {
    use a2a_client::{ClientError, CloseReason};
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let p = broker(dir.path());
    let client = ring_client(&p, 64 * 1024);
    let info = client.handshake_result().event_ring.clone().unwrap();
    let wrk = client
        .register("c2", agent_card("wrk"), Delivery::Push)
        .unwrap();
    let other = Client::connect(p.socket().unwrap(), &p.secret().unwrap()).unwrap();
    let req = other
        .register("c1", agent_card("req"), Delivery::Push)
        .unwrap();
    req.send(message_to("wrk", "first"), None).unwrap();
    assert_eq!(wrk.wait(TIMEOUT).unwrap().len(), 1, "the ring works");

    let seg = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(shm_path(&info.name))
        .unwrap();
    // The layout (a2a-ring's layout.rs): `head` at offset 64, the data
    // area from offset 512.
    let mut head = [0u8; 8];
    seg.read_exact_at(&mut head, 64).unwrap();
    let head = u64::from_le_bytes(head);
    let at = 512 + head % info.bytes;
    let mut record = [0u8; 16];
    record[0] = 8; // len 8
    record[4] = 9; // kind 9: no such kind
    seg.write_all_at(&record, at).unwrap();
    seg.write_all_at(&(head + 16).to_le_bytes(), 64).unwrap();

    let started = Instant::now();
    let err = wrk
        .wait(TIMEOUT)
        .expect_err("the agent's wait ends with the ring's error, not an empty timeout");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "reported after {:?}",
        started.elapsed()
    );
    match &err {
        ClientError::Closed(CloseReason::EventRing(why)) => {
            assert!(why.contains(&info.name), "{why}");
            assert!(why.contains("corrupt"), "{why}");
        }
        other => panic!("expected the event ring's error, got {other:?}"),
    }
    assert!(err.to_string().contains("event ring"), "{err}");
    assert!(matches!(
        client.close_reason(),
        Some(CloseReason::EventRing(_))
    ));
    assert!(matches!(
        wrk.list_agents(None),
        Err(ClientError::Closed(CloseReason::EventRing(_)))
    ));
    // The broker serves the others on.
    req.list_agents(None).expect("the broker serves on");
}
