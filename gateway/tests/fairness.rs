//! One caller cannot take what all callers share: blocking sends are
//! accounted per identity (a broker connection each), contexts and open
//! tasks are bounded per identity, idle contexts are freed, a long
//! conversation outlives the per-registration send cap, `ListTasks` costs
//! the page (not the caller's contexts), and `--reply-timeout` bounds a
//! blocking send.

mod common;

use a2a_client::{ListRole, State, TaskQuery};
use a2a_gateway::Tokens;
use common::{json_body, message, string, Harness};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const ALICE: &str = "alice-secret-0123456789";
const BOB: &str = "bob-secret-0123456789ab";

fn two_identities(o: &mut a2a_gateway::ServeOptions) {
    o.tokens = Tokens::parse([
        format!("alice={ALICE}").as_str(),
        format!("bob={BOB}").as_str(),
    ])
    .unwrap();
    o.rate = 0.0;
}

async fn call(h: &Harness, token: &str, agent: &str, method: &str, params: Value) -> Value {
    json_body(h.post_to(agent, method, params).bearer_auth(token)).await
}

/// A message to the sink that returns at once (the task stays open).
fn open_task(id: &str) -> Value {
    json!({"message": message(id, "hold"), "configuration": {"returnImmediately": true}})
}

/// Tasks the sink holds now.
async fn sink_tasks(h: &Harness) -> Vec<a2a_client::Task> {
    h.sink
        .list_tasks_async(TaskQuery {
            role: ListRole::Worker,
            state: None,
            limit: Some(1000),
            cursor: None,
        })
        .expect("submit")
        .await
        .expect("list")
        .tasks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_identity_sends_while_another_holds_its_maximum() {
    let h = std::sync::Arc::new(Harness::start(two_identities).await);
    // Alice holds 64 blocking sends on tasks nobody answers.
    let mut held = Vec::new();
    for i in 0..64 {
        let h = h.clone();
        held.push(tokio::spawn(async move {
            call(
                &h,
                ALICE,
                "sink",
                "SendMessage",
                json!({"message": message(&format!("a-{i}"), "wait")}),
            )
            .await
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while sink_tasks(&h).await.len() < 64 {
        assert!(Instant::now() < deadline, "alice's sends never arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Her 65th is refused, at once and clearly.
    let over = call(
        &h,
        ALICE,
        "sink",
        "SendMessage",
        json!({"message": message("a-65", "wait")}),
    )
    .await;
    assert!(
        over["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("too many blocking sends")),
        "{over}"
    );
    // Bob's blocking send is answered as if she were not there.
    let started = Instant::now();
    let bob = call(
        &h,
        BOB,
        "tck",
        "SendMessage",
        json!({"message": message("tck-complete-task-b", "hi")}),
    )
    .await;
    assert_eq!(
        bob["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{bob}"
    );
    eprintln!(
        "bob's blocking send beside alice's 64: {:?}",
        started.elapsed()
    );
    for t in held {
        t.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_identity_bounds_refuse_only_that_identity() {
    let h = Harness::start(|o| {
        two_identities(o);
        o.max_open_tasks_per_identity = 3;
        o.max_contexts_per_identity = 2;
    })
    .await;
    let in_one = |id: &str| {
        let mut p = open_task(id);
        p["message"]["contextId"] = json!("alice-1");
        p
    };
    for i in 0..3 {
        let r = call(&h, ALICE, "sink", "SendMessage", in_one(&format!("o-{i}"))).await;
        assert!(r.get("result").is_some(), "{r}");
    }
    let r = call(&h, ALICE, "sink", "SendMessage", in_one("o-4")).await;
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("too many open tasks")),
        "{r}"
    );
    // Bob is not affected.
    let r = call(&h, BOB, "sink", "SendMessage", open_task("b-1")).await;
    assert!(r.get("result").is_some(), "{r}");
    let in_ctx = |id: &str, ctx: &str| {
        let mut m = message(id, "x");
        m["contextId"] = json!(ctx);
        json!({"message": m})
    };
    // Contexts: at his bound of 2, the least recently used one with
    // nothing open makes room; when every one has an open task, refused.
    for c in ["second", "third"] {
        let r = call(
            &h,
            BOB,
            "tck",
            "SendMessage",
            in_ctx(&format!("tck-complete-task-{c}"), c),
        )
        .await;
        assert_eq!(
            r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{r}"
        );
    }
    // A context freed to make room still answers for its tasks.
    let listed = call(&h, BOB, "tck", "ListTasks", json!({"contextId": "second"})).await;
    assert_eq!(listed["result"]["totalSize"], 1, "{listed}");
    assert_eq!(
        listed["result"]["tasks"][0]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let mut open = in_ctx("b-2", "fourth");
    open["configuration"] = json!({"returnImmediately": true});
    let r = call(&h, BOB, "sink", "SendMessage", open).await;
    assert!(r.get("result").is_some(), "{r}");
    let r = call(
        &h,
        BOB,
        "tck",
        "SendMessage",
        in_ctx("tck-complete-task-5", "fifth"),
    )
    .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("too many contexts")),
        "{r}"
    );
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_contexts_are_freed_and_registered_again_on_use() {
    // Counted one by one: no context registered ahead (see
    // `contexts_ready_ahead_are_freed_when_idle`).
    let h = Harness::start(|o| {
        o.context_idle = Duration::from_millis(300);
        o.ready_contexts = 0;
    })
    .await;
    let r = h.send("tck-complete-task-i", "x").await;
    let id = string(&r["task"]["id"]);
    assert_eq!(h.gateway.contexts().registered(), 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while h.gateway.contexts().registered() > 0 {
        assert!(Instant::now() < deadline, "the idle context was not freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The task is still there; reading it registers the context again.
    let t = h.ok("GetTask", json!({"id": id})).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(h.gateway.contexts().registered(), 1);
    // A context with an open task is never freed.
    let open = json_body(h.post_to("sink", "SendMessage", open_task("keep"))).await;
    let open_id = string(&open["result"]["task"]["id"]);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let got = json_body(h.post_to("sink", "GetTask", json!({"id": open_id}))).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_SUBMITTED");
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_messages_in_one_context() {
    let h = Harness::start(|o| o.rate = 0.0).await;
    for i in 0..1000 {
        let mut m = message(&format!("tck-complete-task-{i}"), "x");
        m["contextId"] = json!("long");
        let r = h.rpc("SendMessage", json!({"message": m})).await;
        assert_eq!(
            r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "message {i}: {r}"
        );
    }
    let page = h
        .ok("ListTasks", json!({"contextId": "long", "pageSize": 1}))
        .await;
    assert_eq!(page["totalSize"], 1000);
    h.gateway.stop().await;
}

/// Median times of `n` ListTasks calls (default page) by each token,
/// interleaved (the machine's load falls on both alike).
async fn list_medians(h: &Harness, tokens: [&str; 2], n: usize) -> [Duration; 2] {
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..n {
        for (i, token) in tokens.iter().enumerate() {
            let t = Instant::now();
            let r = call(h, token, "tck", "ListTasks", json!({})).await;
            times[i].push(t.elapsed());
            assert_eq!(
                r["result"]["tasks"].as_array().map(Vec::len),
                Some(50),
                "{r}"
            );
        }
    }
    times.map(|mut t| {
        t.sort();
        t[n / 2]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_tasks_costs_the_page_not_the_contexts() {
    let h = Harness::start(two_identities).await;
    let quick = |i: usize, ctx: String| {
        let mut m = message(&format!("tck-complete-task-{i}"), "x");
        m["contextId"] = json!(ctx);
        json!({"message": m, "configuration": {"returnImmediately": true}})
    };
    // Alice: 10 contexts of 5 tasks; Bob: 3,000 contexts of 1 task.
    for i in 0..50 {
        let r = call(
            &h,
            ALICE,
            "tck",
            "SendMessage",
            quick(i, format!("a{}", i % 10)),
        )
        .await;
        assert!(r.get("result").is_some(), "{r}");
    }
    for i in 0..3000 {
        let r = call(&h, BOB, "tck", "SendMessage", quick(i, format!("b{i}"))).await;
        assert!(r.get("result").is_some(), "{r}");
    }
    let [ten, many] = list_medians(&h, [ALICE, BOB], 31).await;
    let ratio = many.as_secs_f64() / ten.as_secs_f64();
    eprintln!("ListTasks p50: 10 contexts {ten:?}, 3,000 contexts {many:?} ({ratio:.2}x)");
    assert!(ratio < 2.0, "3,000 contexts {many:?} vs 10 {ten:?}");
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reply_timeout_bounds_a_blocking_send() {
    let h = Harness::start(|o| o.reply_timeout = Some(Duration::from_millis(800))).await;
    let started = Instant::now();
    let r = json_body(h.post_to(
        "sink",
        "SendMessage",
        json!({"message": message("w-1", "wait")}),
    ))
    .await;
    let took = started.elapsed();
    assert_eq!(
        r["result"]["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{r}"
    );
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_secs(5),
        "{took:?}"
    );
    h.gateway.stop().await;
    // A task that settles within the timeout is returned settled, even
    // after the broker's own wait would have been too short.
    let h = Harness::start(|o| o.reply_timeout = Some(Duration::from_secs(10))).await;
    let sink = h.sink.clone();
    let send = tokio::spawn({
        let req = h.post_to(
            "sink",
            "SendMessage",
            json!({"message": message("w-2", "wait")}),
        );
        async move { json_body(req).await }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let id = loop {
        let tasks = sink
            .list_tasks_async(TaskQuery {
                role: ListRole::Worker,
                state: None,
                limit: Some(10),
                cursor: None,
            })
            .expect("submit")
            .await
            .expect("list")
            .tasks;
        if let Some(t) = tasks.first() {
            break t.id.clone();
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    sink.set_status_async(&id, State::Completed, None)
        .expect("submit")
        .await
        .expect("completed");
    let r = send.await.unwrap();
    assert_eq!(
        r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{r}"
    );
    h.gateway.stop().await;
}

/// At its context bound, an identity whose contexts hold nothing open gets
/// room for each new one even when many of its callers arrive at once
/// (`send_bench`'s 16 callers without a `contextId` were refused "too many
/// contexts" once past the bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_new_contexts_at_the_bound_make_room() {
    let h = Harness::start(|o| {
        two_identities(o);
        o.max_contexts_per_identity = 32;
    })
    .await;
    let callers = (0..16).map(|c| {
        let h = &h;
        async move {
            for i in 0..40 {
                let id = format!("tck-complete-task-{c}-{i}");
                let r = call(
                    h,
                    BOB,
                    "tck",
                    "SendMessage",
                    json!({"message": message(&id, "x")}),
                )
                .await;
                assert_eq!(
                    r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
                    "caller {c}, send {i}: {r}"
                );
            }
        }
    });
    futures_util::future::join_all(callers).await;
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_bound_one_scan_serves_many_new_contexts_in_lru_order() {
    let h = Harness::start(|o| {
        two_identities(o);
        o.max_contexts_per_identity = 8;
    })
    .await;
    let send = |c: String| {
        let mut m = message(&format!("tck-complete-task-{c}"), "x");
        m["contextId"] = json!(c);
        json!({"message": m})
    };
    let done = |r: &Value| {
        assert_eq!(
            r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{r}"
        );
    };
    for i in 0..8 {
        done(&call(&h, BOB, "tck", "SendMessage", send(format!("c{i}"))).await);
        // Apart by more than the millisecond `last_used` counts in.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // c0 used again: c1 is now the least recently used.
    done(&call(&h, BOB, "tck", "SendMessage", send("c0".into())).await);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let core = h.gateway.contexts();
    let scans = core.lru_scans();
    for i in 0..6 {
        done(&call(&h, BOB, "tck", "SendMessage", send(format!("n{i}"))).await);
        // The oldest unused one gave its place, in order: c1, c2, ...
        for j in 1..=i + 1 {
            assert!(!core.holds("bob", &format!("c{j}")), "c{j} after n{i}");
        }
        for j in i + 2..8 {
            assert!(core.holds("bob", &format!("c{j}")), "c{j} after n{i}");
        }
        assert!(core.holds("bob", "c0"), "c0 (used again) after n{i}");
    }
    // One scan of bob's contexts listed them all (before: a scan, a copy
    // of every key and a sort for each new context).
    assert_eq!(core.lru_scans() - scans, 1);
    h.gateway.stop().await;
}

/// Waits until `identity` has `n` contexts registered ahead; their ids.
async fn ready(h: &Harness, identity: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ids = h.gateway.contexts().ready(identity);
        if ids.len() == n {
            return ids;
        }
        assert!(
            Instant::now() < deadline,
            "{identity} has {} contexts ready, not {n}",
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_conversation_takes_a_context_registered_ahead() {
    let h = Harness::start(|o| o.rate = 0.0).await;
    let anon = a2a_gateway::ANONYMOUS;
    // A context the client names starts nothing ahead.
    let named = json!({"message": {"messageId": "named-1", "role": "ROLE_USER",
        "parts": [{"text": "x"}], "contextId": "mine"}});
    h.ok("SendMessage", named).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(h.gateway.contexts().ready(anon).is_empty());
    // The first new conversation registers its own, then two ahead.
    let first = h.send("tck-complete-task-r0", "x").await;
    let mut seen = vec![string(&first["task"]["contextId"])];
    let mut ahead = ready(&h, anon, 2).await;
    assert_eq!(h.gateway.contexts().registered(), 4);
    // Each next one is one of them, and another is registered after it.
    for i in 1..=5 {
        let r = h.send(&format!("tck-complete-task-r{i}"), "x").await;
        assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
        let ctx = string(&r["task"]["contextId"]);
        assert!(ahead.contains(&ctx), "{ctx} was not ready ({ahead:?})");
        assert!(!seen.contains(&ctx), "{ctx} given twice");
        seen.push(ctx.clone());
        ahead = ready(&h, anon, 2).await;
        assert!(!ahead.contains(&ctx), "{ctx} still listed as ready");
    }
    // Every conversation is its own: the first one lists only its task.
    let listed = h.ok("ListTasks", json!({"contextId": seen[0]})).await;
    assert_eq!(
        listed["tasks"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contexts_ready_ahead_stay_under_the_bound_and_give_way() {
    // Bound 4: at most 2 ahead and never the identity's last place; at
    // the bound, new conversations still get room.
    let h = Harness::start(|o| {
        o.rate = 0.0;
        o.max_contexts_per_identity = 4;
    })
    .await;
    let anon = a2a_gateway::ANONYMOUS;
    for i in 0..12 {
        let r = h.send(&format!("tck-complete-task-b{i}"), "x").await;
        assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
        assert!(h.gateway.contexts().registered() <= 4);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(h.gateway.contexts().registered() <= 4);
    assert!(h.gateway.contexts().ready(anon).len() <= 2);
    h.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contexts_ready_ahead_are_freed_when_idle() {
    let h = Harness::start(|o| {
        o.rate = 0.0;
        o.context_idle = Duration::from_millis(300);
    })
    .await;
    let anon = a2a_gateway::ANONYMOUS;
    h.send("tck-complete-task-idle", "x").await;
    ready(&h, anon, 2).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while h.gateway.contexts().registered() > 0 {
        assert!(
            Instant::now() < deadline,
            "contexts ready ahead were never freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(h.gateway.contexts().ready(anon).is_empty());
    // The next new conversation registers its own again, and works.
    let r = h.send("tck-complete-task-idle2", "x").await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    h.gateway.stop().await;
}

/// The 65th of an identity's concurrent blocking sends is refused with a
/// limit error the client can act on (JSON-RPC -32602 with the bound in
/// `data`, as the broker reports its own parked waits, and HTTP 429), not
/// as an internal error; the other 64 are served in full.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_65th_concurrent_blocking_send_gets_a_limit_error_and_the_64_complete() {
    use a2a_gateway::MAX_BLOCKING_PER_IDENTITY;
    let h = std::sync::Arc::new(Harness::start(two_identities).await);
    let n = MAX_BLOCKING_PER_IDENTITY + 1;
    let mut sends = Vec::new();
    for i in 0..n {
        let req = h
            .post_to(
                "sink",
                "SendMessage",
                json!({"message": message(&format!("c-{i}"), "wait")}),
            )
            .bearer_auth(ALICE);
        sends.push(tokio::spawn(async move {
            let resp = req.send().await.expect("send");
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.expect("json"))
        }));
    }
    // The sink holds the 64 that got through, until this test moves them.
    let deadline = Instant::now() + Duration::from_secs(20);
    let tasks = loop {
        let tasks = sink_tasks(&h).await;
        if tasks.len() >= MAX_BLOCKING_PER_IDENTITY {
            break tasks;
        }
        assert!(Instant::now() < deadline, "the sends never arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(tasks.len(), MAX_BLOCKING_PER_IDENTITY);
    for t in &tasks {
        h.sink
            .set_status_async(&t.id, State::Completed, None)
            .expect("submit")
            .await
            .expect("completed");
    }
    let (mut completed, mut refused) = (0, Vec::new());
    for s in sends {
        let (status, body) = s.await.expect("join");
        if body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED" {
            assert_eq!(status, 200, "{body}");
            completed += 1;
        } else {
            refused.push((status, body));
        }
    }
    assert_eq!(completed, MAX_BLOCKING_PER_IDENTITY, "{refused:?}");
    assert_eq!(refused.len(), 1, "{refused:?}");
    let (status, body) = &refused[0];
    assert_eq!(*status, 429, "{body}");
    let e = &body["error"];
    assert_eq!(e["code"], -32602, "{body}");
    assert_eq!(e["data"]["reason"], "too many waits", "{body}");
    assert_eq!(e["data"]["limit"], "MAX_BLOCKING_PER_IDENTITY", "{body}");
    assert_eq!(e["data"]["max"], MAX_BLOCKING_PER_IDENTITY, "{body}");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("too many blocking sends")),
        "{body}"
    );
}
