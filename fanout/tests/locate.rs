//! `a2a-fanout --socket` finds a running broker as every front end does
//! (`a2a_client::locate`): a `serve --socket` NAME or a path, and "no
//! broker there" said apart from a wrong secret, before any run starts.

use a2a_testkit::{Spawn, SECRET_ENV, TIMEOUT};
use std::path::Path;
use std::process::Command;

/// Runs `a2a-fanout ARGS` with `XDG_RUNTIME_DIR=xdg`: (exit code, stdout, stderr).
fn fanout(xdg: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_a2a-fanout"))
        .args(args)
        .env("XDG_RUNTIME_DIR", xdg)
        .env_remove(SECRET_ENV)
        .output()
        .expect("run a2a-fanout");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn socket_takes_a_name_or_a_path_and_says_when_no_broker_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let xdg = dir.path().join("xdg");

    let (code, _, err) = fanout(&xdg, &["--socket", "nothing", "-q"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err,
        format!(
            "a2a-fanout: no broker is listening at {} (from nothing): start one with `a2a-broker serve --socket nothing`\n",
            xdg.join("a2a-broker").join("nothing.sock").display()
        )
    );

    let _broker = Spawn::new(dir.path().join("db"))
        .socket("main")
        .env("XDG_RUNTIME_DIR", &xdg)
        .no_stdio()
        .start(TIMEOUT)
        .expect("broker ready");
    let wrong = dir.path().join("wrong.secret");
    std::fs::write(&wrong, "wrong\n").unwrap();
    let (code, _, err) = fanout(
        &xdg,
        &[
            "--socket",
            "main",
            "--secret-file",
            wrong.to_str().unwrap(),
            "-q",
        ],
    );
    assert_eq!(code, Some(2));
    assert!(
        err.contains(&format!("refused the secret in {}", wrong.display()))
            && !err.contains("no broker"),
        "{err}"
    );

    let path = xdg.join("a2a-broker").join("main.sock");
    for socket in ["main", path.to_str().unwrap()] {
        let (code, out, err) = fanout(
            &xdg,
            &[
                "--socket",
                socket,
                "--delegates",
                "2",
                "--tasks",
                "10",
                "-q",
                "--json",
            ],
        );
        assert_eq!(code, Some(0), "--socket {socket}: {err}");
        let reports: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(reports[0]["tasks"], 10, "{out}");
    }
}

#[test]
fn an_installed_fanout_starts_the_broker_beside_it() {
    use std::os::unix::fs::PermissionsExt;
    // An a2a-fanout copied (installed) into a directory with an a2a-broker
    // of its own: that one is started, not the workspace's.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let exe = bin.join("a2a-fanout");
    std::fs::copy(env!("CARGO_BIN_EXE_a2a-fanout"), &exe).unwrap();
    let marker = dir.path().join("started");
    let broker = bin.join("a2a-broker");
    std::fs::write(
        &broker,
        format!("#!/bin/sh\necho started > '{}'\nexit 3\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&broker, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A file just written may still be open for writing in a child that
    // another test thread forked meanwhile (it closes at that child's
    // exec): running it fails with ETXTBSY until then.
    let mut tries = 0;
    let out = loop {
        match Command::new(&exe)
            .args(["--delegates", "2", "--tasks", "2", "-q"])
            .env_remove(a2a_testkit::bin::BIN_ENV)
            .output()
        {
            Err(e) if e.raw_os_error() == Some(26) && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => break r.expect("run the copied a2a-fanout"),
        }
    };
    assert_eq!(out.status.code(), Some(2));
    assert!(
        marker.exists(),
        "the broker beside a2a-fanout was not started: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
