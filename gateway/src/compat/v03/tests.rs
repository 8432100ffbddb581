//! The v0.3 <-> v1.0 translation, shape by shape: each method's params,
//! each part kind both ways, each event kind, each state, the push config
//! nesting, error codes and the card's v0.3 fields.

use super::*;
use serde_json::json;

fn user_msg() -> Value {
    json!({"kind": "message", "messageId": "m1", "role": "user", "contextId": "c1",
           "taskId": "t1", "referenceTaskIds": ["t0"], "extensions": ["urn:x"],
           "metadata": {"k": 1},
           "parts": [{"kind": "text", "text": "hi"}]})
}

#[test]
fn every_v03_method_has_its_v1_operation_and_no_other_name_is_v03() {
    let want = [
        ("message/send", "SendMessage"),
        ("message/stream", "SendStreamingMessage"),
        ("tasks/get", "GetTask"),
        ("tasks/cancel", "CancelTask"),
        ("tasks/resubscribe", "SubscribeToTask"),
        (
            "tasks/pushNotificationConfig/set",
            "CreateTaskPushNotificationConfig",
        ),
        (
            "tasks/pushNotificationConfig/get",
            "GetTaskPushNotificationConfig",
        ),
        (
            "tasks/pushNotificationConfig/list",
            "ListTaskPushNotificationConfigs",
        ),
        (
            "tasks/pushNotificationConfig/delete",
            "DeleteTaskPushNotificationConfig",
        ),
        ("agent/getAuthenticatedExtendedCard", "GetExtendedAgentCard"),
    ];
    for (v03, v1) in want {
        let m = Method::from_name(v03).unwrap_or_else(|| panic!("{v03}"));
        assert_eq!(m.name(), v03);
        assert_eq!(m.v1(), v1);
    }
    assert_eq!(Method::ALL.len(), want.len());
    for other in ["SendMessage", "tasks/list", "message/Send", ""] {
        assert_eq!(Method::from_name(other), None, "{other}");
    }
}

#[test]
fn the_version_header_names_v03_only_for_0_3_and_its_patches() {
    for yes in ["0.3", "0.3.0", " 0.3.12 "] {
        assert!(is_version(Some(yes)), "{yes}");
    }
    for no in [
        None,
        Some("1.0"),
        Some("0.2"),
        Some("0.3."),
        Some("0.3.x"),
        Some(""),
    ] {
        assert!(!is_version(no), "{no:?}");
    }
}

#[test]
fn message_send_params_become_v1_send_params() {
    let p = json!({"message": user_msg(), "metadata": {"m": true},
        "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 3,
                          "blocking": true}});
    let v = params_in(Method::Send, &p).unwrap();
    assert_eq!(
        v,
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "contextId": "c1",
                           "taskId": "t1", "referenceTaskIds": ["t0"], "extensions": ["urn:x"],
                           "metadata": {"k": 1}, "parts": [{"text": "hi"}]},
               "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 3,
                                 "returnImmediately": false},
               "metadata": {"m": true}})
    );
    // And the v1.0 reader takes it.
    let req: v1::SendMessageRequest = serde_json::from_value(v).unwrap();
    assert_eq!(req.message.role, v1::Role::User);
    assert_eq!(req.message.parts[0].text.as_deref(), Some("hi"));
    // message/stream reads the same params.
    assert_eq!(
        params_in(Method::Stream, &p).unwrap(),
        params_in(Method::Send, &p).unwrap()
    );
}

#[test]
fn blocking_false_is_return_immediately_and_history_zero_is_no_limit() {
    let p =
        json!({"message": user_msg(), "configuration": {"blocking": false, "historyLength": 0}});
    let v = params_in(Method::Send, &p).unwrap();
    assert_eq!(v["configuration"], json!({"returnImmediately": true}));
    let req: v1::SendMessageRequest = serde_json::from_value(v).unwrap();
    let c = req.configuration.unwrap();
    assert!(c.return_immediately);
    assert_eq!(c.history_length, None);
    let p = json!({"message": user_msg(), "configuration": {"blocking": "no"}});
    assert_eq!(params_in(Method::Send, &p).unwrap_err().code(), -32602);
}

