//! `a2a-broker mcp` spoken to as an MCP host does, line by line on its
//! stdio, against a real broker: the handshake, the tool list, an unknown
//! tool, a call, and the agent leaving when stdin closes; a start-up
//! failure that leaves stdout clean and names what is missing; lines that
//! are not JSON and params of the wrong shape answered as JSON-RPC says;
//! a broker waited for, a broker restarted under a server that carries on,
//! and the model told the name it is registered under.

use a2a_client::Client;
use a2a_testkit::{broker_bin, socket_path_for, BrokerProcess, Spawn, TestDb, TIMEOUT};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

fn line_reader<R: std::io::Read + Send + 'static>(
    out: R,
    all: Option<Arc<Mutex<Vec<String>>>>,
) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(all) = &all {
                all.lock().expect("lock").push(line.clone());
            }
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// One `a2a-broker mcp` process and the host's end of its stdio.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    stderr_all: Arc<Mutex<Vec<String>>>,
}

impl Mcp {
    /// `a2a-broker mcp --socket SOCKET ARGS...`, the secret read from the
    /// file beside the socket (as a host's server would).
    fn spawn(socket: &Path, args: &[&str]) -> Mcp {
        let mut child = Command::new(broker_bin())
            .args(["mcp", "--socket"])
            .arg(socket)
            .args(args)
            .env_remove("A2A_BROKER_SECRET")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn a2a-broker mcp");
        let stderr_all = Arc::new(Mutex::new(Vec::new()));
        Mcp {
            stdin: child.stdin.take(),
            stdout: line_reader(child.stdout.take().expect("stdout"), None),
            stderr: line_reader(
                child.stderr.take().expect("stderr"),
                Some(stderr_all.clone()),
            ),
            stderr_all,
            child,
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write");
        stdin.flush().expect("flush");
    }

    fn send(&mut self, v: Value) {
        self.send_raw(format!("{v}\n").as_bytes());
    }

    /// The next line on stdout, which must be JSON.
    fn next(&self) -> Value {
        let line = self.stdout.recv_timeout(TIMEOUT).expect("a line in time");
        serde_json::from_str(&line).expect("stdout carries JSON-RPC only")
    }

    /// The answer to request `id` (notifications before it are skipped).
    fn answer(&self, id: u64) -> Value {
        loop {
            let v = self.next();
            if v["id"] == id {
                return v;
            }
        }
    }

    /// The handshake; the `initialize` result.
    fn initialize(&mut self) -> Value {
        self.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test-host", "version": "0"}}}),
        );
        let init = self.answer(1);
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        init["result"].clone()
    }

    /// `tools/call` of the A2A tool; the answer.
    fn call(&mut self, id: u64, arguments: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "A2A", "arguments": arguments}}));
        self.answer(id)
    }

    /// Waits for a stderr line with `needle`; all stderr so far.
    fn stderr_with(&self, needle: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            // The reader keeps every line before it hands one over.
            let all = self.stderr_all.lock().expect("lock").join("\n");
            if all.contains(needle) {
                return all;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if self.stderr.recv_timeout(left).is_err() {
                let all = self.stderr_all.lock().expect("lock").join("\n");
                assert!(
                    all.contains(needle),
                    "no stderr line with {needle:?}: {all}"
                );
                return all;
            }
        }
    }

    /// Closes stdin and waits for the exit.
    fn close(mut self) -> std::process::ExitStatus {
        self.stdin = None;
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return s;
            }
            assert!(Instant::now() < deadline, "a2a-broker mcp did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn socket_broker(db: &TestDb) -> BrokerProcess {
    Spawn::new(&db.path)
        .socket(socket_path_for(&db.path))
        .no_stdio()
        .start(TIMEOUT)
        .expect("broker")
}

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {answer}"))
}

fn names(a: &a2a_client::Agent) -> Vec<String> {
    a.list_agents(None)
        .expect("list")
        .into_iter()
        .map(|c| c.name)
        .collect()
}

fn observer(broker: &BrokerProcess, name: &str) -> a2a_client::Agent {
    let socket = broker.socket().expect("socket");
    let client = Client::connect(&socket, &broker.secret().expect("secret")).expect("connect");
    client
        .register(
            "ctx-o",
            a2a_client::agent_card(name),
            a2a_client::Delivery::Push,
        )
        .expect("register")
}

