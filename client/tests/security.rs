//! The local socket's guards (docs/protocol.md §2 Opening a connection): the secret, owner-only
//! files and directory, one broker per socket path, and reuse of a socket
//! file left by a killed broker.

mod common;

use a2a_client::proto::binary::{ClientFrame, ServerFrame};
use a2a_client::proto::call::Call;
use a2a_client::proto::params::ListAgentsParams;
use a2a_client::{agent_card, Client, ClientError, Delivery, RpcError};
use common::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o777
}

fn assert_bad_secret(e: &RpcError) {
    assert_eq!(e.code, -32600, "{e}");
    assert_eq!(e.data.as_ref().unwrap()["reason"], "bad secret", "{e}");
}

#[test]
fn a_wrong_or_missing_secret_is_refused_and_the_connection_closed() {
    let b = Broker::start();

    // Typed client: the broker's error, code and data intact.
    match Client::connect(&b.socket, "not-the-secret") {
        Err(ClientError::Rpc(e)) => assert_bad_secret(&e),
        other => panic!("expected a bad secret error, got {other:?}"),
    }

    // Binary frames, wrong and missing: the error, then end of stream.
    for secret in [Some("wrong"), None] {
        let mut raw = Raw::connect(&b.socket);
        raw.preamble();
        raw.send(&handshake_frame(7, secret)).unwrap();
        match raw.recv() {
            Some(ServerFrame::Response {
                id: 7,
                result: Err(e),
            }) => assert_bad_secret(&e),
            other => panic!("expected the handshake error, got {other:?}"),
        }
        assert!(
            raw.recv().is_none(),
            "the connection stays open after a bad secret"
        );
    }

    // NDJSON, the same.
    for params in [
        json!({"protocolVersion": 10}),
        json!({"protocolVersion": 10, "secret": "nope"}),
    ] {
        let mut raw = Raw::connect(&b.socket);
        raw.send_line(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "app.handshake", "params": params}),
        );
        let reply = raw.recv_line().expect("a reply");
        assert_eq!(reply["id"], 1);
        assert_eq!(reply["error"]["code"], -32600);
        assert_eq!(reply["error"]["data"]["reason"], "bad secret");
        assert!(
            raw.recv_line().is_none(),
            "the connection stays open after a bad secret"
        );
    }

    // Before any handshake, nothing else is served.
    let mut raw = Raw::connect(&b.socket);
    raw.preamble();
    raw.send(&ClientFrame::Request {
        id: 1,
        call: Call::ListAgents(ListAgentsParams::default()),
    })
    .unwrap();
    match raw.recv() {
        Some(ServerFrame::Response {
            id: 1,
            result: Err(e),
        }) => {
            assert_eq!(e.data.unwrap()["reason"], "handshake required")
        }
        other => panic!("expected handshake required, got {other:?}"),
    }

    // The right secret still works.
    let c = b.connect();
    c.register("ctx", agent_card("ok"), Delivery::Push).unwrap();
}

#[test]
fn socket_directory_and_secret_file_are_owner_only() {
    let b = Broker::start();
    let dir = b.socket.parent().unwrap();
    assert_eq!(mode(dir), 0o700, "socket directory");
    assert_eq!(mode(&b.socket), 0o600, "socket");
    let secret_file = a2a_client::secret_file(&b.socket);
    assert_eq!(b.ready["secretFile"], secret_file.display().to_string());
    assert_eq!(b.ready["socket"], b.socket.display().to_string());
    assert_eq!(b.ready["pid"], b.child.id());
    assert_eq!(mode(&secret_file), 0o600, "secret file");
    // At least 128 bits.
    assert!(
        b.secret.len() >= 32,
        "secret too short: {} chars",
        b.secret.len()
    );
}

#[test]
fn a_socket_directory_open_to_others_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("open");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let f = Broker::spawn_at(&dir.join("sock"), &tmp.path().join("db"), &[])
        .err()
        .expect("the broker must refuse an open directory");
    assert_ne!(f.status.map(|s| s.success()), Some(true), "{f:?}");
    assert_eq!(f.stderr.len(), 1, "{f:?}");
    assert!(f.stderr[0].contains("0700"), "{f:?}");
    assert!(!dir.join("sock").exists());
}

#[test]
fn a_secret_from_the_environment_is_used_and_no_file_written() {
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("run").join("sock");
    let b = Broker::spawn_at(
        &socket,
        &tmp.path().join("db"),
        &[(a2a_client::SECRET_ENV, "from-the-starter")],
    )
    .unwrap();
    assert!(b.ready.get("secretFile").is_none(), "{}", b.ready);
    assert!(!a2a_client::secret_file(&socket).exists());
    Client::connect(&socket, "from-the-starter").expect("env secret accepted");
    assert!(matches!(
        Client::connect(&socket, "other"),
        Err(ClientError::Rpc(_))
    ));
}

#[test]
fn one_broker_per_socket_and_a_stale_socket_is_reused() {
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("run").join("sock");
    let mut first = Broker::spawn_at(&socket, &tmp.path().join("db1"), &[]).unwrap();
    let c = first.connect();
    c.register("ctx", agent_card("first"), Delivery::Push)
        .unwrap();

    // A second broker on the live socket fails with one clear line.
    let f = Broker::spawn_at(&socket, &tmp.path().join("db2"), &[])
        .err()
        .expect("a second broker on a live socket must not start");
    assert_ne!(f.status.map(|s| s.success()), Some(true), "{f:?}");
    assert_eq!(f.stderr.len(), 1, "{f:?}");
    assert!(f.stderr[0].contains("in use"), "{f:?}");
    // ... and the first one is untouched.
    assert!(first.alive());
    let a = b_list(&first);
    assert_eq!(a, ["first"]);
    drop(c);

    // SIGKILL leaves the socket file behind; a new broker takes it over.
    first.kill();
    assert!(socket.exists(), "the killed broker's socket file is gone");
    let old_secret = first.secret.clone();
    let third = Broker::spawn_at(&socket, &tmp.path().join("db3"), &[]).unwrap();
    assert_ne!(third.secret, old_secret, "a fresh secret is minted");
    let c = third.connect();
    c.register("ctx", agent_card("third"), Delivery::Push)
        .unwrap();
    assert!(matches!(
        Client::connect(&socket, &old_secret),
        Err(ClientError::Rpc(_))
    ));
}

/// The names a fresh agent on `b` can see.
fn b_list(b: &Broker) -> Vec<String> {
    let c = b.connect();
    let me = c
        .register("ctx-probe", agent_card("probe"), Delivery::Push)
        .unwrap();
    me.list_agents(None)
        .unwrap()
        .into_iter()
        .map(|card| card.name)
        .collect()
}
