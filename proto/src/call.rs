//! Every method as one typed value, the same for both codecs: NDJSON lines
//! are parsed into a [`Call`] from their method name and params, binary
//! frames carry it as is. Results likewise are one [`Outcome`] enum.

use crate::error::RpcError;
use crate::methods as m;
use crate::params::*;
use bincode::{Decode, Encode};
use serde::Serialize;

/// A request's method and typed params.
#[derive(Debug, Clone, PartialEq, Encode, Decode)]
pub enum Call {
    Handshake(HandshakeParams),
    Register(RegisterParams),
    Deregister(TokenParams),
    ListAgents(ListAgentsParams),
    Send(SendParams),
    Stream(SendParams),
    Get(GetParams),
    Status(StatusParams),
    Cancel(CancelParams),
    Resubscribe(ResubscribeParams),
    PushSet(PushSetParams),
    PushGet(PushGetParams),
    ListTasks(ListTasksParams),
    Artifact(ArtifactParams),
    Wait(WaitParams),
}

fn parse<T: serde::de::DeserializeOwned>(params: &str) -> Result<T, RpcError> {
    serde_json::from_str(params).map_err(RpcError::invalid_params)
}

impl Call {
    /// Is `method` one this protocol has?
    pub fn is_method(method: &str) -> bool {
        matches!(
            method,
            m::HANDSHAKE
                | m::AGENTS_REGISTER
                | m::AGENTS_DEREGISTER
                | m::AGENTS_LIST
                | m::MESSAGE_SEND
                | m::MESSAGE_STREAM
                | m::TASKS_GET
                | m::TASKS_STATUS
                | m::TASKS_CANCEL
                | m::TASKS_RESUBSCRIBE
                | m::PUSH_CONFIG_SET
                | m::PUSH_CONFIG_GET
                | m::TASKS_LIST
                | m::TASKS_ARTIFACT
                | m::EVENTS_WAIT
        )
    }

    /// Parses JSON params for `method`: `-32601` for an unknown method,
    /// `-32602` for params of the wrong shape.
    pub fn from_json(method: &str, params: &str) -> Result<Call, RpcError> {
        Ok(match method {
            m::HANDSHAKE => Call::Handshake(parse(params)?),
            m::AGENTS_REGISTER => Call::Register(parse(params)?),
            m::AGENTS_DEREGISTER => Call::Deregister(parse(params)?),
            m::AGENTS_LIST => Call::ListAgents(parse(params)?),
            m::MESSAGE_SEND => Call::Send(parse(params)?),
            m::MESSAGE_STREAM => Call::Stream(parse(params)?),
            m::TASKS_GET => Call::Get(parse(params)?),
            m::TASKS_STATUS => Call::Status(parse(params)?),
            m::TASKS_CANCEL => Call::Cancel(parse(params)?),
            m::TASKS_RESUBSCRIBE => Call::Resubscribe(parse(params)?),
            m::PUSH_CONFIG_SET => Call::PushSet(parse(params)?),
            m::PUSH_CONFIG_GET => Call::PushGet(parse(params)?),
            m::TASKS_LIST => Call::ListTasks(parse(params)?),
            m::TASKS_ARTIFACT => Call::Artifact(parse(params)?),
            m::EVENTS_WAIT => Call::Wait(parse(params)?),
            other => return Err(RpcError::method_not_found(other)),
        })
    }

    /// The method name.
    pub fn method(&self) -> &'static str {
        match self {
            Call::Handshake(_) => m::HANDSHAKE,
            Call::Register(_) => m::AGENTS_REGISTER,
            Call::Deregister(_) => m::AGENTS_DEREGISTER,
            Call::ListAgents(_) => m::AGENTS_LIST,
            Call::Send(_) => m::MESSAGE_SEND,
            Call::Stream(_) => m::MESSAGE_STREAM,
            Call::Get(_) => m::TASKS_GET,
            Call::Status(_) => m::TASKS_STATUS,
            Call::Cancel(_) => m::TASKS_CANCEL,
            Call::Resubscribe(_) => m::TASKS_RESUBSCRIBE,
            Call::PushSet(_) => m::PUSH_CONFIG_SET,
            Call::PushGet(_) => m::PUSH_CONFIG_GET,
            Call::ListTasks(_) => m::TASKS_LIST,
            Call::Artifact(_) => m::TASKS_ARTIFACT,
            Call::Wait(_) => m::EVENTS_WAIT,
        }
    }

    /// The params as JSON.
    pub fn params_json(&self) -> serde_json::Value {
        fn v<T: Serialize>(t: &T) -> serde_json::Value {
            serde_json::to_value(t).expect("params serialize")
        }
        match self {
            Call::Handshake(p) => v(p),
            Call::Register(p) => v(p),
            Call::Deregister(p) => v(p),
            Call::ListAgents(p) => v(p),
            Call::Send(p) | Call::Stream(p) => v(p),
            Call::Get(p) => v(p),
            Call::Status(p) => v(p),
            Call::Cancel(p) => v(p),
            Call::Resubscribe(p) => v(p),
            Call::PushSet(p) => v(p),
            Call::PushGet(p) => v(p),
            Call::ListTasks(p) => v(p),
            Call::Artifact(p) => v(p),
            Call::Wait(p) => v(p),
        }
    }
}

