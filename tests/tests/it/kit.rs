//! The test kit's process control as the client, C ABI and Node tests use
//! it: a socket-only broker (`--no-stdio`) with a secret from the
//! environment, a second one refused on the same socket, SIGTERM.

use a2a_testkit::*;
use std::time::Duration;

#[test]
fn a_socket_only_broker_takes_the_environment_secret_and_stops_on_sigterm() {
    let db = TestDb::new();
    let socket = socket_path_for(&db.path);
    let mut p = Spawn::new(&db.path)
        .socket(&socket)
        .no_stdio()
        .env(SECRET_ENV, "kit-secret-0123456789abcdef")
        .start(TIMEOUT)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        p.ready["pid"].as_u64(),
        Some(u64::from(p.pid)),
        "{}",
        p.ready
    );
    assert_eq!(p.socket().as_deref(), Some(socket.as_path()));
    // The secret came from the environment: no file is minted.
    assert!(p.ready.get("secretFile").is_none(), "{}", p.ready);
    assert_eq!(p.secret().as_deref(), Some("kit-secret-0123456789abcdef"));
    assert!(p.take_stdin().is_none() && p.take_stdout().is_none());

    let mut c = Conn::socket(&socket, p.secret()).expect("connect");
    assert_eq!(c.handshake()["protocolVersion"], 10);
    let a = c.agent("ctx", "a");
    assert_eq!(a.id, "a");

    // A second broker on the same socket is refused before it is ready.
    let other = TestDb::new();
    match Spawn::new(&other.path)
        .socket(&socket)
        .no_stdio()
        .start(TIMEOUT)
    {
        Err(SpawnError::Exited {
            status: Some(status),
            stderr,
        }) => {
            assert!(!status.success(), "{status:?}");
            assert!(stderr.iter().any(|l| l.contains("in use")), "{stderr:?}");
        }
        other => panic!("a second broker on one socket started: {other:?}"),
    }

    assert!(p.alive());
    p.terminate().expect("SIGTERM");
    let status = p.wait_exit(TIMEOUT).expect("the broker exits on SIGTERM");
    assert_eq!(status.code(), Some(0), "stderr: {:?}", p.stderr.all());
    assert!(!p.alive());
    assert!(p.signal(libc::SIGTERM).is_err(), "signalled a reaped child");
    // Its connection sees the end.
    c.close();
    assert!(c.wait_closed(Duration::from_secs(5)));
}
