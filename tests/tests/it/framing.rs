//! NDJSON framing: bad lines are answered and never kill the connection,
//! batches, blank lines, `\r`, U+2028 inside strings, oversize frames,
//! unknown methods, client notifications and pipelining.

use std::time::Duration;

use a2a_testkit::*;

on_both_transports!(
    invalid_json_gets_parse_error_with_null_id_and_connection_survives,
    valid_json_that_is_not_a_request_gets_invalid_request,
    unknown_method_gets_method_not_found,
    blank_lines_and_trailing_cr_are_tolerated,
    line_separators_inside_strings_do_not_split_lines,
    batches_reply_with_one_array_in_request_order,
    empty_batch_gets_a_single_invalid_request,
    notification_only_batch_gets_no_reply_but_is_executed,
    single_client_notification_gets_no_response,
    oversize_line_is_discarded_and_answered_and_connection_survives,
    slow_request_does_not_hold_up_others,
);

fn other(b: &mut Broker) -> Value {
    match b.next_other(TIMEOUT) {
        Some(v) => v,
        None => panic!("no reply line within {TIMEOUT:?}"),
    }
}

fn invalid_json_gets_parse_error_with_null_id_and_connection_survives(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    for line in [
        "{not json",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":",
        "nul",
        "\u{fffd}\u{fffd}",
    ] {
        b.send_raw(line);
        let v = other(&mut b);
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        assert!(v["id"].is_null(), "{v}");
        assert_eq!(v["error"]["code"], -32700, "{line:?} -> {v}");
    }
    // Invalid UTF-8 is not valid JSON either.
    b.write_bytes(vec![0xff, 0xfe, b'{', b'\n']);
    let v = other(&mut b);
    assert!(v["id"].is_null(), "{v}");
    let code = v["error"]["code"].as_i64();
    assert!(code == Some(-32700) || code == Some(-32600), "{v}");
    b.handshake();
}

