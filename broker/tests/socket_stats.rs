//! The local socket's write counters belong to its server, not to the
//! process: two servers of one broker process each count only the frames
//! their own connections were written.

use a2a_broker::server::{start, ServeConfig};
use a2a_broker::transport::socket::listen;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

#[test]
fn each_socket_server_counts_its_own_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = start(&ServeConfig::new(dir.path().join("stats.db"))).expect("start");
    let sock = |name: &str| dir.path().join("run").join(name);
    let a = listen(broker.clone(), sock("a").to_str().expect("utf-8"), 8).expect("listen a");
    let b = listen(broker.clone(), sock("b").to_str().expect("utf-8"), 8).expect("listen b");
    assert_eq!(a.write_stats(), (0, 0));

    // A line that is not JSON: the broker answers a parse error (§4).
    let mut conn = UnixStream::connect(&a.path).expect("connect a");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    conn.write_all(b"not json\n").expect("write");
    let mut line = String::new();
    BufReader::new(&conn)
        .read_line(&mut line)
        .expect("read the answer");
    assert!(line.contains("-32700"), "a parse error: {line}");

    // The writer counts right after its write returns: wait for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.write_stats().0 == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let (frames, calls) = a.write_stats();
    assert!(frames >= 1 && calls >= 1, "a counted ({frames}, {calls})");
    assert!(calls <= frames, "a write call carries one frame or more");
    assert_eq!(b.write_stats(), (0, 0), "b wrote nothing");
}
