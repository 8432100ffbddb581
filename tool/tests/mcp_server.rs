//! `a2a-broker mcp` spoken to as an MCP host does, line by line on its
//! stdio, against a real broker: the handshake, the tool list, an unknown
//! tool, a call, and the agent leaving when stdin closes; and a start-up
//! failure that leaves stdout clean.

use a2a_client::Client;
use a2a_testkit::{broker_bin, socket_path_for, Spawn, TestDb, TIMEOUT};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn line_reader(out: std::process::ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn answer(rx: &mpsc::Receiver<String>, id: u64) -> Value {
    loop {
        let line = rx.recv_timeout(TIMEOUT).expect("an answer in time");
        let v: Value = serde_json::from_str(&line).expect("stdout carries JSON-RPC only");
        if v["id"] == id {
            return v;
        }
    }
}

#[test]
fn an_mcp_host_lists_and_calls_the_tool_and_closing_stdin_deregisters() {
    let db = TestDb::new();
    let broker = Spawn::new(&db.path)
        .socket(socket_path_for(&db.path))
        .no_stdio()
        .start(TIMEOUT)
        .expect("broker");
    let socket = broker.socket().expect("socket");
    let mut child = Command::new(broker_bin())
        .args(["mcp", "--socket"])
        .arg(&socket)
        .args(["--as", "helper", "--description", "helps"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn a2a-broker mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let rx = line_reader(child.stdout.take().expect("stdout"));
    let mut send = move |v: Value| {
        writeln!(stdin, "{v}").expect("write");
        stdin.flush().expect("flush");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test-host", "version": "0"}}}),
    );
    let init = answer(&rx, 1);
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "a2a-broker", "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = answer(&rx, 2);
    let tools = list["result"]["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 1, "{list}");
    assert_eq!(tools[0]["name"], "A2A");
    assert_eq!(tools[0]["inputSchema"], a2a_tool::schema::input_schema());
    assert_eq!(tools[0]["outputSchema"], a2a_tool::schema::output_schema());

    send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "B2B", "arguments": {"action": "discover"}}}));
    let wrong = answer(&rx, 3);
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");

    // Another agent on the broker sees the helper while it serves.
    let client = Client::connect(&socket, &broker.secret().expect("secret")).expect("connect");
    let observer = client
        .register(
            "ctx-o",
            a2a_client::agent_card("observer"),
            a2a_client::Delivery::Push,
        )
        .expect("register");
    send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "A2A", "arguments": {"action": "discover"}}}));
    let found = answer(&rx, 4);
    assert_eq!(found["result"]["isError"], false, "{found}");
    assert_eq!(
        found["result"]["structuredContent"]["peers"][0]["name"],
        "observer"
    );
    assert!(found["result"]["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.contains("- observer")));
    let names = |a: &a2a_client::Agent| -> Vec<String> {
        a.list_agents(None)
            .expect("list")
            .into_iter()
            .map(|c| c.name)
            .collect()
    };
    assert_eq!(names(&observer), ["helper"]);

    // The host closes stdin: the server deregisters and exits 0.
    drop(send);
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "a2a-broker mcp did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    assert!(names(&observer).is_empty());
}

#[test]
fn a_server_that_cannot_reach_the_broker_says_why_and_writes_nothing_to_stdout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(broker_bin())
        .args(["mcp", "--socket"])
        .arg(dir.path().join("no-such.sock"))
        .args(["--as", "helper"])
        .env("A2A_BROKER_SECRET", "0123456789abcdef0123456789abcdef")
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "stdout is the MCP channel");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot connect"), "{err}");
}

/// The `args` of the MCP server entries (```` ```json ```` blocks) of the
/// README's section "Give two coding agents one broker", as written there.
fn readme_mcp_entries() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("read README.md");
    let section = readme
        .split("\n## Give two coding agents one broker")
        .nth(1)
        .expect("the README has the section")
        .split("\n## ")
        .next()
        .unwrap();
    section
        .split("```json\n")
        .skip(1)
        .map(|block| {
            let json: Value = serde_json::from_str(block.split("```").next().unwrap())
                .expect("the README's server entry is JSON");
            let server = &json["mcpServers"]["a2a"];
            assert_eq!(server["command"], "a2a-broker", "{json}");
            server["args"]
                .as_array()
                .expect("args")
                .iter()
                .map(|a| a.as_str().expect("a string").to_string())
                .collect()
        })
        .collect()
}

/// An MCP server started with `args` (its `--socket` pointed at `socket`),
/// initialized; calls the tool with `call(arguments)`.
struct McpHost {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    rx: mpsc::Receiver<String>,
    next_id: u64,
}

impl McpHost {
    fn start(args: &[String], socket: &std::path::Path) -> McpHost {
        let mut args = args.to_vec();
        let at = args.iter().position(|a| a == "--socket").expect("--socket") + 1;
        args[at] = socket.display().to_string();
        let mut child = Command::new(broker_bin())
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn a2a-broker mcp");
        let stdin = child.stdin.take().expect("stdin");
        let rx = line_reader(child.stdout.take().expect("stdout"));
        let mut host = McpHost {
            child,
            stdin,
            rx,
            next_id: 1,
        };
        host.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test-host", "version": "0"}}),
        );
        writeln!(
            host.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .expect("write");
        host
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
        .expect("write");
        self.stdin.flush().expect("flush");
        answer(&self.rx, id)
    }

    fn call(&mut self, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": "A2A", "arguments": arguments}))["result"].clone()
    }
}

impl Drop for McpHost {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The README promises that its two MCP server entries share a context, so
/// that a lease one agent holds refuses the other and names the holder.
/// Run with the entries as the README writes them; and without their
/// `--context-id`, each agent is alone in its context and both leases are
/// granted (what the README warns of).
#[test]
fn the_readmes_two_mcp_servers_share_a_context_so_their_leases_meet() {
    let entries = readme_mcp_entries();
    assert_eq!(entries.len(), 2, "two server entries: {entries:?}");
    let db = TestDb::new();
    let broker = Spawn::new(&db.path)
        .socket(socket_path_for(&db.path))
        .no_stdio()
        .start(TIMEOUT)
        .expect("broker");
    let socket = broker.socket().expect("socket");
    let lease = json!({"action": "lease", "paths": ["src/lexer.rs"]});

    let mut planner = McpHost::start(&entries[0], &socket);
    let mut coder = McpHost::start(&entries[1], &socket);
    let held = coder.call(lease.clone());
    assert_eq!(held["isError"], false, "{held}");
    let refused = planner.call(lease.clone());
    assert_eq!(refused["isError"], true, "{refused}");
    let error = &refused["structuredContent"]["error"];
    assert_eq!(error["code"], "lease-conflict", "{refused}");
    assert_eq!(error["holder"], "coder", "{refused}");
    drop((planner, coder));

    // The same entries without --context-id: two contexts, no conflict.
    let alone: Vec<Vec<String>> = entries
        .iter()
        .map(|args| {
            let at = args
                .iter()
                .position(|a| a == "--context-id")
                .expect("--context-id");
            [&args[..at], &args[at + 2..]].concat()
        })
        .collect();
    let mut planner = McpHost::start(&alone[0], &socket);
    let mut coder = McpHost::start(&alone[1], &socket);
    assert_eq!(coder.call(lease.clone())["isError"], false);
    let granted = planner.call(lease);
    assert_eq!(granted["isError"], false, "{granted}");
}
