//! Every `a2a.*` method through the typed API, over binary frames, against
//! the real broker binary: the results, and which agent receives which
//! event (creation → worker; status, artifact, cancel, follow-up messages →
//! the counterpart; stream and resubscribe → the caller).

mod common;

use a2a_client::proto::types::StreamEvent;
use a2a_client::A2aErrorCode;
use a2a_client::{
    agent_card, message_to, skill, task_message, text_artifact, text_message, Agent, Client,
    ClientError, CloseReason, Delivery, ListRole, Notification, Part, PushConfig, State, TaskQuery,
};
use common::*;
use serde_json::json;
use std::time::Duration;

fn register(client: &Client, ctx: &str, name: &str) -> Agent {
    client
        .register(ctx, agent_card(name), Delivery::Push)
        .expect("register")
}

fn text_of(m: &a2a_client::Message) -> &str {
    match &m.parts[0] {
        Part::Text { text, .. } => text,
        other => panic!("not a text part: {other:?}"),
    }
}

/// The one status update in `evs`, checked to be addressed to `to`.
fn only_status<'a>(
    evs: &'a [a2a_client::Event],
    to: &Agent,
) -> &'a a2a_client::proto::types::StatusUpdate {
    assert_eq!(evs.len(), 1, "expected one event: {evs:#?}");
    match &evs[0] {
        Notification::TaskEvent(p) => {
            assert_eq!(p.recipient, to.id());
            assert_eq!(p.recipient_context_id, to.context_id());
            match &p.event {
                StreamEvent::Status(s) => s,
                other => panic!("not a status update: {other:?}"),
            }
        }
        other => panic!("not a task event: {other:?}"),
    }
}

