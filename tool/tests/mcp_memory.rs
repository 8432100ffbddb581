//! `a2a-broker mcp` holds what its model has not read yet within a bound:
//! 128 tasks carrying a 1 MiB file each, queued while the model does not
//! call `wait`, raise the server's peak resident memory by far less than
//! their 128 MiB (it keeps each file's name and size, not its bytes), and
//! every task still reaches the model, over bounded `wait` results.

mod support;

use a2a_client::proto::types::FileContent;
use a2a_client::{agent_card, message_to, Delivery, Message, Part};
use a2a_testkit::{broker_bin, TIMEOUT};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;

/// Peak resident memory of process `pid`, in KiB (`VmHWM`).
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

fn file_message(to: &str, i: usize) -> Message {
    use base64::Engine as _;
    Message {
        parts: vec![Part::File {
            file: FileContent {
                name: Some(format!("f{i}.bin")),
                mime_type: Some("application/octet-stream".into()),
                uri: None,
                bytes: Some(base64::engine::general_purpose::STANDARD.encode(vec![b'z'; 1 << 20])),
            },
            metadata: None,
        }],
        ..message_to(to, "")
    }
}

#[test]
fn queued_file_events_do_not_grow_the_mcp_server_by_their_bytes() {
    let running = support::broker();
    let socket = running.broker.socket().expect("socket");
    let mut child = Command::new(broker_bin())
        .args(["mcp", "--socket"])
        .arg(&socket)
        .args(["--as", "helper"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn a2a-broker mcp");
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let (tx, rx) = mpsc::channel::<String>();
    let out = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut id = 0;
    let mut call = |method: &str, params: Value| -> Value {
        id += 1;
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
        .expect("write");
        stdin.flush().expect("flush");
        loop {
            let line = rx.recv_timeout(TIMEOUT * 4).expect("an answer in time");
            let v: Value = serde_json::from_str(&line).expect("JSON-RPC");
            if v["id"] == id {
                return v;
            }
        }
    };
    call(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test-host", "version": "0"}}),
    );
    // The server is registered and idle: its peak so far is the baseline.
    let r = call(
        "tools/call",
        json!({"name": "A2A", "arguments": {"action": "discover"}}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let before = peak_kib(pid);

    // 128 tasks, 1 MiB file each, from two requesters (a context holds at
    // most 128 open tasks); the model does not wait meanwhile.
    let client = &running.client;
    let mut sent = HashSet::new();
    for r in 0..2 {
        let asker = client
            .register(
                &format!("ctx-r{r}"),
                agent_card(&format!("r{r}")),
                Delivery::Push,
            )
            .expect("register");
        for i in 0..64 {
            let t = asker.send(file_message("helper", i), None).expect("send");
            sent.insert(t.id);
        }
    }
    // The model reads them all, over several bounded results.
    let mut seen = HashSet::new();
    let mut waits = 0;
    while seen.len() < sent.len() {
        waits += 1;
        assert!(
            waits <= 40,
            "{} of {} tasks after 40 waits",
            seen.len(),
            sent.len()
        );
        let r = call(
            "tools/call",
            json!({"name": "A2A", "arguments": {"action": "wait", "timeoutSeconds": 30}}),
        );
        let events = r["result"]["structuredContent"]["events"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for e in events {
            seen.insert(e["taskId"].as_str().expect("taskId").to_owned());
        }
    }
    assert_eq!(seen, sent);
    let after = peak_kib(pid);
    let grew_mib = after.saturating_sub(before) / 1024;
    eprintln!("a2a-broker mcp peak RSS: {before} KiB before, {after} KiB after ({grew_mib} MiB more) for 128 MiB of queued files");
    // Holding the bytes is 128 MiB and more (their base64 text: 171 MiB).
    assert!(
        grew_mib < 48,
        "the server's peak grew by {grew_mib} MiB for 128 queued 1 MiB files"
    );
    // The host closes stdin: the server deregisters and exits.
    drop(stdin);
    let _ = child.wait();
}
