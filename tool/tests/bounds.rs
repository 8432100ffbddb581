//! What one result holds, and what a session holds for its model, stay
//! bounded however much other agents send: hundreds of queued tasks come
//! back over several `wait`s, each result within `RESULT_MAX_CHARS` and
//! `WAIT_MAX_EVENTS` and saying how many more wait; file parts queued for
//! the model hold their names and sizes, not their bytes.

mod support;

use a2a_client::proto::types::FileContent;
use a2a_client::{agent_card, message_to, Agent, Delivery, Message, Part};
use a2a_tool::{
    Registration, Session, SessionOptions, QUOTE_MAX_CHARS, RESULT_MAX_CHARS, WAIT_MAX_EVENTS,
};
use serde_json::{json, Value};
use std::collections::HashSet;

fn worker(run: &support::Running) -> Session {
    let reg = Registration {
        context_id: "ctx-worker".into(),
        name: "worker".into(),
        ..Default::default()
    };
    Session::register(&run.client, &reg, SessionOptions::default()).expect("worker")
}

fn requesters(run: &support::Running, n: usize) -> Vec<Agent> {
    (0..n)
        .map(|i| {
            run.client
                .register(
                    &format!("ctx-r{i}"),
                    agent_card(&format!("r{i}")),
                    Delivery::Push,
                )
                .expect("requester")
        })
        .collect()
}

/// Calls `wait` until nothing is pending; checks each result's bounds and
/// returns the task ids seen and the results.
fn drain(tool: &Session, expected: usize) -> (Vec<String>, Vec<(String, Value)>) {
    let mut ids = Vec::new();
    let mut results = Vec::new();
    while ids.len() < expected {
        let r = tool.call(&json!({"action": "wait", "timeoutSeconds": 10}));
        assert!(!r.is_error, "{}", r.text);
        let events = r.structured["events"].as_array().expect("events").clone();
        assert!(
            !events.is_empty(),
            "the queued updates stopped coming: {}",
            r.text
        );
        assert!(events.len() <= WAIT_MAX_EVENTS, "{} updates", events.len());
        let chars = r.text.chars().count();
        assert!(chars <= RESULT_MAX_CHARS, "a wait of {chars} characters");
        let structured = r.structured.to_string().chars().count();
        assert!(
            structured <= RESULT_MAX_CHARS,
            "a structured wait of {structured} characters"
        );
        ids.extend(
            events
                .iter()
                .map(|e| e["taskId"].as_str().expect("taskId").to_owned()),
        );
        let pending = r.structured["pending"].as_u64().unwrap_or(0) as usize;
        assert_eq!(pending, expected.saturating_sub(ids.len()), "{}", r.text);
        if pending > 0 {
            assert!(
                r.text.ends_with(&format!(
                    "{pending} more update{} waiting: call wait again to read {}.",
                    if pending == 1 { " is" } else { "s are" },
                    if pending == 1 { "it" } else { "them" },
                )),
                "no hint for the {pending} left: {}",
                &r.text[r.text.len().saturating_sub(300)..]
            );
        } else {
            assert!(!r.text.contains("call wait again"), "{}", r.text);
        }
        results.push((r.text, r.structured));
    }
    (ids, results)
}

#[test]
fn hundreds_of_queued_tasks_come_back_in_bounded_results_each_once() {
    let run = support::broker();
    let tool = worker(&run);
    // 300 tasks of 16,000 characters each (the most one message holds):
    // 4.8 M characters in all, had one result held them.
    // The third requester's texts are quotes and newlines, which JSON
    // escapes: the structured results stay within the bound too.
    let mut sent = Vec::new();
    for (n, r) in requesters(&run, 3).iter().enumerate() {
        for i in 0..100 {
            let filler = if n == 2 {
                "\"\n".repeat(7_997)
            } else {
                "x".repeat(15_994)
            };
            let text = format!("{i:05} {filler}");
            let t = r.send(message_to("worker", &text), None).expect("send");
            sent.push(t.id);
        }
    }
    let (ids, results) = drain(&tool, sent.len());
    assert_eq!(ids.len(), sent.len(), "every task once");
    assert_eq!(
        ids.iter().collect::<HashSet<_>>(),
        sent.iter().collect::<HashSet<_>>()
    );
    assert!(
        results.len() >= sent.len() / WAIT_MAX_EVENTS,
        "{}",
        results.len()
    );
    // Each task's whole text was shown (16,000 characters fit one quote).
    let (text, structured) = &results[0];
    assert!(!text.contains("more characters not shown"));
    assert_eq!(
        structured["events"][0]["text"]
            .as_str()
            .map(|t| t.chars().count()),
        Some(16_000)
    );
    // Nothing is left: a last wait finds no update.
    let r = tool.call(&json!({"action": "wait", "timeoutSeconds": 0}));
    assert_eq!(r.structured["events"], json!([]), "{}", r.text);
}

