//! Multi-process tests: this process is the producer (the broker's side),
//! `a2a-ring-peer` the consumer (the client's side) over a real shared-memory
//! segment, plus segment creation, removal, stale cleanup and refusal of bad
//! segments.
//!
//! The stream test moves `A2A_RING_STREAM_RECORDS` records (default 10
//! million; about 4 s in a debug build, 1.5 s in release on the 2-vCPU VM).

#![cfg(not(loom))]
#![allow(unsafe_code)] // libc calls that forge a foreign segment

use a2a_ring::{
    cleanup_stale, HeaderError, OverflowBound, Producer, Published, Publisher, PushError, Segment,
    SegmentError, HEADER_BYTES,
};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

const CHECK: u64 = 0x9E37_79B9_7F4A_7C15;
/// How long any single step may take before the test fails instead of
/// hanging (generous: the machine is shared).
const STEP: Duration = Duration::from_secs(60);

/// A spawned peer, killed on drop.
struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Peer {
    fn spawn(args: &[&str]) -> Peer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_a2a-ring-peer"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn a2a-ring-peer");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Peer {
            child,
            stdin,
            lines,
        }
    }

    fn line(&self) -> String {
        self.lines
            .recv_timeout(STEP)
            .expect("the peer printed nothing in time")
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The peer's summary, parsed into (events, lagged, markers, bad, cpu_us).
    fn summary(&self) -> [u64; 5] {
        let line = self.line();
        let fields: Vec<u64> = line
            .split(' ')
            .filter_map(|kv| kv.split_once('=').and_then(|(_, v)| v.parse().ok()))
            .collect();
        fields
            .try_into()
            .unwrap_or_else(|_| panic!("unexpected peer summary: {line}"))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn record(seq: u64) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[..8].copy_from_slice(&seq.to_le_bytes());
    r[8..].copy_from_slice(&seq.wrapping_mul(CHECK).to_le_bytes());
    r
}

/// Pushes with retries while the ring is full, failing (not hanging) if the
/// peer dies or nothing moves for a whole step.
fn push_retrying(p: &mut Producer<Segment>, rec: &[u8], peer: &mut Peer) {
    let mut since = None;
    let mut spins = 0u32;
    loop {
        match p.try_push(rec) {
            Ok(()) => return,
            Err(PushError::Full) => {}
            Err(e) => panic!("push failed: {e}"),
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
            continue;
        }
        std::thread::yield_now();
        if spins % 1024 == 0 {
            let started = *since.get_or_insert_with(Instant::now);
            assert!(peer.alive(), "the consumer died");
            assert!(started.elapsed() < STEP, "the consumer stopped reading");
        }
    }
}

/// Flushes until the overflow queue and the pending lag are empty, failing
/// (not hanging) if the peer dies or stops reading.
fn flush_all(publisher: &mut Publisher<Segment>, peer: &mut Peer) {
    let deadline = Instant::now() + STEP;
    while publisher.queued() > 0 || publisher.pending_lag() > 0 {
        assert!(peer.alive() && Instant::now() < deadline, "flush stalled");
        publisher.flush().unwrap();
        std::thread::yield_now();
    }
}

fn until_sleeping(p: &Producer<Segment>) {
    let deadline = Instant::now() + STEP;
    while !p.consumer_sleeping() {
        assert!(Instant::now() < deadline, "the consumer never parked");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn shm_path(name: &str) -> String {
    format!("/dev/shm{name}")
}

fn test_prefix(tag: &str) -> String {
    format!("a2a-ring-t{tag}{}-", std::process::id())
}

#[test]
fn a_stream_that_the_consumer_keeps_up_with_arrives_whole_and_in_order() {
    let n: u64 = std::env::var("A2A_RING_STREAM_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let (mut p, name) = Segment::create_with_prefix(&test_prefix("s"), 1 << 16).unwrap();
    let mut peer = Peer::spawn(&["consume", &name, &p.capacity().to_string()]);
    assert_eq!(peer.line(), "ready");
    let start = Instant::now();
    for seq in 0..n {
        push_retrying(&mut p, &record(seq), &mut peer);
    }
    push_retrying(&mut p, &record(u64::MAX), &mut peer);
    let [events, lagged, markers, bad, _] = peer.summary();
    eprintln!(
        "stream: {n} records in {:?}, {} wake-ups",
        start.elapsed(),
        p.wake_count()
    );
    assert_eq!((events, lagged, markers, bad), (n, 0, 0, 0));
}

#[test]
fn a_consumer_that_falls_behind_reads_exact_lag_records() {
    let (p, name) = Segment::create_with_prefix(&test_prefix("l"), 4096).unwrap();
    let mut peer = Peer::spawn(&["consume", &name, "4096", "gate"]);
    assert_eq!(peer.line(), "ready");
    let bound = OverflowBound {
        max_records: 100,
        max_bytes: usize::MAX,
    };
    let mut publisher = Publisher::new(p, bound);
    // The peer reads nothing until the gate opens: 4096 bytes hold 170
    // records of 24 framed bytes, the queue 100, the rest is dropped. The
    // 16 bytes left in the ring take a lag record for the first drop.
    let total = 10_000u64;
    let mut into_ring = 0;
    for seq in 0..total {
        if publisher.publish(&record(seq)).unwrap() == Published::Ring {
            into_ring += 1;
        }
    }
    assert_eq!(into_ring, 170);
    assert_eq!(publisher.queued(), 100);
    assert_eq!(publisher.dropped(), total - 270);
    assert_eq!(publisher.pending_lag(), total - 271);

    let gate = peer.stdin.as_mut().expect("piped stdin");
    gate.write_all(b"go\n").unwrap();
    gate.flush().unwrap();
    // Drain the queue before the end record, which would otherwise push
    // the oldest queued event out.
    flush_all(&mut publisher, &mut peer);
    publisher.publish(&record(u64::MAX)).unwrap();
    flush_all(&mut publisher, &mut peer);
    assert_eq!(publisher.dropped(), total - 270);
    let [events, lagged, markers, bad, _] = peer.summary();
    // Two lag records (1, then the rest) before the 100 queued events.
    assert_eq!((events, lagged, markers, bad), (270, total - 270, 2, 0));
}

#[test]
fn an_idle_consumer_parks_without_cpu_and_wakes_for_the_next_record() {
    let (mut p, name) = Segment::create_with_prefix(&test_prefix("i"), 4096).unwrap();
    let mut peer = Peer::spawn(&["consume", &name, "4096"]);
    assert_eq!(peer.line(), "ready");
    let rounds = 10;
    let idle = Duration::from_millis(100);
    for seq in 0..rounds {
        until_sleeping(&p);
        std::thread::sleep(idle);
        push_retrying(&mut p, &record(seq), &mut peer);
    }
    until_sleeping(&p);
    push_retrying(&mut p, &record(u64::MAX), &mut peer);
    let [events, lagged, _, bad, cpu_us] = peer.summary();
    assert_eq!((events, lagged, bad), (rounds, 0, 0));
    // Every record found the consumer parked: one wake-up each.
    assert_eq!(p.wake_count(), rounds + 1);
    // A parked consumer burns nothing: its whole life (start-up included)
    // took under a tenth of the time it spent idle.
    let idle_us = (idle * rounds as u32).as_micros() as u64;
    assert!(
        cpu_us * 10 < idle_us,
        "consumer used {cpu_us} µs of CPU in {idle_us} µs idle"
    );
}

#[test]
fn a_consumer_killed_mid_stream_does_not_stall_the_producer() {
    let (p, name) = Segment::create_with_prefix(&test_prefix("k"), 1 << 16).unwrap();
    let mut peer = Peer::spawn(&["consume", &name, &p.capacity().to_string()]);
    assert_eq!(peer.line(), "ready");
    let bound = OverflowBound {
        max_records: 1000,
        max_bytes: usize::MAX,
    };
    let mut publisher = Publisher::new(p, bound);
    let mut seq = 0;
    // A live phase: the consumer reads while we publish.
    while seq < 50_000 {
        publisher.publish(&record(seq)).unwrap();
        seq += 1;
    }
    flush_all(&mut publisher, &mut peer);
    // Kill it while it is parked (or about to), the worst case for the
    // eventcount: its `sleeping` flag stays set forever.
    until_sleeping(publisher.producer());
    peer.child.kill().unwrap();
    peer.child.wait().unwrap();
    let wakes_before = publisher.producer().wake_count();
    let dropped_before = publisher.dropped();
    let queued_before = publisher.queued() as u64;
    let after = 1_000_000u64;
    let mut into_ring = 0u64;
    for _ in 0..after {
        if publisher.publish(&record(seq)).unwrap() == Published::Ring {
            into_ring += 1;
        }
        seq += 1;
    }
    let dropped = publisher.dropped() - dropped_before;
    let queued = publisher.queued() as u64;
    // Every event is accounted for: in the ring, queued, or dropped.
    assert_eq!(into_ring + queued + dropped, after + queued_before);
    assert_eq!(queued, 1000);
    // The ring took at most what fits in 64 KiB (24 bytes each).
    assert!(into_ring <= 65536 / 24, "{into_ring}");
    // A dead consumer costs at most the one wake-up its flag asked for.
    assert!(publisher.producer().wake_count() - wakes_before <= 1);
    let path = shm_path(&name);
    assert!(std::path::Path::new(&path).exists());
    drop(publisher);
    assert!(!std::path::Path::new(&path).exists(), "segment left behind");
}

#[test]
fn segments_are_private_and_removed_by_their_creator_only() {
    let prefix = test_prefix("r");
    let (p, name) = Segment::create_with_prefix(&prefix, 5000).unwrap();
    assert_eq!(p.capacity(), 8192, "rounded up to a power of two");
    assert!(name.starts_with(&format!("/{prefix}{}-", std::process::id())));
    let (p2, name2) = Segment::create_with_prefix(&prefix, 4096).unwrap();
    assert_ne!(name, name2);
    let meta = std::fs::metadata(shm_path(&name)).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert_eq!(meta.len(), (HEADER_BYTES + 8192) as u64);

    let c = Segment::open(&name, 8192).unwrap();
    assert_eq!(c.capacity(), 8192);
    drop(c);
    assert!(std::path::Path::new(&shm_path(&name)).exists());
    drop(p);
    assert!(!std::path::Path::new(&shm_path(&name)).exists());
    match Segment::open(&name, 8192) {
        Err(SegmentError::Os {
            op: "shm_open",
            source,
        }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound)
        }
        other => panic!("opened a removed segment: {:?}", other.err()),
    }
    drop(p2);
    assert!(!std::path::Path::new(&shm_path(&name2)).exists());
}

#[test]
fn stale_segments_of_dead_creators_are_cleaned_and_live_ones_kept() {
    let prefix = test_prefix("c");
    let mut crashed = Peer::spawn(&["crash-create", &prefix, "4096"]);
    let dead = crashed.line();
    assert!(crashed.child.wait().unwrap().success());
    assert!(std::path::Path::new(&shm_path(&dead)).exists());
    // The leftover is a valid ring: only the cleanup removes it.
    assert!(Segment::open(&dead, 4096).is_ok());
    let (live, live_name) = Segment::create_with_prefix(&prefix, 4096).unwrap();

    let removed = cleanup_stale(&prefix).unwrap();
    assert_eq!(removed, vec![dead.clone()]);
    assert!(!std::path::Path::new(&shm_path(&dead)).exists());
    assert!(std::path::Path::new(&shm_path(&live_name)).exists());
    assert_eq!(cleanup_stale(&prefix).unwrap(), Vec::<String>::new());
    drop(live);
    assert!(cleanup_stale("bad/prefix").is_err());
}

/// Creates a shared-memory object by hand (as another program might).
fn forge(name: &str, len: usize, mode: libc::mode_t, fill: u8) {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: plain libc calls on a fresh descriptor we close at the end.
    unsafe {
        let fd = libc::shm_open(
            c.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
            0o600,
        );
        assert!(fd >= 0, "{}", std::io::Error::last_os_error());
        assert_eq!(libc::fchmod(fd, mode), 0);
        let data = vec![fill; len];
        assert_eq!(libc::write(fd, data.as_ptr().cast(), len), len as isize);
        libc::close(fd);
    }
}

fn unlink(name: &str) {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: a valid C string.
    unsafe { libc::shm_unlink(c.as_ptr()) };
}

#[test]
fn open_refuses_foreign_or_malformed_segments() {
    let prefix = test_prefix("f");
    let garbage = format!("/{prefix}1-garbage");
    forge(&garbage, HEADER_BYTES + 4096, 0o600, 0xA5);
    let shared = format!("/{prefix}1-shared");
    forge(&shared, HEADER_BYTES + 4096, 0o644, 0);

    let bad_magic = Segment::open(&garbage, 4096).err();
    let wrong_size = Segment::open(&garbage, 8192).err();
    let public = Segment::open(&shared, 4096).err();
    unlink(&garbage);
    unlink(&shared);
    assert!(
        matches!(bad_magic, Some(SegmentError::Header(HeaderError::BadMagic))),
        "{bad_magic:?}"
    );
    assert!(
        matches!(wrong_size, Some(SegmentError::SizeMismatch { .. })),
        "{wrong_size:?}"
    );
    assert!(
        matches!(public, Some(SegmentError::NotPrivate { .. })),
        "{public:?}"
    );
    assert!(matches!(
        Segment::open(&garbage, 5000),
        Err(SegmentError::BadCapacity(5000))
    ));
    assert!(matches!(
        Segment::open("no-slash", 4096),
        Err(SegmentError::BadName(_))
    ));
    assert!(matches!(
        Segment::open("/a/b", 4096),
        Err(SegmentError::BadName(_))
    ));
}