#[test]
fn a_push_config_in_the_send_configuration_is_flattened() {
    let p = json!({"message": user_msg(), "configuration": {"pushNotificationConfig":
        {"id": "p1", "url": "https://h/w", "token": "tok",
         "authentication": {"schemes": ["Bearer", "Basic"], "credentials": "cr"}}}});
    let v = params_in(Method::Send, &p).unwrap();
    assert_eq!(
        v["configuration"]["taskPushNotificationConfig"],
        json!({"id": "p1", "url": "https://h/w", "token": "tok",
               "authentication": {"scheme": "Bearer", "credentials": "cr"}})
    );
    let req: v1::SendMessageRequest = serde_json::from_value(v).unwrap();
    let pc = req
        .configuration
        .unwrap()
        .task_push_notification_config
        .unwrap();
    assert_eq!(pc.url, "https://h/w");
    assert_eq!(pc.authentication.unwrap().scheme, "Bearer");
}

#[test]
fn each_part_kind_is_read_into_its_v1_part() {
    let cases = [
        (
            json!({"kind": "text", "text": "t", "metadata": {"a": 1}}),
            json!({"text": "t", "metadata": {"a": 1}}),
        ),
        (
            json!({"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "f.txt"}}),
            json!({"raw": "aGk=", "mediaType": "text/plain", "filename": "f.txt"}),
        ),
        (
            json!({"kind": "file", "file": {"uri": "https://h/f.png", "mimeType": "image/png"}}),
            json!({"url": "https://h/f.png", "mediaType": "image/png"}),
        ),
        (
            json!({"kind": "data", "data": {"x": [1, 2]}}),
            json!({"data": {"x": [1, 2]}}),
        ),
        // A v1.0 data part that was not an object, as v0.3 carries it back.
        (
            json!({"kind": "data", "data": {"value": [1, 2]}, "metadata": {"data_part_compat": true}}),
            json!({"data": [1, 2]}),
        ),
    ];
    for (v03, want) in cases {
        assert_eq!(part_in(&v03).unwrap(), want, "{v03}");
        serde_json::from_value::<v1::Part>(want).unwrap();
    }
}

#[test]
fn bad_parts_and_messages_are_invalid_params_with_a_reason() {
    let bad_parts = [
        (
            json!({"kind": "video", "video": 1}),
            "unknown part kind `video`",
        ),
        (json!({"kind": "text"}), "string text"),
        (
            json!({"kind": "file", "file": {"name": "x"}}),
            "file.bytes or file.uri",
        ),
        (json!({"kind": "file"}), "must be an object"),
        (json!({"kind": "data", "data": [1]}), "must be an object"),
        (json!({"kind": 3}), "kind must be a string"),
        (json!({}), "needs a kind"),
        // v0.3's schema requires `kind`: not guessed from other members.
        (json!({"text": "bare"}), "needs a kind"),
        (
            json!({"type": "unsupported_type", "text": "x"}),
            "needs a kind",
        ),
        (json!("text"), "must be an object"),
    ];
    for (p, why) in bad_parts {
        let e = part_in(&p).unwrap_err();
        assert_eq!(e.code(), -32602, "{p}");
        assert!(e.to_string().contains(why), "{p}: {e}");
    }
    let mut m = user_msg();
    m["role"] = json!("ROLE_USER");
    assert!(message_in(&m)
        .unwrap_err()
        .to_string()
        .contains("unknown role"));
    m["role"] = json!("agent");
    assert_eq!(message_in(&m).unwrap()["role"], "ROLE_AGENT");
    m.as_object_mut().unwrap().remove("role");
    assert!(message_in(&m).is_err());
    let mut m = user_msg();
    m["parts"] = json!({"kind": "text"});
    assert!(message_in(&m).is_err());
    for p in [json!(null), json!([1]), json!({}), json!({"message": 1})] {
        assert_eq!(
            params_in(Method::Send, &p).unwrap_err().code(),
            -32602,
            "{p}"
        );
    }
}

#[test]
fn a_history_length_must_be_a_count() {
    for bad in [json!(-1), json!(1.5), json!("3"), json!(true)] {
        let e = params_in(Method::Get, &json!({"id": "t", "historyLength": bad})).unwrap_err();
        assert_eq!(e.code(), -32602, "{bad}");
        assert!(e.to_string().contains("historyLength"), "{e}");
        let p = json!({"message": user_msg(), "configuration": {"historyLength": bad}});
        assert_eq!(params_in(Method::Send, &p).unwrap_err().code(), -32602);
    }
    let p = json!({"id": "t", "historyLength": null});
    assert_eq!(params_in(Method::Get, &p).unwrap(), json!({"id": "t"}));
}

#[test]
fn task_id_methods_keep_their_id_and_history_length() {
    assert_eq!(
        params_in(
            Method::Get,
            &json!({"id": "t", "historyLength": 2, "metadata": {}})
        )
        .unwrap(),
        json!({"id": "t", "historyLength": 2})
    );
    assert_eq!(
        params_in(Method::Get, &json!({"id": "t"})).unwrap(),
        json!({"id": "t"})
    );
    assert_eq!(
        params_in(
            Method::Cancel,
            &json!({"id": "t", "metadata": {"reason": "r"}})
        )
        .unwrap(),
        json!({"id": "t", "metadata": {"reason": "r"}})
    );
    assert_eq!(
        params_in(Method::Resubscribe, &json!({"id": "t"})).unwrap(),
        json!({"id": "t"})
    );
    for m in [
        Method::Get,
        Method::Cancel,
        Method::Resubscribe,
        Method::PushList,
    ] {
        assert_eq!(params_in(m, &json!({"id": 7})).unwrap_err().code(), -32602);
        assert_eq!(params_in(m, &json!({})).unwrap_err().code(), -32602);
        assert_eq!(params_in(m, &json!("t")).unwrap_err().code(), -32602);
    }
    assert_eq!(
        params_in(Method::ExtendedCard, &Value::Null).unwrap(),
        json!({})
    );
    assert_eq!(
        params_in(Method::ExtendedCard, &json!({})).unwrap(),
        json!({})
    );
}

#[test]
fn push_config_methods_unnest_and_name_configs_after_their_task() {
    let set = json!({"taskId": "t", "pushNotificationConfig": {"url": "https://h/w",
        "authentication": {"schemes": ["Bearer"]}}});
    let v = params_in(Method::PushSet, &set).unwrap();
    assert_eq!(
        v,
        json!({"taskId": "t", "id": "t", "url": "https://h/w",
               "authentication": {"scheme": "Bearer"}})
    );
    let c: v1::TaskPushNotificationConfig = serde_json::from_value(v).unwrap();
    assert_eq!((c.task_id.as_str(), c.id.as_str()), ("t", "t"));
    let mut with_id = set.clone();
    with_id["pushNotificationConfig"]["id"] = json!("p9");
    assert_eq!(params_in(Method::PushSet, &with_id).unwrap()["id"], "p9");
    assert!(params_in(Method::PushSet, &json!({"taskId": "t"})).is_err());
    assert!(params_in(Method::PushSet, &json!({"pushNotificationConfig": {}})).is_err());

    assert_eq!(
        params_in(
            Method::PushGet,
            &json!({"id": "t", "pushNotificationConfigId": "p"})
        )
        .unwrap(),
        json!({"taskId": "t", "id": "p"})
    );
    // Without a config id: the one named after the task.
    assert_eq!(
        params_in(Method::PushGet, &json!({"id": "t"})).unwrap(),
        json!({"taskId": "t", "id": "t"})
    );
    assert_eq!(
        params_in(
            Method::PushDelete,
            &json!({"id": "t", "pushNotificationConfigId": "p"})
        )
        .unwrap(),
        json!({"taskId": "t", "id": "p"})
    );
    assert!(params_in(Method::PushDelete, &json!({"id": "t"})).is_err());
    assert_eq!(
        params_in(Method::PushList, &json!({"id": "t"})).unwrap(),
        json!({"taskId": "t"})
    );
}

#[test]
fn each_v1_state_has_its_v03_name() {
    let want = [
        (v1::TaskState::Unspecified, "unknown"),
        (v1::TaskState::Submitted, "submitted"),
        (v1::TaskState::Working, "working"),
        (v1::TaskState::Completed, "completed"),
        (v1::TaskState::Failed, "failed"),
        (v1::TaskState::Canceled, "canceled"),
        (v1::TaskState::InputRequired, "input-required"),
        (v1::TaskState::Rejected, "rejected"),
        (v1::TaskState::AuthRequired, "auth-required"),
    ];
    assert_eq!(want.len(), v1::TaskState::ALL.len());
    for (s, name) in want {
        assert_eq!(state_out(s.as_str()), name);
    }
    assert_eq!(state_out("nonsense"), "unknown");
}

#[test]
fn each_v1_part_is_written_as_its_v03_kind_and_read_back_the_same() {
    let cases = [
        (json!({"text": "t"}), json!({"kind": "text", "text": "t"})),
        (
            json!({"raw": "aGk=", "mediaType": "text/plain", "filename": "f"}),
            json!({"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "f"}}),
        ),
        (
            json!({"url": "https://h/x", "metadata": {"a": 1}}),
            json!({"kind": "file", "file": {"uri": "https://h/x"}, "metadata": {"a": 1}}),
        ),
        (
            json!({"data": {"k": "v"}}),
            json!({"kind": "data", "data": {"k": "v"}}),
        ),
        (
            json!({"data": 5}),
            json!({"kind": "data", "data": {"value": 5}, "metadata": {"data_part_compat": true}}),
        ),
    ];
    for (v1p, want) in cases {
        let out = part_out(&v1p);
        assert_eq!(out, want, "{v1p}");
        assert_eq!(part_in(&out).unwrap(), v1p, "round trip of {v1p}");
    }
    assert_eq!(part_out(&json!({})), json!({"kind": "text", "text": ""}));
}

fn v1_task() -> Value {
    json!({"id": "t", "contextId": "c",
           "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2026-01-01T00:00:00Z",
                      "message": {"messageId": "s", "role": "ROLE_AGENT", "parts": [{"text": "more?"}]}},
           "artifacts": [{"artifactId": "a", "name": "n", "parts": [{"data": {"x": 1}}]}],
           "history": [{"messageId": "m", "role": "ROLE_USER", "contextId": "c", "taskId": "t",
                        "parts": [{"text": "hi"}]}]})
}

#[test]
fn a_task_gets_kinds_lowercase_states_and_v03_roles() {
    let t = task_out(&v1_task());
    assert_eq!(
        t,
        json!({"kind": "task", "id": "t", "contextId": "c",
               "status": {"state": "input-required", "timestamp": "2026-01-01T00:00:00Z",
                          "message": {"kind": "message", "messageId": "s", "role": "agent",
                                      "parts": [{"kind": "text", "text": "more?"}]}},
               "artifacts": [{"artifactId": "a", "name": "n",
                              "parts": [{"kind": "data", "data": {"x": 1}}]}],
               "history": [{"kind": "message", "messageId": "m", "role": "user",
                            "contextId": "c", "taskId": "t",
                            "parts": [{"kind": "text", "text": "hi"}]}]})
    );
    for m in [Method::Get, Method::Cancel] {
        assert_eq!(result_out(m, &v1_task()).unwrap(), t);
    }
    // A task without artifacts or history has neither member.
    let bare = task_out(&json!({"id": "t", "contextId": "c",
                                "status": {"state": "TASK_STATE_WORKING"}}));
    assert_eq!(
        bare,
        json!({"kind": "task", "id": "t", "contextId": "c", "status": {"state": "working"}})
    );
}

#[test]
fn a_send_result_is_the_task_or_the_message_itself() {
    assert_eq!(
        result_out(Method::Send, &json!({"task": v1_task()})).unwrap(),
        task_out(&v1_task())
    );
    let m = json!({"messageId": "r", "role": "ROLE_AGENT", "contextId": "c",
                   "parts": [{"text": "done"}]});
    assert_eq!(
        result_out(Method::Send, &json!({"message": m})).unwrap(),
        json!({"kind": "message", "messageId": "r", "role": "agent", "contextId": "c",
               "parts": [{"kind": "text", "text": "done"}]})
    );
}

#[test]
fn each_stream_event_gets_its_kind_and_status_updates_their_final() {
    let st = json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                                     "status": {"state": "TASK_STATE_COMPLETED"}}});
    assert_eq!(
        event_out(&st, true),
        json!({"kind": "status-update", "taskId": "t", "contextId": "c",
               "status": {"state": "completed"}, "final": true})
    );
    assert_eq!(event_out(&st, false)["final"], false);
    let art = json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "append": true,
                     "lastChunk": false,
                     "artifact": {"artifactId": "a", "parts": [{"url": "https://h/f"}]}}});
    assert_eq!(
        event_out(&art, false),
        json!({"kind": "artifact-update", "taskId": "t", "contextId": "c", "append": true,
               "lastChunk": false,
               "artifact": {"artifactId": "a",
                            "parts": [{"kind": "file", "file": {"uri": "https://h/f"}}]}})
    );
    assert_eq!(
        event_out(&json!({"task": v1_task()}), true),
        task_out(&v1_task())
    );
    let m = json!({"messageId": "r", "role": "ROLE_AGENT", "parts": []});
    assert_eq!(event_out(&json!({"message": m}), true)["kind"], "message");
}