#[test]
fn an_mcp_host_lists_and_calls_the_tool_and_closing_stdin_deregisters() {
    let db = TestDb::new();
    let broker = socket_broker(&db);
    let socket = broker.socket().expect("socket");
    let mut mcp = Mcp::spawn(&socket, &["--as", "helper", "--description", "helps"]);
    let init = mcp.initialize();
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    assert_eq!(init["serverInfo"]["name"], "a2a-broker", "{init}");

    mcp.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = mcp.answer(2);
    let tools = list["result"]["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 1, "{list}");
    assert_eq!(tools[0]["name"], "A2A");
    assert_eq!(tools[0]["inputSchema"], a2a_tool::schema::input_schema());
    assert_eq!(tools[0]["outputSchema"], a2a_tool::schema::output_schema());

    mcp.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "B2B", "arguments": {"action": "discover"}}}));
    let wrong = mcp.answer(3);
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");

    // Another agent on the broker sees the helper while it serves.
    let observer = observer(&broker, "observer");
    let found = mcp.call(4, json!({"action": "discover"}));
    assert_eq!(found["result"]["isError"], false, "{found}");
    assert_eq!(
        found["result"]["structuredContent"]["peers"][0]["name"],
        "observer"
    );
    assert!(text(&found).contains("- observer"), "{found}");
    assert_eq!(names(&observer), ["helper"]);

    // The host closes stdin: the server deregisters and exits 0.
    let status = mcp.close();
    assert!(status.success(), "{status}");
    assert!(names(&observer).is_empty());
}

