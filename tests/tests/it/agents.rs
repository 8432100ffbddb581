//! `a2a.agents.register` / `deregister` / `list`: card defaults and stamping,
//! peer-id suffixes, tokens, kinds, listing order and skill filter.

use a2a_testkit::*;

on_both_transports!(
    register_mints_token_and_fills_card_defaults,
    register_keeps_given_card_fields_but_stamps_name_context_and_kind,
    register_rejects_bad_params,
    peer_ids_get_the_lowest_free_suffix,
    deregister_invalidates_the_token_at_once,
    every_tokened_method_refuses_absent_malformed_and_unknown_tokens,
    list_excludes_self_is_sorted_and_spans_contexts_within_a_kind,
    list_skill_filter_matches_id_or_tag,
    kinds_never_mix_when_addressing,
    unknown_recipient_gets_unknown_agent,
);

fn register_mints_token_and_fills_card_defaults(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let r = b.ok(
        "a2a.agents.register",
        json!({"contextId": "ctx-1", "card": {"name": "alpha"}}),
    );
    assert_eq!(r["agentId"], "alpha");
    let token = r["token"].as_str().expect("token string");
    assert!(
        token.len() >= 22,
        "token too short for 128 random bits: {token:?}"
    );
    let card = &r["card"];
    assert_eq!(card["name"], "alpha");
    assert_eq!(card["contextId"], "ctx-1");
    assert_eq!(card["kind"], "subagent");
    assert_eq!(card["description"], "");
    assert_eq!(card["version"], "");
    assert_eq!(card["skills"], json!([]));
    assert_eq!(
        card["capabilities"],
        json!({"streaming": true, "pushNotifications": true})
    );
    assert_eq!(card["defaultInputModes"], json!(["text/plain"]));
    assert_eq!(card["defaultOutputModes"], json!(["text/plain"]));

    // Tokens differ between registrations.
    let r2 = b.ok(
        "a2a.agents.register",
        json!({"contextId": "ctx-1", "card": {"name": "beta"}}),
    );
    assert_ne!(r2["token"], r["token"]);
}

fn register_keeps_given_card_fields_but_stamps_name_context_and_kind(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let card = json!({
        "name": "alpha", "description": "does things", "version": "2.1",
        "skills": [{"id": "s1", "name": "Skill", "description": "d", "tags": ["t1"]}],
        "capabilities": {"streaming": false, "pushNotifications": false},
        "defaultInputModes": ["application/json"], "defaultOutputModes": ["text/markdown"],
        "contextId": "forged", "kind": "parent"
    });
    let r = b.ok(
        "a2a.agents.register",
        json!({"contextId": "real", "card": card}),
    );
    let c = &r["card"];
    assert_eq!(c["contextId"], "real");
    assert_eq!(c["kind"], "parent");
    assert_eq!(c["description"], "does things");
    assert_eq!(c["version"], "2.1");
    assert_eq!(c["skills"], card["skills"]);
    assert_eq!(
        c["capabilities"],
        json!({"streaming": false, "pushNotifications": false})
    );
    assert_eq!(c["defaultInputModes"], json!(["application/json"]));
    assert_eq!(c["defaultOutputModes"], json!(["text/markdown"]));
    // A second "alpha" gets a suffixed peer id, and its card carries it.
    let r2 = b.ok(
        "a2a.agents.register",
        json!({"contextId": "real", "card": {"name": "alpha"}}),
    );
    assert_eq!(r2["agentId"], "alpha-2");
    assert_eq!(r2["card"]["name"], "alpha-2");
}

fn register_rejects_bad_params(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    for params in [
        json!({"contextId": "c"}),
        json!({"card": {"name": "a"}}),
        json!({"contextId": "c", "card": {}}),
        json!({"contextId": "c", "card": {"name": 5}}),
        json!({"contextId": 3, "card": {"name": "a"}}),
        json!({"contextId": "c", "card": {"name": "a"}, "delivery": "carrier-pigeon"}),
        json!({"contextId": "c", "card": {"name": "a", "kind": "grandparent"}}),
    ] {
        let resp = b.call("a2a.agents.register", params.clone());
        assert_rpc_error(&resp, -32602);
    }
    // Nothing was registered by the refused calls: "a" is still free.
    let (id, _) = b.register("c", "a", "subagent", "push");
    assert_eq!(id, "a");
}

