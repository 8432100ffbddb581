//! What the gateway's benchmark examples (`send_bench`, `federation_bench`)
//! share: where the built binaries are, the blocking send they time, an
//! A2A `SendMessage` over HTTP, an HTTP front's serving, and the figures
//! they print.

/// Starting `a2a-gateway serve`, as the tests do (one copy).
#[allow(dead_code)]
#[path = "../../tests/common/gateway_proc.rs"]
pub mod gateway_proc;

use a2a_client::SendConfiguration;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// The folder of the built binaries (`target/<profile>`): the example runs
/// from its `examples/` subfolder.
pub fn exe_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().and_then(|d| d.parent()).map(|d| d.to_path_buf()))
        .expect("exe dir")
}

/// Sends the benches make on one registration (or in one A2A context)
/// before they register again (untimed): under the broker's bound
/// (docs/protocol.md §9, `A2A_MAX_SENDS_PER_RUN`).
pub const SENDS_PER_REQUESTER: u32 = a2a_proto::limits::A2A_MAX_SENDS_PER_RUN - 10;

/// The send configuration of every timed send: answered once the task is
/// settled.
pub fn blocking() -> Option<SendConfiguration> {
    Some(SendConfiguration {
        blocking: Some(true),
        history_length: None,
        push_notification_config: None,
    })
}

/// POSTs `body` (a JSON-RPC request) to a gateway's `url` with the A2A
/// version header: the JSON answer.
pub async fn post(http: &reqwest::Client, url: &str, body: &Value) -> Value {
    http.post(url)
        .header("a2a-version", "1.0")
        .json(body)
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json")
}

/// The `p` percentile of `sorted`, in microseconds.
pub fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

/// Phase 2's table: per mode (its name padded to `width`), the `unit`s
/// (`tasks`, `calls`) per second and their ratio to the first mode's, named
/// `base`.
pub fn print_rates(rows: &[(&str, u64, Duration)], width: usize, unit: &str, base: &str) {
    let rate = |n: u64, t: Duration| n as f64 / t.as_secs_f64();
    let first = rate(rows[0].1, rows[0].2);
    for &(name, n, t) in rows {
        let rps = rate(n, t);
        println!(
            "{:<width$} {:>9.0} {unit}/s  x{:.2} of {base}",
            name,
            rps,
            rps / first
        );
    }
}

/// Serves `app` on `listener` with `TCP_NODELAY`, as the gateway does.
pub async fn serve_front(listener: tokio::net::TcpListener, app: axum::Router) {
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await.expect("serve");
}

/// A process's CPU time so far (user + system, all its threads, and its
/// children it has waited for: `reply --exec`'s commands), from
/// `/proc/PID/stat` (clock ticks of 10 ms: the benches' slices are long
/// enough for the figure per call to hold). Zero once the process is gone.
#[allow(dead_code)] // federation_bench reads no CPU times
pub fn cpu_of(pid: u32) -> Duration {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // Fields after the command name (which may hold spaces): state is
    // field 3, utime 14, stime 15, cutime 16, cstime 17.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // CLK_TCK is 100 on Linux's every ABI this runs on.
    Duration::from_millis((ticks(14) + ticks(15) + ticks(16) + ticks(17)) * 10)
}