#[test]
fn a_server_that_cannot_reach_the_broker_says_why_and_writes_nothing_to_stdout() {
    let dir = tempfile::tempdir().expect("tempdir");
    // With a secret at hand, and without one: either way no broker is
    // listening, and that is what the user reads (not a missing secret).
    for secret in [Some("0123456789abcdef0123456789abcdef"), None] {
        let mut cmd = Command::new(broker_bin());
        cmd.args(["mcp", "--socket"])
            .arg(dir.path().join("no-such.sock"))
            .args(["--as", "helper"])
            .env_remove("A2A_BROKER_SECRET")
            .stdin(Stdio::null());
        if let Some(s) = secret {
            cmd.env("A2A_BROKER_SECRET", s);
        }
        let out = cmd.output().expect("run");
        assert!(!out.status.success());
        assert!(out.stdout.is_empty(), "stdout is the MCP channel");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no broker is listening at"), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }
}

#[test]
fn a_line_that_is_not_json_gets_a_parse_error_and_the_server_serves_on() {
    let db = TestDb::new();
    let broker = socket_broker(&db);
    let mut mcp = Mcp::spawn(&broker.socket().expect("socket"), &["--as", "helper"]);
    mcp.initialize();
    mcp.send_raw(b"{bad json\n");
    mcp.send_raw(
        b"{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"tools/list\", \"x\": \"\xff\"}\n",
    );
    mcp.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    // Each bad line is answered, in order, before the request after them.
    for _ in 0..2 {
        let e = mcp.next();
        assert_eq!(e["error"]["code"], -32700, "{e}");
        assert_eq!(e["id"], Value::Null, "{e}");
        assert_eq!(e["jsonrpc"], "2.0", "{e}");
    }
    let list = mcp.next();
    assert_eq!(list["id"], 2, "{list}");
    assert_eq!(list["result"]["tools"][0]["name"], "A2A", "{list}");
    // A line over the bound is skipped to its end, and said so.
    let mut long = vec![b' '; 16 * 1024 * 1024];
    long.push(b'\n');
    mcp.send_raw(&long);
    let e = mcp.next();
    assert_eq!(e["error"]["code"], -32600, "{e}");
    assert_eq!(e["id"], Value::Null, "{e}");
    let found = mcp.call(3, json!({"action": "discover"}));
    assert_eq!(found["result"]["isError"], false, "{found}");
}

#[test]
fn params_of_the_wrong_shape_are_invalid_params() {
    let db = TestDb::new();
    let broker = socket_broker(&db);
    let mut mcp = Mcp::spawn(&broker.socket().expect("socket"), &["--as", "helper"]);
    mcp.initialize();
    for (id, params) in [
        (2, json!({"name": "A2A", "arguments": [1, 2]})),
        (3, json!({"name": "A2A", "arguments": "discover"})),
        (4, json!({"name": 42, "arguments": {"action": "discover"}})),
    ] {
        mcp.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
        let e = mcp.answer(id);
        assert_eq!(e["error"]["code"], -32602, "{e}");
    }
    // Params that are not an object at all, and a request without
    // "jsonrpc": answered with the request's id (JSON-RPC 2.0 allows a
    // null id only when the id cannot be read).
    mcp.send(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": [1, 2]}));
    assert_eq!(mcp.answer(10)["error"]["code"], -32602);
    mcp.send(json!({"id": 11, "method": "ping"}));
    assert_eq!(mcp.answer(11)["error"]["code"], -32600);
    // An unknown method is still one.
    mcp.send(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/frobnicate", "params": {}}));
    assert_eq!(mcp.answer(6)["error"]["code"], -32601);
    let found = mcp.call(7, json!({"action": "discover"}));
    assert_eq!(found["result"]["isError"], false, "{found}");
}

#[test]
fn a_megabyte_of_tool_name_or_action_comes_back_as_a_short_excerpt() {
    let db = TestDb::new();
    let broker = socket_broker(&db);
    let mut mcp = Mcp::spawn(&broker.socket().expect("socket"), &["--as", "helper"]);
    mcp.initialize();
    let huge = "x".repeat(1 << 20);
    let r = mcp.call(8, json!({"action": huge}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    let said = r.to_string();
    assert!(said.len() < 2000, "{} bytes", said.len());
    assert!(text(&r).contains("The actions are: discover, send"), "{r}");
    // A megabyte of peer name or task id is quoted back short too.
    for (id, args) in [
        (9, json!({"action": "send", "to": huge, "text": "hi"})),
        (10, json!({"action": "get", "taskId": huge})),
    ] {
        let r = mcp.call(id, args);
        assert_eq!(r["result"]["isError"], true, "{r}");
        let said = r.to_string();
        assert!(said.len() < 2000, "{} bytes", said.len());
    }
    mcp.send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": huge, "arguments": {"action": "discover"}}}));
    let e = mcp.answer(7);
    assert_eq!(e["error"]["code"], -32602);
    let message = e["error"]["message"].as_str().expect("message");
    assert!(message.len() < 300, "{} bytes", message.len());
}

#[test]
fn with_wait_the_server_waits_for_a_broker_that_starts_later() {
    let db = TestDb::new();
    let socket = socket_path_for(&db.path);
    let mut mcp = Mcp::spawn(&socket, &["--as", "late", "--wait", "60"]);
    let said = mcp.stderr_with("waiting up to 60 s");
    assert!(said.contains(&socket.display().to_string()), "{said}");
    let broker = socket_broker(&db);
    let init = mcp.initialize();
    assert!(
        init["instructions"]
            .as_str()
            .is_some_and(|i| i.contains("\"late\"")),
        "{init}"
    );
    let found = mcp.call(2, json!({"action": "discover"}));
    assert_eq!(found["result"]["isError"], false, "{found}");
    assert_eq!(names(&observer(&broker, "observer")), ["late"]);
}

#[test]
fn a_name_already_held_is_suffixed_and_the_model_is_told_its_name() {
    let db = TestDb::new();
    let broker = socket_broker(&db);
    let socket = broker.socket().expect("socket");
    let mut first = Mcp::spawn(&socket, &["--as", "dup"]);
    first.initialize(); // registered
    let mut second = Mcp::spawn(&socket, &["--as", "dup"]);
    let init = second.initialize();
    let err = second.stderr_with("registered as");
    assert!(err.contains("registered as dup-2"), "{err}");
    let instructions = init["instructions"].as_str().expect("instructions");
    assert!(
        instructions.contains("You are agent \"dup-2\""),
        "{instructions}"
    );
    second.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = second.answer(2);
    let description = list["result"]["tools"][0]["description"]
        .as_str()
        .expect("description");
    assert!(description.contains("\"dup-2\""), "{description}");
    // The first result says it, and every discover.
    let first_result = second.call(3, json!({"action": "wait", "timeoutSeconds": 0}));
    assert!(
        text(&first_result).starts_with("You are agent \"dup-2\""),
        "{first_result}"
    );
    let later = second.call(4, json!({"action": "wait", "timeoutSeconds": 0}));
    assert!(!text(&later).contains("dup-2"), "{later}");
    let found = second.call(5, json!({"action": "discover"}));
    assert!(
        text(&found).starts_with("You are agent \"dup-2\""),
        "{found}"
    );
    // The first one, which got the name it asked for, is told it too.
    let own = first.call(2, json!({"action": "discover"}));
    assert!(text(&own).starts_with("You are agent \"dup\" "), "{own}");
}

/// Waits until `agent` sees a peer named `name`.
fn until_listed(agent: &a2a_client::Agent, name: &str, mcp: &Mcp) {
    let deadline = Instant::now() + TIMEOUT;
    while !names(agent).iter().any(|n| n == name) {
        assert!(
            Instant::now() < deadline,
            "{name} never registered; its stderr: {:?}",
            mcp.stderr_all.lock().expect("lock")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn after_the_broker_restarts_the_next_call_and_a_wait_connect_again_under_the_same_name() {
    let db = TestDb::new();
    let mut broker = socket_broker(&db);
    let socket = broker.socket().expect("socket");
    let mut mcp = Mcp::spawn(&socket, &["--as", "helper"]);
    mcp.initialize();
    let asker = observer(&broker, "asker");
    let task = asker
        .send(a2a_client::message_to("helper", "do x"), None)
        .expect("send");
    let got = mcp.call(2, json!({"action": "wait", "timeoutSeconds": 30}));
    assert!(text(&got).contains(&task.id), "{got}");

    // The broker is killed and another starts on the same socket and
    // database: the next call connects again and says so.
    broker.kill();
    drop(asker);
    let broker = socket_broker(&db);
    let found = mcp.call(3, json!({"action": "discover"}));
    assert_eq!(found["result"]["isError"], false, "{found}");
    let said = text(&found);
    assert!(said.contains("The A2A broker restarted"), "{said}");
    assert!(
        said.contains("registered again as agent \"helper\""),
        "{said}"
    );
    // Its open task, as the broker has it.
    assert!(
        said.contains(&format!("{} (you serve it; submitted)", task.id)),
        "{said}"
    );
    let asker = observer(&broker, "asker");
    assert_eq!(names(&asker), ["helper"]);
    mcp.stderr_with("registered again as helper");

    // A wait under way when the broker goes keeps waiting on the next one
    // (its first progress report says it is under way).
    mcp.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "A2A", "arguments": {"action": "wait", "timeoutSeconds": 60},
                   "_meta": {"progressToken": "w"}}}));
    let progress = mcp.next();
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    let mut broker = broker;
    broker.kill();
    drop(asker);
    let broker = socket_broker(&db);
    let asker = observer(&broker, "asker");
    until_listed(&asker, "helper", &mcp);
    let task = asker
        .send(a2a_client::message_to("helper", "do y"), None)
        .expect("send");
    let waited = mcp.answer(4);
    assert_eq!(waited["result"]["isError"], false, "{waited}");
    let said = text(&waited);
    assert!(said.contains("The A2A broker restarted"), "{said}");
    assert!(said.contains(&task.id), "{said}");
}

#[test]
fn a_broker_that_does_not_come_back_is_said_plainly_and_the_next_call_looks_again() {
    let db = TestDb::new();
    let mut broker = socket_broker(&db);
    let mut mcp = Mcp::spawn(&broker.socket().expect("socket"), &["--as", "helper"]);
    mcp.initialize();
    broker.kill();
    // The call looks for the broker for a bounded time (10 s), then says
    // what is wrong as the locator says it.
    let started = Instant::now();
    let r = mcp.call(2, json!({"action": "discover"}));
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["error"]["code"], "broker-unavailable",
        "{r}"
    );
    assert!(text(&r).contains("no broker is listening at"), "{r}");
    let _broker = socket_broker(&db);
    let r = mcp.call(3, json!({"action": "discover"}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(text(&r).contains("The A2A broker restarted"), "{r}");
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

/// An MCP server started as a README entry says (`args` after `mcp`, its
/// `--socket` pointed at `socket`), initialized.
fn start_entry(args: &[String], socket: &Path) -> Mcp {
    assert_eq!(args.first().map(String::as_str), Some("mcp"), "{args:?}");
    let at = args.iter().position(|a| a == "--socket").expect("--socket");
    let rest: Vec<&str> = args[1..at]
        .iter()
        .chain(&args[at + 2..])
        .map(String::as_str)
        .collect();
    let mut mcp = Mcp::spawn(socket, &rest);
    mcp.initialize();
    mcp
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

    let mut planner = start_entry(&entries[0], &socket);
    let mut coder = start_entry(&entries[1], &socket);
    let held = coder.call(2, lease.clone())["result"].clone();
    assert_eq!(held["isError"], false, "{held}");
    let refused = planner.call(2, lease.clone())["result"].clone();
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
    let mut planner = start_entry(&alone[0], &socket);
    let mut coder = start_entry(&alone[1], &socket);
    assert_eq!(coder.call(2, lease.clone())["result"]["isError"], false);
    let granted = planner.call(2, lease)["result"].clone();
    assert_eq!(granted["isError"], false, "{granted}");
}
