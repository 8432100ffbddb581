//! What the A2A tool adds to a call, measured: one `get` of a task as
//!
//! 1. the bare client call (`Agent::get_task`, the baseline),
//! 2. the tool in-process (`Session::call`, `{"action": "get"}`),
//! 3. a `tools/call` to `a2a-broker mcp` over its stdio, as an MCP host
//!    makes it (JSON-RPC lines in and out of the child).
//!
//! All three against one broker (`a2a-broker serve`, release build), in the
//! same run, in alternating blocks so that the machine's noise hits each
//! alike. Prints p50/p99 of each and the overheads over the baseline.
//!
//! `cargo run --release -p a2a-tool --example mcp_round_trip [-- CALLS]`

use a2a_client::{message_to, Client};
use a2a_testkit::bin::{locate, Build, Profile};
use a2a_testkit::{socket_path_for, Spawn, TestDb, TIMEOUT};
use a2a_tool::{Registration, Session, SessionOptions};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let calls: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5000);
    // The broker of this build's profile (an example's path does not say it).
    let profile = if cfg!(debug_assertions) {
        Profile::Debug
    } else {
        Profile::Release
    };
    let bin = locate(profile, Build::Always).expect("the a2a-broker binary");
    let db = TestDb::new();
    let broker = Spawn::new(&db.path)
        .bin(&bin)
        .socket(socket_path_for(&db.path))
        .no_stdio()
        .start(TIMEOUT)
        .expect("broker starts");
    let socket = broker.socket().expect("socket");
    let secret = broker.secret().expect("secret");

    // The MCP server is the requester of the task it reads; the in-process
    // session and the bare agent read a task of their own.
    let mut mcp = Command::new(&bin)
        .args(["mcp", "--socket"])
        .arg(&socket)
        .args(["--as", "mcp-reader"])
        .env("A2A_BROKER_SECRET", &secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn a2a-broker mcp");
    let mut server = McpPipe {
        to: mcp.stdin.take().expect("stdin"),
        from: BufReader::new(mcp.stdout.take().expect("stdout")),
        next_id: 0,
    };
    server.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
    );
    server.notify("notifications/initialized");

    let client = Client::connect(&socket, &secret).expect("connect");
    let worker = client
        .register(
            "ctx-w",
            a2a_client::agent_card("worker"),
            a2a_client::Delivery::Push,
        )
        .expect("register worker");
    let reg = Registration {
        context_id: "ctx-bench".into(),
        name: "reader".into(),
        ..Default::default()
    };
    let session = Session::register(&client, &reg, SessionOptions::default()).expect("register");
    let task = session
        .agent()
        .send(message_to("worker", "a task to read"), None)
        .expect("send")
        .id;
    let sent = server.request(
        "tools/call",
        json!({"name": "A2A", "arguments": {"action": "send", "to": "worker", "text": "a task to read"}}),
    );
    let mcp_task = sent["result"]["structuredContent"]["taskId"]
        .as_str()
        .expect("the MCP send's task id")
        .to_owned();
    let _ = worker;

    let mut bare = Vec::with_capacity(calls);
    let mut tool = Vec::with_capacity(calls);
    let mut over_mcp = Vec::with_capacity(calls);
    let args = json!({"action": "get", "taskId": task});
    let mcp_args = json!({"name": "A2A", "arguments": {"action": "get", "taskId": mcp_task}});
    // Blocks of BLOCK calls of each kind in turn: the noise of the machine
    // spreads over all three, and a call never follows another kind's
    // (whose other process may still be running down).
    const BLOCK: usize = 100;
    for _ in 0..calls.div_ceil(BLOCK) {
        for _ in 0..BLOCK {
            let t = Instant::now();
            session.agent().get_task(&task, None).expect("get");
            bare.push(t.elapsed());
        }
        for _ in 0..BLOCK {
            let t = Instant::now();
            let r = session.call(&args);
            tool.push(t.elapsed());
            assert!(!r.is_error, "{}", r.text);
        }
        for _ in 0..BLOCK {
            let t = Instant::now();
            let r = server.request("tools/call", mcp_args.clone());
            over_mcp.push(t.elapsed());
            assert_eq!(r["result"]["isError"], false, "{r}");
        }
    }
    // Closing its stdin ends the server (and deregisters its agent).
    drop(server);
    let _ = mcp.kill();
    let _ = mcp.wait();

    report(&mut bare, &mut tool, &mut over_mcp, BLOCK, profile);
}

/// p50 and p99 of each way of calling, and the overheads at p50 over the
/// bare client.
fn report(
    bare: &mut [Duration],
    tool: &mut [Duration],
    over_mcp: &mut [Duration],
    block: usize,
    profile: Profile,
) {
    let (b50, b99) = pct(bare);
    let (t50, t99) = pct(tool);
    let (m50, m99) = pct(over_mcp);
    println!(
        "{} calls each, in alternating blocks of {block}; one broker ({profile:?}); a shared 2-core machine",
        bare.len()
    );
    println!("{:<44} {:>10} {:>10}", "get of one task", "p50", "p99");
    println!(
        "{:<44} {:>10} {:>10}",
        "bare client (Agent::get_task)",
        us(b50),
        us(b99)
    );
    println!(
        "{:<44} {:>10} {:>10}",
        "tool in-process (Session::call)",
        us(t50),
        us(t99)
    );
    println!(
        "{:<44} {:>10} {:>10}",
        "tool over MCP (a2a-broker mcp, stdio)",
        us(m50),
        us(m99)
    );
    println!(
        "overhead at p50: tool {} ({:.2}x), MCP {} ({:.2}x)",
        us(t50.saturating_sub(b50)),
        t50.as_secs_f64() / b50.as_secs_f64(),
        us(m50.saturating_sub(b50)),
        m50.as_secs_f64() / b50.as_secs_f64()
    );
}

/// The MCP server's stdio, as a host speaks it: one JSON-RPC line each way.
struct McpPipe {
    to: std::process::ChildStdin,
    from: BufReader<std::process::ChildStdout>,
    next_id: u64,
}

impl McpPipe {
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let line =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        writeln!(self.to, "{line}").expect("write to the MCP server");
        self.to.flush().expect("flush");
        loop {
            let mut l = String::new();
            if self.from.read_line(&mut l).expect("read") == 0 {
                panic!("the MCP server closed its stdout");
            }
            let v: Value = serde_json::from_str(&l).expect("a JSON-RPC line");
            if v["id"] == self.next_id {
                return v;
            }
        }
    }

    fn notify(&mut self, method: &str) {
        writeln!(self.to, "{}", json!({"jsonrpc": "2.0", "method": method})).expect("write");
        self.to.flush().expect("flush");
    }
}

fn pct(v: &mut [Duration]) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[v.len() * 99 / 100])
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}
