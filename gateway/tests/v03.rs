//! A2A v0.3 clients against the gateway (a real broker, the TCK's SUT
//! agent and a sink that never answers), over the JSON-RPC binding without
//! an `A2A-Version` header, as the v0.3 SDKs call: the card's v0.3 fields,
//! a whole delegation (send, input-required, follow-up, artifacts of each
//! part kind, history, `blocking: false`, cancel), streams with v0.3
//! events and `final`, push configs nested the v0.3 way, and v0.3 errors.

mod common;

use a2a_gateway::WebhookPolicy;
use common::{sse_events, string, Harness, TIMEOUT};
use serde_json::{json, Value};

/// A v0.3 JSON-RPC request to `agent` (no `A2A-Version` unless given).
fn post(
    h: &Harness,
    agent: &str,
    method: &str,
    params: Value,
    version: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut r = h
        .http
        .post(format!("{}/agents/{agent}", h.base))
        .header("content-type", "application/json")
        .json(&json!({"jsonrpc": "2.0", "id": "r1", "method": method, "params": params}));
    if let Some(v) = version {
        r = r.header("a2a-version", v);
    }
    r
}

async fn rpc_to(h: &Harness, agent: &str, method: &str, params: Value) -> Value {
    common::json_body(post(h, agent, method, params, None)).await
}

async fn rpc(h: &Harness, method: &str, params: Value) -> Value {
    rpc_to(h, h.agent.id(), method, params).await
}

/// A unary v0.3 call's result (panics on an error answer).
async fn ok(h: &Harness, method: &str, params: Value) -> Value {
    let r = rpc(h, method, params).await;
    assert!(r.get("error").is_none(), "{method}: {r}");
    assert_eq!(r["id"], "r1");
    r["result"].clone()
}

/// A v0.3 streaming call's whole events (results or errors), read until the
/// gateway ends the stream.
async fn stream_raw(h: &Harness, agent: &str, method: &str, params: Value) -> Vec<Value> {
    let resp = post(h, agent, method, params, None)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("send");
    let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ct.contains("text/event-stream"), "{ct}");
    let body = tokio::time::timeout(TIMEOUT, resp.text())
        .await
        .expect("the stream ends")
        .expect("body");
    sse_events(&body)
}

/// A v0.3 streaming call's results (panics on an error event).
async fn stream(h: &Harness, agent: &str, method: &str, params: Value) -> Vec<Value> {
    stream_raw(h, agent, method, params)
        .await
        .into_iter()
        .map(|e| {
            assert!(e.get("error").is_none(), "{e}");
            e["result"].clone()
        })
        .collect()
}

/// A v0.3 user message.
fn msg(id: &str, text: &str) -> Value {
    json!({"kind": "message", "messageId": id, "role": "user",
           "parts": [{"kind": "text", "text": text}]})
}

