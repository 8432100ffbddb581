//! `NativeAgent`: one registered agent and one method per `a2a.*` call
//! (docs/protocol.md §5 Methods). Each method submits the call (`*_async` of
//! `a2a_client::Agent`) and returns a promise settled by the call's
//! completion on the connection's reader thread (see `settle`): no thread
//! waits for the broker.
//!
//! Protocol values cross as JSON text both ways: the JS layer
//! (`index.js`) passes `JSON.stringify`'d arguments, this side parses them
//! with serde, and answers are rendered to JSON on the reader thread and
//! parsed by V8. BENCHMARKS.md has the measurement behind that choice.

use crate::error::Failure;
use crate::settle::{self, Payload, Ticket};
use a2a_client::{
    Agent, Artifact, ClientError, ListRole, Message, Pending, PushConfig, SendConfiguration, State,
    TaskQuery,
};
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi::Env;
use napi_derive::napi;
use serde::de::DeserializeOwned;

/// A registered agent.
#[napi]
pub struct NativeAgent {
    pub(crate) agent: Agent,
}

impl NativeAgent {
    pub(crate) fn new(agent: Agent) -> NativeAgent {
        NativeAgent { agent }
    }
}

type JsPromise<'env> = napi::Result<PromiseRaw<'env, Unknown<'env>>>;

/// Reads an argument, or rejects the call with `-32602`.
fn arg<T: DeserializeOwned>(what: &str, json: &str) -> Result<T, Failure> {
    serde_json::from_str(json).map_err(|e| Failure::invalid(what, e))
}

fn opt_arg<T: DeserializeOwned>(what: &str, json: Option<&str>) -> Result<Option<T>, Failure> {
    json.map(|j| arg(what, j)).transpose()
}

/// Submits a call whose answer settles `ticket` as JSON.
fn submit<T: serde::Serialize + Send + 'static>(
    ticket: Ticket,
    call: Result<Result<Pending<T>, ClientError>, Failure>,
) {
    match call {
        Ok(Ok(p)) => p.on_complete(move |r| ticket.settle_json(r)),
        Ok(Err(e)) => ticket.settle(Err(e.into())),
        Err(f) => ticket.settle(Err(f)),
    }
}

/// A whole number argument (JS numbers are doubles).
fn count(what: &str, v: Option<f64>) -> Result<Option<u64>, Failure> {
    match v {
        None => Ok(None),
        Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= u64::MAX as f64 => Ok(Some(n as u64)),
        Some(n) => Err(Failure::invalid(
            what,
            format!("{n} is not a whole number ≥ 0"),
        )),
    }
}

