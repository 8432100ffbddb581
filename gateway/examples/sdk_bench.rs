//! Our stack beside the official Python SDK's own server, paired in one run
//! (BENCHMARKS.md, "Beside the official SDK"; `gateway/sdk-tests/bench.sh`
//! makes the SDK's venv, builds and runs this).
//!
//! Ours: a release broker (`a2a-broker serve`), the README's own agent
//! (`a2a-broker reply --as echo --exec cat`: each task's text through
//! `cat`, answered concurrently, a plain-word command run without a
//! shell), and `a2a-gateway serve --expose echo`. Also, as a second row of
//! ours, a lean agent that does not fork (`tck`: the `tck_agent` example,
//! a client-library agent that completes each task at once), behind the
//! same gateway. Theirs: `a2a-sdk`'s server (Starlette + uvicorn,
//! `gateway/sdk-tests/python/bench_server.py`) with an echo
//! `AgentExecutor`.
//!
//! The same client for every row: one keep-alive HTTP client (reqwest, on
//! a one-thread runtime) sending blocking `SendMessage` calls, over
//! JSON-RPC and over HTTP+JSON (`POST .../message:send`), each answered
//! with the completed task (checked: state and echoed text). Rows run in
//! paired blocks, their order reversed every other block (A B B A ...), so
//! drift on a shared machine falls on every row alike. Each block of a row:
//! `--seq` calls one at a time (its p50), then `--calls` calls from
//! `--concurrency` callers (calls/s, and the CPU per call of the row's
//! server processes from `/proc/PID/stat`, their waited-for children
//! included: `reply`'s `cat`s), in total and per process. The figures are
//! the medians over blocks, and the ratios ours/theirs per binding.
//!
//! ```text
//! cargo build --release -p a2a-cli -p a2a-gateway --example sdk_bench --example tck_agent
//! target/release/examples/sdk_bench --blocks 5 --calls 1000 --seq 200
//! ```
//!
//! `--python PATH` (default: the SDK stage's venv, gateway/sdk-tests/.venv),
//! `--exec CMD` (the README agent's command, default `cat`), `--no-lean`.

// The shared bench helpers; this example uses some of them.
#[allow(dead_code)]
mod bench;

