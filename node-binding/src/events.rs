//! An agent's events in JS: `onEvent` (a callback) and `wait` (a promise).
//!
//! - `onEvent(cb)` installs an `a2a_client` event handler that runs on the
//!   connection's reader thread. It appends each event, rendered to JSON
//!   there (off the JS thread), to the agent's batch and, when no delivery
//!   is already on its way, calls a weak threadsafe function: events that
//!   arrive while the JS thread is busy ride on the next delivery, so a
//!   burst costs one call and one decode of one batch. A busy stream is
//!   paced: once the JS thread has taken a batch, the next delivery waits
//!   until one interval (500 µs) after it (see `pace`): the JS thread's
//!   wake-up, not decoding, is most of an event's cost there. The function
//!   is weak (unreferenced): an agent that merely listens does not keep
//!   the process alive. `mode = "objects"` instead builds the events as JS
//!   objects through napi (for the benchmark that chose JSON).
//! - `wait(timeoutSeconds)` takes what is queued or, if nothing is, waits
//!   on the agent's event stream on this addon's one timer thread (a tokio
//!   runtime of one worker, never a libuv pool thread); the answer is one
//!   JSON array, settled like any call (see `settle`).

use crate::agent::NativeAgent;
use crate::error::Failure;
use crate::settle::{self, Payload};
use a2a_client::{Agent, ClientError, CloseReason, Event};
use napi::bindgen_prelude::{Function, PromiseRaw, ToNapiValue, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{sys, Env, JsValue, Status};
use napi_derive::napi;
use parking_lot::Mutex;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Most events one `wait` returns (the rest stay queued for the next).
const WAIT_MAX_EVENTS: usize = 4096;

/// How events cross into JS (see the module doc).
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// One JSON array per batch, parsed by V8 here.
    Json,
    /// Objects built through napi (serde).
    Objects,
    /// One compact string per batch (see `compact`), decoded in JS.
    Compact,
}

/// Events waiting for the JS thread.
#[derive(Default)]
struct BatchState {
    /// `Json`: the events' JSON texts joined by commas (no brackets);
    /// `Compact`: the compact batch.
    json: String,
    /// `Objects`: the events themselves.
    events: Vec<Event>,
    /// A threadsafe call is on its way (or deferred, see [`pace`]) and
    /// will take everything here.
    scheduled: bool,
    /// When the JS thread last took a batch.
    last_delivery: Option<Instant>,
}

/// One agent's batch, shared by the handler and the deliveries.
struct Batch {
    mode: Mode,
    st: Mutex<BatchState>,
}

/// The value of one threadsafe call: converted on the JS thread (into an
/// array of events) by taking the whole batch at that moment.
pub struct EventBatch(Arc<Batch>);

impl ToNapiValue for EventBatch {
    #[allow(unsafe_code)]
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let batch = val.0;
        let (json, events) = {
            let mut st = batch.st.lock();
            st.scheduled = false;
            st.last_delivery = Some(Instant::now());
            (std::mem::take(&mut st.json), std::mem::take(&mut st.events))
        };
        match batch.mode {
            Mode::Json => {
                let text = format!("[{json}]");
                crate::js::parse_json(env, &text)
                    .map_err(|_| napi::Error::new(Status::GenericFailure, "bad event batch"))
            }
            Mode::Compact => {
                // SAFETY: delegated to napi-rs's String conversion.
                #[allow(unsafe_code)]
                unsafe {
                    String::to_napi_value(env, json)
                }
            }
            Mode::Objects => {
                let env = Env::from_raw(env);
                let v = env.to_js_value(&events)?;
                Ok(v.raw())
            }
        }
    }
}

type EventFn = ThreadsafeFunction<EventBatch, (), EventBatch, Status, false, true>;

/// The threadsafe function and its batch, owned by the installed handler
/// (and, while a delivery is deferred, by the pacing thread).
#[derive(Clone)]
struct Sink {
    tsfn: Arc<EventFn>,
    batch: Arc<Batch>,
}

