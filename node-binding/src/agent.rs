//! `NativeAgent`: one registered agent and one method per `a2a.*` call
//! (docs/protocol.md §5 Methods). Each method builds the call and returns a
//! promise; no thread waits for the broker. Where libuv can be used, the
//! call goes on the broker's calls connection on the JS thread's own loop
//! (`calls`: written, read and settled on the JS thread, no thread hop);
//! elsewhere (and for `stream`, `resubscribe`, `deregister`, whose answers
//! keep an order with the agent's events) it is submitted on the client's
//! connection and settled from its reader thread (see `settle`).
//!
//! Protocol values cross as JSON text both ways: the JS layer
//! (`index.js`) passes `JSON.stringify`'d arguments, this side parses them
//! with serde, and answers are rendered to JSON on the reader thread and
//! parsed by V8. BENCHMARKS.md has the measurement behind that choice.

use crate::calls::Link;
use crate::error::Failure;
use crate::settle::{self, Payload, Shape, Ticket};
use a2a_client::proto::call::{Call, Outcome};
use a2a_client::proto::params::{
    AcquireLeaseParams, ArtifactParams, CancelParams, GetParams, ListAgentsParams,
    ListLeasesParams, ListTasksParams, PushGetParams, PushSetParams, ReleaseLeaseParams,
    RenewLeaseParams, SendParams, StatusParams,
};
use a2a_client::{
    Agent, Artifact, ClientError, ListRole, Message, Pending, PushConfig, SendConfiguration, State,
};
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi::Env;
use napi_derive::napi;
use serde::de::DeserializeOwned;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// A registered agent.
#[napi]
pub struct NativeAgent {
    pub(crate) agent: Agent,
    /// Its broker's calls connection on this thread's loop, if it has one.
    calls: Option<Rc<Link>>,
    /// Its number in [`SLOTS`] (0: none yet), for the raw entry points of
    /// the hottest calls (`rawcall`).
    slot: Cell<u32>,
}

thread_local! {
    /// The agents (of this thread) the raw entry points can name, by slot
    /// number - 1; a slot is emptied when its agent drops (JS thread: napi
    /// finalizes a wrapped object there), so a number never names a freed
    /// agent.
    static SLOTS: RefCell<Slots> = const { RefCell::new(Slots { agents: Vec::new(), free: Vec::new() }) };
}

struct Slots {
    agents: Vec<*const NativeAgent>,
    free: Vec<u32>,
}

impl Drop for NativeAgent {
    fn drop(&mut self) {
        let slot = self.slot.get();
        if slot != 0 {
            let _ = SLOTS.try_with(|s| {
                let mut s = s.borrow_mut();
                s.agents[slot as usize - 1] = std::ptr::null();
                s.free.push(slot);
            });
        }
    }
}

impl NativeAgent {
    pub(crate) fn new(agent: Agent, calls: Option<Rc<Link>>) -> NativeAgent {
        NativeAgent {
            agent,
            calls,
            slot: Cell::new(0),
        }
    }

    /// The agent in `slot` (JS thread, for the duration of a JS call into
    /// the addon: index.js's `Agent` making the call holds the agent's JS
    /// object, and napi runs a wrapped object's finalizer from a later
    /// task, never inside a call).
    #[allow(unsafe_code)]
    pub(crate) fn by_slot<'a>(slot: u32) -> Option<&'a NativeAgent> {
        let p = SLOTS.with(|s| {
            let s = s.borrow();
            (slot as usize)
                .checked_sub(1)
                .and_then(|i| s.agents.get(i).copied())
        })?;
        // SAFETY: a slot holds the address of a live agent (napi's boxed
        // value, which does not move), cleared when it drops.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// The agent's token, as every call carries it.
    fn token(&self) -> Option<String> {
        Some(self.agent.token().to_owned())
    }

    /// Submits `call` (built from the arguments, or why they could not be
    /// read) on the loop's calls connection when there is one, else on the
    /// client's; its answer settles the promise as `shape` says.
    fn call<'env>(
        &self,
        env: &'env Env,
        call: Result<Call, Failure>,
        shape: Shape,
    ) -> JsPromise<'env> {
        // The checks the client's own submission makes: a deregistered
        // agent or a closed connection fails before anything is sent.
        let call = call.and_then(|c| {
            if self.agent.is_deregistered() {
                return Err(ClientError::Deregistered(self.agent.id().to_owned()).into());
            }
            if let Some(r) = self.agent.client().close_reason() {
                return Err(ClientError::Closed(r).into());
            }
            Ok(c)
        });
        if let Some(link) = self.calls.as_deref().filter(|l| l.closed().is_none()) {
            return match call {
                Ok(c) => link.submit(env, c, shape),
                Err(f) => {
                    let (deferred, promise) = settle::raw_promise(env)?;
                    settle::settle_now(env.raw(), deferred, Err(f));
                    Ok(promise)
                }
            };
        }
        let (ticket, promise) = settle::promise(env)?;
        match call.map(|c| self.agent.client().call_async(c)) {
            Ok(Ok(p)) => p.on_complete(move |r| {
                ticket.settle(
                    r.map_err(Failure::from)
                        .and_then(|o| (shape.typed)(o).map_err(Failure::from)),
                )
            }),
            Ok(Err(e)) => ticket.settle(Err(e.into())),
            Err(f) => ticket.settle(Err(f)),
        }
        Ok(promise)
    }
}

