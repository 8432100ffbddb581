//! Every security rule of the gateway, over HTTP against a real broker:
//! the loopback-only default bind, bearer identities (and their isolation
//! from each other), per-identity rate limits, the request size bound, and
//! the webhook SSRF guard.

mod common;

use a2a_gateway::{ServeError, ServeOptions, StartError, Tokens, WebhookPolicy};
use common::{json_body, message, string, Harness};
use serde_json::{json, Value};

const ALICE: &str = "alice-secret-0123456789";
const BOB: &str = "bob-secret-0123456789ab";

fn two_identities(o: &mut ServeOptions) {
    o.tokens = Tokens::parse([
        format!("alice={ALICE}").as_str(),
        format!("bob={BOB}").as_str(),
    ])
    .unwrap();
}

async fn call(h: &Harness, token: Option<&str>, method: &str, params: Value) -> reqwest::Response {
    let mut r = h.post(method, params);
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    r.send().await.unwrap()
}

/// [`call`]'s JSON answer.
async fn call_json(h: &Harness, token: Option<&str>, method: &str, params: Value) -> Value {
    call(h, token, method, params).await.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_loopback_is_served_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = ServeOptions::new(dir.path().join("no.sock"), "s".into(), vec!["x".into()]);
    opts.listen = "0.0.0.0:0".parse().unwrap();
    // Refused before anything is contacted or bound.
    match a2a_gateway::serve(opts.clone()).await {
        Err(ServeError::Refused(StartError::OpenBind(a))) => assert_eq!(a, opts.listen),
        Err(e) => panic!("wrong refusal: {e}"),
        Ok(_) => panic!("an open bind without a token was accepted"),
    }
    opts.listen = "[::]:0".parse().unwrap();
    assert!(matches!(
        a2a_gateway::serve(opts).await,
        Err(ServeError::Refused(StartError::OpenBind(_)))
    ));
    // Loopback needs none (the harness binds 127.0.0.1:0 without tokens).
    let h = Harness::start(|_| {}).await;
    let ok = h.send("tck-complete-task-1", "x").await;
    assert_eq!(ok["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_tokens_are_required_and_identities_never_see_each_others_tasks() {
    let h = Harness::start(two_identities).await;
    let params = json!({"message": message("tck-input-required-1", "x")});
    let none = call(&h, None, "SendMessage", params.clone()).await;
    assert_eq!(none.status(), 401);
    assert_eq!(none.headers()["www-authenticate"], "Bearer");
    let body: Value = none.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600);
    let wrong = call(
        &h,
        Some("alice-secret-0123456780"),
        "SendMessage",
        params.clone(),
    )
    .await;
    assert_eq!(wrong.status(), 401);
    // The card says how to authenticate.
    let card = json_body(
        h.http
            .get(format!("{}/.well-known/agent-card.json", h.base)),
    )
    .await;
    assert!(card["securitySchemes"]["bearer"].is_object());

    let r: Value = call_json(&h, Some(ALICE), "SendMessage", params).await;
    let id = string(&r["result"]["task"]["id"]);
    let ctx = string(&r["result"]["task"]["contextId"]);
    let get: Value = call_json(&h, Some(ALICE), "GetTask", json!({"id": id})).await;
    assert_eq!(get["result"]["id"], id.as_str());
    // The scheme is case-insensitive (RFC 7235): `bearer` works too.
    let lower: Value = json_body(
        h.post("GetTask", json!({"id": id}))
            .header("authorization", format!("bearer {ALICE}")),
    )
    .await;
    assert_eq!(lower["result"]["id"], id.as_str(), "{lower}");
    // Bob knows the ids and still finds nothing.
    for (method, params) in [
        ("GetTask", json!({"id": id})),
        ("CancelTask", json!({"id": id})),
        ("SubscribeToTask", json!({"id": id})),
    ] {
        let r: Value = call_json(&h, Some(BOB), method, params).await;
        assert_eq!(r["error"]["code"], -32001, "{method}: {r}");
    }
    let mut follow = message("tck-complete-task-b", "hijack");
    follow["taskId"] = json!(id);
    let r: Value = call_json(&h, Some(BOB), "SendMessage", json!({"message": follow})).await;
    assert_eq!(r["error"]["code"], -32001);
    // Bob's context of the same name is his own, empty.
    let list: Value = call_json(&h, Some(BOB), "ListTasks", json!({"contextId": ctx})).await;
    assert_eq!(list["result"]["tasks"], json!([]));
    let list: Value = call_json(&h, Some(ALICE), "ListTasks", json!({"contextId": ctx})).await;
    assert_eq!(list["result"]["totalSize"], 1);
    // Alice's task is untouched by Bob's attempts.
    let get: Value = call_json(&h, Some(ALICE), "GetTask", json!({"id": id})).await;
    assert_eq!(
        get["result"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_identity_has_its_own_rate_limit() {
    let h = Harness::start(|o| {
        two_identities(o);
        // One call per 100 s after a burst of 3: the test cannot refill.
        o.rate = 0.01;
        o.burst = 3;
    })
    .await;
    for _ in 0..3 {
        let r = call(&h, Some(ALICE), "GetTask", json!({"id": "x"})).await;
        assert_eq!(r.status(), 200);
    }
    let limited = call(&h, Some(ALICE), "GetTask", json!({"id": "x"})).await;
    assert_eq!(limited.status(), 429);
    let retry: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1);
    let body: Value = limited.json().await.unwrap();
    assert!(body["error"]["code"].is_i64());
    // Bob is not slowed by Alice.
    let r = call(&h, Some(BOB), "GetTask", json!({"id": "x"})).await;
    assert_eq!(r.status(), 200);
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_bound_are_refused_with_json() {
    let h = Harness::start(|o| o.max_body_bytes = 2048).await;
    let big = "x".repeat(4096);
    let r = h
        .post(
            "SendMessage",
            json!({"message": message("tck-complete-task-big", &big)}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600);
    // Under the bound is served.
    let small = h.send("tck-complete-task-s", "x").await;
    assert_eq!(small["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_refused_to_private_and_loopback_targets_and_off_by_default() {
    // Default: no webhook host allowed, push is off.
    let h = Harness::start(|_| {}).await;
    let r = h.send("tck-input-required-p", "x").await;
    let id = string(&r["task"]["id"]);
    let e = h
        .rpc(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "id": "p", "url": "https://hooks.example.com/w"}),
        )
        .await;
    assert_eq!(e["error"]["code"], -32003);
    h.gateway.stop().await;

    // Allowed host list without the loopback switch.
    let h = Harness::start(|o| {
        o.webhooks = WebhookPolicy {
            allow_hosts: vec!["hooks.example.com".into()],
            allow_loopback: false,
        }
    })
    .await;
    let r = h.send("tck-input-required-p", "x").await;
    let id = string(&r["task"]["id"]);
    for url in [
        "http://127.0.0.1:9/webhook",
        "http://localhost:9/webhook",
        "http://[::1]:9/webhook",
        "http://10.0.0.8/webhook",
        "http://169.254.169.254/latest/meta-data",
        "https://evil.example.net/w",
        "file:///etc/passwd",
    ] {
        let e = h
            .rpc(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": id, "id": "p", "url": url}),
            )
            .await;
        assert_eq!(e["error"]["code"], -32602, "{url}: {e}");
    }
    // The same guard applies to a config given with SendMessage.
    let e = h
        .rpc(
            "SendMessage",
            json!({"message": message("tck-complete-task-p", "x"),
                   "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/w"}}}),
        )
        .await;
    assert_eq!(e["error"]["code"], -32602);
    let ok = h
        .rpc(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "id": "p", "url": "https://hooks.example.com/w"}),
        )
        .await;
    assert_eq!(ok["result"]["url"], "https://hooks.example.com/w");
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_refused_to_every_special_purpose_range() {
    // Every host allowed: only the address rules can refuse.
    let h = Harness::start(|o| {
        o.webhooks = WebhookPolicy {
            allow_hosts: vec!["*".into()],
            allow_loopback: false,
        }
    })
    .await;
    let r = h.send("tck-input-required-s", "x").await;
    let id = string(&r["task"]["id"]);
    for (url, range) in [
        ("http://[fec0::1]/w", "fec0::/10"),
        ("http://[64:ff9b:1::a00:1]/w", "64:ff9b:1::/48"),
        ("http://[2001::1]/w", "2001::/32"),
        (
            "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/w",
            "2001::/32",
        ),
        ("http://[100::1]/w", "100::/64"),
        ("http://192.88.99.1/w", "192.88.99.0/24"),
        ("http://[2002:c058:6301::1]/w", "192.88.99.0/24"),
        ("http://198.18.0.1/w", "198.18.0.0/15"),
        ("http://240.0.0.1/w", "240.0.0.0/4"),
        ("http://[2001:10::1]/w", "2001:10::/28"),
        ("http://[2001:20::1]/w", "2001:20::/28"),
        ("http://[3fff::1]/w", "3fff::/20"),
        ("http://[5f00::1]/w", "5f00::/16"),
        ("http://[::8.8.8.8]/w", "::/96"),
    ] {
        let e = h
            .rpc(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": id, "id": "s", "url": url}),
            )
            .await;
        assert_eq!(e["error"]["code"], -32602, "{url}: {e}");
        let message = e["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(&format!("{range}: ")), "{url}: {e}");
    }
    // A public address is still accepted.
    let ok = h
        .rpc(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "id": "s", "url": "https://[2606:4700::1111]/w"}),
        )
        .await;
    assert_eq!(ok["result"]["url"], "https://[2606:4700::1111]/w", "{ok}");
    h.gateway.stop().await;
}

/// The permission bits of `path`.
fn mode_of(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_file_and_its_wal_and_shm_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let bin = a2a_testkit::bin::broker_bin().to_path_buf();
    let broker = tokio::task::spawn_blocking(move || common::tck::spawn_broker(&bin))
        .await
        .unwrap()
        .expect("broker starts");
    let (socket, secret) = (broker.socket.clone(), broker.secret.clone());
    let _sut = {
        let (socket, secret) = (socket.clone(), secret.clone());
        tokio::task::spawn_blocking(move || {
            let c = a2a_client::Client::connect(&socket, &secret).expect("connect");
            common::tck::register_sut(&c).expect("sut")
        })
        .await
        .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("gateway.db");
    let files = ["", "-wal", "-shm"].map(|suffix| dir.path().join(format!("gateway.db{suffix}")));
    let modes = || {
        files
            .iter()
            .map(|f| format!("{:04o}", mode_of(f)))
            .collect::<Vec<_>>()
    };
    let answered = |g: &common::GatewayProc| {
        let g_base = g.base.clone();
        async move {
            let r: Value = reqwest::Client::new()
                .post(format!("{g_base}/agents/{}", common::tck::SUT_NAME))
                .header("a2a-version", "1.0")
                .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                    "params": {"message": message("tck-complete-task-m", "x")}}))
                .send()
                .await
                .expect("send")
                .json()
                .await
                .expect("json");
            assert_eq!(
                r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
                "{r}"
            );
        }
    };
    // A new state file: owner-only, and so its log and index.
    let g = common::GatewayProc::start(&socket, &secret, &state, &[]);
    answered(&g).await;
    assert_eq!(modes(), ["0600"; 3], "a new state file");
    // Killed (its log and index stay), the three made readable by all as
    // an older gateway left them: the next start takes the bits back.
    g.kill("KILL");
    for f in &files {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let g = common::GatewayProc::start(&socket, &secret, &state, &[]);
    answered(&g).await;
    assert_eq!(modes(), ["0600"; 3], "an existing loose state file");
    g.kill("TERM");
}