fn peer_ids_get_the_lowest_free_suffix(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let ids: Vec<_> = (0..4)
        .map(|i| b.register(&format!("c{i}"), "w", "subagent", "push"))
        .collect();
    let names: Vec<_> = ids.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(names, ["w", "w-2", "w-3", "w-4"]);
    // Free w-2 and the bare name; the next two take them, lowest first.
    b.ok("a2a.agents.deregister", json!({"token": ids[1].1}));
    b.ok("a2a.agents.deregister", json!({"token": ids[0].1}));
    assert_eq!(b.register("cx", "w", "subagent", "push").0, "w");
    assert_eq!(b.register("cy", "w", "subagent", "push").0, "w-2");
    assert_eq!(b.register("cz", "w", "subagent", "push").0, "w-5");
    // Kinds share the peer-id namespace of the host.
    assert_eq!(b.register("cp", "w", "parent", "push").0, "w-6");
}

fn deregister_invalidates_the_token_at_once(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("c1", "a");
    let other = b.agent("c2", "o");
    assert_eq!(
        b.ok("a2a.agents.deregister", json!({"token": a.token})),
        json!({"ok": true})
    );
    let resp = b.call("a2a.agents.list", json!({"token": a.token}));
    assert_a2a_error(&resp, "A2A_UNKNOWN_TOKEN");
    assert_eq!(resp["error"]["data"]["reason"], "invalid token");
    // Deregistering again is idempotent, as in PI-Desktop's broker (§5).
    assert_eq!(
        b.ok("a2a.agents.deregister", json!({"token": a.token})),
        json!({"ok": true})
    );
    let list = b.ok("a2a.agents.list", json!({"token": other.token}));
    assert_eq!(
        list["agents"],
        json!([]),
        "a deregistered agent is still listed"
    );
}

fn every_tokened_method_refuses_absent_malformed_and_unknown_tokens(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("c1", "a");
    let w = b.agent("c2", "w");
    let task = b.create_task(&a, &w, "x");
    let tid = task["id"].as_str().unwrap().to_string();
    let gone = b.agent("c3", "gone");
    b.ok("a2a.agents.deregister", json!({"token": gone.token}));
    let bad_tokens = [
        None,
        Some(json!("")),
        Some(json!("not-a-token")),
        Some(json!("A".repeat(43))),
        Some(json!(gone.token)),
    ];
    let artifact = json!({"artifactId": "a1", "parts": [{"kind": "text", "text": "x"}]});
    let calls = [
        ("a2a.agents.deregister", json!({})),
        ("a2a.agents.list", json!({})),
        (
            "a2a.message.send",
            json!({"message": text_msg_to("x", "w")}),
        ),
        (
            "a2a.message.stream",
            json!({"message": text_msg_to("x", "w")}),
        ),
        ("a2a.tasks.get", json!({"id": tid})),
        ("a2a.tasks.status", json!({"id": tid, "state": "working"})),
        ("a2a.tasks.cancel", json!({"id": tid})),
        ("a2a.tasks.resubscribe", json!({"id": tid})),
        (
            "a2a.tasks.pushNotificationConfig.set",
            json!({"taskId": tid, "config": {"id": "p"}}),
        ),
        (
            "a2a.tasks.pushNotificationConfig.get",
            json!({"taskId": tid}),
        ),
        ("a2a.tasks.list", json!({})),
        (
            "a2a.tasks.artifact",
            json!({"id": tid, "artifact": artifact}),
        ),
        ("a2a.events.wait", json!({"timeoutSeconds": 0})),
    ];
    for (method, params) in &calls {
        for (i, tok) in bad_tokens.iter().enumerate() {
            let mut p = params.clone();
            if let Some(t) = tok {
                p["token"] = t.clone();
            }
            let resp = b.call(method, p);
            let missing = i < 2;
            if *method == "a2a.agents.deregister" && !missing {
                // Idempotent: an unknown token is already gone (§5).
                assert_eq!(resp["result"], json!({"ok": true}), "{method} {tok:?}");
                continue;
            }
            assert_a2a_error(&resp, "A2A_UNKNOWN_TOKEN");
            let reason = if missing {
                "missing token"
            } else {
                "invalid token"
            };
            assert_eq!(resp["error"]["data"]["reason"], reason, "{method} {tok:?}");
        }
    }
    // Another spelling of a live token is another, invalid token (§4).
    let resp = b.call("a2a.agents.list", json!({"token": a.token.to_uppercase()}));
    assert_a2a_error(&resp, "A2A_UNKNOWN_TOKEN");
    // Nothing changed on the task.
    let t = b.get_task(&a, &tid);
    assert_eq!(t["version"], 1);
    assert_eq!(t["status"]["state"], "submitted");
}

