//! A full `/dev/shm` never kills the broker (docs/protocol.md §1 Framing, the event ring):
//! the real binary in a private mount namespace whose `/dev/shm` is a small
//! tmpfs, filled by another file, in both orders:
//! - full before the handshake that asks for a ring: the ring is declined
//!   (no `eventRing`, one `-v` line saying why), the client falls back to
//!   the socket transparently and its events arrive there (and
//!   `a2a-broker watch --event-ring` says so on stderr);
//! - full after the ring was granted: events keep arriving through it (its
//!   pages were allocated at creation);
//!
//! and the total-ring budget (half of `/dev/shm` at most) declines a ring
//! that would pass it while `/dev/shm` still has room.
//!
//! Each test re-runs itself under `unshare -m` (this file's test binary,
//! `--exact` its own name, with `A2A_SHM_NS_CHILD` set): inside, it mounts
//! the tmpfs and runs the scenario; outside, it checks that the child ran
//! it and passed. Where a private mount namespace cannot be made (no
//! CAP_SYS_ADMIN, e.g. an unprivileged container), the test prints
//! `SKIPPED` and passes.

use a2a_client::{agent_card, message_to, Client, ClientOptions, Delivery};
use a2a_testkit::{BrokerProcess, Spawn, TIMEOUT};
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Set in the re-run child, which is inside the private namespace.
const CHILD: &str = "A2A_SHM_NS_CHILD";

/// Runs `scenario` with `/dev/shm` a fresh tmpfs of `size` (mount's
/// `size=`) in a private mount namespace, or says SKIPPED.
fn with_small_shm(test: &str, size: &str, scenario: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size},mode=1777"))
            .args(["tmpfs", "/dev/shm"])
            .status()
            .expect("run mount");
        assert!(mounted.success(), "mount a tmpfs on /dev/shm: {mounted}");
        scenario();
        return;
    }
    let probe = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg("mount -t tmpfs -o size=64k tmpfs /dev/shm")
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        other => {
            eprintln!(
                "SKIPPED {test}: cannot mount a tmpfs in a private mount namespace \
                 (unshare -m needs CAP_SYS_ADMIN): {other:?}"
            );
            return;
        }
    }
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private"])
        .arg(std::env::current_exe().expect("this test binary"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("run the test in a private mount namespace");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("--- {test} in a private mount namespace ---\n{stdout}\n{stderr}");
    assert!(out.status.success(), "{test} failed in the namespace");
    assert!(
        stdout.contains("1 passed"),
        "{test} did not run in the namespace"
    );
}

/// Fills `/dev/shm` with one file until the tmpfs refuses more.
fn fill_shm() {
    let mut f = std::fs::File::create("/dev/shm/filler").expect("create the filler");
    let chunk = vec![0xA5u8; 4096];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling /dev/shm: {e}"),
        }
    }
    let mut probe = std::fs::File::create("/dev/shm/probe").expect("create a probe");
    assert!(probe.write_all(&[1; 4096]).is_err(), "/dev/shm is not full");
}

fn broker(dir: &Path) -> BrokerProcess {
    Spawn::new(dir.join("db"))
        .socket(dir.join("run").join("sock"))
        .no_stdio()
        .arg("-v")
        .start(TIMEOUT)
        .expect("broker ready")
}

fn client(p: &BrokerProcess, ring: Option<usize>) -> Result<Client, a2a_client::ClientError> {
    let opts = ClientOptions {
        event_ring_bytes: ring,
        ..Default::default()
    };
    Client::connect_with(p.socket().unwrap(), &p.secret().unwrap(), opts)
}

/// Panics saying how the broker died, if it did.
fn assert_alive(p: &mut BrokerProcess, when: &str) {
    // A broker that is dying may not have exited yet: give it a moment.
    if let Some(status) = p.wait_exit(Duration::from_millis(500)) {
        let status = Some(status);
        panic!(
            "the broker died {when}: {status:?} (signal {:?}; SIGBUS is {})",
            status.and_then(|s| s.signal()),
            libc::SIGBUS
        );
    }
}

/// Sends `n` messages from a client without a ring to `worker` on `on`, and
/// returns how many events the worker received within the timeout.
fn send_and_count(p: &mut BrokerProcess, on: &a2a_client::Agent, n: usize) -> usize {
    let sender = client(p, None).expect("connect a sender");
    let req = sender
        .register("ctx-req", agent_card("req"), Delivery::Push)
        .expect("register the requester");
    let text = "x".repeat(1000);
    for _ in 0..n {
        if let Err(e) = req.send(message_to(on.id(), &text), None) {
            // A connection closed under a send: the broker may be dying.
            let status = p.wait_exit(Duration::from_secs(2));
            panic!(
                "send: {e}; the broker's exit: {status:?} (signal {:?}; SIGBUS is {})",
                status.and_then(|s| s.signal()),
                libc::SIGBUS
            );
        }
    }
    let mut got = 0;
    let deadline = std::time::Instant::now() + TIMEOUT;
    while got < n && std::time::Instant::now() < deadline {
        got += on.wait(Duration::from_millis(200)).expect("events").len();
    }
    got
}