#[test]
fn task_lifecycle_routes_each_event_to_the_counterpart() {
    let b = Broker::start();
    let (ca, cb) = (b.connect(), b.connect());
    let hs = ca.handshake_result();
    assert_eq!(hs.protocol_version, 10);
    assert!(hs.capabilities.iter().any(|c| c == "a2a"));

    let r = register(&ca, "ctx-r", "requester");
    let mut card = agent_card("coder");
    card.skills = vec![skill("review", &["code"])];
    let w = cb
        .register("ctx-w", card, Delivery::Push)
        .expect("register coder");
    let other = register(&cb, "ctx-o", "tester");
    assert_eq!(
        (r.id(), w.id(), other.id()),
        ("requester", "coder", "tester")
    );
    assert_eq!(w.card().context_id.as_deref(), Some("ctx-w"));

    // list: itself excluded, sorted; the skill filter matches id or tag.
    let names =
        |cards: Vec<a2a_client::AgentCard>| cards.into_iter().map(|c| c.name).collect::<Vec<_>>();
    assert_eq!(names(r.list_agents(None).unwrap()), ["coder", "tester"]);
    assert_eq!(names(r.list_agents(Some("review")).unwrap()), ["coder"]);
    assert_eq!(names(r.list_agents(Some("code")).unwrap()), ["coder"]);
    assert!(r.list_agents(Some("nothing")).unwrap().is_empty());

    // Creation: the worker gets `submitted` carrying the message.
    let t = r.send(message_to("coder", "do it"), None).unwrap();
    assert_eq!(t.status.state, State::Submitted);
    assert_eq!(
        (t.agent_name.as_str(), t.requester_name.as_str()),
        ("coder", "requester")
    );
    assert_eq!(t.context_id, "ctx-r");
    assert_eq!(t.version, 1);
    assert_eq!(t.history.len(), 1);
    assert_eq!(t.history[0].from.as_deref(), Some("requester"));
    let evs = collect_n(&w, 1);
    let s = only_status(&evs, &w);
    assert_eq!(
        (s.task_id.as_str(), s.status.state, s.is_final),
        (t.id.as_str(), State::Submitted, false)
    );
    assert_eq!(text_of(s.status.message.as_ref().unwrap()), "do it");
    assert_quiet(&r);

    // Status by the worker → requester.
    let t1 = w
        .set_status(&t.id, State::Working, Some(task_message(&t.id, "on it")))
        .unwrap();
    assert_eq!((t1.status.state, t1.version), (State::Working, 2));
    let evs = collect_n(&r, 1);
    let s = only_status(&evs, &r);
    assert_eq!(s.status.state, State::Working);
    let m = s.status.message.as_ref().unwrap();
    assert_eq!((text_of(m), m.from.as_deref()), ("on it", Some("coder")));
    assert_quiet(&w);

    // A follow-up by the requester → worker; the state stays.
    let t2 = r.send(task_message(&t.id, "more info"), None).unwrap();
    assert_eq!(t2.status.state, State::Working);
    let evs = collect_n(&w, 1);
    assert_eq!(
        text_of(only_status(&evs, &w).status.message.as_ref().unwrap()),
        "more info"
    );

    // input-required → requester; its answer resumes to working → worker.
    w.set_status(
        &t.id,
        State::InputRequired,
        Some(task_message(&t.id, "which file?")),
    )
    .unwrap();
    assert_eq!(
        only_status(&collect_n(&r, 1), &r).status.state,
        State::InputRequired
    );
    let t3 = r.send(task_message(&t.id, "parser.rs"), None).unwrap();
    assert_eq!(t3.status.state, State::Working);
    let evs = collect_n(&w, 1);
    let s = only_status(&evs, &w);
    assert_eq!(
        (s.status.state, text_of(s.status.message.as_ref().unwrap())),
        (State::Working, "parser.rs")
    );

    // Artifacts (two chunks) → requester.
    w.add_artifact(&t.id, text_artifact("a1", "part 1"), false, false)
        .unwrap();
    let t4 = w
        .add_artifact(&t.id, text_artifact("a1", "part 2"), true, true)
        .unwrap();
    assert_eq!(t4.artifacts.len(), 1);
    assert_eq!(
        t4.artifacts[0].parts,
        vec![Part::text("part 1"), Part::text("part 2")]
    );
    let evs = collect_n(&r, 2);
    let chunks: Vec<(bool, bool)> = evs
        .iter()
        .map(|e| match e {
            Notification::TaskEvent(p) => match &p.event {
                StreamEvent::Artifact(a) => {
                    assert_eq!(p.recipient, "requester");
                    assert_eq!(a.artifact.artifact_id, "a1");
                    (a.append, a.last_chunk)
                }
                other => panic!("not an artifact update: {other:?}"),
            },
            other => panic!("not a task event: {other:?}"),
        })
        .collect();
    assert_eq!(chunks, [(false, false), (true, true)]);
    assert_quiet(&w);

    // Push config: set and read back; none on another task.
    let cfg = PushConfig {
        id: "p1".into(),
        url: Some("https://example.invalid/hook".into()),
        token: Some("tok-r".into()),
    };
    assert_eq!(
        r.set_push_config(&t.id, cfg.clone()).unwrap(),
        Some(cfg.clone())
    );
    assert_eq!(r.push_config(&t.id).unwrap(), Some(cfg));
    let plain = r.send(message_to("coder", "second"), None).unwrap();
    assert_eq!(r.push_config(&plain.id).unwrap(), None);
    collect_n(&w, 1);

    // Completion → requester: the final status and its a2a.push.
    let done = w
        .set_status(&t.id, State::Completed, Some(task_message(&t.id, "done")))
        .unwrap();
    assert!(done.status.state.is_terminal());
    let evs = collect_n(&r, 2);
    let finals: Vec<_> = evs.iter().filter_map(status_of).collect();
    assert_eq!(finals, [(t.id.as_str(), State::Completed, true)]);
    let push = evs
        .iter()
        .find_map(|e| match e {
            Notification::Push(p) => Some(p),
            _ => None,
        })
        .expect("a2a.push");
    assert_eq!(push.recipient, "requester");
    assert_eq!(push.task_id, t.id);
    assert_eq!(push.token.as_deref(), Some("tok-r"));
    assert_eq!(push.status.state, State::Completed);
    assert_quiet(&w);

    // Terminal tasks refuse messages and moves.
    let e = r.send(task_message(&t.id, "late"), None).unwrap_err();
    assert_eq!(e.a2a_code(), Some(A2aErrorCode::TaskTerminal), "{e}");
    let e = w.set_status(&t.id, State::Working, None).unwrap_err();
    assert_eq!(e.a2a_code(), Some(A2aErrorCode::TaskTerminal), "{e}");

    // get: the whole history, or its tail.
    let full = r.get_task(&t.id, None).unwrap();
    let texts: Vec<&str> = full.history.iter().map(|m| text_of(m)).collect();
    assert_eq!(
        texts,
        [
            "do it",
            "on it",
            "more info",
            "which file?",
            "parser.rs",
            "done"
        ]
    );
    assert_eq!(full.version, done.version);
    let tail = w.get_task(&t.id, Some(2)).unwrap();
    assert_eq!(tail.history.len(), 2);
    assert_eq!(text_of(&tail.history[1]), "done");
    assert!(r.get_task(&t.id, Some(0)).unwrap().history.is_empty());

    // Refusals keep code and data.
    let e = r.set_status(&plain.id, State::Working, None).unwrap_err();
    assert_eq!(e.a2a_code(), Some(A2aErrorCode::CrossContextDenied), "{e}");
    let e = other.get_task(&t.id, None).unwrap_err();
    assert_eq!(e.a2a_code(), Some(A2aErrorCode::CrossContextDenied), "{e}");
    let e = w.set_status(&plain.id, State::Submitted, None).unwrap_err();
    assert_eq!(e.a2a_code(), Some(A2aErrorCode::InvalidTransition), "{e}");
    let e = r.send(message_to("nobody", "hi"), None).unwrap_err();
    assert_eq!(e.a2a_code(), Some(A2aErrorCode::UnknownAgent), "{e}");
    let e = r.get_task("no-such-task", None).unwrap_err();
    assert_eq!(e.a2a_code(), Some(A2aErrorCode::UnknownTask), "{e}");
    match &e {
        ClientError::Rpc(rpc) => assert_eq!(rpc.code, 1400),
        other => panic!("{other:?}"),
    }
    assert_quiet(&r);
    assert_quiet(&w);
    assert_quiet(&other);
}

