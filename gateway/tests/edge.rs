//! The HTTP edge: a silent connection is closed at the header timeout, a
//! stalled body is answered 408 at the body timeout, thousands of idle
//! connections cannot lock a client out, and slow large bodies hold
//! bounded memory (the real gateway binary, its resident size read from
//! /proc).

mod common;

use common::{message, Harness};
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_at_the_header_timeout() {
    let h = Harness::start(|o| o.header_timeout = Duration::from_millis(300)).await;
    let mut s = TcpStream::connect(h.gateway.addr).await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .expect("closed in time")
        .unwrap_or(0);
    assert!(n == 0 || String::from_utf8_lossy(&buf[..n]).contains("408"));
    assert!(started.elapsed() < Duration::from_secs(5));
    // A keep-alive connection that goes quiet after a request, too.
    let mut s = TcpStream::connect(h.gateway.addr).await.unwrap();
    s.write_all(b"GET /.well-known/agent-card.json HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut all = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut all)).await;
    assert!(closed.is_ok(), "the idle keep-alive connection stays open");
    assert!(String::from_utf8_lossy(&all).starts_with("HTTP/1.1 200"));
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_answered_408() {
    let h = Harness::start(|o| o.body_timeout = Duration::from_millis(300)).await;
    let mut s = TcpStream::connect(h.gateway.addr).await.unwrap();
    s.write_all(
        b"POST /agents/tck HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"jsonrpc\":",
    )
    .await
    .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .expect("answered in time")
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_thousand_idle_connections_cannot_lock_a_client_out() {
    let h = Harness::start(|_| {}).await;
    let mut idle = Vec::new();
    for _ in 0..2000 {
        idle.push(TcpStream::connect(h.gateway.addr).await.unwrap());
    }
    let started = Instant::now();
    let r = h
        .ok(
            "SendMessage",
            json!({"message": message("tck-complete-task-e", "x")}),
        )
        .await;
    let took = started.elapsed();
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    eprintln!("a call beside 2,000 idle connections: {took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(idle);
    h.gateway.stop().await;
}

/// Resident and peak resident size of a process, in KiB.
fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_slow_large_bodies_hold_bounded_memory() {
    let bin = a2a_testkit::bin::broker_bin().to_path_buf();
    let broker = tokio::task::spawn_blocking(move || common::tck::spawn_broker(&bin))
        .await
        .unwrap()
        .expect("broker");
    let (socket, secret) = (broker.socket.clone(), broker.secret.clone());
    let _sut = tokio::task::spawn_blocking(move || {
        let c = a2a_client::Client::connect(&socket, &secret).expect("connect");
        common::tck::register_sut(&c).expect("sut")
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let g = common::GatewayProc::start(
        &broker.socket,
        &broker.secret,
        &dir.path().join("g.db"),
        &[],
    );
    // Warm up (the first call makes the broker connection, the context).
    let r = g
        .ok(
            "tck",
            "SendMessage",
            json!({"message": message("tck-complete-task-w", "x")}),
        )
        .await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let (before, _) = rss_kib(g.pid());
    // 60 requests, each declaring 8 MiB - 1 and sending all but one byte.
    const LEN: usize = (8 << 20) - 1;
    let addr = g.addr();
    let mut conns = Vec::new();
    for _ in 0..60 {
        conns.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let head = format!(
                "POST /agents/tck HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {LEN}\r\n\r\n"
            );
            s.write_all(head.as_bytes()).await.unwrap();
            let chunk = vec![b' '; 1 << 20];
            let mut left = LEN - 1;
            while left > 0 {
                let n = left.min(chunk.len());
                if s.write_all(&chunk[..n]).await.is_err() {
                    break;
                }
                left -= n;
            }
            // Hold the connection, one byte short.
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(s);
        }));
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (now, peak) = rss_kib(g.pid());
    let grew_mib = now.saturating_sub(before) / 1024;
    let peak_mib = peak.saturating_sub(before) / 1024;
    eprintln!(
        "60 slow 8 MiB bodies: gateway RSS {} MiB -> {} MiB (+{grew_mib} MiB, peak +{peak_mib} MiB)",
        before / 1024,
        now / 1024
    );
    assert!(peak_mib < 64, "the bodies cost {peak_mib} MiB");
    // The gateway still answers.
    let r = g
        .ok(
            "tck",
            "SendMessage",
            json!({"message": message("tck-complete-task-z", "x")}),
        )
        .await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    for c in conns {
        c.abort();
    }
}