fn list_excludes_self_is_sorted_and_spans_contexts_within_a_kind(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let me = b.agent("c1", "mid");
    b.agent("c2", "zeta");
    b.agent("c1", "alpha");
    b.agent("c3", "beta");
    let parent = b.agent_with("c1", "boss", "parent", "push");
    b.agent_with("c4", "chief", "parent", "push");
    let list = b.ok("a2a.agents.list", json!({"token": me.token}));
    let names: Vec<_> = list["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["alpha", "beta", "zeta"], "{list}");
    for c in list["agents"].as_array().unwrap() {
        assert_eq!(c["kind"], "subagent");
        assert!(c["contextId"].is_string());
    }
    let plist = b.ok("a2a.agents.list", json!({"token": parent.token}));
    let pnames: Vec<_> = plist["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(pnames, [json!("chief")], "{plist}");
}

fn list_skill_filter_matches_id_or_tag(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let me = b.agent("c0", "me");
    let skill =
        |id: &str, tags: &[&str]| json!({"id": id, "name": id, "description": "", "tags": tags});
    for (name, skills) in [
        ("coder", json!([skill("code", &["rust", "review"])])),
        ("reviewer", json!([skill("review", &["prose"])])),
        ("writer", json!([skill("write", &["prose"])])),
        ("idle", json!([])),
    ] {
        b.ok(
            "a2a.agents.register",
            json!({"contextId": "c1", "card": {"name": name, "skills": skills}}),
        );
    }
    let names = |b: &mut Broker, skill: &str| -> Vec<String> {
        let l = b.ok(
            "a2a.agents.list",
            json!({"token": me.token, "skill": skill}),
        );
        l["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&mut b, "review"), ["coder", "reviewer"]);
    assert_eq!(names(&mut b, "prose"), ["reviewer", "writer"]);
    assert_eq!(names(&mut b, "code"), ["coder"]);
    assert_eq!(names(&mut b, "nothing"), Vec::<String>::new());
}

fn kinds_never_mix_when_addressing(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let sub = b.agent("c1", "sub");
    let parent = b.agent_with("c2", "par", "parent", "push");
    let resp = b.call(
        "a2a.message.send",
        json!({"token": sub.token, "message": text_msg_to("x", "par")}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_AGENT");
    let resp = b.call(
        "a2a.message.send",
        json!({"token": parent.token, "message": text_msg_to("x", "sub")}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_AGENT");
    // With no same-kind peer, an omitted `to` finds nobody.
    let resp = b.call(
        "a2a.message.send",
        json!({"token": sub.token, "message": text_msg("x")}),
    );
    assert_a2a_error(&resp, "A2A_NO_PEERS");
    let resp = b.call("a2a.message.send", json!({"token": parent.token, "message": {"role":"user","parts":[{"kind":"text","text":"x"}],"messageId":"b1","to":"*"}}));
    assert_a2a_error(&resp, "A2A_NO_PEERS");
    // No task was created by the refused sends.
    let l = b.ok("a2a.tasks.list", json!({"token": sub.token}));
    assert_eq!(l["tasks"], json!([]));
}

fn unknown_recipient_gets_unknown_agent(t: Transport) {
    let db = TestDb::new();
    let mut b = Broker::open_on(t, &db.path);
    let a = b.agent("c1", "a");
    b.agent("c2", "w");
    let resp = b.call(
        "a2a.message.send",
        json!({"token": a.token, "message": text_msg_to("x", "nobody")}),
    );
    assert_a2a_error(&resp, "A2A_UNKNOWN_AGENT");
}