#[test]
fn broadcast_and_cancel_route_to_counterparts() {
    let b = Broker::start();
    let (ca, cb) = (b.connect(), b.connect());
    let r = register(&ca, "ctx-r", "owner");
    let w1 = register(&cb, "ctx-1", "w1");
    let w2 = register(&ca, "ctx-2", "w2");

    // Without `to` and with two peers: ambiguous, with the candidates.
    let e = r.send(text_message("who?"), None).unwrap_err();
    let data = e.rpc().and_then(|r| r.data.clone()).unwrap();
    assert_eq!(data["errorCode"], "A2A_UNKNOWN_AGENT");
    assert_eq!(data["reason"], "ambiguous recipient");
    assert_eq!(data["candidates"], json!(["w1", "w2"]));

    let tasks = r.broadcast(text_message("I own src/x.rs"), None).unwrap();
    let mut workers: Vec<&str> = tasks.iter().map(|t| t.agent_name.as_str()).collect();
    workers.sort();
    assert_eq!(workers, ["w1", "w2"]);
    let task_for = |name: &str| {
        tasks
            .iter()
            .find(|t| t.agent_name == name)
            .unwrap()
            .id
            .clone()
    };
    let (t1, t2) = (task_for("w1"), task_for("w2"));
    for (w, t) in [(&w1, &t1), (&w2, &t2)] {
        let evs = collect_n(w, 1);
        assert_eq!(
            status_of(&evs[0]),
            Some((t.as_str(), State::Submitted, false))
        );
        assert_eq!(recipient(&evs[0]), w.id());
    }
    assert_quiet(&r);

    // The requester cancels → the worker hears it.
    let c = r
        .cancel(&t1, Some(task_message(&t1, "never mind")))
        .unwrap();
    assert_eq!(c.status.state, State::Canceled);
    let evs = collect_n(&w1, 1);
    assert_eq!(
        status_of(&evs[0]),
        Some((t1.as_str(), State::Canceled, true))
    );
    assert_quiet(&r);

    // The worker cancels → the requester hears it.
    w2.cancel(&t2, None).unwrap();
    let evs = collect_n(&r, 1);
    assert_eq!(
        status_of(&evs[0]),
        Some((t2.as_str(), State::Canceled, true))
    );
    assert_quiet(&w2);
    assert_quiet(&w1);
}

