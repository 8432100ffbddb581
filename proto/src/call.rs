//! Every method as one typed value, the same for both codecs: NDJSON lines
//! are parsed into a [`Call`] from their method name and params, binary
//! frames carry it as is. Results likewise are one [`Outcome`] enum.

use crate::check::{CheckError, Precheck};
use crate::error::RpcError;
use crate::methods as m;
use crate::params::*;
use bincode::{Decode, Encode};
use serde::Serialize;

/// Where the broker answers a method (the table's `route` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The connection's own state (`app.handshake`).
    Session,
    /// Without the writer: the committed-task cache, else a reader.
    Read,
    /// On the writer thread, ordered with every other write.
    Write,
    /// Parked in the caller's pull queue (`a2a.events.wait`).
    Wait,
}

/// `Call`, and each per-method match over it, from the method table.
macro_rules! define_call {
    ($( $variant:ident($params:ty) $konst:ident, $route:ident, $result:ident, $handler:ident, $bindings:tt; )*) => {
        /// A request's method and typed params (one variant per row of
        /// [`method_table!`](crate::method_table), in its order: the binary
        /// codec numbers them so).
        #[derive(Debug, Clone, PartialEq, Encode, Decode)]
        pub enum Call {
            $( $variant($params), )*
        }

        impl Call {
            /// Is `method` one this protocol has?
            pub fn is_method(method: &str) -> bool {
                matches!(method, $( m::$konst )|*)
            }

            /// Parses JSON params for `method`: `-32601` for an unknown method,
            /// `-32602` for params of the wrong shape.
            pub fn from_json(method: &str, params: &str) -> Result<Call, RpcError> {
                Ok(match method {
                    $( m::$konst => Call::$variant(parse(params)?), )*
                    other => return Err(RpcError::method_not_found(other)),
                })
            }

            /// The method name.
            pub fn method(&self) -> &'static str {
                match self {
                    $( Call::$variant(_) => m::$konst, )*
                }
            }

            /// Where the broker answers this call.
            pub fn route(&self) -> Route {
                match self {
                    $( Call::$variant(_) => route!($route), )*
                }
            }

            /// The params as JSON.
            pub fn params_json(&self) -> serde_json::Value {
                match self {
                    $( Call::$variant(p) => serde_json::to_value(p).expect("params serialize"), )*
                }
            }

            /// Writes the params as JSON straight from their typed form (no
            /// `Value` tree between: the Node addon's calls connection).
            pub fn write_params_json<W: std::io::Write>(&self, out: W) -> serde_json::Result<()> {
                match self {
                    $( Call::$variant(p) => serde_json::to_writer(out, p), )*
                }
            }

            /// Everything the call can be refused for without the broker's
            /// state: ids' lengths, message, artifact and card bounds (§9
            /// Bounds), blank `to`/`taskId` read as omitted (§3 Shapes).
            /// Each method's params say theirs ([`Precheck`]); the dispatch
            /// is the method table's.
            pub fn precheck(&mut self) -> Result<usize, CheckError> {
                match self {
                    $( Call::$variant(p) => Precheck::precheck(p), )*
                }
            }
        }

        /// Reads the JSON result of `method` into its typed form (a method
        /// this protocol does not have reads as a task).
        fn outcome_from_json(
            method: &str,
            result: serde_json::Value,
        ) -> Result<Outcome, serde_json::Error> {
            Ok(match method {
                $( m::$konst => outcome!($result, result), )*
                _ => Outcome::Task(serde_json::from_value(result)?),
            })
        }
    };
}

macro_rules! route {
    (session) => {
        Route::Session
    };
    (read) => {
        Route::Read
    };
    (write) => {
        Route::Write
    };
    (wait) => {
        Route::Wait
    };
}
// The markers (`crate::request`) read the same column.
pub(crate) use route;

macro_rules! outcome {
    (TaskOrTasks, $result:ident) => {
        if $result.get("tasks").is_some() {
            Outcome::Tasks(serde_json::from_value($result)?)
        } else {
            Outcome::Task(serde_json::from_value($result)?)
        }
    };
    ($variant:ident, $result:ident) => {
        Outcome::$variant(serde_json::from_value($result)?)
    };
}

fn parse<T: serde::de::DeserializeOwned>(params: &str) -> Result<T, RpcError> {
    serde_json::from_str(params).map_err(RpcError::invalid_params)
}

crate::method_table!(define_call);

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
    /// (ext) `{lease}`.
    Lease(LeaseResult),
    /// (ext) `{leases}`.
    Leases(LeasesResult),
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
    Lease = 9,
    Leases = 10,
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
            Outcome::Lease(_) => OutcomeKind::Lease,
            Outcome::Leases(_) => OutcomeKind::Leases,
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
            Outcome::Lease(r) => v(r),
            Outcome::Leases(r) => v(r),
        }
    }

    /// Reads the JSON result of `method` into its typed form.
    pub fn from_json(
        method: &str,
        result: serde_json::Value,
    ) -> Result<Outcome, serde_json::Error> {
        outcome_from_json(method, result)
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
            (
                m::LEASES_ACQUIRE,
                json!({"lease": {"id": "l", "paths": ["src/**"], "holder": "w",
                "exclusive": true, "expiresAt": "2026-11-30T09:23:55.420Z"}}),
            ),
            (m::LEASES_LIST, json!({"leases": []})),
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
            (0..11).collect::<Vec<u32>>(),
            "one sample of each kind"
        );
        for o in &samples {
            let whole = bincode::encode_to_vec(o, cfg).unwrap();
            let tag = bincode::encode_to_vec(o.kind().index(), cfg).unwrap();
            assert!(whole.starts_with(&tag), "{:?}", o.kind());
        }
    }
}