impl Sink {
    /// Reader thread: adds one event; wakes the JS thread if nobody has.
    fn push(&self, ev: Event) {
        let mut st = self.batch.st.lock();
        match self.batch.mode {
            Mode::Json => {
                if !st.json.is_empty() {
                    st.json.push(',');
                }
                // Writing into a String cannot fail for these types.
                let mut buf = std::mem::take(&mut st.json).into_bytes();
                let _ = serde_json::to_writer(&mut buf, &ev);
                st.json = String::from_utf8(buf).unwrap_or_default();
            }
            Mode::Objects => st.events.push(ev),
            Mode::Compact => crate::compact::push_event(&mut st.json, &ev),
        }
        if !st.scheduled {
            st.scheduled = true;
            // A busy stream (the JS thread took a batch less than one
            // pacing interval ago) is delivered at most once per interval:
            // each delivery costs the JS thread a wake-up that outweighs
            // decoding a dozen events, so fewer, larger batches. An event
            // after a quiet spell goes at once.
            let due = st.last_delivery.map(|t| t + pace::interval());
            drop(st);
            match due {
                Some(due) if due > Instant::now() => pace::defer(due, self.clone()),
                _ => self.deliver(),
            }
        }
    }

    /// Asks the JS thread to take the batch.
    fn deliver(&self) {
        let status = self.tsfn.call(
            EventBatch(self.batch.clone()),
            ThreadsafeFunctionCallMode::NonBlocking,
        );
        if status != Status::Ok {
            // The environment is closing: nothing will take the batch.
            self.batch.st.lock().scheduled = false;
        }
    }
}

/// Deferred deliveries of busy streams: one thread for the addon, which
/// sleeps until the earliest due delivery.
mod pace {
    use super::Sink;
    use parking_lot::{Condvar, Mutex};
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    /// Default pacing interval: bounds the latency a busy stream adds.
    const DEFAULT_INTERVAL: Duration = Duration::from_micros(500);

    /// The pacing interval (`A2A_NODE_EVENT_PACE_US` overrides it; `0`
    /// delivers every batch at once).
    pub(super) fn interval() -> Duration {
        static I: OnceLock<Duration> = OnceLock::new();
        *I.get_or_init(|| {
            std::env::var("A2A_NODE_EVENT_PACE_US")
                .ok()
                .and_then(|v| v.parse().ok())
                .map_or(DEFAULT_INTERVAL, Duration::from_micros)
        })
    }

    struct Queue {
        /// Deferred deliveries: few (one per busy agent), so a scan for
        /// the earliest is cheaper than keeping them ordered.
        due: Mutex<Vec<(Instant, Sink)>>,
        cv: Condvar,
    }

    /// The pacing thread's queue, or `None` if the thread could not start
    /// (then every batch is delivered at once).
    fn queue() -> Option<&'static Queue> {
        static Q: OnceLock<Option<&'static Queue>> = OnceLock::new();
        *Q.get_or_init(|| {
            let q: &'static Queue = Box::leak(Box::new(Queue {
                due: Mutex::new(Vec::new()),
                cv: Condvar::new(),
            }));
            std::thread::Builder::new()
                .name("a2a-node-pace".into())
                .spawn(move || run(q))
                .ok()
                .map(|_| q)
        })
    }

    fn run(q: &'static Queue) {
        let mut due = q.due.lock();
        loop {
            let Some((i, at)) = due
                .iter()
                .enumerate()
                .map(|(i, (t, _))| (i, *t))
                .min_by_key(|&(_, t)| t)
            else {
                q.cv.wait(&mut due);
                continue;
            };
            if at > Instant::now() {
                // Woken early by a new entry (maybe due sooner): rescan.
                q.cv.wait_until(&mut due, at);
                continue;
            }
            let (_, sink) = due.swap_remove(i);
            drop(due);
            sink.deliver();
            due = q.due.lock();
        }
    }

    /// Delivers `sink`'s batch at `at`.
    pub(super) fn defer(at: Instant, sink: Sink) {
        let Some(q) = queue() else {
            return sink.deliver();
        };
        q.due.lock().push((at, sink));
        q.cv.notify_one();
    }
}

