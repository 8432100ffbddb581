//! `a2a-broker demo`, the client program shipped in the broker's binary:
//! it runs its story against a broker it starts itself, and with `--db`
//! keeps the database so that the audit commands it prints work again.

mod common;

use common::*;
use std::process::{Command, Stdio};

#[test]
fn the_demo_runs_and_its_printed_audit_commands_work_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let out_path = dir.path().join("out.txt");
    let mut child = Command::new(broker_bin())
        .arg("demo")
        .arg("--db")
        .arg(&db)
        .env_remove(a2a_client::SECRET_ENV)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let status = wait_exit(&mut child, TIMEOUT * 2).expect("the demo hung");
    let out = std::fs::read_to_string(&out_path).unwrap();
    assert!(status.success(), "demo failed: {out}");
    assert!(
        out.contains("the blocking send returns: state input-required"),
        "{out}"
    );
    assert!(out.contains("the broker exited with status 0"), "{out}");
    // The printed `tasks show` command, run again on the kept database.
    let show = out
        .lines()
        .find(|l| l.trim_start().starts_with("a2a-broker tasks show"))
        .unwrap_or_else(|| panic!("no audit command printed: {out}"));
    let id = show.split_whitespace().last().unwrap();
    let again = Command::new(broker_bin())
        .args(["tasks", "show", "--db"])
        .arg(&db)
        .arg(id)
        .output()
        .unwrap();
    assert!(again.status.success());
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(text.contains("LGTM, two nits"), "{text}");
    let list = Command::new(broker_bin())
        .args(["tasks", "list", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    assert_eq!(text.lines().count(), 1 + 4, "header and four tasks: {text}");
}
