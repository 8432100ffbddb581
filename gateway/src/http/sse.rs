//! SSE streams of one task: each event on one `data:` line, a whole
//! JSON-RPC response (`{"jsonrpc","id","result": StreamResponse}`) for the
//! JSON-RPC binding, the bare `StreamResponse` for HTTP+JSON; the task
//! first, then its status and artifact updates newer than that task, and
//! the end of the stream after a terminal state (and, for
//! `SendStreamingMessage`, after an interrupted one: the client answers
//! with a new request). A subscriber that falls too far behind, or a
//! stream that outlives the gateway's bound, is ended, and so is every
//! stream when the gateway stops; the client can subscribe again.

use crate::compat::v03;
use crate::core::HubEvent;
use crate::mapping::{self, TaskView};
use crate::v1;
use a2a_proto::types::{State, StreamEvent, Task};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;
use tokio::time::Instant;

struct St {
    /// The JSON-RPC id events are wrapped with (none: bare events).
    envelope: Option<Value>,
    task_id: String,
    last_version: u64,
    queue: VecDeque<Value>,
    rx: broadcast::Receiver<HubEvent>,
    done: bool,
    /// End on an interrupted state too.
    end_on_interrupt: bool,
    deadline: Instant,
    /// True once the gateway stops (`HttpConfig::stopping`).
    stopping: watch::Receiver<bool>,
    /// Events in A2A v0.3's shapes (`compat::v03`), for a v0.3 request.
    v03: bool,
}

/// Does this state end the stream?
fn ends(state: State, end_on_interrupt: bool) -> bool {
    state.is_terminal() || (end_on_interrupt && state.is_interrupted())
}

/// A stream of one JSON-RPC error event (how a v0.3 server answers a
/// streaming call that fails).
pub fn error_event(id: Value, error: Value) -> Response {
    let line = json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string();
    let once = stream::once(async move { Ok::<Event, Infallible>(Event::default().data(line)) });
    Sse::new(once).into_response()
}

/// The SSE response of a task stream starting at `snapshot` (`v03`: in
/// A2A v0.3's shapes).
#[allow(clippy::too_many_arguments)]
pub fn stream_task(
    envelope: Option<Value>,
    snapshot: Task,
    rx: broadcast::Receiver<HubEvent>,
    view: TaskView,
    end_on_interrupt: bool,
    max_life: Duration,
    stopping: watch::Receiver<bool>,
    v03: bool,
) -> Response {
    let first = v1::StreamResponse::Task(mapping::task_out(&snapshot, view));
    let mut first = serde_json::to_value(first).unwrap_or(Value::Null);
    if v03 {
        first = v03::event_out(&first, false);
    }
    let mut queue = VecDeque::new();
    queue.push_back(first);
    let st = St {
        envelope,
        task_id: snapshot.id.clone(),
        last_version: snapshot.version,
        queue,
        rx,
        done: ends(snapshot.status.state, end_on_interrupt),
        end_on_interrupt,
        deadline: Instant::now() + max_life,
        stopping,
        v03,
    };
    let events = stream::unfold(st, |mut st| async move {
        loop {
            if let Some(result) = st.queue.pop_front() {
                let line = match &st.envelope {
                    Some(id) => json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
                    None => result.to_string(),
                };
                return Some((Ok::<Event, Infallible>(Event::default().data(line)), st));
            }
            if st.done {
                return None;
            }
            let next = tokio::select! {
                next = tokio::time::timeout_at(st.deadline, st.rx.recv()) => next,
                _ = st.stopping.wait_for(|stop| *stop) => return None,
            };
            match next {
                Err(_) | Ok(Err(RecvError::Closed)) | Ok(Err(RecvError::Lagged(_))) => return None,
                Ok(Ok(ev)) => {
                    if ev.task_id != st.task_id || ev.version <= st.last_version {
                        continue;
                    }
                    st.last_version = ev.version;
                    if let StreamEvent::Status(s) = &*ev.event {
                        st.done = ends(s.status.state, st.end_on_interrupt);
                    }
                    let out = mapping::event_out(&ev.event);
                    let mut out = serde_json::to_value(out).unwrap_or(Value::Null);
                    if st.v03 {
                        // v0.3's `final`: this event ends the stream.
                        out = v03::event_out(&out, st.done);
                    }
                    st.queue.push_back(out);
                }
            }
        }
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