fn valid_json_that_is_not_a_request_gets_invalid_request(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    // With a readable id the error carries it.
    for (line, id) in [
        (r#"{"jsonrpc":"2.0","id":7}"#, json!(7)),
        (r#"{"jsonrpc":"2.0","id":"s8","method":5}"#, json!("s8")),
        (
            r#"{"jsonrpc":"1.0","id":9,"method":"app.handshake","params":{"protocolVersion":10}}"#,
            json!(9),
        ),
        (
            r#"{"id":10,"method":"app.handshake","params":{"protocolVersion":10}}"#,
            json!(10),
        ),
        (
            r#"{"jsonrpc":"2.0","id":11,"method":"a2a.agents.list","params":"nope"}"#,
            json!(11),
        ),
    ] {
        b.send_raw(line);
        let resp = b
            .try_response(&id, TIMEOUT)
            .unwrap_or_else(|| panic!("no response to {line}"));
        let code = resp["error"]["code"].as_i64();
        if id == json!(11) {
            // Params that are neither object nor array: invalid request or params.
            assert!(
                code == Some(-32600) || code == Some(-32602),
                "{line} -> {resp}"
            );
        } else {
            assert_eq!(code, Some(-32600), "{line} -> {resp}");
        }
    }
    // Without a readable id the error has id null.
    for line in ["42", r#""text""#, "null", "true", r#"{"jsonrpc":"2.0"}"#] {
        b.send_raw(line);
        let v = other(&mut b);
        assert!(v["id"].is_null(), "{line} -> {v}");
        assert_eq!(v["error"]["code"], -32600, "{line} -> {v}");
    }
    b.handshake();
}

fn unknown_method_gets_method_not_found(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    for m in ["a2a.nope", "app.nope", "tasks.get", ""] {
        let resp = b.call(m, json!({}));
        assert_rpc_error(&resp, -32601);
    }
    b.handshake();
}

fn blank_lines_and_trailing_cr_are_tolerated(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::start_on(t, &db.path, &[]);
    b.write_bytes(b"\n\n\r\n\n".to_vec());
    let params = b.with_secret(json!({"protocolVersion": 10}));
    let handshake = json!({"jsonrpc": "2.0", "id": 1, "method": "app.handshake", "params": params});
    b.write_bytes(format!("{handshake}\r\n").into_bytes());
    let resp = b
        .try_response(&json!(1), TIMEOUT)
        .expect("response to a CRLF line");
    assert_eq!(result(&resp)["protocolVersion"], 10);
    b.write_bytes(b"\n\n".to_vec());
    let list = b.call("a2a.agents.list", json!({"token": "nope"}));
    assert_a2a_error(&list, "A2A_UNKNOWN_TOKEN");
    // Blank lines got no reply of their own.
    b.pump_ready();
    assert!(
        b.next_other(std::time::Duration::ZERO).is_none(),
        "a blank line was answered"
    );
}

fn line_separators_inside_strings_do_not_split_lines(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let desc = "one\u{2028}two\u{2029}three";
    // serde_json writes U+2028/2029 raw, so the line holds them unescaped.
    let line = json!({"jsonrpc":"2.0","id":5,"method":"a2a.agents.register",
        "params":{"contextId":"c","card":{"name":"a","description":desc}}})
    .to_string();
    assert!(line.contains('\u{2028}'));
    b.send_raw(&line);
    let resp = b
        .try_response(&json!(5), TIMEOUT)
        .expect("register response");
    assert_eq!(result(&resp)["card"]["description"], desc);
}

fn batches_reply_with_one_array_in_request_order(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("c1", "a");
    let hs = b.with_secret(json!({"protocolVersion": 10}));
    let line = json!([
        {"jsonrpc":"2.0","id":"b1","method":"a2a.agents.list","params":{"token": a.token}},
        {"jsonrpc":"2.0","method":"a2a.agents.list","params":{"token": a.token}},
        {"jsonrpc":"2.0","id":"b2","method":"a2a.nope","params":{}},
        {"jsonrpc":"2.0","id":"b3","method":"app.handshake","params":hs},
        7
    ])
    .to_string();
    b.send_raw(&line);
    let v = other(&mut b);
    let arr = v
        .as_array()
        .unwrap_or_else(|| panic!("batch reply is not an array: {v}"));
    assert_eq!(arr.len(), 4, "{v}");
    assert_eq!(arr[0]["id"], "b1");
    assert!(arr[0]["result"]["agents"].is_array(), "{v}");
    assert_eq!(arr[1]["id"], "b2");
    assert_eq!(arr[1]["error"]["code"], -32601);
    assert_eq!(arr[2]["id"], "b3");
    assert_eq!(arr[2]["result"]["protocolVersion"], 10);
    assert!(arr[3]["id"].is_null(), "{v}");
    assert_eq!(arr[3]["error"]["code"], -32600);
}

fn empty_batch_gets_a_single_invalid_request(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    b.send_raw("[]");
    let v = other(&mut b);
    assert!(
        v.is_object(),
        "an empty batch gets a single error, not an array: {v}"
    );
    assert!(v["id"].is_null(), "{v}");
    assert_eq!(v["error"]["code"], -32600, "{v}");
}

fn notification_only_batch_gets_no_reply_but_is_executed(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("c1", "a");
    let line = json!([
        {"jsonrpc":"2.0","method":"a2a.agents.register","params":{"contextId":"c2","card":{"name":"ghost1"}}},
        {"jsonrpc":"2.0","method":"a2a.agents.register","params":{"contextId":"c3","card":{"name":"ghost2"}}}
    ])
    .to_string();
    b.send_raw(&line);
    // Notifications are executed: the agents appear (poll with a deadline).
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let list = b.ok("a2a.agents.list", json!({"token": a.token}));
        let names: Vec<_> = list["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].clone())
            .collect();
        if names.contains(&json!("ghost1")) && names.contains(&json!("ghost2")) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "notification batch was not executed: {names:?}"
        );
    }
    // A following batch's reply is the next non-keyed line: nothing came for
    // the notification-only batch.
    let hs = b.with_secret(json!({"protocolVersion": 10}));
    b.send_raw(
        &json!([{"jsonrpc":"2.0","id":"x1","method":"app.handshake","params":hs}]).to_string(),
    );
    let v = other(&mut b);
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v[0]["id"], "x1", "{v}");
}

