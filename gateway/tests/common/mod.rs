//! The gateway under test: a real `a2a-broker` child on a temporary
//! database, the TCK's SUT agent registered on it (a worker whose
//! behaviour is chosen by each message's id prefix), and the gateway
//! serving it on a loopback port; plus an HTTP client for the JSON-RPC
//! binding and SSE. Everything is bounded by timeouts.

#![allow(dead_code)]

/// The binary's TCK harness (a broker child, the SUT agent), the same
/// file `serve-tck` runs.
#[path = "../../src/tck/harness.rs"]
pub mod tck;

pub mod gateway_proc;

use a2a_client::{Agent, Client};
use a2a_gateway::{Running, ServeOptions};
use serde_json::{json, Value};
use std::process::{Child, Command};
use std::time::Duration;
use tck::BrokerChild;

/// Bound of every HTTP exchange in the tests.
pub const TIMEOUT: Duration = Duration::from_secs(20);

pub struct Harness {
    pub gateway: Running,
    pub agent: Agent,
    /// A second exposed agent (`sink`) that never acts on its tasks: they
    /// stay open until the test moves them.
    pub sink: Agent,
    pub broker: BrokerChild,
    pub http: reqwest::Client,
    pub base: String,
}

impl Harness {
    /// A gateway with default options (changed by `configure`).
    pub async fn start(configure: impl FnOnce(&mut ServeOptions)) -> Harness {
        let bin = a2a_testkit::bin::broker_bin().to_path_buf();
        let broker = tokio::task::spawn_blocking(move || tck::spawn_broker(&bin))
            .await
            .expect("join")
            .expect("broker starts");
        let (socket, secret) = (broker.socket.clone(), broker.secret.clone());
        let (agent, sink) = tokio::task::spawn_blocking(move || {
            let client = Client::connect(&socket, &secret).expect("connect");
            let sut = tck::register_sut(&client).expect("register the SUT agent");
            let sink = client
                .register(
                    "sink-ctx",
                    a2a_client::agent_card("sink"),
                    a2a_client::Delivery::Push,
                )
                .expect("register the sink");
            (sut, sink)
        })
        .await
        .expect("join");
        let mut opts = ServeOptions::new(
            broker.socket.clone(),
            broker.secret.clone(),
            vec![agent.id().to_owned(), sink.id().to_owned()],
        );
        configure(&mut opts);
        let gateway = a2a_gateway::serve(opts).await.expect("gateway starts");
        let base = format!("http://{}", gateway.addr);
        Harness {
            gateway,
            agent,
            sink,
            broker,
            http: reqwest::Client::builder()
                .timeout(TIMEOUT)
                .no_proxy()
                .build()
                .expect("http client"),
            base,
        }
    }

    /// The JSON-RPC interface URL of the exposed agent.
    pub fn url(&self) -> String {
        format!("{}/agents/{}", self.base, self.agent.id())
    }

    /// A JSON-RPC request to the exposed agent `agent`.
    pub fn post_to(&self, agent: &str, method: &str, params: Value) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}/agents/{agent}", self.base))
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
    }

    /// A JSON-RPC request as the official clients send it.
    pub fn post(&self, method: &str, params: Value) -> reqwest::RequestBuilder {
        self.http
            .post(self.url())
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
    }

    /// A unary call's whole JSON answer.
    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        json_body(self.post(method, params)).await
    }

    /// A unary call's `result` (panics on an error answer).
    pub async fn ok(&self, method: &str, params: Value) -> Value {
        let r = self.rpc(method, params).await;
        assert!(r.get("error").is_none(), "{method}: {r}");
        r["result"].clone()
    }

    /// The served agent card (`GET /.well-known/agent-card.json`).
    pub async fn card(&self) -> Value {
        self.http
            .get(format!("{}/.well-known/agent-card.json", self.base))
            .send()
            .await
            .expect("the card")
            .json()
            .await
            .expect("the card is JSON")
    }

    /// `SendMessage` of a text message with this id (its prefix picks
    /// the SUT's behaviour): the call's `result`.
    pub async fn send(&self, message_id: &str, text: &str) -> Value {
        self.ok("SendMessage", json!({"message": message(message_id, text)}))
            .await
    }

    /// Posts a streaming call asking for SSE: the response and its
    /// Content-Type.
    async fn post_stream(&self, method: &str, params: Value) -> (reqwest::Response, String) {
        let resp = self
            .post(method, params)
            .header("accept", "text/event-stream")
            .send()
            .await
            .expect("send");
        let ct = content_type(&resp);
        (resp, ct)
    }

    /// A streaming call's events (`result`s, or errors), read until the
    /// server closes the stream (which must happen within TIMEOUT).
    pub async fn stream(&self, method: &str, params: Value) -> Vec<Value> {
        let (resp, ct) = self.post_stream(method, params).await;
        let body = tokio::time::timeout(TIMEOUT, resp.text())
            .await
            .expect("the stream closes")
            .expect("body");
        if !ct.contains("text/event-stream") {
            return vec![serde_json::from_str(&body).expect("a JSON error body")];
        }
        sse_events(&body)
    }
}