/// A method's result, typed.
#[derive(Debug, Clone, PartialEq, Encode, Decode)]
pub enum Outcome {
    Handshake(HandshakeResult),
    Registered(RegisterResult),
    Ok(OkResult),
    Agents(AgentsResult),
    Task(TaskResult),
    Tasks(TasksResult),
    TaskList(TaskListResult),
    Config(ConfigResult),
    Events(WaitResult),
}

/// The binary codec's number of each [`Outcome`] variant. bincode numbers
/// an enum's variants in declaration order; an encoder that writes a result
/// without building an `Outcome` (the broker's borrowed replies) takes the
/// number from this one table, which a test holds to the enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeKind {
    Handshake = 0,
    Registered = 1,
    Ok = 2,
    Agents = 3,
    Task = 4,
    Tasks = 5,
    TaskList = 6,
    Config = 7,
    Events = 8,
}

impl OutcomeKind {
    /// The variant index bincode writes for this kind of [`Outcome`].
    pub const fn index(self) -> u32 {
        self as u32
    }
}

impl Outcome {
    /// Which variant this is.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Outcome::Handshake(_) => OutcomeKind::Handshake,
            Outcome::Registered(_) => OutcomeKind::Registered,
            Outcome::Ok(_) => OutcomeKind::Ok,
            Outcome::Agents(_) => OutcomeKind::Agents,
            Outcome::Task(_) => OutcomeKind::Task,
            Outcome::Tasks(_) => OutcomeKind::Tasks,
            Outcome::TaskList(_) => OutcomeKind::TaskList,
            Outcome::Config(_) => OutcomeKind::Config,
            Outcome::Events(_) => OutcomeKind::Events,
        }
    }

    /// The result as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        fn v<T: Serialize>(t: &T) -> serde_json::Value {
            serde_json::to_value(t).expect("results serialize")
        }
        match self {
            Outcome::Handshake(r) => v(r),
            Outcome::Registered(r) => v(r),
            Outcome::Ok(r) => v(r),
            Outcome::Agents(r) => v(r),
            Outcome::Task(r) => v(r),
            Outcome::Tasks(r) => v(r),
            Outcome::TaskList(r) => v(r),
            Outcome::Config(r) => v(r),
            Outcome::Events(r) => v(r),
        }
    }

    /// Reads the JSON result of `method` into its typed form.
    pub fn from_json(
        method: &str,
        result: serde_json::Value,
    ) -> Result<Outcome, serde_json::Error> {
        use serde_json::from_value as f;
        Ok(match method {
            m::HANDSHAKE => Outcome::Handshake(f(result)?),
            m::AGENTS_REGISTER => Outcome::Registered(f(result)?),
            m::AGENTS_DEREGISTER => Outcome::Ok(f(result)?),
            m::AGENTS_LIST => Outcome::Agents(f(result)?),
            m::MESSAGE_SEND | m::MESSAGE_STREAM => {
                if result.get("tasks").is_some() {
                    Outcome::Tasks(f(result)?)
                } else {
                    Outcome::Task(f(result)?)
                }
            }
            m::PUSH_CONFIG_SET | m::PUSH_CONFIG_GET => Outcome::Config(f(result)?),
            m::TASKS_LIST => Outcome::TaskList(f(result)?),
            m::EVENTS_WAIT => Outcome::Events(f(result)?),
            _ => Outcome::Task(f(result)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One value of every variant, read from its JSON.
    fn samples() -> Vec<Outcome> {
        let task = json!({"kind": "task", "id": "t", "contextId": "c",
            "status": {"state": "working", "timestamp": "2026-11-30T09:23:55.420Z"},
            "history": [], "artifacts": [], "agentName": "w", "requesterName": "r", "version": 1});
        let card = json!({"name": "w"});
        [
            (
                m::HANDSHAKE,
                json!({"protocolVersion": 10, "host": "h", "hostVersion": "1",
                "features": [], "capabilities": []}),
            ),
            (
                m::AGENTS_REGISTER,
                json!({"agentId": "w", "token": "k", "card": card}),
            ),
            (m::AGENTS_DEREGISTER, json!({"ok": true})),
            (m::AGENTS_LIST, json!({"agents": [card]})),
            (m::TASKS_GET, json!({"task": task})),
            (m::MESSAGE_SEND, json!({"tasks": [task]})),
            (m::TASKS_LIST, json!({"tasks": [task], "nextCursor": "2"})),
            (m::PUSH_CONFIG_GET, json!({"config": null})),
            (m::EVENTS_WAIT, json!({"events": [], "timedOut": true})),
        ]
        .into_iter()
        .map(|(method, v)| Outcome::from_json(method, v).expect("a sample result"))
        .collect()
    }

    #[test]
    fn the_kind_table_is_the_variant_order_bincode_writes() {
        let cfg = bincode::config::standard();
        let samples = samples();
        let kinds: Vec<u32> = samples.iter().map(|o| o.kind().index()).collect();
        assert_eq!(
            kinds,
            (0..9).collect::<Vec<u32>>(),
            "one sample of each kind"
        );
        for o in &samples {
            let whole = bincode::encode_to_vec(o, cfg).unwrap();
            let tag = bincode::encode_to_vec(o.kind().index(), cfg).unwrap();
            assert!(whole.starts_with(&tag), "{:?}", o.kind());
        }
    }
}