#[test]
fn push_configs_are_nested_back_and_listed_as_an_array() {
    let c = json!({"id": "p", "taskId": "t", "url": "https://h/w", "token": "tok",
                   "authentication": {"scheme": "Bearer", "credentials": "cr"}});
    let want = json!({"taskId": "t", "pushNotificationConfig": {"id": "p", "url": "https://h/w",
        "token": "tok", "authentication": {"schemes": ["Bearer"], "credentials": "cr"}}});
    assert_eq!(result_out(Method::PushSet, &c).unwrap(), want);
    assert_eq!(result_out(Method::PushGet, &c).unwrap(), want);
    assert_eq!(
        result_out(Method::PushList, &json!({"configs": [c.clone(), c]})).unwrap(),
        json!([want.clone(), want])
    );
    assert_eq!(
        result_out(Method::PushList, &json!({"configs": []})).unwrap(),
        json!([])
    );
    assert_eq!(
        result_out(Method::PushDelete, &json!({})).unwrap(),
        Value::Null
    );
}

#[test]
fn error_codes_v03_lacks_become_internal_error() {
    for keep in [
        -32001, -32002, -32003, -32004, -32005, -32006, -32007, -32600, -32601, -32602, -32603,
        -32700,
    ] {
        let e = error_out(json!({"code": keep, "message": "m"}));
        assert_eq!(e["code"], keep);
    }
    for v1_only in [-32008, -32009] {
        let e = error_out(json!({"code": v1_only, "message": "m", "data": [1]}));
        assert_eq!(e, json!({"code": -32603, "message": "m", "data": [1]}));
    }
    let e = crate::mapping::GatewayError::TaskNotFound("t".into());
    assert_eq!(error_out(e.to_json())["code"], -32001);
}