fn kinds(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| string(&e["kind"])).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_has_the_v03_fields_a_v03_client_needs_beside_the_v1_ones() {
    let h = Harness::start(|_| {}).await;
    let card = h.card().await;
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["url"], h.url());
    assert_eq!(card["preferredTransport"], "JSONRPC");
    assert_eq!(
        card["additionalInterfaces"],
        json!([{"url": h.url(), "transport": "JSONRPC"}])
    );
    for k in [
        "capabilities",
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
        "name",
        "version",
        "description",
    ] {
        assert!(card.get(k).is_some(), "{k}");
    }
    // The v1.0 interface stays first; the v0.3 one is the same endpoint.
    let ifaces = card["supportedInterfaces"].as_array().unwrap();
    assert_eq!(ifaces[0]["protocolVersion"], "1.0");
    assert_eq!(
        ifaces.last().unwrap(),
        &json!({"url": h.url(), "protocolBinding": "JSONRPC", "protocolVersion": "0.3"})
    );
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v03_delegation_goes_through_input_required_artifacts_and_cancel() {
    let h = Harness::start(|_| {}).await;
    // send: the agent asks for more input.
    let t = ok(
        &h,
        "message/send",
        json!({"message": msg("tck-input-required-v03", "start")}),
    )
    .await;
    assert_eq!(t["kind"], "task");
    assert_eq!(t["status"]["state"], "input-required");
    let asks = &t["status"]["message"];
    assert_eq!(asks["kind"], "message");
    assert_eq!(asks["role"], "agent");
    assert_eq!(
        asks["parts"][0],
        json!({"kind": "text", "text": "Please provide more input"})
    );
    let (tid, cid) = (string(&t["id"]), string(&t["contextId"]));
    // The follow-up on the same task completes it.
    let mut more = msg("tck-complete-v03", "more");
    more["taskId"] = json!(tid);
    more["contextId"] = json!(cid);
    let done = ok(&h, "message/send", json!({"message": more})).await;
    assert_eq!(
        (done["kind"].as_str(), done["id"].as_str()),
        (Some("task"), Some(tid.as_str()))
    );
    assert_eq!(done["status"]["state"], "completed");
    // Its history, in v0.3 shapes and roles, with the client's ids.
    let got = ok(&h, "tasks/get", json!({"id": tid, "historyLength": 10})).await;
    assert_eq!(got["kind"], "task");
    let history = got["history"].as_array().unwrap();
    assert!(history.iter().all(|m| m["kind"] == "message"), "{got}");
    let roles: Vec<&str> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles.first(), Some(&"user"), "{got}");
    assert!(roles.contains(&"agent"), "{got}");
    assert!(
        history.iter().any(|m| m["messageId"] == "tck-complete-v03"),
        "{got}"
    );
    // Artifacts of each part kind.
    let data = ok(
        &h,
        "message/send",
        json!({"message": msg("tck-artifact-data-v03", "d")}),
    )
    .await;
    assert_eq!(
        data["artifacts"][0]["parts"][0],
        json!({"kind": "data", "data": {"key": "value", "count": 42}})
    );
    let file = ok(
        &h,
        "message/send",
        json!({"message": msg("tck-artifact-file-v03", "f")}),
    )
    .await;
    let fp = &file["artifacts"][0]["parts"][0];
    assert_eq!(fp["kind"], "file");
    assert_eq!(fp["file"]["bytes"], "ZmlsZSBjb250ZW50IGZyb20gVENL");
    let url = ok(
        &h,
        "message/send",
        json!({"message": msg("tck-artifact-file-url-v03", "u")}),
    )
    .await;
    assert_eq!(
        url["artifacts"][0]["parts"][0]["file"]["uri"],
        "https://example.com/output.txt"
    );
    let text = ok(
        &h,
        "message/send",
        json!({"message": msg("tck-artifact-text-v03", "t")}),
    )
    .await;
    assert_eq!(
        text["artifacts"][0]["parts"][0],
        json!({"kind": "text", "text": "Generated text content"})
    );
    // A message answer is the message itself.
    let m = ok(
        &h,
        "message/send",
        json!({"message": msg("tck-message-response-v03", "m")}),
    )
    .await;
    assert_eq!(m["kind"], "message");
    assert_eq!(m["role"], "agent");
    // `blocking: false` to an agent that never answers returns at once
    // (v1.0's returnImmediately), and the open task is canceled.
    let sink = h.sink.id().to_owned();
    let r = rpc_to(
        &h,
        &sink,
        "message/send",
        json!({"message": msg("open-v03", "wait"), "configuration": {"blocking": false}}),
    )
    .await;
    let open = &r["result"];
    assert_eq!(open["kind"], "task", "{r}");
    assert!(
        ["submitted", "working"].contains(&open["status"]["state"].as_str().unwrap()),
        "{r}"
    );
    let oid = string(&open["id"]);
    let c = rpc_to(&h, &sink, "tasks/cancel", json!({"id": oid})).await;
    assert_eq!(c["result"]["kind"], "task", "{c}");
    assert_eq!(c["result"]["status"]["state"], "canceled", "{c}");
    // Canceling it again: v0.3's TaskNotCancelableError.
    let again = rpc_to(&h, &sink, "tasks/cancel", json!({"id": oid})).await;
    assert_eq!(again["error"]["code"], -32002, "{again}");
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v03_streams_carry_v03_events_and_final_on_the_last_one() {
    let h = Harness::start(|_| {}).await;
    let agent = h.agent.id().to_owned();
    let evs = stream(
        &h,
        &agent,
        "message/stream",
        json!({"message": msg("tck-stream-001-v03", "s")}),
    )
    .await;
    assert_eq!(
        kinds(&evs),
        ["task", "status-update", "artifact-update", "status-update"],
        "{evs:?}"
    );
    assert_eq!(evs[1]["status"]["state"], "working");
    assert_eq!(evs[1]["final"], false);
    assert_eq!(
        evs[2]["artifact"]["parts"][0],
        json!({"kind": "text", "text": "Stream hello from TCK"})
    );
    assert_eq!(evs[3]["status"]["state"], "completed");
    assert_eq!(evs[3]["final"], true);
    let tid = string(&evs[0]["id"]);
    assert!(evs[1..].iter().all(|e| e["taskId"] == tid.as_str()));
    // A stream that stops at input-required ends there, with final.
    let ir = stream(
        &h,
        &agent,
        "message/stream",
        json!({"message": msg("tck-input-required-s03", "s")}),
    )
    .await;
    let last = ir.last().unwrap();
    if last["kind"] == "status-update" {
        assert_eq!(last["status"]["state"], "input-required");
        assert_eq!(last["final"], true);
    } else {
        assert_eq!(last["status"]["state"], "input-required", "{ir:?}");
    }
    // Resubscribing to a task that is done, or to none: the error inside
    // the stream, as v0.3 servers answer (UnsupportedOperation, TaskNotFound).
    for (id, code) in [(tid.as_str(), -32004), ("no-such-task", -32001)] {
        let r = stream_raw(&h, &agent, "tasks/resubscribe", json!({"id": id})).await;
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0]["error"]["code"], code, "{r:?}");
        assert_eq!(r[0]["id"], "r1");
    }
    // Resubscribing to an open task: the task, then its updates until it
    // ends (here canceled, with final).
    let sink = h.sink.id().to_owned();
    let open = rpc_to(
        &h,
        &sink,
        "message/send",
        json!({"message": msg("open-s03", "wait"), "configuration": {"blocking": false}}),
    )
    .await;
    let oid = string(&open["result"]["id"]);
    let resp = post(&h, &sink, "tasks/resubscribe", json!({"id": oid}), None)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("send");
    let c = rpc_to(&h, &sink, "tasks/cancel", json!({"id": oid})).await;
    assert_eq!(c["result"]["status"]["state"], "canceled", "{c}");
    let body = tokio::time::timeout(TIMEOUT, resp.text())
        .await
        .expect("the stream ends")
        .expect("body");
    let re: Vec<Value> = sse_events(&body)
        .into_iter()
        .map(|e| e["result"].clone())
        .collect();
    assert_eq!(re[0]["kind"], "task", "{re:?}");
    let last = re.last().unwrap();
    assert_eq!(last["kind"], "status-update", "{re:?}");
    assert_eq!(last["status"]["state"], "canceled");
    assert_eq!(last["final"], true);
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v03_push_configs_are_set_read_listed_and_deleted_nested() {
    let h = Harness::start(|o| {
        o.webhooks = WebhookPolicy {
            allow_hosts: vec![],
            allow_loopback: true,
        }
    })
    .await;
    let t = ok(
        &h,
        "message/send",
        json!({"message": msg("tck-complete-push-v03", "p")}),
    )
    .await;
    let tid = string(&t["id"]);
    let cfg = json!({"url": "http://127.0.0.1:9/webhook", "token": "tok",
                     "authentication": {"schemes": ["Bearer"], "credentials": "c"}});
    let set = ok(
        &h,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": tid, "pushNotificationConfig": cfg}),
    )
    .await;
    assert_eq!(set["taskId"], tid.as_str());
    // Without an id, the config is named after its task (as v0.3 does).
    assert_eq!(set["pushNotificationConfig"]["id"], tid.as_str());
    assert_eq!(
        set["pushNotificationConfig"]["authentication"]["schemes"],
        json!(["Bearer"])
    );
    let got = ok(&h, "tasks/pushNotificationConfig/get", json!({"id": tid})).await;
    assert_eq!(got, set);
    // An id the task has no config of: the task's config, as the v0.3
    // SDK's server answers (its TCK asks for `default`).
    let got = ok(
        &h,
        "tasks/pushNotificationConfig/get",
        json!({"id": tid, "pushNotificationConfigId": "default"}),
    )
    .await;
    assert_eq!(got, set);
    let listed = ok(&h, "tasks/pushNotificationConfig/list", json!({"id": tid})).await;
    assert_eq!(listed, json!([set]));
    let del = rpc(
        &h,
        "tasks/pushNotificationConfig/delete",
        json!({"id": tid, "pushNotificationConfigId": tid}),
    )
    .await;
    assert!(del.get("error").is_none(), "{del}");
    assert_eq!(del["result"], Value::Null);
    assert_eq!(
        ok(&h, "tasks/pushNotificationConfig/list", json!({"id": tid})).await,
        json!([])
    );
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_version_header_and_bad_v03_input_get_clear_errors() {
    let h = Harness::start(|_| {}).await;
    let agent = h.agent.id().to_owned();
    let send = json!({"message": msg("tck-complete-hdr", "x")});
    // The v0.3 header with a v0.3 name is served.
    let r = common::json_body(post(&h, &agent, "message/send", send.clone(), Some("0.3"))).await;
    assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
    // A v0.3 name under the v1.0 header is told its v1.0 name.
    let r = common::json_body(post(&h, &agent, "message/send", send.clone(), Some("1.0"))).await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert!(
        string(&r["error"]["message"]).contains("SendMessage"),
        "{r}"
    );
    // A v1.0 name under the v0.3 header: the version is refused.
    let v1 = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}});
    let r = common::json_body(post(&h, &agent, "SendMessage", v1, Some("0.3"))).await;
    assert_eq!(r["error"]["code"], -32009, "{r}");
    // A part of no v0.3 kind, an unknown task: v0.3 errors, and nothing
    // was sent.
    let bad = json!({"message": {"kind": "message", "messageId": "b", "role": "user",
                                 "parts": [{"kind": "video", "video": "x"}]}});
    let r = rpc(&h, "message/send", bad).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(string(&r["error"]["message"]).contains("video"), "{r}");
    let r = rpc(&h, "tasks/get", json!({"id": "no-such-task"})).await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
    let r = rpc(&h, "tasks/get", json!({"id": 5})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = rpc(&h, "tasks/get", json!({"id": "x", "historyLength": -1})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // A part without its `kind` (v0.3 requires it) is refused.
    let r = rpc(
        &h,
        "message/send",
        json!({"message": {"kind": "message", "messageId": "k",
        "role": "user", "parts": [{"type": "text", "text": "x"}]}}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let listed = h.ok("ListTasks", json!({})).await;
    assert_eq!(
        listed["totalSize"], 1,
        "only the first send made a task: {listed}"
    );
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_code_v03_lacks_reaches_a_v03_client_as_internal_error() {
    let h = Harness::start(|o| o.required_extensions = vec!["urn:needed".into()]).await;
    // v1.0 says -32008 (extension support required); v0.3 has no such code.
    let r = rpc(
        &h,
        "message/send",
        json!({"message": msg("tck-complete-ext", "x")}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(string(&r["error"]["message"]).contains("urn:needed"), "{r}");
    let v1 = common::json_body(h.post(
        "SendMessage",
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
    ))
    .await;
    assert_eq!(v1["error"]["code"], -32008, "{v1}");
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authenticated_extended_card_needs_authentication() {
    // Without bearer tokens there is no authenticated caller: not declared,
    // and asked for, v0.3's AuthenticatedExtendedCardNotConfigured.
    let h = Harness::start(|_| {}).await;
    assert!(h
        .card()
        .await
        .get("supportsAuthenticatedExtendedCard")
        .is_none());
    let r = rpc(&h, "agent/getAuthenticatedExtendedCard", Value::Null).await;
    assert_eq!(r["error"]["code"], -32007, "{r}");
    h.gateway.stop().await;
    // With them, declared and answered (with the v0.3 fields) to a caller
    // with a token.
    const TOKEN: &str = "alice-secret-0123456789";
    let h = Harness::start(|o| {
        o.tokens = a2a_gateway::Tokens::parse([format!("alice={TOKEN}").as_str()]).unwrap()
    })
    .await;
    let card = h.card().await;
    assert_eq!(card["supportsAuthenticatedExtendedCard"], true, "{card}");
    assert_eq!(card["security"], json!([{"bearer": []}]), "{card}");
    assert_eq!(card["securitySchemes"]["bearer"]["type"], "http", "{card}");
    let agent = h.agent.id().to_owned();
    let r = common::json_body(
        post(
            &h,
            &agent,
            "agent/getAuthenticatedExtendedCard",
            json!({}),
            None,
        )
        .bearer_auth(TOKEN),
    )
    .await;
    assert_eq!(r["result"]["protocolVersion"], "0.3.0", "{r}");
    assert_eq!(r["result"]["url"], h.url(), "{r}");
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_v03_card_the_card_is_strictly_v1_and_v03_calls_still_work() {
    // v1.0's card schema is closed: `--no-v03-card` serves the v1.0
    // members only (the v1.0 TCK checks so).
    let h = Harness::start(|o| o.v03_card = false).await;
    let card = h.card().await;
    for k in [
        "url",
        "protocolVersion",
        "preferredTransport",
        "additionalInterfaces",
    ] {
        assert!(card.get(k).is_none(), "{k}: {card}");
    }
    let ifaces = card["supportedInterfaces"].as_array().unwrap();
    assert!(
        ifaces.iter().all(|i| i["protocolVersion"] == "1.0"),
        "{card}"
    );
    // A v0.3 client that knows the endpoint is served all the same.
    let t = ok(
        &h,
        "message/send",
        json!({"message": msg("tck-complete-nocard", "x")}),
    )
    .await;
    assert_eq!(t["status"]["state"], "completed", "{t}");
    h.gateway.stop().await;
}