/// How each answer becomes its promise's value (what `a2a_client::Agent`'s
/// typed methods return, as JSON for V8 to parse).
mod render {
    use super::*;

    fn json<T: serde::Serialize>(v: &T) -> Result<Payload, ClientError> {
        serde_json::to_string(v)
            .map(Payload::Json)
            .map_err(|e| ClientError::Protocol(format!("cannot render the answer: {e}")))
    }

    fn unexpected(o: &Outcome) -> ClientError {
        ClientError::Protocol(format!("unexpected answer ({:?})", o.kind()))
    }

    pub(super) fn task(o: Outcome) -> Result<Payload, ClientError> {
        match o {
            Outcome::Task(r) => json(&r.task),
            o => Err(unexpected(&o)),
        }
    }

    pub(super) fn tasks(o: Outcome) -> Result<Payload, ClientError> {
        match o {
            Outcome::Tasks(r) => json(&r.tasks),
            o => Err(unexpected(&o)),
        }
    }

    pub(super) fn agents(o: Outcome) -> Result<Payload, ClientError> {
        match o {
            Outcome::Agents(r) => json(&r.agents),
            o => Err(unexpected(&o)),
        }
    }

    pub(super) fn config(o: Outcome) -> Result<Payload, ClientError> {
        match o {
            Outcome::Config(r) => json(&r.config),
            o => Err(unexpected(&o)),
        }
    }

    pub(super) fn task_list(o: Outcome) -> Result<Payload, ClientError> {
        match o {
            Outcome::TaskList(r) => json(&r),
            o => Err(unexpected(&o)),
        }
    }

    pub(super) fn lease(o: Outcome) -> Result<Payload, ClientError> {
        match o {
            Outcome::Lease(r) => json(&r.lease),
            o => Err(unexpected(&o)),
        }
    }

    pub(super) fn leases(o: Outcome) -> Result<Payload, ClientError> {
        match o {
            Outcome::Leases(r) => json(&r.leases),
            o => Err(unexpected(&o)),
        }
    }

    pub(super) fn ok(o: Outcome) -> Result<Payload, ClientError> {
        match o {
            Outcome::Ok(_) => Ok(Payload::Undefined),
            o => Err(unexpected(&o)),
        }
    }

    const fn shape(
        typed: fn(Outcome) -> Result<Payload, ClientError>,
        member: Option<&'static str>,
    ) -> Shape {
        Shape {
            typed,
            member,
            undefined: false,
        }
    }

    /// The whole result, as the protocol writes it (`agent.request`).
    pub(super) fn whole(o: Outcome) -> Result<Payload, ClientError> {
        Ok(Payload::Json(o.to_json().to_string()))
    }

    pub(super) const WHOLE: Shape = shape(whole, None);
    pub(super) const TASK: Shape = shape(task, Some("task"));
    pub(super) const TASKS: Shape = shape(tasks, Some("tasks"));
    pub(super) const AGENTS: Shape = shape(agents, Some("agents"));
    pub(super) const CONFIG: Shape = shape(config, Some("config"));
    pub(super) const TASK_LIST: Shape = shape(task_list, None);
    pub(super) const LEASE: Shape = shape(lease, Some("lease"));
    pub(super) const LEASES: Shape = shape(leases, Some("leases"));
    pub(super) const OK: Shape = Shape {
        typed: ok,
        member: None,
        undefined: true,
    };
}