use bench::{cpu_of, exe_dir, pct};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One row: a server, its binding, and the processes whose CPU it costs.
struct Row {
    name: String,
    url: String,
    rest: bool,
    /// The agent to send to on our gateway is `tck`: its messages need the
    /// id prefix that makes it complete the task (the TCK's behaviour).
    tck: bool,
    /// Each with its name, for the split of the CPU per call.
    pids: Vec<(&'static str, u32)>,
}

/// Per block of one row: sequential p50 (µs), calls/s, CPU per call (µs).
#[derive(Default)]
struct Figures {
    p50: Vec<f64>,
    rate: Vec<f64>,
    cpu: Vec<f64>,
    /// Per process of the row, CPU per call (µs), per block.
    split: Vec<Vec<f64>>,
}

struct Opts {
    blocks: usize,
    calls: u64,
    seq: usize,
    concurrency: usize,
    python: PathBuf,
    exec: String,
    lean: bool,
}

fn parse_opts() -> Result<Opts, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut o = Opts {
        blocks: 5,
        calls: 1000,
        seq: 200,
        concurrency: 16,
        python: root.join("sdk-tests/.venv/bin/python"),
        exec: "cat".into(),
        lean: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{a}: {e}"));
        match a.as_str() {
            "--blocks" => o.blocks = num(val()?)?.max(1) as usize,
            "--calls" => o.calls = num(val()?)?.max(1),
            "--seq" => o.seq = num(val()?)?.max(1) as usize,
            "--concurrency" => o.concurrency = num(val()?)?.max(1) as usize,
            "--python" => o.python = PathBuf::from(val()?),
            "--exec" => o.exec = val()?,
            "--no-lean" => o.lean = false,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

fn main() {
    let o = match parse_opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("sdk_bench: {e}");
            std::process::exit(2);
        }
    };
    let bin = exe_dir();
    let broker = tck::spawn_broker(&bin.join("a2a-broker")).expect("the broker starts");
    let socket = broker.socket.clone();
    let secret = broker.secret.clone();

    let reply = Command::new(bin.join("a2a-broker"))
        .args(["reply", "--as", "echo", "--exec", &o.exec, "--socket"])
        .arg(&socket)
        .env(a2a_client::SECRET_ENV, &secret)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("a2a-broker reply starts");
    let reply = Guard(reply);
    let mut ours_pids = vec![("broker", broker.pid()), ("reply", reply.0.id())];
    let mut lean_pids = vec![("broker", broker.pid())];
    let mut children = vec![reply];
    if o.lean {
        let mut lean = Command::new(bin.join("examples/tck_agent"))
            .arg("--socket")
            .arg(&socket)
            .env(a2a_client::SECRET_ENV, &secret)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the tck_agent example starts (built with --example tck_agent)");
        let mut line = String::new();
        let out = lean.stdout.take().expect("stdout");
        BufReader::new(out).read_line(&mut line).expect("tck_agent");
        assert_eq!(line.trim(), "READY", "tck_agent did not start");
        lean_pids.push(("tck_agent", lean.id()));
        children.push(Guard(lean));
    }

    // The gateway's state file, beside the broker's socket (removed with it).
    let state = socket.with_file_name("gateway.db");
    let mut args: Vec<String> = ["--listen", "127.0.0.1:0", "--rate", "0", "--expose", "echo"]
        .map(String::from)
        .to_vec();
    if o.lean {
        args.extend(["--expose".into(), "tck".into()]);
    }
    args.extend(["--state".into(), state.display().to_string()]);
    let (gateway, addr) = bench::gateway_proc::spawn_serve(
        &bin.join("a2a-gateway"),
        &socket,
        &secret,
        &args,
        &[],
        false,
    );
    ours_pids.push(("gateway", gateway.id()));
    lean_pids.push(("gateway", gateway.id()));
    children.push(Guard(gateway));

    let (sdk, sdk_origin) = spawn_sdk(&o.python);
    let sdk_pid = sdk.id();
    children.push(Guard(sdk));

    let gw = format!("http://{addr}");
    let mut rows = vec![
        row(
            "ours jsonrpc",
            format!("{gw}/agents/echo"),
            false,
            false,
            &ours_pids,
        ),
        row(
            "theirs jsonrpc",
            format!("{sdk_origin}/a2a/jsonrpc"),
            false,
            false,
            &[("uvicorn", sdk_pid)],
        ),
        row(
            "ours rest",
            format!("{gw}/agents/echo/message:send"),
            true,
            false,
            &ours_pids,
        ),
        row(
            "theirs rest",
            format!("{sdk_origin}/a2a/rest/message:send"),
            true,
            false,
            &[("uvicorn", sdk_pid)],
        ),
    ];
    if o.lean {
        rows.push(row(
            "lean jsonrpc",
            format!("{gw}/agents/tck"),
            false,
            true,
            &lean_pids,
        ));
        rows.push(row(
            "lean rest",
            format!("{gw}/agents/tck/message:send"),
            true,
            true,
            &lean_pids,
        ));
    }

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // Idle connections are dropped before uvicorn's keep-alive of 5 s closes
    // them, so a block never races a server's close on a reused connection.
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(2))
        .build()
        .expect("http client");
    println!(
        "sdk_bench: {} blocks; per block and row {} sequential calls, then {} calls from {} callers; agent command {:?}",
        o.blocks, o.seq, o.calls, o.concurrency, o.exec
    );
    rt.block_on(async {
        // Warm up (untimed): the agents registered, connections open, the
        // SDK's imports and caches loaded.
        for r in &rows {
            ready(&http, r).await;
            concurrent(&http, r, 200, o.concurrency).await;
        }
    });
    let mut figs: Vec<Figures> = rows.iter().map(|_| Figures::default()).collect();
    for b in 0..o.blocks {
        let mut order: Vec<usize> = (0..rows.len()).collect();
        if b % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let r = &rows[i];
            let (p50, rate, split) = rt.block_on(async {
                let mut lat = Vec::with_capacity(o.seq);
                for _ in 0..o.seq {
                    let t = Instant::now();
                    call(&http, r).await;
                    lat.push(t.elapsed());
                }
                lat.sort();
                let cpu0: Vec<Duration> = r.pids.iter().map(|&(_, p)| cpu_of(p)).collect();
                let t = Instant::now();
                concurrent(&http, r, o.calls, o.concurrency).await;
                let wall = t.elapsed();
                let split: Vec<f64> = r
                    .pids
                    .iter()
                    .zip(&cpu0)
                    .map(|(&(_, p), &c0)| {
                        cpu_of(p).saturating_sub(c0).as_secs_f64() * 1e6 / o.calls as f64
                    })
                    .collect();
                (pct(&lat, 0.5), o.calls as f64 / wall.as_secs_f64(), split)
            });
            let cpu: f64 = split.iter().sum();
            eprintln!(
                "block {b} {:<15} p50 {p50:>7.0} us  {rate:>6.0} calls/s  cpu {cpu:>6.0} us/call",
                r.name
            );
            figs[i].p50.push(p50);
            figs[i].rate.push(rate);
            figs[i].cpu.push(cpu);
            figs[i].split.push(split);
        }
    }
    report(&rows, &figs);
    drop(children);
    drop(broker);
}