fn file_message(to: &str, name: &str, bytes: usize) -> Message {
    use base64::Engine as _;
    let data = vec![b'z'; bytes];
    Message {
        parts: vec![
            Part::text("see the file"),
            Part::File {
                file: FileContent {
                    name: Some(name.into()),
                    mime_type: Some("application/octet-stream".into()),
                    uri: None,
                    bytes: Some(base64::engine::general_purpose::STANDARD.encode(&data)),
                },
                metadata: None,
            },
        ],
        ..message_to(to, "")
    }
}

#[test]
fn queued_file_parts_are_held_by_name_and_size_not_bytes() {
    let run = support::broker();
    let tool = worker(&run);
    // 64 tasks carrying a 1 MiB file each: 64 MiB, had the session kept
    // their bytes for the model.
    let mut n = 0;
    for r in requesters(&run, 2) {
        for i in 0..32 {
            r.send(file_message("worker", &format!("f{i}.bin"), 1 << 20), None)
                .expect("send");
            n += 1;
        }
    }
    // All 64 are queued (one connection: the events arrive before the
    // sends' answers): what the session holds is names and sizes.
    let held = tool.held_bytes();
    assert!(held > 0);
    assert!(
        held < 256 * 1024,
        "{held} bytes held for 64 queued file parts"
    );
    let (ids, results) = drain(&tool, n);
    assert_eq!(ids.len(), n);
    assert!(
        results[0]
            .0
            .contains("[file f0.bin (application/octet-stream, 1048576 bytes)]"),
        "{}",
        results[0].0
    );
    assert_eq!(tool.held_bytes(), 0);
}

/// A long artifact is cut to `QUOTE_MAX_CHARS` in the text and in the
/// structured result, saying how much was left out.
#[test]
fn long_texts_are_cut_and_say_so() {
    let run = support::broker();
    let reg = Registration {
        context_id: "ctx-asker".into(),
        name: "asker".into(),
        ..Default::default()
    };
    let asker = Session::register(&run.client, &reg, SessionOptions::default()).expect("asker");
    let worker = run
        .client
        .register("ctx-w", agent_card("worker"), Delivery::Push)
        .expect("worker");
    let r = asker.call(&json!({"action": "send", "to": "worker", "text": "write it"}));
    let t = r.structured["taskId"].as_str().expect("taskId").to_owned();
    // A data part of 48,000 characters (an artifact's text parts are
    // bounded like a message's; its data parts are not).
    let mut data = serde_json::Map::new();
    data.insert("y".into(), json!("y".repeat(QUOTE_MAX_CHARS * 3)));
    let artifact = a2a_client::Artifact {
        artifact_id: "big".into(),
        name: Some("big.json".into()),
        description: None,
        parts: vec![Part::Data {
            data: data.into(),
            metadata: None,
        }],
        metadata: None,
    };
    worker
        .add_artifact(&t, artifact, false, true)
        .expect("artifact");
    let left = QUOTE_MAX_CHARS * 3 + r#"{"y":""}"#.len() - QUOTE_MAX_CHARS;
    let note = format!("[… {left} more characters not shown]");
    for r in [
        asker.call(&json!({"action": "wait", "timeoutSeconds": 5})),
        asker.call(&json!({"action": "get", "taskId": t})),
    ] {
        assert!(r.text.chars().count() <= RESULT_MAX_CHARS);
        assert!(
            r.text.contains(&note),
            "{}",
            &r.text[r.text.len().saturating_sub(500)..]
        );
        let kept = r.structured["events"][0]["artifact"]["text"]
            .as_str()
            .or(r.structured["artifacts"][0]["text"].as_str())
            .expect("the artifact's text");
        assert!(kept.starts_with(r#"{"y":"yyyy"#), "{}", &kept[..20]);
        assert!(kept.ends_with(&note), "{}", &kept[kept.len() - 100..]);
        assert!(
            kept.chars().count() < QUOTE_MAX_CHARS + 100,
            "{}",
            kept.len()
        );
    }
}