pub(crate) type JsPromise<'env> = napi::Result<PromiseRaw<'env, Unknown<'env>>>;

/// Reads an argument, or rejects the call with `-32602`.
fn arg<T: DeserializeOwned>(what: &str, json: &str) -> Result<T, Failure> {
    serde_json::from_str(json).map_err(|e| Failure::invalid(what, e))
}

/// The call of `method` with `params` (a JSON object, or none) and the
/// agent's `token`; the connection's own calls (the handshake, a
/// registration) are the broker's, not an agent's.
fn agent_call(method: &str, params: Option<&str>, token: &str) -> Result<Call, Failure> {
    let mut params: serde_json::Map<String, serde_json::Value> =
        opt_arg("params", params)?.unwrap_or_default();
    params.insert("token".into(), token.into());
    let call = Call::from_json(method, &serde_json::Value::Object(params).to_string())
        .map_err(|e| Failure::from(ClientError::Rpc(e)))?;
    match call {
        Call::Handshake(_) | Call::Register(_) => Err(Failure::invalid(
            "method",
            format!("{method} is the connection's, not an agent's: use Broker.connect or broker.register"),
        )),
        call => Ok(call),
    }
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

    /// The agent's number for the raw entry points of its calls on the
    /// loop's calls connection (`rawcall`), or 0 where it has none.
    #[napi(getter)]
    pub fn call_slot(&self) -> u32 {
        if self.calls.is_none() {
            return 0;
        }
        if self.slot.get() == 0 {
            // `self` is the wrapped value now (a getter runs on it), at the
            // address it keeps until it drops.
            let slot = SLOTS.with(|s| {
                let mut s = s.borrow_mut();
                let me = self as *const NativeAgent;
                match s.free.pop() {
                    Some(n) => {
                        s.agents[n as usize - 1] = me;
                        n
                    }
                    None => {
                        s.agents.push(me);
                        s.agents.len() as u32
                    }
                }
            });
            self.slot.set(slot);
        }
        self.slot.get()
    }

    /// Has `deregister` succeeded?
    #[napi(getter)]
    pub fn deregistered(&self) -> bool {
        self.agent.is_deregistered()
    }

    /// Any agent method of the protocol by its wire name (`a2a.leases.renew`),
    /// as this agent: `params` a JSON object without the token, which is
    /// filled in; resolves with the method's whole result as the protocol
    /// writes it. A method the broker's method table gains is reachable
    /// here before it has a method of its own.
    #[napi]
    pub fn request<'env>(
        &self,
        env: &'env Env,
        method: String,
        params: Option<String>,
    ) -> JsPromise<'env> {
        let call = agent_call(&method, params.as_deref(), self.agent.token());
        self.call(env, call, render::WHOLE)
    }

    /// `a2a.message.send` → Task (or Task[] when `message.to` is `"*"`).
    #[napi]
    pub fn send<'env>(
        &self,
        env: &'env Env,
        message: String,
        configuration: Option<String>,
    ) -> JsPromise<'env> {
        let parsed = arg::<Message>("message", &message).and_then(|m| {
            Ok((
                m,
                opt_arg::<SendConfiguration>("configuration", configuration.as_deref())?,
            ))
        });
        let broadcast = matches!(&parsed, Ok((m, _)) if m.to.as_deref() == Some("*"));
        let call = parsed.map(|(message, configuration)| {
            Call::Send(SendParams {
                token: self.token(),
                message,
                configuration,
            })
        });
        let shape = if broadcast {
            render::TASKS
        } else {
            render::TASK
        };
        self.call(env, call, shape)
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
        let call = count("historyLength", history_length).map(|history_length| {
            Call::Get(GetParams {
                token: self.token(),
                id,
                history_length,
            })
        });
        self.call(env, call, render::TASK)
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
        let call = serde_json::from_value::<State>(serde_json::Value::String(state))
            .map_err(|e| Failure::invalid("state", e))
            .and_then(|s| Ok((s, opt_arg::<Message>("message", message.as_deref())?)))
            .map(|(state, message)| {
                Call::Status(StatusParams {
                    token: self.token(),
                    id,
                    state,
                    message,
                })
            });
        self.call(env, call, render::TASK)
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
        let call = arg::<Artifact>("artifact", &artifact).map(|artifact| {
            Call::Artifact(ArtifactParams {
                token: self.token(),
                id,
                artifact,
                append: append.unwrap_or(false),
                last_chunk: last_chunk.unwrap_or(true),
            })
        });
        self.call(env, call, render::TASK)
    }

    /// `a2a.tasks.cancel` (either party's) → Task.
    #[napi]
    pub fn cancel<'env>(
        &self,
        env: &'env Env,
        id: String,
        message: Option<String>,
    ) -> JsPromise<'env> {
        let call = opt_arg::<Message>("message", message.as_deref()).map(|message| {
            Call::Cancel(CancelParams {
                token: self.token(),
                id,
                message,
            })
        });
        self.call(env, call, render::TASK)
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
        let call = arg::<PushConfig>("config", &config).map(|config| {
            Call::PushSet(PushSetParams {
                token: self.token(),
                task_id,
                config,
            })
        });
        self.call(env, call, render::CONFIG)
    }

    /// `a2a.tasks.pushNotificationConfig.get` → PushConfig or null.
    #[napi]
    pub fn get_push<'env>(&self, env: &'env Env, task_id: String) -> JsPromise<'env> {
        let call = Call::PushGet(PushGetParams {
            token: self.token(),
            task_id,
        });
        self.call(env, Ok(call), render::CONFIG)
    }

    /// `a2a.agents.list` → AgentCard[].
    #[napi]
    pub fn list<'env>(&self, env: &'env Env, skill: Option<String>) -> JsPromise<'env> {
        let call = Call::ListAgents(ListAgentsParams {
            token: self.token(),
            skill,
        });
        self.call(env, Ok(call), render::AGENTS)
    }

    /// `a2a.tasks.list` (ext) → `{tasks, nextCursor?}`; `query` is JSON
    /// `{role?, state?, limit?, cursor?}`.
    #[napi]
    pub fn list_tasks<'env>(&self, env: &'env Env, query: Option<String>) -> JsPromise<'env> {
        let call = opt_arg::<TaskQueryJson>("query", query.as_deref()).map(|q| {
            let q = q.unwrap_or_default();
            Call::ListTasks(ListTasksParams {
                token: self.token(),
                role: q.role.unwrap_or_default(),
                state: q.state,
                limit: q.limit,
                cursor: q.cursor,
            })
        });
        self.call(env, call, render::TASK_LIST)
    }

    /// `a2a.leases.acquire` (ext) → Lease; `request` is JSON `{paths,
    /// ttlSeconds, exclusive?, reason?, waitSeconds?}`.
    #[napi]
    pub fn lease_acquire<'env>(&self, env: &'env Env, request: String) -> JsPromise<'env> {
        let call = arg::<LeaseJson>("lease", &request).map(|r| {
            Call::LeaseAcquire(AcquireLeaseParams {
                token: self.token(),
                paths: r.paths,
                ttl_seconds: i64::try_from(r.ttl_seconds).unwrap_or(i64::MAX),
                exclusive: r.exclusive.unwrap_or(true),
                reason: r.reason,
                wait_seconds: r.wait_seconds.map(|w| i64::try_from(w).unwrap_or(i64::MAX)),
            })
        });
        self.call(env, call, render::LEASE)
    }

    /// `a2a.leases.renew` (ext) → Lease.
    #[napi]
    pub fn lease_renew<'env>(
        &self,
        env: &'env Env,
        lease_id: String,
        ttl_seconds: f64,
    ) -> JsPromise<'env> {
        let call = count("ttlSeconds", Some(ttl_seconds)).map(|t| {
            Call::LeaseRenew(RenewLeaseParams {
                token: self.token(),
                lease_id,
                ttl_seconds: i64::try_from(t.unwrap_or(0)).unwrap_or(i64::MAX),
            })
        });
        self.call(env, call, render::LEASE)
    }

    /// `a2a.leases.release` (ext) → undefined.
    #[napi]
    pub fn lease_release<'env>(&self, env: &'env Env, lease_id: String) -> JsPromise<'env> {
        let call = Call::LeaseRelease(ReleaseLeaseParams {
            token: self.token(),
            lease_id,
        });
        self.call(env, Ok(call), render::OK)
    }

    /// `a2a.leases.list` (ext) → Lease[] (those overlapping `path`, when given).
    #[napi]
    pub fn lease_list<'env>(&self, env: &'env Env, path: Option<String>) -> JsPromise<'env> {
        let call = Call::LeaseList(ListLeasesParams {
            token: self.token(),
            path,
        });
        self.call(env, Ok(call), render::LEASES)
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