fn row(name: &str, url: String, rest: bool, tck: bool, pids: &[(&'static str, u32)]) -> Row {
    Row {
        name: name.into(),
        url,
        rest,
        tck,
        pids: pids.to_vec(),
    }
}

/// The medians over blocks, then ours/theirs per binding.
fn report(rows: &[Row], figs: &[Figures]) {
    let med = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    };
    println!("row              seq p50 us   calls/s   cpu us/call   (medians of blocks)");
    let m: Vec<(f64, f64, f64)> = figs
        .iter()
        .map(|f| (med(&f.p50), med(&f.rate), med(&f.cpu)))
        .collect();
    for ((r, f), (p50, rate, cpu)) in rows.iter().zip(figs).zip(&m) {
        let split: Vec<String> = r
            .pids
            .iter()
            .enumerate()
            .map(|(k, (name, _))| {
                let per: Vec<f64> = f.split.iter().map(|b| b[k]).collect();
                format!("{name} {:.0}", med(&per))
            })
            .collect();
        println!(
            "{:<15} {p50:>11.0} {rate:>9.0} {cpu:>13.0}   ({})",
            r.name,
            split.join(", ")
        );
    }
    for (mine, theirs) in [
        ("ours jsonrpc", "theirs jsonrpc"),
        ("ours rest", "theirs rest"),
        ("lean jsonrpc", "theirs jsonrpc"),
        ("lean rest", "theirs rest"),
    ] {
        let at = |n: &str| rows.iter().position(|r| r.name == n);
        let (Some(a), Some(b)) = (at(mine), at(theirs)) else {
            continue;
        };
        println!(
            "{mine} / {theirs}: calls/s x{:.2}, seq p50 x{:.2}, cpu/call x{:.2}",
            m[a].1 / m[b].1,
            m[a].0 / m[b].0,
            m[a].2 / m[b].2
        );
    }
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// One blocking `SendMessage`; panics unless the answer is the completed
/// task with the echoed text (a wrong answer must not pass as fast).
async fn call(http: &reqwest::Client, r: &Row) {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let text = format!("hello {n}");
    // The TCK agent completes a task whose message id has this prefix.
    let id = if r.tck {
        format!("tck-complete-task-{n}")
    } else {
        format!("bench-{n}")
    };
    let params =
        json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}});
    let body = if r.rest {
        params
    } else {
        json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": params})
    };
    let v = send(http, r, &body)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", r.name));
    let task = if r.rest {
        &v["task"]
    } else {
        &v["result"]["task"]
    };
    let status = &task["status"];
    assert_eq!(status["state"], "TASK_STATE_COMPLETED", "{}: {v}", r.name);
    if !r.tck {
        let got = status["message"]["parts"][0]["text"].as_str().unwrap_or("");
        assert_eq!(got.trim_end(), text, "{}: {v}", r.name);
    }
}

async fn send(http: &reqwest::Client, r: &Row, body: &Value) -> Result<Value, String> {
    let resp = http
        .post(&r.url)
        .header("a2a-version", "1.0")
        .json(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status();
    let v: Value = resp.json().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("http {status}: {v}"));
    }
    Ok(v)
}

/// `calls` calls from `callers` concurrent callers.
async fn concurrent(http: &reqwest::Client, r: &Row, calls: u64, callers: usize) {
    let left = Arc::new(AtomicU64::new(calls));
    let one = |left: Arc<AtomicU64>| async move {
        while left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
        {
            call(http, r).await;
        }
    };
    join_all((0..callers).map(|_| one(left.clone()))).await;
}

/// Polls the callers together on this one-thread runtime (no extra
/// crate): they borrow the client and the row, so they are not spawned.
async fn join_all<F: std::future::Future<Output = ()>>(fs: impl Iterator<Item = F>) {
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = fs.map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        pinned.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if pinned.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
}

/// Waits (up to 20 s) until a row answers: `reply` and the gateway come
/// up beside each other.
async fn ready(http: &reqwest::Client, r: &Row) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let probe = if r.rest {
        json!({"message": {"messageId": if r.tck {"tck-complete-task-probe"} else {"probe"}, "role": "ROLE_USER", "parts": [{"text": "probe"}]}})
    } else {
        json!({"jsonrpc": "2.0", "id": 0, "method": "SendMessage", "params": {"message": {"messageId": if r.tck {"tck-complete-task-probe"} else {"probe"}, "role": "ROLE_USER", "parts": [{"text": "probe"}]}}})
    };
    loop {
        let ok = match send(http, r, &probe).await {
            Ok(v) => {
                let t = if r.rest {
                    &v["task"]
                } else {
                    &v["result"]["task"]
                };
                t["status"]["state"] == "TASK_STATE_COMPLETED"
            }
            Err(_) => false,
        };
        if ok {
            return;
        }
        assert!(Instant::now() < deadline, "{} never answered", r.name);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The SDK's server on a free port; its stdin is held open (it exits when
/// the pipe closes).
fn spawn_sdk(python: &Path) -> (Child, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk-tests/python/bench_server.py");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = Command::new(python)
        .arg(&script)
        .args(["--port", &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "{} cannot start ({e}): make the venv with gateway/sdk-tests/bench.sh",
                python.display()
            )
        });
    let mut line = String::new();
    let out = child.stdout.take().expect("stdout");
    BufReader::new(out)
        .read_line(&mut line)
        .expect("bench_server");
    let origin = line
        .trim()
        .strip_prefix("READY ")
        .unwrap_or_else(|| panic!("bench_server did not start: {line:?}"))
        .to_owned();
    (child, origin)
}

/// A child killed (and reaped) on drop, so a panic leaves nothing running.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The benches' broker child: the TCK harness's, shared.
#[allow(dead_code)]
#[path = "../src/tck/harness.rs"]
mod tck;
