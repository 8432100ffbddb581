//! The generator end to end against the real `a2a-broker` binary: the
//! library at N = 32 over socket-binary, and the command line with
//! `--json` (and `--help`).

use a2a_fanout::engine::Workload;
use a2a_fanout::{run, Config, Durability, Transport};
use serde_json::Value;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn thirty_two_delegates_over_socket_binary_pass_every_check() {
    let mut c = Config::new(Transport::SocketBinary, Durability::Normal, 32);
    c.tasks = Some(200);
    c.timeout = Duration::from_secs(90);
    // The workload before leases (fanout/tests/leases.rs has those).
    c.workload = Workload::Claims;
    let r = run(&c).expect("the run is made");
    assert!(
        r.checks.passed,
        "{}",
        a2a_fanout::report::table(std::slice::from_ref(&r))
    );
    assert_eq!(r.tasks, 200);
    // Every delegate claimed its files with one broadcast to the 31 others.
    assert_eq!(r.claim_mode, "broadcast");
    assert_eq!(r.claims, 32 * 31);
    assert_eq!(r.events, 200 * 5 + 32 * 31 * 2);
    assert_eq!(r.checks.received_events, r.checks.expected_events);
    assert!(r.registrations >= 32);
    assert!(r.latency.samples == r.events && r.latency.p50_us <= r.latency.p99_us);
    assert!(r.latency.p99_us <= r.latency.max_us);
    assert!(r.tasks_per_s > 0.0 && r.events_per_s > r.tasks_per_s);
    assert!(
        r.cpu
            .iter()
            .any(|t| t.process == "broker" && t.name == "a2a-writer"),
        "{:?}",
        r.cpu
    );
    let v = serde_json::to_value(&r).expect("serialises");
    for key in [
        "transport",
        "durability",
        "tasks_per_s",
        "events_per_s",
        "latency",
        "checks",
    ] {
        assert!(v.get(key).is_some(), "no {key} in {v}");
    }
}

/// Runs the binary with `args`, killing it after `timeout`; returns the
/// exit code and stdout.
fn fanout(args: &[&str], timeout: Duration) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_a2a-fanout"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn a2a-fanout");
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let status = a2a_testkit::process::wait_exit(&mut child, timeout);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("a2a-fanout {args:?} did not finish within {timeout:?}");
    }
    (
        status.and_then(|s| s.code()),
        reader.join().expect("reader"),
    )
}

#[test]
fn the_cli_prints_json_reports_and_exits_zero_when_the_checks_pass() {
    let (code, out) = fanout(
        &[
            "--delegates",
            "8",
            "--tasks",
            "80",
            "--transport",
            "socket-binary,socket-ndjson",
            "--durability",
            "normal",
            "--json",
            "--quiet",
        ],
        Duration::from_secs(180),
    );
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let rows = v.as_array().expect("an array of reports");
    assert_eq!(rows.len(), 2, "{out}");
    for (r, t) in rows.iter().zip(["socket-binary", "socket-ndjson"]) {
        assert_eq!(r["transport"], t);
        assert_eq!(r["durability"], "normal");
        assert_eq!(r["delegates"], 8);
        assert_eq!(r["tasks"], 80);
        assert_eq!(r["checks"]["passed"], true, "{r}");
        assert_eq!(
            r["checks"]["expected_events"],
            r["checks"]["received_events"]
        );
        assert!(r["latency"]["p99_us"].as_u64().is_some(), "{r}");
        assert!(r["events_per_s"].as_f64().is_some_and(|x| x > 0.0), "{r}");
    }
    assert_eq!(code, Some(0));
}

#[test]
fn help_explains_the_run_and_invalid_options_exit_two() {
    let (code, out) = fanout(&["--help"], Duration::from_secs(30));
    assert_eq!(code, Some(0));
    for word in [
        "exactly once",
        "--delegates",
        "--transport",
        "--processes",
        "--json",
        "chart",
    ] {
        assert!(out.contains(word), "--help lacks {word}: {out}");
    }
    let (code, _) = fanout(&["--delegates", "1", "--quiet"], Duration::from_secs(30));
    assert_eq!(code, Some(2));
}