#[napi]
impl NativeAgent {
    /// The peer id (`agentId`).
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.agent.id().to_owned()
    }

    /// The context it registered under.
    #[napi(getter)]
    pub fn context_id(&self) -> String {
        self.agent.context_id().to_owned()
    }

    /// The card as the broker stamped it, as JSON.
    #[napi(getter)]
    pub fn card(&self) -> String {
        serde_json::to_string(self.agent.card()).unwrap_or_default()
    }

    /// `"push"` or `"pull"`.
    #[napi(getter)]
    pub fn delivery(&self) -> String {
        match self.agent.delivery() {
            a2a_client::Delivery::Push => "push".into(),
            a2a_client::Delivery::Pull => "pull".into(),
        }
    }

    /// Has `deregister` succeeded?
    #[napi(getter)]
    pub fn deregistered(&self) -> bool {
        self.agent.is_deregistered()
    }

    /// `a2a.message.send` → Task (or Task[] when `message.to` is `"*"`).
    #[napi]
    pub fn send<'env>(
        &self,
        env: &'env Env,
        message: String,
        configuration: Option<String>,
    ) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        let parsed = arg::<Message>("message", &message).and_then(|m| {
            Ok((
                m,
                opt_arg::<SendConfiguration>("configuration", configuration.as_deref())?,
            ))
        });
        match parsed {
            Ok((m, c)) if m.to.as_deref() == Some("*") => {
                submit(ticket, Ok(self.agent.broadcast_async(m, c)))
            }
            Ok((m, c)) => submit(ticket, Ok(self.agent.send_async(m, c))),
            Err(f) => ticket.settle(Err(f)),
        }
        Ok(promise)
    }

    /// `a2a.message.stream` → Task.
    #[napi]
    pub fn stream<'env>(&self, env: &'env Env, message: String) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        let call = arg::<Message>("message", &message).map(|m| self.agent.stream_async(m));
        submit(ticket, call);
        Ok(promise)
    }

    /// `a2a.tasks.get` → Task.
    #[napi]
    pub fn get<'env>(
        &self,
        env: &'env Env,
        id: String,
        history_length: Option<f64>,
    ) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        let call =
            count("historyLength", history_length).map(|h| self.agent.get_task_async(&id, h));
        submit(ticket, call);
        Ok(promise)
    }

    /// `a2a.tasks.status` (the worker's) → Task.
    #[napi]
    pub fn status<'env>(
        &self,
        env: &'env Env,
        id: String,
        state: String,
        message: Option<String>,
    ) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        let call = serde_json::from_value::<State>(serde_json::Value::String(state))
            .map_err(|e| Failure::invalid("state", e))
            .and_then(|s| Ok((s, opt_arg::<Message>("message", message.as_deref())?)))
            .map(|(s, m)| self.agent.set_status_async(&id, s, m));
        submit(ticket, call);
        Ok(promise)
    }

    /// `a2a.tasks.artifact` (the worker's) → Task.
    #[napi]
    pub fn artifact<'env>(
        &self,
        env: &'env Env,
        id: String,
        artifact: String,
        append: Option<bool>,
        last_chunk: Option<bool>,
    ) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        let call = arg::<Artifact>("artifact", &artifact).map(|a| {
            self.agent.add_artifact_async(
                &id,
                a,
                append.unwrap_or(false),
                last_chunk.unwrap_or(true),
            )
        });
        submit(ticket, call);
        Ok(promise)
    }

    /// `a2a.tasks.cancel` (either party's) → Task.
    #[napi]
    pub fn cancel<'env>(
        &self,
        env: &'env Env,
        id: String,
        message: Option<String>,
    ) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        let call = opt_arg::<Message>("message", message.as_deref())
            .map(|m| self.agent.cancel_async(&id, m));
        submit(ticket, call);
        Ok(promise)
    }

    /// `a2a.tasks.resubscribe` → Task (the events arrive before it).
    #[napi]
    pub fn resubscribe<'env>(
        &self,
        env: &'env Env,
        id: String,
        after_version: Option<f64>,
    ) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        let call =
            count("afterVersion", after_version).map(|v| self.agent.resubscribe_async(&id, v));
        submit(ticket, call);
        Ok(promise)
    }

    /// `a2a.tasks.pushNotificationConfig.set` → PushConfig.
    #[napi]
    pub fn set_push<'env>(
        &self,
        env: &'env Env,
        task_id: String,
        config: String,
    ) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        let call = arg::<PushConfig>("config", &config)
            .map(|c| self.agent.set_push_config_async(&task_id, c));
        submit(ticket, call);
        Ok(promise)
    }

    /// `a2a.tasks.pushNotificationConfig.get` → PushConfig or null.
    #[napi]
    pub fn get_push<'env>(&self, env: &'env Env, task_id: String) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        submit(ticket, Ok(self.agent.push_config_async(&task_id)));
        Ok(promise)
    }

    /// `a2a.agents.list` → AgentCard[].
    #[napi]
    pub fn list<'env>(&self, env: &'env Env, skill: Option<String>) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        submit(ticket, Ok(self.agent.list_agents_async(skill.as_deref())));
        Ok(promise)
    }

    /// `a2a.tasks.list` (ext) → `{tasks, nextCursor?}`; `query` is JSON
    /// `{role?, state?, limit?, cursor?}`.
    #[napi]
    pub fn list_tasks<'env>(&self, env: &'env Env, query: Option<String>) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        let call = opt_arg::<TaskQueryJson>("query", query.as_deref()).map(|q| {
            let q = q.unwrap_or_default();
            self.agent.list_tasks_async(TaskQuery {
                role: q.role.unwrap_or_default(),
                state: q.state,
                limit: q.limit,
                cursor: q.cursor,
            })
        });
        submit(ticket, call);
        Ok(promise)
    }

    /// `a2a.leases.acquire` (ext) → Lease; `request` is JSON `{paths,
    /// ttlSeconds, exclusive?, reason?, waitSeconds?}`.
    #[napi]
    pub fn lease_acquire<'env>(&self, env: &'env Env, request: String) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        let call = arg::<LeaseJson>("lease", &request).map(|r| {
            let paths: Vec<&str> = r.paths.iter().map(String::as_str).collect();
            self.agent.acquire_lease_async(
                &paths,
                r.ttl_seconds,
                r.exclusive.unwrap_or(true),
                r.reason.as_deref(),
                r.wait_seconds,
            )
        });
        submit(ticket, call);
        Ok(promise)
    }

    /// `a2a.leases.renew` (ext) → Lease.
    #[napi]
    pub fn lease_renew<'env>(
        &self,
        env: &'env Env,
        lease_id: String,
        ttl_seconds: f64,
    ) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        let call = count("ttlSeconds", Some(ttl_seconds))
            .map(|t| self.agent.renew_lease_async(&lease_id, t.unwrap_or(0)));
        submit(ticket, call);
        Ok(promise)
    }

    /// `a2a.leases.release` (ext) → undefined.
    #[napi]
    pub fn lease_release<'env>(&self, env: &'env Env, lease_id: String) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        match self.agent.release_lease_async(&lease_id) {
            Ok(p) => p.on_complete(move |r| {
                ticket.settle(r.map(|()| Payload::Undefined).map_err(Failure::from))
            }),
            Err(e) => ticket.settle(Err(e.into())),
        }
        Ok(promise)
    }

    /// `a2a.leases.list` (ext) → Lease[] (those overlapping `path`, when given).
    #[napi]
    pub fn lease_list<'env>(&self, env: &'env Env, path: Option<String>) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        submit(ticket, Ok(self.agent.list_leases_async(path.as_deref())));
        Ok(promise)
    }

    /// `a2a.agents.deregister` → undefined. Events already delivered stay;
    /// the event callback is dropped.
    #[napi]
    pub fn deregister<'env>(&self, env: &'env Env) -> JsPromise<'env> {
        let (ticket, promise) = settle::promise(env)?;
        match self.agent.deregister_async() {
            Ok(p) => p.on_complete(move |r| {
                ticket.settle(r.map(|()| Payload::Undefined).map_err(Failure::from))
            }),
            Err(e) => ticket.settle(Err(e.into())),
        }
        Ok(promise)
    }
}

/// `a2a.leases.acquire` arguments as JS passes them (`undefined` fields
/// are left out by `JSON.stringify`). Whole numbers only: a fraction, a
/// negative or a missing `ttlSeconds` is -32602 here, as the broker would
/// answer.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LeaseJson {
    paths: Vec<String>,
    ttl_seconds: u64,
    exclusive: Option<bool>,
    reason: Option<String>,
    wait_seconds: Option<u64>,
}

/// `a2a.tasks.list` query as JS passes it.
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskQueryJson {
    role: Option<ListRole>,
    state: Option<State>,
    limit: Option<u64>,
    cursor: Option<String>,
}
