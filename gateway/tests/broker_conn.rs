//! Each identity's broker connection runs on the gateway's own runtime
//! (`gateway/src/conn.rs`): a new identity adds a connection, not OS
//! threads (`a2a-client`'s connections had a reader and a writer thread
//! each, and every answer crossed from one to a tokio worker).

mod common;

use a2a_gateway::Tokens;
use common::{json_body, message, string, Harness};
use serde_json::{json, Value};

/// Identities that each make their first call (and so their connection).
const IDENTITIES: usize = 12;

fn token(i: usize) -> String {
    format!("secret-{i:02}-0123456789abcdef")
}

/// This process's threads now.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

async fn send_as(h: &Harness, i: usize) -> Value {
    let params = json!({"message": message(&format!("tck-complete-task-{i}"), "hi")});
    json_body(h.post("SendMessage", params).bearer_auth(token(i))).await
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_identity_costs_no_threads() {
    let specs: Vec<String> = (0..IDENTITIES)
        .map(|i| format!("user{i}={}", token(i)))
        .collect();
    let h = Harness::start(|o| {
        o.tokens = Tokens::parse(specs.iter().map(String::as_str)).expect("tokens");
        o.rate = 0.0;
    })
    .await;
    // The first identity's call starts whatever the gateway starts once
    // (the state file's writer, the runtime's blocking pool).
    let r = send_as(&h, 0).await;
    assert_eq!(
        string(&r["result"]["task"]["status"]["state"]),
        "TASK_STATE_COMPLETED",
        "{r}"
    );
    let before = threads();
    for i in 1..IDENTITIES {
        let r = send_as(&h, i).await;
        assert_eq!(
            string(&r["result"]["task"]["status"]["state"]),
            "TASK_STATE_COMPLETED",
            "{r}"
        );
    }
    let after = threads();
    // Two threads per connection before; a spare blocking-pool thread
    // may still come and go.
    assert!(
        after < before + (IDENTITIES - 1),
        "{} identities took {} threads ({before} -> {after})",
        IDENTITIES - 1,
        after.saturating_sub(before)
    );
}
