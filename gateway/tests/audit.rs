//! One audit line per call: identity, agent, method, task and outcome,
//! never a message body or a token; and one per refusal (401, 413, 429).
//! The same, as JSON lines, in the `--audit` file.

mod common;

use common::{json_body, message, string, Harness};
use serde_json::json;
use std::io::Write;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_leaves_one_audit_line_without_its_body() {
    let buf = Buf::default();
    let writer = buf.clone();
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "a2a_gateway::audit=info",
        ))
        .init();
    let dir = tempfile::tempdir().unwrap();
    let audit_path = dir.path().join("audit.jsonl");
    // An earlier line is kept (appended to, never truncated).
    std::fs::write(&audit_path, "{\"earlier\":true}\n").unwrap();
    let file = audit_path.clone();
    let h = Harness::start(move |o| {
        o.audit = Some(file);
        o.tokens = a2a_gateway::Tokens::parse(["carol=carol-secret-0123456789"]).unwrap();
        o.rate = 0.001;
        o.burst = 3;
        o.max_body_bytes = 4096;
    })
    .await;
    let secret_text = "the body text that must never be logged";
    let r = json_body(
        h.post(
            "SendMessage",
            json!({"message": message("tck-complete-task-1", secret_text)}),
        )
        .bearer_auth("carol-secret-0123456789"),
    )
    .await;
    let id = string(&r["result"]["task"]["id"]);
    let _ = h
        .post("GetTask", json!({"id": "missing"}))
        .bearer_auth("carol-secret-0123456789")
        .send()
        .await
        .unwrap();
    // Refusals: a body over the bound (413), then the rate limit (429), and
    // a wrong token (401).
    let big = h
        .post(
            "SendMessage",
            json!({"message": message("x", &"y".repeat(8000))}),
        )
        .bearer_auth("carol-secret-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), 413);
    let limited = h
        .post("GetTask", json!({"id": "missing"}))
        .bearer_auth("carol-secret-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(limited.status(), 429);
    let stranger = h
        .post("GetTask", json!({"id": "missing"}))
        .bearer_auth("not-a-token-of-this-gateway")
        .send()
        .await
        .unwrap();
    assert_eq!(stranger.status(), 401);
    h.gateway.stop().await;
    let log = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("a2a_gateway::audit"))
        .collect();
    assert_eq!(lines.len(), 5, "{log}");
    assert!(
        lines[0].contains("identity=\"carol\"") && lines[0].contains("method=\"SendMessage\""),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains(&id) && lines[0].contains("outcome=\"ok\""),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("method=\"GetTask\"") && lines[1].contains("error -32001"),
        "{}",
        lines[1]
    );
    for (line, status) in lines[2..].iter().zip(["413", "429", "401"]) {
        assert!(
            line.contains(&format!("outcome=\"refused {status}\""))
                && line.contains("agent=\"tck\""),
            "{line}"
        );
    }
    assert!(lines[2].contains("identity=\"carol\""), "{}", lines[2]);
    assert!(lines[4].contains("identity=\"-\""), "{}", lines[4]);
    assert!(!log.contains(secret_text));
    assert!(!log.contains("carol-secret"));
    assert!(!log.contains("not-a-token"));

    // The --audit file: the same five, one JSON object a line, after the
    // line that was there.
    let text = std::fs::read_to_string(&audit_path).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(rows.len(), 6, "{text}");
    assert_eq!(rows[0], json!({"earlier": true}));
    let call = &rows[1];
    assert_eq!(
        (&call["kind"], &call["identity"], &call["agent"]),
        (&json!("call"), &json!("carol"), &json!("tck"))
    );
    assert_eq!(
        (&call["method"], &call["task"]),
        (&json!("SendMessage"), &json!(id))
    );
    assert!(call["error"].is_null() && call["micros"].is_u64(), "{call}");
    assert!(
        call["time"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{call}"
    );
    assert_eq!(
        (&rows[2]["method"], &rows[2]["error"]),
        (&json!("GetTask"), &json!(-32001))
    );
    for (row, status) in rows[3..].iter().zip([413, 429, 401]) {
        assert_eq!(
            (&row["kind"], &row["status"]),
            (&json!("refused"), &json!(status)),
            "{row}"
        );
        assert_eq!(row["agent"], "tck", "{row}");
    }
    assert_eq!(rows[3]["identity"], "carol");
    assert!(rows[5]["identity"].is_null(), "{}", rows[5]);
    assert!(
        !text.contains(secret_text)
            && !text.contains("carol-secret")
            && !text.contains("not-a-token")
    );
}