fn single_client_notification_gets_no_response(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("c1", "a");
    b.notify(
        "a2a.agents.register",
        json!({"contextId":"c2","card":{"name":"ghost"}}),
    );
    b.notify("a2a.nope", json!({}));
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let list = b.ok("a2a.agents.list", json!({"token": a.token}));
        if list["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "ghost")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "notification was not executed"
        );
    }
    b.pump_ready();
    assert!(
        b.next_other(Duration::ZERO).is_none(),
        "a notification was answered"
    );
}

/// A `a2a.agents.list` request line of exactly `len` bytes (no newline).
fn padded_line(id: u64, token: &str, len: usize) -> Vec<u8> {
    let head = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"a2a.agents.list","params":{{"token":"{token}","pad":""#
    );
    let tail = br#""}}"#;
    let mut line = Vec::with_capacity(len + 1);
    line.extend_from_slice(head.as_bytes());
    line.resize(len - tail.len(), b'a');
    line.extend_from_slice(tail);
    assert_eq!(line.len(), len);
    line
}

const MAX_FRAME: usize = 32 * 1024 * 1024;

fn oversize_line_is_discarded_and_answered_and_connection_survives(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("c1", "a");
    // One byte over the bound.
    let mut line = padded_line(77, &a.token, MAX_FRAME + 1);
    line.push(b'\n');
    b.write_bytes(line);
    let v = b
        .next_other(SLOW_TIMEOUT)
        .expect("no answer to an oversize line");
    assert!(
        v["id"].is_null(),
        "{}",
        v.to_string().chars().take(300).collect::<String>()
    );
    assert_eq!(v["error"]["code"], -32600, "{v}");
    assert_eq!(v["error"]["data"]["reason"], "frame too large", "{v}");
    // The rest of that line was discarded, not parsed as requests.
    assert!(!b.has_response(77));
    let list = b.ok("a2a.agents.list", json!({"token": a.token}));
    assert!(list["agents"].is_array());
    // Exactly at the bound: an ordinary request.
    let mut line = padded_line(78, &a.token, MAX_FRAME);
    line.push(b'\n');
    b.write_bytes(line);
    let resp = b
        .try_response(&json!(78), SLOW_TIMEOUT)
        .expect("no answer to a 32 MiB line");
    assert_eq!(result(&resp)["agents"], json!([]));
    b.pump_ready();
    assert!(
        b.next_other(Duration::ZERO).is_none(),
        "extra replies after the oversize line"
    );
}

fn slow_request_does_not_hold_up_others(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let p = b.agent_with("c1", "p", "subagent", "pull");
    let w = b.agent("c2", "w");
    let wait_id = b.request(
        "a2a.events.wait",
        json!({"token": p.token, "timeoutSeconds": 100}),
    );
    // Requests behind the blocked wait are answered.
    for _ in 0..3 {
        b.ok("a2a.agents.list", json!({"token": w.token}));
    }
    assert!(
        !b.has_response(wait_id),
        "the wait returned without an event"
    );
    // Create work for p: w requests a task from p.
    let task = b.create_task(&w, &p, "wake up");
    let resp = b.response(wait_id);
    let r = result(&resp);
    assert_eq!(r["timedOut"], false);
    let ev = &r["events"][0];
    assert_eq!(ev["method"], "a2a.task.event");
    assert_eq!(ev["params"]["event"]["taskId"], task["id"]);
}