#[test]
fn stream_and_resubscribe_address_the_caller_and_replay_after_a_version() {
    let b = Broker::start();
    let (ca, cb) = (b.connect(), b.connect());
    let r = register(&ca, "ctx-r", "asker");
    let w = register(&cb, "ctx-w", "doer");

    let t = r.stream(message_to("doer", "go")).unwrap();
    let mine = collect_n(&r, 1);
    assert_eq!(
        status_of(&mine[0]),
        Some((t.id.as_str(), State::Submitted, false))
    );
    let theirs = collect_n(&w, 1);
    assert_eq!(
        status_of(&theirs[0]),
        Some((t.id.as_str(), State::Submitted, false))
    );

    w.set_status(&t.id, State::Working, Some(task_message(&t.id, "v2")))
        .unwrap();
    w.add_artifact(&t.id, text_artifact("out", "v3"), false, true)
        .unwrap();
    w.set_status(&t.id, State::InputRequired, None).unwrap();
    let live = collect_n(&r, 3);
    let versions = |evs: &[a2a_client::Event]| {
        evs.iter()
            .map(|e| match e {
                Notification::TaskEvent(p) => p.task_version,
                other => panic!("{other:?}"),
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(versions(&live), [2, 3, 4]);

    // Plain resubscribe: the current status, to the caller only.
    let now = r.resubscribe(&t.id, None).unwrap();
    assert_eq!((now.status.state, now.version), (State::InputRequired, 4));
    let evs = collect_n(&r, 1);
    assert_eq!(
        status_of(&evs[0]),
        Some((t.id.as_str(), State::InputRequired, false))
    );
    assert_eq!(recipient(&evs[0]), "asker");
    assert_quiet(&w);

    // With afterVersion: versions 2..=4 replayed in order, then the status.
    r.resubscribe(&t.id, Some(1)).unwrap();
    let evs = collect_n(&r, 4);
    assert_eq!(versions(&evs), [2, 3, 4, 4]);
    assert_eq!(status_of(&evs[0]).map(|s| s.1), Some(State::Working));
    assert!(
        matches!(&evs[1], Notification::TaskEvent(p) if matches!(p.event, StreamEvent::Artifact(_)))
    );
    assert_eq!(status_of(&evs[2]).map(|s| s.1), Some(State::InputRequired));
    assert_eq!(status_of(&evs[3]).map(|s| s.1), Some(State::InputRequired));
    // `seq` grows by one per notification to this recipient.
    let seqs: Vec<u64> = evs.iter().filter_map(|e| e.seq()).collect();
    assert!(seqs.windows(2).all(|p| p[1] == p[0] + 1), "{seqs:?}");

    // The worker may resubscribe too, and only it hears that.
    w.resubscribe(&t.id, None).unwrap();
    assert_eq!(recipient(&collect_n(&w, 1)[0]), "doer");
    assert_quiet(&r);
}

#[test]
fn list_tasks_pages_newest_first_and_filters() {
    let b = Broker::start();
    let (ca, cb) = (b.connect(), b.connect());
    let r = register(&ca, "ctx-r", "lister");
    let w = register(&cb, "ctx-w", "listee");
    let ids: Vec<String> = (0..5)
        .map(|i| {
            r.send(message_to("listee", &format!("task {i}")), None)
                .unwrap()
                .id
        })
        .collect();
    collect_n(&w, 5);

    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = Vec::new();
    loop {
        let page = r
            .list_tasks(TaskQuery {
                limit: Some(2),
                cursor: cursor.take(),
                ..TaskQuery::default()
            })
            .unwrap();
        pages.push(page.tasks.len());
        seen.extend(page.tasks.into_iter().map(|t| t.id));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
        assert!(pages.len() < 10, "paging does not end");
    }
    assert_eq!(pages, [2, 2, 1]);
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(seen, newest_first);

    let as_worker = |a: &Agent, state| {
        a.list_tasks(TaskQuery {
            role: ListRole::Worker,
            state,
            ..TaskQuery::default()
        })
        .unwrap()
        .tasks
        .len()
    };
    assert_eq!(as_worker(&r, None), 0);
    assert_eq!(as_worker(&w, None), 5);
    w.set_status(&ids[2], State::Completed, None).unwrap();
    assert_eq!(as_worker(&w, Some(State::Completed)), 1);
    assert_eq!(as_worker(&w, Some(State::Submitted)), 4);
}

#[test]
fn pull_agent_gets_events_through_events_wait_and_acknowledges_them() {
    let b = Broker::start();
    let (ca, cb) = (b.connect(), b.connect());
    let r = register(&ca, "ctx-r", "pusher");
    let p = cb
        .register("ctx-p", agent_card("puller"), Delivery::Pull)
        .unwrap();
    assert_eq!(p.delivery(), Delivery::Pull);

    // Nothing pending: the wait times out empty.
    assert!(p.wait(Duration::from_millis(50)).unwrap().is_empty());

    let t1 = r.send(message_to("puller", "one"), None).unwrap();
    let t2 = r.send(message_to("puller", "two"), None).unwrap();
    let evs = collect_n(&p, 2);
    let got: Vec<_> = evs.iter().filter_map(status_of).collect();
    assert_eq!(
        got,
        [
            (t1.id.as_str(), State::Submitted, false),
            (t2.id.as_str(), State::Submitted, false)
        ]
    );
    assert!(evs.iter().all(|e| recipient(e) == "puller"));
    // Acknowledged by the next wait: they do not come back.
    assert!(p.wait(Duration::from_millis(50)).unwrap().is_empty());
    // Pull events never travel on the connection.
    assert!(cb.take_unclaimed_events().is_empty());

    p.set_status(&t1.id, State::Completed, None).unwrap();
    assert_eq!(
        status_of(&collect_n(&r, 1)[0]),
        Some((t1.id.as_str(), State::Completed, true))
    );
    r.send(task_message(&t2.id, "ping"), None).unwrap();
    let evs = collect_n(&p, 1);
    assert_eq!(status_of(&evs[0]).map(|s| s.0), Some(t2.id.as_str()));

    // A push agent may not call a2a.events.wait.
    let e = ca
        .call_json(
            "a2a.events.wait",
            json!({"token": r.token(), "timeoutSeconds": 0}),
        )
        .unwrap_err();
    assert_eq!(e.rpc().map(|r| r.code), Some(-32602), "{e}");
}

#[test]
fn deregister_settles_tasks_and_frees_the_name() {
    let b = Broker::start();
    let (ca, cb) = (b.connect(), b.connect());
    let r = register(&ca, "ctx-r", "boss");
    let x = register(&ca, "ctx-x", "helper");
    let w = register(&cb, "ctx-w", "leaver");

    let served = r.send(message_to("leaver", "work"), None).unwrap();
    collect_n(&w, 1);
    let requested = w.send(message_to("helper", "help me"), None).unwrap();
    collect_n(&x, 1);

    w.deregister().unwrap();
    // Served → failed, to its requester; requested → canceled, to its worker.
    assert_eq!(
        status_of(&collect_n(&r, 1)[0]),
        Some((served.id.as_str(), State::Failed, true))
    );
    assert_eq!(
        status_of(&collect_n(&x, 1)[0]),
        Some((requested.id.as_str(), State::Canceled, true))
    );

    // The handle knows; the broker refuses the dead token.
    assert!(matches!(
        w.get_task(&served.id, None),
        Err(ClientError::Deregistered(_))
    ));
    assert!(matches!(
        w.wait(Duration::from_millis(10)),
        Err(ClientError::Deregistered(_))
    ));
    let e = cb
        .call_json(
            "a2a.tasks.get",
            json!({"token": w.token(), "id": served.id}),
        )
        .unwrap_err();
    assert_eq!(e.a2a_code(), Some(A2aErrorCode::UnknownToken), "{e}");

    // The name is free again, and the same party sees its tasks.
    let again = register(&cb, "ctx-w", "leaver");
    assert_eq!(again.id(), "leaver");
    assert_eq!(
        again.get_task(&served.id, None).unwrap().status.state,
        State::Failed
    );
}

#[test]
fn call_json_goes_through_the_same_binary_frames() {
    let b = Broker::start();
    let c = b.connect();
    let hs = c
        .call_json(
            "app.handshake",
            json!({"protocolVersion": 10, "secret": b.secret}),
        )
        .unwrap();
    assert_eq!(hs["protocolVersion"], 10);
    assert_eq!(hs["host"], "a2a-broker");

    let reg = c
        .call_json(
            "a2a.agents.register",
            json!({"contextId": "ctx-j", "card": {"name": "json"}}),
        )
        .unwrap();
    assert_eq!(reg["agentId"], "json");
    assert_eq!(reg["card"]["description"], "");
    let token = reg["token"].as_str().unwrap().to_owned();

    let typed = register(&c, "ctx-t", "typed");
    let list = c
        .call_json("a2a.agents.list", json!({"token": token}))
        .unwrap();
    assert_eq!(list["agents"][0]["name"], "typed");

    let sent = c
        .call_json(
            "a2a.message.send",
            json!({"token": token, "message": {"role": "user", "messageId": "m-1", "to": "typed",
                   "parts": [{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"n": 1}}]}}),
        )
        .unwrap();
    assert_eq!(sent["task"]["kind"], "task");
    assert_eq!(sent["task"]["status"]["state"], "submitted");
    assert_eq!(
        sent["task"]["history"][0]["parts"][1]["data"],
        json!({"n": 1})
    );
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    let evs = collect_n(&typed, 1);
    assert_eq!(status_of(&evs[0]).map(|s| s.0), Some(id.as_str()));

    // The JSON-registered agent has no queue: its events are unclaimed.
    typed.set_status(&id, State::Working, None).unwrap();
    let deadline = std::time::Instant::now() + TIMEOUT;
    let unclaimed = loop {
        let evs = c.take_unclaimed_events();
        if !evs.is_empty() {
            break evs;
        }
        assert!(std::time::Instant::now() < deadline, "no unclaimed event");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(recipient(&unclaimed[0]), "json");

    let got = c
        .call_json(
            "a2a.tasks.get",
            json!({"token": token, "id": id, "historyLength": 0}),
        )
        .unwrap();
    assert_eq!(got["task"]["history"], json!([]));
    assert_eq!(got["task"]["status"]["state"], "working");

    let e = c.call_json("a2a.nope", json!({})).unwrap_err();
    assert_eq!(e.rpc().map(|r| r.code), Some(-32601));
    let e = c
        .call_json("a2a.tasks.get", json!({"token": token}))
        .unwrap_err();
    assert_eq!(e.rpc().map(|r| r.code), Some(-32602));
    let e = c
        .call_json(
            "a2a.tasks.status",
            json!({"token": token, "id": id, "state": "done"}),
        )
        .unwrap_err();
    assert_eq!(e.rpc().map(|r| r.code), Some(-32602));
}

#[test]
fn a_dead_connection_fails_pending_and_later_calls() {
    let mut b = Broker::start();
    let c = b.connect();
    let push = register(&c, "ctx-a", "push");
    let pull = c
        .register("ctx-b", agent_card("pull"), Delivery::Pull)
        .unwrap();

    // Two calls blocked for far longer than TIMEOUT: they must end when
    // the broker dies, not when their own timeouts pass.
    let long = Duration::from_secs(100);
    let (tx, rx) = std::sync::mpsc::channel();
    for agent in [push.clone(), pull.clone()] {
        let tx = tx.clone();
        std::thread::spawn(move || tx.send(agent.wait(long)).unwrap());
    }
    // Whether the waits are already blocked when the broker dies, or start
    // after, they must end with `Closed`, never hang.
    push.list_agents(None).unwrap();
    b.kill();
    for _ in 0..2 {
        let r = rx
            .recv_timeout(TIMEOUT)
            .expect("a blocked call did not return");
        assert!(matches!(r, Err(ClientError::Closed(_))), "{r:?}");
    }
    assert_eq!(c.close_reason(), Some(CloseReason::ByBroker));
    assert!(matches!(
        push.list_agents(None),
        Err(ClientError::Closed(CloseReason::ByBroker))
    ));
}

#[test]
fn close_ends_the_connection_from_this_side() {
    let b = Broker::start();
    let c = b.connect();
    let a = register(&c, "ctx", "closer");
    let c2 = c.clone();
    c2.close();
    assert!(matches!(
        a.list_agents(None),
        Err(ClientError::Closed(CloseReason::Shutdown))
    ));
    assert!(matches!(
        a.wait(Duration::from_secs(100)),
        Err(ClientError::Closed(_))
    ));
    // The broker sees a disconnect: the name is free for a new connection.
    let again = b.connect();
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let n = register(&again, "ctx", "closer");
        if n.id() == "closer" {
            break;
        }
        n.deregister().unwrap();
        assert!(std::time::Instant::now() < deadline, "name never freed");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn send_configuration_blocking_history_push_and_idempotency() {
    let b = Broker::start();
    // Both agents on one connection: the worker's calls must get through
    // while the requester's blocking send is pending on the same socket.
    let c = b.connect();
    let r = register(&c, "ctx-r", "waiter");
    let w = register(&c, "ctx-w", "finisher");

    let worker = {
        let w = w.clone();
        std::thread::spawn(move || {
            let evs = collect_n(&w, 1);
            let (task, _, _) = status_of(&evs[0]).unwrap();
            w.set_status(task, State::Working, None).unwrap();
            w.set_status(task, State::Completed, Some(task_message(task, "finished")))
                .unwrap();
        })
    };
    let cfg = PushConfig {
        id: "p".into(),
        url: None,
        token: Some("secret-token".into()),
    };
    let done = r
        .send(
            message_to("finisher", "tell me when done"),
            Some(a2a_client::SendConfiguration {
                blocking: Some(true),
                history_length: Some(1),
                push_notification_config: Some(cfg.clone()),
            }),
        )
        .unwrap();
    worker.join().unwrap();
    assert_eq!(done.status.state, State::Completed);
    assert_eq!(done.history.len(), 1);
    assert_eq!(text_of(&done.history[0]), "finished");
    assert_eq!(r.push_config(&done.id).unwrap(), Some(cfg));
    let evs = collect_until(&r, |evs| {
        evs.iter().any(|e| matches!(e, Notification::Push(_)))
    });
    assert!(evs.iter().all(|e| recipient(e) == "waiter"));

    // The same messageId again: the original result, nothing new routed.
    let m = message_to("finisher", "once");
    let first = r.send(m.clone(), None).unwrap();
    let again = r.send(m.clone(), None).unwrap();
    assert_eq!(
        (again.id.as_str(), again.version),
        (first.id.as_str(), first.version)
    );
    assert_eq!(collect_n(&w, 1).len(), 1);
    assert_quiet(&w);
    // The same id with other parts is refused.
    let mut changed = m;
    changed.parts = vec![Part::text("twice")];
    let e = r.send(changed, None).unwrap_err();
    assert_eq!(e.rpc().map(|e| e.code), Some(-32602), "{e}");
}

#[test]
fn oversized_payloads_are_refused_and_the_connection_stays_usable() {
    let b = Broker::start();
    let c = b.connect();
    let r = register(&c, "ctx-r", "big");
    register(&c, "ctx-w", "small");

    // Past the broker's text bound: its error, with the bound in `data`.
    let long = "x".repeat(a2a_client::proto::limits::A2A_MAX_TEXT_CHARS + 1);
    let e = r.send(message_to("small", &long), None).unwrap_err();
    assert_eq!(e.a2a_code(), Some(A2aErrorCode::PayloadTooLarge), "{e}");
    let data = e.rpc().unwrap().data.clone().unwrap();
    assert_eq!(data["limit"], "A2A_MAX_TEXT_CHARS");
    assert_eq!(data["max"], 16000);

    // Past the frame limit: refused here, never sent (the broker would
    // have to close the connection).
    let huge = "y".repeat(a2a_client::proto::limits::MAX_FRAME_BYTES + 1);
    match r.send(message_to("small", &huge), None) {
        Err(ClientError::FrameTooLarge { bytes, max }) => assert!(bytes > max),
        other => panic!("expected FrameTooLarge, got {other:?}"),
    }
    assert_eq!(r.list_agents(None).unwrap().len(), 1);
    assert_eq!(c.close_reason(), None);
}

/// The broker's frames may be twice what a client may send (docs/protocol.md
/// §1 Framing): a 20 MiB file part comes back in a reply of over 53 MiB (its
/// base64 in the status message and in the history), which the client
/// reads like any other.
#[test]
fn replies_past_the_incoming_frame_bound_are_read() {
    use base64::Engine;
    let broker = Broker::start();
    let client = broker.connect();
    let req = register(&client, "c1", "req");
    let _wrk = register(&client, "c2", "wrk");
    let bytes = base64::engine::general_purpose::STANDARD.encode(vec![9u8; 20 << 20]);
    let mut m = message_to("wrk", "big");
    m.parts = vec![Part::File {
        file: a2a_client::proto::types::FileContent {
            name: Some("f.bin".into()),
            bytes: Some(bytes.clone()),
            ..Default::default()
        },
        metadata: None,
    }];
    let task = req.send(m, None).expect("a reply over 32 MiB");
    match &task.history[0].parts[0] {
        Part::File { file, .. } => assert_eq!(file.bytes.as_deref(), Some(bytes.as_str())),
        other => panic!("{other:?}"),
    }
    // The connection is still whole.
    assert_eq!(req.get_task(&task.id, Some(0)).unwrap().id, task.id);
}

/// The generic call reaches any method of the table by its marker type,
/// with the agent's token filled in, blocking and submitted alike; and its
/// answers are the typed methods' answers.
#[test]
fn the_generic_call_reaches_methods_by_their_marker_types() {
    use a2a_client::proto::params::{
        AcquireLeaseParams, GetParams, ListLeasesParams, RenewLeaseParams,
    };
    use a2a_client::proto::request::{self, Method, TaskOrTasks};
    let b = Broker::start();
    let c = b.connect();
    let alice = register(&c, "ctx-g", "alice");
    let bob = register(&c, "ctx-g", "bob");

    let acquired = alice
        .call::<request::LeaseAcquire>(AcquireLeaseParams {
            token: None,
            paths: vec!["src/lib.rs".into()],
            ttl_seconds: 30,
            exclusive: true,
            reason: None,
            wait_seconds: None,
        })
        .unwrap()
        .lease;
    assert_eq!(acquired.holder, "alice");
    let renewed = alice
        .call_async::<request::LeaseRenew>(RenewLeaseParams {
            token: None,
            lease_id: acquired.id.clone(),
            ttl_seconds: 60,
        })
        .unwrap()
        .wait(TIMEOUT)
        .unwrap()
        .lease;
    assert_eq!(renewed.id, acquired.id);
    let listed = bob
        .call::<request::LeaseList>(ListLeasesParams::default())
        .unwrap()
        .leases;
    assert_eq!(listed, bob.list_leases(None).unwrap());
    assert_eq!(listed.len(), 1);

    let task = match alice
        .call::<request::Send>(a2a_client::proto::params::SendParams {
            token: None,
            message: message_to("bob", "hi"),
            configuration: None,
        })
        .unwrap()
    {
        TaskOrTasks::Task(t) => t.task,
        TaskOrTasks::Tasks(_) => panic!("one peer, one task"),
    };
    let got = bob
        .call::<request::Get>(GetParams {
            token: None,
            id: task.id.clone(),
            history_length: None,
        })
        .unwrap()
        .task;
    assert_eq!(got, bob.get_task(&task.id, None).unwrap());
    assert_eq!(request::Get::NAME, "a2a.tasks.get");
}