/// The addon's timer thread for `wait`.
fn runtime() -> Result<&'static tokio::runtime::Runtime, Failure> {
    static RT: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("a2a-node-wait")
            .enable_time()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(Failure::internal)
}

/// Why no event can come any more.
fn gone(agent: &Agent) -> ClientError {
    if agent.is_deregistered() {
        return ClientError::Deregistered(agent.id().to_owned());
    }
    ClientError::Closed(
        agent
            .client()
            .close_reason()
            .unwrap_or(CloseReason::ByBroker),
    )
}

/// What is queued, else the first event within `timeout` and whatever
/// came with it; empty when the timeout passes.
async fn wait_events(agent: Agent, timeout: Duration) -> Result<Vec<Event>, ClientError> {
    let mut out = Vec::new();
    if agent.try_events(&mut out, WAIT_MAX_EVENTS) > 0 || timeout.is_zero() {
        return Ok(out);
    }
    let mut stream = agent.events();
    let next = poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut stream), cx));
    match tokio::time::timeout(timeout, next).await {
        Err(_elapsed) => Ok(out),
        Ok(None) => Err(gone(&agent)),
        Ok(Some(first)) => {
            out.push(first);
            agent.try_events(&mut out, WAIT_MAX_EVENTS - 1);
            Ok(out)
        }
    }
}

#[napi]
impl NativeAgent {
    /// Events as they arrive: `callback(batch)` on the JS thread, one call
    /// per batch, in arrival order. `null` removes it (events queue for
    /// `wait` again). `mode`: `"json"` (default; `batch` is an array of
    /// events), `"objects"` (the same, built through napi) or `"compact"`
    /// (`batch` is a compact string for `index.js` to decode).
    #[napi]
    pub fn on_event(
        &self,
        callback: Option<Function<'_, EventBatch, ()>>,
        mode: Option<String>,
    ) -> napi::Result<()> {
        let Some(cb) = callback else {
            self.agent.set_event_handler(None);
            return Ok(());
        };
        let mode = match mode.as_deref() {
            None | Some("json") => Mode::Json,
            Some("objects") => Mode::Objects,
            Some("compact") => Mode::Compact,
            Some(other) => {
                return Err(napi::Error::new(
                    Status::InvalidArg,
                    format!("unknown event mode {other:?}"),
                ))
            }
        };
        let tsfn: EventFn = cb
            .build_threadsafe_function::<EventBatch>()
            .weak::<true>()
            .callee_handled::<false>()
            .build_callback(|ctx| Ok(ctx.value))?;
        let sink = Sink {
            tsfn: Arc::new(tsfn),
            batch: Arc::new(Batch {
                mode,
                st: Mutex::new(BatchState::default()),
            }),
        };
        self.agent
            .set_event_handler(Some(Box::new(move |_agent, ev| sink.push(ev))));
        Ok(())
    }

    /// `a2a.events.wait` for JS: resolves with the events queued (at most
    /// 4096), or the first to arrive within `timeoutSeconds` (default 0:
    /// no waiting) with those behind it, or `[]`; with `compact`, as one
    /// compact string instead (see `compact`). Rejects with
    /// `deregistered` / `closed` when no event can come any more.
    #[napi]
    pub fn wait<'env>(
        &self,
        env: &'env Env,
        timeout_seconds: Option<f64>,
        compact: Option<bool>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let (ticket, promise) = settle::promise(env)?;
        let timeout = match Duration::try_from_secs_f64(timeout_seconds.unwrap_or(0.0)) {
            Ok(t) => t,
            Err(e) => {
                ticket.settle(Err(Failure::invalid("timeoutSeconds", e)));
                return Ok(promise);
            }
        };
        match runtime() {
            Ok(rt) => {
                let agent = self.agent.clone();
                rt.spawn(async move {
                    let r = wait_events(agent, timeout).await;
                    if compact == Some(true) {
                        ticket.settle(
                            r.map(|evs| Payload::Text(crate::compact::batch(&evs)))
                                .map_err(Failure::from),
                        );
                    } else {
                        ticket.settle_json(r);
                    }
                });
            }
            Err(f) => ticket.settle(Err(f)),
        }
        Ok(promise)
    }
}