fn v1_card(bearer: bool, extended: bool) -> v1::AgentCard {
    let (schemes, reqs) = if bearer {
        (
            Some(json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}})),
            Some(json!([{"schemes": {"bearer": {"list": []}}}])),
        )
    } else {
        (None, None)
    };
    v1::AgentCard {
        name: "echo".into(),
        description: "d".into(),
        version: "1.2.3".into(),
        supported_interfaces: vec![v1::AgentInterface {
            url: "http://127.0.0.1:9/agents/echo".into(),
            protocol_binding: "JSONRPC".into(),
            protocol_version: "1.0".into(),
            tenant: None,
        }],
        capabilities: v1::AgentCapabilities {
            streaming: true,
            push_notifications: true,
            extended_agent_card: extended,
            extensions: vec![],
        },
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        skills: vec![v1::AgentSkill {
            id: "s".into(),
            name: "S".into(),
            description: "sd".into(),
            tags: vec!["t".into()],
        }],
        security_schemes: schemes,
        security_requirements: reqs,
    }
}

#[test]
fn the_card_carries_the_v03_fields_beside_the_v1_ones() {
    let v1c = v1_card(false, false);
    let c = card(&v1c);
    let url = "http://127.0.0.1:9/agents/echo";
    assert_eq!(c["protocolVersion"], "0.3.0");
    assert_eq!(c["url"], url);
    assert_eq!(c["preferredTransport"], "JSONRPC");
    assert_eq!(
        c["additionalInterfaces"],
        json!([{"url": url, "transport": "JSONRPC"}])
    );
    assert_eq!(
        c["supportedInterfaces"],
        json!([{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
               {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}])
    );
    assert!(c.get("supportsAuthenticatedExtendedCard").is_none());
    assert!(c.get("security").is_none());
    // The members both versions share are the v1.0 card's.
    for k in [
        "name",
        "description",
        "version",
        "capabilities",
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
    ] {
        assert_eq!(c[k], serde_json::to_value(&v1c).unwrap()[k], "{k}");
    }
    // And a v1.0 reader still reads it as the same card (the v1.0
    // interface first).
    let back: v1::AgentCard = serde_json::from_value(c).unwrap();
    assert_eq!(back.supported_interfaces[0], v1c.supported_interfaces[0]);
}

#[test]
fn the_card_security_and_extended_card_have_their_v03_forms_too() {
    let c = card(&v1_card(true, true));
    assert_eq!(c["supportsAuthenticatedExtendedCard"], true);
    assert_eq!(
        c["securitySchemes"]["bearer"],
        json!({"httpAuthSecurityScheme": {"scheme": "Bearer"}, "type": "http", "scheme": "Bearer"})
    );
    assert_eq!(c["security"], json!([{"bearer": []}]));
    assert_eq!(
        c["securityRequirements"],
        json!([{"schemes": {"bearer": {"list": []}}}])
    );
    // The extended card's v0.3 result is that card as it is.
    assert_eq!(result_out(Method::ExtendedCard, &c).unwrap(), c);
    // Without authentication, v0.3 has no authenticated extended card:
    // not declared, and asked for, v0.3's -32007.
    let open = card(&v1_card(false, true));
    assert!(open.get("supportsAuthenticatedExtendedCard").is_none());
    let e = result_out(Method::ExtendedCard, &open).unwrap_err();
    assert_eq!(e.code(), -32007);
}

#[test]
fn a_card_without_a_json_rpc_interface_gets_no_v03_fields() {
    let mut v1c = v1_card(false, false);
    v1c.supported_interfaces[0].protocol_binding = "GRPC".into();
    let c = card(&v1c);
    assert!(c.get("url").is_none());
    assert_eq!(c["supportedInterfaces"].as_array().unwrap().len(), 1);
}