#[test]
fn a_full_dev_shm_before_the_handshake_declines_the_ring_and_events_use_the_socket() {
    with_small_shm(
        "a_full_dev_shm_before_the_handshake_declines_the_ring_and_events_use_the_socket",
        "1m",
        || {
            let dir = tempfile::tempdir().unwrap();
            let mut p = broker(dir.path());
            fill_shm();
            let c = client(&p, Some(64 * 1024));
            assert_alive(
                &mut p,
                "at a handshake asking for a ring on a full /dev/shm",
            );
            let c = c.expect("the handshake succeeds without a ring");
            assert!(
                c.handshake_result().event_ring.is_none(),
                "a ring granted on a full /dev/shm"
            );
            assert!(!c.uses_event_ring());
            let wrk = c
                .register("ctx-wrk", agent_card("wrk"), Delivery::Push)
                .unwrap();
            assert_eq!(
                send_and_count(&mut p, &wrk, 20),
                20,
                "events over the socket"
            );
            assert_alive(&mut p, "delivering events");
            let lines = p.stderr.all();
            let declined: Vec<_> = lines
                .iter()
                .filter(|l| l.contains("event ring declined"))
                .collect();
            assert_eq!(declined.len(), 1, "one -v line: {lines:?}");
            assert!(
                declined[0].contains("shared memory is short"),
                "{declined:?}"
            );

            // `a2a-broker watch --event-ring` says where its events come from.
            let mut watch = Command::new(a2a_testkit::broker_bin())
                .args(["watch", "--socket"])
                .arg(p.socket().unwrap())
                .args(["--as", "watcher", "--context", "w", "--event-ring", "65536"])
                .env(a2a_testkit::SECRET_ENV, p.secret().unwrap())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn a2a-broker watch");
            let mut line = String::new();
            std::io::BufRead::read_line(
                &mut std::io::BufReader::new(watch.stderr.take().unwrap()),
                &mut line,
            )
            .unwrap();
            watch.kill().unwrap();
            watch.wait().unwrap();
            assert!(
                line.contains("through the socket (the broker granted no event ring)"),
                "watch's stderr: {line}"
            );
            assert_alive(&mut p, "serving watch");
        },
    );
}

#[test]
fn a_dev_shm_filled_after_the_grant_never_kills_the_broker() {
    with_small_shm(
        "a_dev_shm_filled_after_the_grant_never_kills_the_broker",
        "1m",
        || {
            let dir = tempfile::tempdir().unwrap();
            let mut p = broker(dir.path());
            let c = client(&p, Some(64 * 1024)).expect("connect");
            assert!(
                c.uses_event_ring(),
                "the ring is granted while there is room"
            );
            let wrk = c
                .register("ctx-wrk", agent_card("wrk"), Delivery::Push)
                .unwrap();
            fill_shm();
            // 40 events of ~1.2 KB: every page of the 64 KiB ring is
            // written, most of them for the first time.
            let got = send_and_count(&mut p, &wrk, 40);
            assert_alive(&mut p, "writing into its ring after /dev/shm filled up");
            assert_eq!(got, 40, "every event arrives through the ring");
            assert!(c.close_reason().is_none());
        },
    );
}

#[test]
fn the_rings_together_stay_within_half_of_dev_shm() {
    with_small_shm(
        "the_rings_together_stay_within_half_of_dev_shm",
        "2m",
        || {
            let dir = tempfile::tempdir().unwrap();
            let mut p = broker(dir.path());
            // Budget: half of 2 MiB. Each 256 KiB ring takes 256 KiB and a
            // page: three fit, a fourth would pass the budget while the
            // tmpfs still has ~1.2 MiB free.
            let granted: Vec<Client> = (0..3)
                .map(|_| client(&p, Some(256 * 1024)).expect("connect"))
                .collect();
            assert!(granted.iter().all(Client::uses_event_ring));
            let fourth = client(&p, Some(256 * 1024)).expect("connect");
            assert!(!fourth.uses_event_ring(), "the budget is spent");
            let wrk = fourth
                .register("ctx-wrk", agent_card("wrk"), Delivery::Push)
                .unwrap();
            assert_eq!(send_and_count(&mut p, &wrk, 3), 3, "events over the socket");
            let lines = p.stderr.all();
            assert!(
                lines
                    .iter()
                    .any(|l| l.contains("event ring declined") && l.contains("budget")),
                "{lines:?}"
            );
            // A ring that goes gives its share back.
            drop(granted);
            let again = (0..50)
                .map(|_| {
                    std::thread::sleep(Duration::from_millis(100));
                    client(&p, Some(256 * 1024)).expect("connect")
                })
                .find(Client::uses_event_ring);
            assert!(again.is_some(), "the budget never came back");
            assert_alive(&mut p, "declining rings");
        },
    );
}