/// The JSON body of the answer to a request.
pub async fn json_body(r: reqwest::RequestBuilder) -> Value {
    r.send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json body")
}

/// A JSON string value, owned (an id read from an answer).
/// An answer's `content-type` ("" when it has none).
pub fn content_type(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

pub fn string(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_owned()
}

/// The JSON of each `data:` line of an SSE body.
pub fn sse_events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).expect("one JSON value per data line"))
        .collect()
}

/// A user message with `id` and a text part.
pub fn message(id: &str, text: &str) -> Value {
    json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// Every object key in `v`, recursively.
pub fn keys(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k.clone());
                keys(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
        _ => {}
    }
}

/// An SSE response read event by event.
pub struct Sse {
    resp: reqwest::Response,
    buf: String,
}

impl Sse {
    /// Opens a streaming call (panics unless the answer is SSE).
    pub async fn open(h: &Harness, method: &str, params: Value) -> Sse {
        let (resp, ct) = h.post_stream(method, params).await;
        assert!(ct.contains("text/event-stream"), "not a stream: {ct}");
        Sse {
            resp,
            buf: String::new(),
        }
    }

    /// Reads an SSE response already received (the HTTP+JSON binding's
    /// streams; panics unless it is SSE).
    pub fn from_response(resp: reqwest::Response) -> Sse {
        let ct = content_type(&resp);
        assert!(ct.contains("text/event-stream"), "not a stream: {ct}");
        Sse {
            resp,
            buf: String::new(),
        }
    }

    /// The next event, or `None` when the server closed the stream
    /// (within TIMEOUT, else a panic).
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(i) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..i + 2).collect();
                let data: Vec<&str> = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .collect();
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                assert_eq!(data.len(), 1, "one data line per event: {block}");
                return Some(serde_json::from_str(data[0].trim()).expect("JSON event"));
            }
            let chunk = tokio::time::timeout(TIMEOUT, self.resp.chunk())
                .await
                .expect("an event or the end in time")
                .expect("body");
            match chunk {
                Some(c) => self.buf.push_str(&String::from_utf8_lossy(&c)),
                None => return None,
            }
        }
    }

    /// Every remaining event, until the server closes the stream.
    pub async fn rest(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await {
            out.push(e);
        }
        out
    }
}

/// The `a2a-gateway serve` binary, serving `tck` (and what `extra` adds)
/// on a state file.
pub struct GatewayProc {
    child: Child,
    pub base: String,
}

impl GatewayProc {
    pub fn start(
        socket: &std::path::Path,
        secret: &str,
        state: &std::path::Path,
        extra: &[&str],
    ) -> GatewayProc {
        Self::start_on("127.0.0.1:0", socket, secret, state, extra)
    }

    /// [`GatewayProc::start`] on a given address (a restart on the same
    /// port, where another gateway bridges to it).
    pub fn start_on(
        listen: &str,
        socket: &std::path::Path,
        secret: &str,
        state: &std::path::Path,
        extra: &[&str],
    ) -> GatewayProc {
        Self::start_on_env(listen, socket, secret, state, extra, &[])
    }

    /// [`GatewayProc::start_on`] with further environment variables (a
    /// bearer token that must stay off the command line).
    pub fn start_on_env(
        listen: &str,
        socket: &std::path::Path,
        secret: &str,
        state: &std::path::Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> GatewayProc {
        let mut args = vec![
            "--listen".as_ref(),
            listen.as_ref(),
            "--rate".as_ref(),
            "0".as_ref(),
            "--expose".as_ref(),
            tck::SUT_NAME.as_ref(),
            "--state".as_ref(),
            state.as_os_str(),
        ];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        let bin = std::path::Path::new(env!("CARGO_BIN_EXE_a2a-gateway"));
        let (child, addr) = gateway_proc::spawn_serve(bin, socket, secret, args, env, true);
        GatewayProc {
            child,
            base: format!("http://{addr}"),
        }
    }

    /// Ends the process with `signal` (`TERM` or `KILL`) and waits for it.
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The address it listens on.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.base
            .trim_start_matches("http://")
            .parse()
            .expect("an address")
    }

    pub fn kill(mut self, signal: &str) {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("kill runs");
        assert!(ok.success());
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            if self.child.try_wait().expect("wait").is_some() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the gateway did not exit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub async fn call(&self, agent: &str, method: &str, params: Value) -> Value {
        reqwest::Client::new()
            .post(format!("{}/agents/{agent}", self.base))
            .header("a2a-version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .timeout(TIMEOUT)
            .send()
            .await
            .expect("send")
            .json()
            .await
            .expect("json")
    }

    pub async fn ok(&self, agent: &str, method: &str, params: Value) -> Value {
        let r = self.call(agent, method, params).await;
        assert!(r.get("error").is_none(), "{method}: {r}");
        r["result"].clone()
    }
}

impl Drop for GatewayProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Serves `app` on a free loopback port, in the background of the current
/// tokio runtime: the port.
pub async fn serve_loopback(app: axum::Router) -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = l.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    port
}
