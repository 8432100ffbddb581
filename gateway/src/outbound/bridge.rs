//! One remote agent as a broker peer: the bridge owns the agent the gateway
//! registered under the remote card's name, reads the tasks local delegates
//! send it, and runs one actor per task that forwards the task's messages to
//! the remote (`SendStreamingMessage`, or `SendMessage` for a remote that
//! does not stream) and reflects what the remote answers back onto the
//! broker task (`a2a.tasks.status`, `a2a.tasks.artifact`).
//!
//! Exactly once across restarts: the remote `messageId` of each forwarded
//! broker message is recorded (in the gateway's state file) before it is
//! sent, and the remote task id as soon as the remote names it: a
//! non-streaming remote is sent `returnImmediately: true` and then polled,
//! so the id is known (and a cancel can reach the task) while it runs; a
//! streaming remote names it in its first event. A bridge that starts
//! again (after a crash or a stop) resumes every open task it has a remote
//! task for (polling it), forwards the `submitted` ones not yet sent, and
//! cancels the remote side of tasks the broker ended meanwhile. A record
//! is written before its send, so after a restart the remote is asked
//! whether it has the message: a recorded message is sent again (under the
//! same `messageId`) only when the remote task's history lacks it, or,
//! before the remote named a task, when none of the remote's newest tasks
//! holds it (a task found there is taken up instead); and a requester's
//! latest message that was never recorded (sent while no bridge ran, or
//! lost between its event and the record) is forwarded when its task
//! resumes. A connection that breaks after a first message went out and
//! before the remote named its task is looked up the same way: a task the
//! remote holds is followed, not failed here while it runs there.
//!
//! An unreachable remote (calls failing without a word about the task for
//! `limits::REMOTE_UNREACHABLE_AFTER`) is reported on each task waiting on
//! it by a `working` status message marked `metadata.a2aGatewayNotice`
//! ([`NOTICE_KEY`]); the task keeps its state and is polled, and takes the
//! remote's real state when it answers again (after a second notice).
//! Cancels are retried while it is unreachable, and owed ones stay
//! recorded for the next start. The remote's echo of the requester's own
//! message is never reflected (`translate::is_user_message`), and a
//! cancel's reason crosses as `CancelTask` `metadata.reason`: both hosts
//! hold one history.
//!
//! Architecture invariant: a broker task has at most one actor, and only
//! that actor calls the broker about it, so the reflected states of one
//! task follow the remote's order. The bridge loop never awaits a remote:
//! a slow remote holds its own tasks' actors, never the others'.

use super::card::{CachedCard, Endpoint};
use super::rpc::{CardFetch, RemoteError, RemoteRpc};
use super::translate::{
    artifact_from_v1, message_from_v1, reflect, send_params, status_steps, Reflect,
};
use crate::conn::Peer;
use crate::limits::{
    REMOTE_CANCEL_RETRY, REMOTE_LOOKUP_PAGE, REMOTE_PROBE_EVERY, REMOTE_PROBE_TIMEOUT,
    REMOTE_UNREACHABLE_AFTER,
};
use crate::store::Store;
use a2a_client::proto::limits::A2A_MAX_ID_BYTES;
use a2a_client::proto::types::{Object, Role, StreamEvent, TaskEventParams};
use a2a_client::{new_id, text_message, ClientError, Event, ListRole, Message, State, TaskQuery};
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify};

/// How long one broker call may take before the bridge gives up on it (the
/// broker answers in milliseconds; this only fires for one that stopped).
const BROKER_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a stopping bridge waits for its actors to cancel their remote
/// tasks before it leaves the broker anyway.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The shortest gap between two card fetches triggered by failures, so that
/// many failing tasks cost the remote one fetch, not one each.
const REFRESH_DEBOUNCE: Duration = Duration::from_secs(1);

/// How long a task is polled after its stream ended unsettled, and the
/// bounds of the polling interval.
#[derive(Debug, Clone)]
pub struct SettleOptions {
    /// After this, the broker task fails and the remote one is canceled.
    pub timeout: Duration,
    pub poll_min: Duration,
    pub poll_max: Duration,
}

impl Default for SettleOptions {
    fn default() -> Self {
        SettleOptions {
            timeout: Duration::from_secs(3600),
            poll_min: Duration::from_millis(200),
            poll_max: Duration::from_secs(5),
        }
    }
}

/// What a bridge shares with its task actors.
pub(crate) struct Shared {
    /// The agent registered for the remote (on the gateway's runtime:
    /// `crate::conn`).
    pub agent: Peer,
    pub rpc: RemoteRpc,
    /// The URL the remote was added by (its card is fetched from there).
    pub base_url: String,
    /// The card as last fetched.
    pub card: RwLock<CachedCard>,
    /// When a failure last made the card be fetched (the debounce).
    pub failure_refresh: Mutex<Option<Instant>>,
    /// When the remote last answered a card fetch: tasks waiting on an
    /// unreachable remote resume as soon as this moves past their first
    /// failure.
    pub last_answer: Mutex<Option<Instant>>,
    /// Broker context id -> the remote context id its first task got, so
    /// that one local conversation stays one remote context.
    pub contexts: Mutex<HashMap<String, String>>,
    pub settle: SettleOptions,
    /// Ends with the [`super::Remote`] handle (its sender is dropped): the
    /// bridge and every task actor stop at once, as in a crash, without
    /// deregistering.
    pub gone: tokio::sync::watch::Receiver<()>,
    /// The durable record of remote tasks and forwarded messages.
    pub store: Store,
    /// This bridge's key in the store (broker context and peer id).
    pub key: String,
    /// Sends under way whose remote task is not recorded yet: a bridge
    /// that suspends waits for them to reach zero.
    pub sending: AtomicUsize,
}

/// Counts a send under way until dropped.
struct Sending<'a>(&'a AtomicUsize);

impl<'a> Sending<'a> {
    fn new(n: &'a AtomicUsize) -> Sending<'a> {
        n.fetch_add(1, Ordering::AcqRel);
        Sending(n)
    }
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Shared {
    fn endpoint(&self) -> (Endpoint, bool) {
        let c = self.card.read();
        (c.card.endpoint.clone(), c.card.streaming)
    }

    /// One call at the remote's current endpoint within
    /// REMOTE_PROBE_TIMEOUT: the reads and cancels that follow up on a
    /// remote task, each retried by its caller.
    async fn probe(&self, method: &str, params: Value) -> Result<Value, RemoteError> {
        let (endpoint, _) = self.endpoint();
        self.rpc
            .call_within(&endpoint, method, params, REMOTE_PROBE_TIMEOUT)
            .await
    }

    /// Fetches the card again (conditionally); returns when it should be
    /// fetched next. A failed fetch keeps the card in use.
    pub async fn refresh_card(&self) -> Duration {
        let cached = self.card.read().clone();
        let fetched = self.rpc.fetch_card(&self.base_url, Some(&cached)).await;
        if fetched.is_ok() {
            *self.last_answer.lock() = Some(Instant::now());
        }
        match fetched {
            Ok(CardFetch::NotModified(after)) => after,
            Ok(CardFetch::Fresh(fresh)) => {
                if fresh.card.name != cached.card.name {
                    // The broker peer keeps the name it registered under:
                    // renaming would strand the delegates addressing it.
                    tracing::warn!(
                        remote = %self.base_url,
                        old = %cached.card.name,
                        new = %fresh.card.name,
                        "remote agent renamed; its broker peer keeps the old name"
                    );
                }
                if fresh.card.endpoint != cached.card.endpoint {
                    tracing::info!(remote = %self.base_url, endpoint = %fresh.card.endpoint, "remote agent endpoint changed");
                }
                let after = fresh.refresh_after;
                *self.card.write() = fresh;
                after
            }
            Err(e) => {
                tracing::warn!(remote = %self.base_url, error = %e, "agent card refresh failed");
                self.rpc.options().refresh_min
            }
        }
    }

    /// A refresh because a call failed, unless one just happened.
    async fn refresh_after_failure(&self) {
        {
            let mut last = self.failure_refresh.lock();
            if last.is_some_and(|t| t.elapsed() < REFRESH_DEBOUNCE) {
                return;
            }
            *last = Some(Instant::now());
        }
        self.refresh_card().await;
    }
}

/// A command to a task's actor.
#[derive(Debug)]
enum Cmd {
    /// Forward this requester message; the broker task was in `state`
    /// when it arrived.
    Forward { message: Message, state: State },
    /// The requester canceled the task (or left), with its reason (the
    /// text of the message it canceled with), carried to the remote.
    Cancel { reason: Option<String> },
    /// Take up a task an earlier bridge forwarded (its remote task is
    /// recorded); the broker task is in `state`.
    Resume { state: State },
}

/// How a bridge loop was asked to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Leave: cancel the remote tasks, deregister (their broker tasks fail).
    Leave,
    /// Suspend (a process stopping to restart): let sends under way record
    /// their remote task, then end without deregistering; the tasks stay
    /// open, and a bridge started again resumes them.
    Suspend,
}

/// The bridge loop of one remote: runs until the agent's event stream ends
/// (connection closed, agent deregistered) or `stop` is notified.
pub(crate) async fn run(
    shared: Arc<Shared>,
    mut events: mpsc::UnboundedReceiver<Event>,
    stop: Arc<Notify>,
    how: Arc<parking_lot::Mutex<Stop>>,
) {
    let mut actors: HashMap<String, mpsc::UnboundedSender<Cmd>> = HashMap::new();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<String>();
    // One deadline across loop turns: a sleep made anew each turn would be
    // pushed back by every event, and a busy remote would never refresh.
    let first = shared.card.read().refresh_after;
    let refresh = tokio::time::sleep(first);
    tokio::pin!(refresh);
    let mut gone = shared.gone.clone();
    sweep(&shared, &mut actors, &done_tx).await;
    loop {
        tokio::select! {
            _ = gone.changed() => break,
            ev = events.recv() => {
                let Some(ev) = ev else { break };
                match ev {
                    Event::TaskEvent(p) => on_task_event(&shared, &mut actors, &done_tx, p),
                    Event::Lagged(l) => {
                        tracing::warn!(remote = %shared.base_url, dropped = l.dropped, "bridge lagged; resynchronising");
                        resync(&shared, &mut actors, &done_tx).await;
                    }
                    // The terminal-state push duplicates the status event.
                    Event::Push(_) => {}
                    // The bridge takes no lease.
                    Event::LeaseReleased(_) => {}
                }
            }
            Some(id) = done_rx.recv() => {
                actors.remove(&id);
            }
            () = &mut refresh => {
                let next = shared.refresh_card().await;
                refresh.as_mut().reset(tokio::time::Instant::now() + next);
            }
            _ = stop.notified() => {
                if *how.lock() == Stop::Suspend {
                    let drained = async {
                        while shared.sending.load(Ordering::Acquire) > 0 {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    };
                    let _ = tokio::time::timeout(STOP_GRACE, drained).await;
                    let store = shared.store.clone();
                    let _ = tokio::task::spawn_blocking(move || store.flush()).await;
                    break;
                }
                // Leaving: the broker fails the tasks this peer serves.
                // Their remote counterparts are canceled first.
                for tx in actors.values() {
                    let _ = tx.send(Cmd::Cancel { reason: None });
                }
                // The actors end once their CancelTask is answered (each
                // bounded by the call timeout; the wait by STOP_GRACE).
                let drained = async {
                    while !actors.is_empty() {
                        match done_rx.recv().await {
                            Some(id) => {
                                actors.remove(&id);
                            }
                            None => break,
                        }
                    }
                };
                let _ = tokio::time::timeout(STOP_GRACE, drained).await;
                let _ = broker(shared.agent.deregister()).await;
                break;
            }
        }
    }
}

fn on_task_event(
    shared: &Arc<Shared>,
    actors: &mut HashMap<String, mpsc::UnboundedSender<Cmd>>,
    done: &mpsc::UnboundedSender<String>,
    p: TaskEventParams,
) {
    // Requesters only send messages and cancel; artifacts are the worker's.
    let StreamEvent::Status(su) = p.event else {
        return;
    };
    if su.status.state.is_terminal() {
        if let Some(tx) = actors.get(&su.task_id) {
            let reason = su.status.message.as_deref().and_then(reason_of);
            let _ = tx.send(Cmd::Cancel { reason });
        }
        return;
    }
    let Some(message) = su.status.message else {
        return;
    };
    if message.role != Role::User {
        return;
    }
    let tx = actors.entry(su.task_id.clone()).or_insert_with(|| {
        spawn_actor(
            shared,
            su.task_id.clone(),
            su.context_id.clone(),
            done.clone(),
        )
    });
    let cmd = Cmd::Forward {
        message: (*message).clone(),
        state: su.status.state,
    };
    if let Err(mpsc::error::SendError(cmd)) = tx.send(cmd) {
        // The actor ended (its task settled terminal, as the broker will
        // say to this message's sender); a new one reports it.
        let tx2 = spawn_actor(shared, su.task_id.clone(), su.context_id, done.clone());
        let _ = tx2.send(cmd);
        actors.insert(su.task_id, tx2);
    }
}

fn spawn_actor(
    shared: &Arc<Shared>,
    task_id: String,
    context_id: String,
    done: mpsc::UnboundedSender<String>,
) -> mpsc::UnboundedSender<Cmd> {
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::clone(shared);
    let mut gone = shared.gone.clone();
    tokio::spawn(async move {
        let id = task_id.clone();
        tokio::select! {
            () = TaskActor::new(shared, task_id, context_id).run(rx) => {}
            _ = gone.changed() => {}
        }
        let _ = done.send(id);
    });
    tx
}

/// At start (the gateway may have restarted under the same name and
/// context, so the broker sees the same party): tasks further along than
/// `submitted` whose remote task is recorded are resumed; those without
/// one (lost before the remote named its task) are failed, so that no
/// delegate waits on them forever; recorded remote tasks whose broker task
/// ended meanwhile are canceled on the remote if it was canceled here.
/// Then the `submitted` tasks are forwarded (see [`resync`]).
async fn sweep(
    shared: &Arc<Shared>,
    actors: &mut HashMap<String, mpsc::UnboundedSender<Cmd>>,
    done: &mpsc::UnboundedSender<String>,
) {
    for state in [State::Working, State::InputRequired, State::AuthRequired] {
        for task in list_worker_tasks(&shared.agent, state).await {
            if shared.store.remote_task(&shared.key, &task.id).is_some() {
                let tx = spawn_actor(
                    shared,
                    task.id.clone(),
                    task.context_id.clone(),
                    done.clone(),
                );
                let _ = tx.send(Cmd::Resume { state });
                actors.insert(task.id, tx);
                continue;
            }
            let msg = text_message("the gateway restarted and lost the remote agent's task");
            let _ = broker(shared.agent.set_status(&task.id, State::Failed, Some(msg))).await;
        }
    }
    for (task_id, remote) in shared.store.remote_tasks_of(&shared.key) {
        if actors.contains_key(&task_id) {
            continue;
        }
        let Ok(t) = broker(shared.agent.get_task(&task_id, Some(0))).await else {
            continue;
        };
        if !t.status.state.is_terminal() {
            continue;
        }
        // Ended here while the bridge was away: canceled by the requester,
        // or failed (the requester left, or gave up): the remote task must
        // not run on (nor wait for input) forever. The record goes once
        // the remote has answered; one that cannot be reached keeps it
        // for the next start.
        if t.status.state != State::Completed {
            let reason = t.status.message.as_deref().and_then(reason_of);
            match shared
                .probe("CancelTask", cancel_params(&remote, reason.as_deref()))
                .await
            {
                Err(e) if e.is_unreachable() => {
                    tracing::info!(task = %task_id, error = %e, "canceling the remote task failed; kept for the next start");
                    continue;
                }
                Err(e) => {
                    tracing::info!(task = %task_id, error = %e, "the remote did not cancel its task")
                }
                Ok(_) => {}
            }
        }
        shared.store.forget_remote_task(&shared.key, &task_id);
    }
    resync(shared, actors, done).await;
}

/// After lost events: forwards the `submitted` tasks not yet seen, and
/// cancels the remote side of known tasks the broker has ended.
async fn resync(
    shared: &Arc<Shared>,
    actors: &mut HashMap<String, mpsc::UnboundedSender<Cmd>>,
    done: &mpsc::UnboundedSender<String>,
) {
    for task in list_worker_tasks(&shared.agent, State::Submitted).await {
        if actors.contains_key(&task.id) {
            continue;
        }
        let Some(first) = task.history.first() else {
            continue;
        };
        let tx = spawn_actor(
            shared,
            task.id.clone(),
            task.context_id.clone(),
            done.clone(),
        );
        let _ = tx.send(Cmd::Forward {
            message: (**first).clone(),
            state: State::Submitted,
        });
        actors.insert(task.id, tx);
    }
    let known: Vec<String> = actors.keys().cloned().collect();
    for id in known {
        if let Ok(t) = broker(shared.agent.get_task(&id, Some(0))).await {
            if t.status.state.is_terminal() {
                if let Some(tx) = actors.get(&id) {
                    let reason = t.status.message.as_deref().and_then(reason_of);
                    let _ = tx.send(Cmd::Cancel { reason });
                }
            }
        }
    }
}

async fn list_worker_tasks(agent: &Peer, state: State) -> Vec<a2a_client::Task> {
    let mut out = Vec::new();
    let mut cursor = None;
    // Bounded: a sweep reads at most this many pages.
    for _ in 0..100 {
        let q = TaskQuery {
            role: ListRole::Worker,
            state: Some(state),
            limit: Some(100),
            cursor,
        };
        match broker(agent.list_tasks(q)).await {
            Ok(page) => {
                out.extend(page.tasks);
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "listing the bridge's tasks failed");
                break;
            }
        }
    }
    out
}

/// Whether a broker message is one of the gateway's own notices.
fn is_notice(m: &Message) -> bool {
    m.metadata
        .as_ref()
        .is_some_and(|md| md.contains_key(NOTICE_KEY))
}

/// Whether a v1.0 task's history holds the message `id`; `None` when the
/// task came without a history (a remote may leave it out unless asked),
/// which says nothing.
fn holds_message(task: &Value, id: &str) -> Option<bool> {
    task["history"]
        .as_array()
        .filter(|h| !h.is_empty())
        .map(|h| h.iter().any(|m| m["messageId"] == id))
}

/// A broker call, awaited with a timeout.
async fn broker<T>(
    call: impl std::future::Future<Output = Result<T, ClientError>>,
) -> Result<T, String> {
    match tokio::time::timeout(BROKER_TIMEOUT, call).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err("the broker did not answer in time".into()),
    }
}

/// The metadata key marking the status messages the gateway itself adds
/// to a task (the remote unreachable, then reachable again): they are the
/// requester host's alone, so a history compared with the remote's skips
/// them. Its value is [`NOTICE_UNREACHABLE`] or [`NOTICE_REACHABLE`].
pub const NOTICE_KEY: &str = "a2aGatewayNotice";
/// [`NOTICE_KEY`]'s value when the remote stopped answering.
pub const NOTICE_UNREACHABLE: &str = "remote-unreachable";
/// [`NOTICE_KEY`]'s value when it answers again.
pub const NOTICE_REACHABLE: &str = "remote-reachable";

/// The reason a requester gave with its cancel: the text of its message
/// (a cancel by the worker side, or one without a message, has none).
fn reason_of(m: &Message) -> Option<String> {
    if m.role != Role::User {
        return None;
    }
    m.parts
        .iter()
        .any(|p| p.as_text().is_some())
        .then(|| m.text())
}

/// `CancelTask` params: the reason rides in `metadata.reason`, which
/// `a2a-gateway serve` turns into the message of the broker cancel (so
/// the remote host's history holds it too).
fn cancel_params(remote: &str, reason: Option<&str>) -> Value {
    match reason {
        Some(r) => json!({ "id": remote, "metadata": { "reason": r } }),
        None => json!({ "id": remote }),
    }
}

/// The state of one broker task and of its remote counterpart.
struct TaskActor {
    shared: Arc<Shared>,
    /// The broker task's id and context.
    task_id: String,
    context_id: String,
    /// The remote task's ids, once learned.
    remote_task: Option<String>,
    remote_context: Option<String>,
    /// The broker task's state as the actor last set or saw it.
    state: State,
    /// The remote task's state as last reported.
    remote_state: Option<State>,
    /// Artifacts already reflected (snapshots repeat them).
    artifacts: HashSet<String>,
    /// Status message ids already reflected (snapshots repeat them too).
    messages: HashSet<String>,
    /// Broker message ids already forwarded.
    forwarded: HashSet<String>,
    /// Since when calls to the remote have been failing (unreachable).
    failing_since: Option<Instant>,
    /// Whether the requester was told the remote is unreachable.
    told_unreachable: bool,
    /// A cancel of the remote task that never reached it: the records stay
    /// for the bridge's next start, which cancels it then.
    cancel_pending: bool,
}

impl TaskActor {
    fn new(shared: Arc<Shared>, task_id: String, context_id: String) -> TaskActor {
        TaskActor {
            shared,
            task_id,
            context_id,
            remote_task: None,
            remote_context: None,
            state: State::Submitted,
            remote_state: None,
            artifacts: HashSet::new(),
            messages: HashSet::new(),
            forwarded: HashSet::new(),
            failing_since: None,
            told_unreachable: false,
            cancel_pending: false,
        }
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Cmd>) {
        let mut queued = VecDeque::new();
        loop {
            let cmd = match queued.pop_front() {
                Some(c) => c,
                None => match rx.recv().await {
                    Some(c) => c,
                    None => return,
                },
            };
            let outcome = match cmd {
                Cmd::Cancel { reason } => {
                    self.cancel_and_finish(reason.as_deref()).await;
                    return;
                }
                Cmd::Resume { state } => {
                    self.state = state;
                    let latest = self.seed_from_broker().await;
                    self.recall_remote_task();
                    if state.is_interrupted() {
                        // The remote waits for the next message, as here.
                        self.remote_state = Some(state);
                        continue;
                    }
                    tracing::info!(task = %self.task_id, "resuming a forwarded task");
                    let unsent = self.unsent(latest).await;
                    let fut = self.resume(unsent);
                    cancellable(fut, &mut rx, &mut queued).await
                }
                Cmd::Forward { message, state } => {
                    // A start-up sweep or a resync may hand over a message
                    // its event brings too: forward each once.
                    if !self.forwarded.insert(message.message_id.clone()) {
                        continue;
                    }
                    if !self.state.is_terminal() {
                        self.state = state;
                    }
                    let fut = self.forward(message);
                    cancellable(fut, &mut rx, &mut queued).await
                }
            };
            match outcome {
                Outcome::Canceled(reason) => {
                    self.cancel_and_finish(reason.as_deref()).await;
                    return;
                }
                Outcome::Orphaned => return,
                Outcome::Done => {}
            }
            if self.state.is_terminal() {
                self.finish();
                return;
            }
        }
    }

    /// The requester ended the task: its remote counterpart is canceled
    /// (retried while the remote is unreachable, see [`REMOTE_CANCEL_RETRY`])
    /// and the records go once the remote answered; if it never did, they
    /// stay for the bridge's next start, which cancels it then.
    async fn cancel_and_finish(&mut self, reason: Option<&str>) {
        self.cancel_pending = !self.cancel_remote(reason).await;
        self.finish();
    }

    /// A resumed task: what an earlier bridge reflected already (its
    /// messages and artifacts, as the broker task holds them) is not
    /// reflected again when the remote's snapshot repeats it, so the two
    /// hosts' histories stay equal across a restart.
    /// Takes the remote task id (and context) this task's forward
    /// recorded, if any; says whether there was one.
    fn recall_remote_task(&mut self) -> bool {
        match self
            .shared
            .store
            .remote_task(&self.shared.key, &self.task_id)
        {
            Some((t, c)) => {
                self.remote_task = Some(t);
                self.remote_context = c;
                true
            }
            None => false,
        }
    }

    /// Also returns the requester's latest messages: those after the last
    /// answer (the gateway's own notices aside), which the remote may not
    /// have been sent yet.
    async fn seed_from_broker(&mut self) -> Vec<Message> {
        let id = self.task_id.clone();
        match broker(self.shared.agent.get_task(&id, None)).await {
            Ok(t) => {
                self.messages
                    .extend(t.history.iter().map(|m| m.message_id.clone()));
                self.artifacts
                    .extend(t.artifacts.iter().map(|a| a.artifact_id.clone()));
                let mut latest: Vec<Message> = t
                    .history
                    .iter()
                    .rev()
                    .filter(|m| !is_notice(m))
                    .take_while(|m| m.role == Role::User)
                    .map(|m| (**m).clone())
                    .collect();
                latest.reverse();
                latest
            }
            Err(e) => {
                tracing::warn!(task = %id, error = %e, "reading a resumed task failed");
                Vec::new()
            }
        }
    }

    /// Of the requester's latest messages on a resumed task, those the
    /// remote may not hold: never recorded as forwarded (the process ended
    /// between their event and the record), or recorded under an id the
    /// remote task's history lacks (it ended between the record and the
    /// send). The remote is waited for while unreachable; with an error
    /// from it (or no history in its answer), the recorded ones count as
    /// sent (the task is polled, as it would have been).
    async fn unsent(&mut self, latest: Vec<Message>) -> Vec<Message> {
        let records: Vec<(Message, Option<String>)> = latest
            .into_iter()
            .map(|m| {
                let r = self.shared.store.forward_record(
                    &self.shared.key,
                    &self.task_id,
                    &m.message_id,
                );
                (m, r)
            })
            .collect();
        let held = match (&self.remote_task, records.iter().any(|(_, r)| r.is_some())) {
            (Some(remote), true) => {
                let id = remote.clone();
                self.ask_remote("GetTask", json!({ "id": id })).await
            }
            _ => None,
        };
        records
            .into_iter()
            .filter(|(_, r)| match (r, &held) {
                (None, _) => true,
                (Some(id), Some(task)) => holds_message(task, id) == Some(false),
                (Some(_), None) => false,
            })
            .map(|(m, _)| m)
            .collect()
    }

    /// A resumed working task: its unsent messages forwarded (each
    /// reflected until the remote task settles), else the task polled.
    async fn resume(&mut self, unsent: Vec<Message>) {
        if unsent.is_empty() {
            self.poll_until_settled().await;
            return;
        }
        for m in unsent {
            tracing::info!(task = %self.task_id, "a message the remote never got is forwarded after a restart");
            self.forwarded.insert(m.message_id.clone());
            self.forward(m).await;
            if self.state.is_terminal() {
                return;
            }
        }
    }

    /// The task is over here: its records go (unless a cancel of its
    /// remote task is still owed).
    fn finish(&self) {
        if self.cancel_pending {
            return;
        }
        self.shared
            .store
            .forget_remote_task(&self.shared.key, &self.task_id);
    }

    /// Forwards one message and reflects the answer until the remote task
    /// settles (terminal or interrupted), polling if its stream ends early.
    /// A message recorded as forwarded by an earlier bridge is not sent
    /// again: its remote task is polled instead.
    async fn forward(&mut self, message: Message) {
        let (remote_id, sent_before) =
            match self
                .shared
                .store
                .forward_id(&self.shared.key, &self.task_id, &message.message_id)
            {
                Ok(r) => r,
                Err(e) => {
                    self.fail(&format!("the gateway could not record the forward: {e}"))
                        .await;
                    return;
                }
            };
        if sent_before && self.on_remote(&remote_id).await {
            self.remote_state = None;
            tracing::info!(task = %self.task_id, "message forwarded before; resuming its remote task");
            self.poll_until_settled().await;
            return;
        }
        // Recorded but not on the remote (the process ended between the
        // record and the send, or before the remote took it), or a remote
        // that could not say: sent (again) under the same messageId, which
        // a remote that deduplicates recognises.
        let remote_context = self.known_remote_context();
        let (_, streaming) = self.shared.endpoint();
        let params = send_params(
            &message,
            &remote_id,
            self.remote_task.as_deref(),
            remote_context.as_deref(),
            !streaming,
        );
        self.remote_state = None;
        let settle = self.shared.settle.clone();
        let deadline = Instant::now() + settle.timeout;
        let mut interval = settle.poll_min;
        let result = loop {
            let (endpoint, streaming) = self.shared.endpoint();
            let r = if streaming {
                self.forward_streaming(&endpoint, params.clone()).await
            } else {
                self.forward_unary(&endpoint, params.clone()).await
            };
            match r {
                // The remote certainly did nothing (no connection, or a
                // refusal before the call): its address may have moved, or
                // it is down. Fetch the card and send again, under the
                // same messageId, until it answers (the requester is told
                // if that takes long) or the settle timeout.
                Err((e, false)) if e.nothing_was_done() && Instant::now() < deadline => {
                    self.shared.refresh_after_failure().await;
                    self.unreachable(&e).await;
                    self.pause(self.retry_wait(interval)).await;
                    interval = (interval * 2).min(settle.poll_max);
                }
                other => break other,
            }
        };
        if let Err((e, _)) = result {
            if e.suggests_card_refresh() {
                self.shared.refresh_after_failure().await;
            }
            // The connection broke after the message went out and before
            // the remote named a task: the remote may have taken it (its
            // gateway died mid-answer), and a task it holds is taken up
            // rather than failed here while it runs there.
            let taken = self.remote_task.is_none()
                && matches!(e, RemoteError::Http(_))
                && self.on_remote(&remote_id).await;
            if !taken
                && (self.remote_task.is_none()
                    || !matches!(e, RemoteError::Http(_) | RemoteError::Connect(_)))
            {
                self.fail(&format!("{e}")).await;
                return;
            }
            tracing::info!(task = %self.task_id, error = %e, "remote stream broke; polling the task");
            self.unreachable(&e).await;
        }
        if !self.settled() {
            self.poll_until_settled().await;
        }
    }

    /// The remote context of this task's conversation, if one is known:
    /// the task's own, else the conversation's (in memory, else recorded).
    fn known_remote_context(&self) -> Option<String> {
        self.remote_context
            .clone()
            .or_else(|| self.shared.contexts.lock().get(&self.context_id).cloned())
            .or_else(|| {
                self.shared
                    .store
                    .remote_context(&self.shared.key, &self.context_id)
            })
    }

    /// Whether the remote holds the message recorded under `remote_id`.
    /// The forward's record is written before the send, so after a restart
    /// it does not say whether the send happened; the remote does. With its
    /// task known, that task's history (`GetTask`); before the remote named
    /// one, its newest tasks (`ListTasks`, in the conversation's remote
    /// context when known), and a task found holding the message is taken
    /// up (recorded, and its state reflected). An unreachable remote is
    /// waited for ([`Self::ask_remote`]); one that answers with an error
    /// (or a task without its history) is taken to hold the message when
    /// its task is known (the task is polled) and not to when none is (the
    /// message is sent again).
    async fn on_remote(&mut self, remote_id: &str) -> bool {
        if self.recall_remote_task() {
            let remote = self.remote_task.clone().unwrap_or_default();
            return match self.ask_remote("GetTask", json!({ "id": remote })).await {
                Some(task) => holds_message(&task, remote_id).unwrap_or(true),
                None => true,
            };
        }
        let mut params = json!({ "pageSize": REMOTE_LOOKUP_PAGE });
        if let Some(c) = self.known_remote_context() {
            params["contextId"] = json!(c);
        }
        let Some(page) = self.ask_remote("ListTasks", params).await else {
            return false;
        };
        let found = page["tasks"]
            .as_array()
            .and_then(|tasks| {
                tasks
                    .iter()
                    .find(|t| holds_message(t, remote_id) == Some(true))
            })
            .cloned();
        match found {
            Some(task) => {
                tracing::info!(task = %self.task_id, "a forward lost in a restart was found on the remote");
                self.apply(&json!({ "task": task })).await;
                self.remote_task.is_some()
            }
            None => false,
        }
    }

    /// A read of the remote for what a restart left unknown, asked again
    /// while the remote is unreachable (the requester told, as for a
    /// forward) until it answers or the settle timeout: what decides
    /// whether a message is sent again must not be a remote that was
    /// merely down. `None`: the remote answered with an error (or never).
    async fn ask_remote(&mut self, method: &str, params: Value) -> Option<Value> {
        let settle = self.shared.settle.clone();
        let deadline = Instant::now() + settle.timeout;
        let mut interval = settle.poll_min;
        loop {
            match self.shared.probe(method, params.clone()).await {
                Ok(v) => {
                    self.reachable().await;
                    return Some(v);
                }
                Err(e) if e.is_unreachable() && Instant::now() < deadline => {
                    self.unreachable(&e).await;
                    self.pause(self.retry_wait(interval)).await;
                    interval = (interval * 2).min(settle.poll_max);
                }
                Err(e) => {
                    tracing::info!(task = %self.task_id, method, error = %e, "the remote could not say what it holds");
                    return None;
                }
            }
        }
    }

    fn settled(&self) -> bool {
        self.state.is_terminal()
            || self
                .remote_state
                .is_some_and(|s| s.is_terminal() || s.is_interrupted())
    }

    /// `Err((error, accepted))`: `accepted` when the remote had already
    /// answered something (so a retry would send the message twice).
    async fn forward_streaming(
        &mut self,
        endpoint: &Endpoint,
        params: Value,
    ) -> Result<(), (RemoteError, bool)> {
        let shared = Arc::clone(&self.shared);
        let mut sending = Some(Sending::new(&shared.sending));
        let mut stream = self
            .shared
            .rpc
            .stream(endpoint, "SendStreamingMessage", params)
            .await
            .map_err(|e| (e, false))?;
        while let Some(ev) = stream.next().await {
            if self.remote_task.is_some() {
                // Named (and recorded): a suspending bridge need not wait.
                sending = None;
            }
            let ev = ev.map_err(|e| (e, true))?;
            self.reachable().await;
            self.apply(&ev).await;
            if self.state.is_terminal() {
                break;
            }
        }
        drop(sending);
        // Its connection kept for the next forward.
        stream.release();
        Ok(())
    }

    async fn forward_unary(
        &mut self,
        endpoint: &Endpoint,
        params: Value,
    ) -> Result<(), (RemoteError, bool)> {
        let shared = Arc::clone(&self.shared);
        let _sending = Sending::new(&shared.sending);
        // `returnImmediately`: the answer names the task at once (recorded
        // in `apply`), and the task is then polled, cancelable meanwhile.
        let r = self
            .shared
            .rpc
            .call(endpoint, "SendMessage", params)
            .await
            .map_err(|e| (e, false))?;
        self.reachable().await;
        self.apply(&r).await;
        Ok(())
    }

    async fn poll_until_settled(&mut self) {
        let Some(remote) = self.remote_task.clone() else {
            self.fail("the remote agent answered without a task").await;
            return;
        };
        let settle = self.shared.settle.clone();
        let deadline = Instant::now() + settle.timeout;
        let mut interval = settle.poll_min;
        while !self.settled() {
            if Instant::now() >= deadline {
                self.fail(&format!(
                    "the remote task did not settle within {} s",
                    settle.timeout.as_secs()
                ))
                .await;
                self.cancel_pending = !self
                    .cancel_remote(Some("the requester's gateway gave up waiting"))
                    .await;
                return;
            }
            self.pause(self.retry_wait(interval)).await;
            interval = (interval * 2).min(settle.poll_max);
            match self
                .shared
                .probe("GetTask", json!({"id": remote, "historyLength": 0}))
                .await
            {
                Ok(task) => {
                    self.reachable().await;
                    self.apply(&json!({ "task": task })).await;
                }
                Err(e @ RemoteError::Rpc { .. }) => {
                    self.fail(&format!("{e}")).await;
                    return;
                }
                Err(e) => {
                    if e.suggests_card_refresh() {
                        self.shared.refresh_after_failure().await;
                    }
                    tracing::debug!(task = %self.task_id, error = %e, "polling the remote task failed; retrying");
                    self.unreachable(&e).await;
                }
            }
        }
    }

    /// Reflects one remote answer or event onto the broker task.
    async fn apply(&mut self, response: &Value) {
        for r in reflect(response) {
            match r {
                Reflect::Ids {
                    task_id,
                    context_id,
                } => {
                    if self.remote_task.as_deref() != Some(task_id.as_str()) {
                        if let Err(e) = self.shared.store.put_remote_task(
                            &self.shared.key,
                            &self.task_id,
                            &task_id,
                            context_id.as_deref(),
                        ) {
                            tracing::warn!(task = %self.task_id, error = %e, "recording the remote task failed");
                        }
                    }
                    self.remote_task = Some(task_id);
                    if let Some(c) = context_id {
                        // Recorded once per conversation, not once per task
                        // (a commit on every round trip's path otherwise).
                        let known = self
                            .shared
                            .contexts
                            .lock()
                            .insert(self.context_id.clone(), c.clone());
                        if known.as_deref() != Some(c.as_str()) {
                            self.shared.store.put_remote_context(
                                &self.shared.key,
                                &self.context_id,
                                &c,
                            );
                        }
                        self.remote_context = Some(c);
                    }
                }
                Reflect::Artifact {
                    artifact,
                    append,
                    last_chunk,
                } => {
                    let Some(a) = artifact_from_v1(&artifact) else {
                        continue;
                    };
                    // A snapshot repeats the artifacts the events brought.
                    if !append && !self.artifacts.insert(a.artifact_id.clone()) {
                        continue;
                    }
                    if self.state.is_terminal() {
                        continue;
                    }
                    let id = self.task_id.clone();
                    if let Err(e) =
                        broker(self.shared.agent.add_artifact(&id, a, append, last_chunk)).await
                    {
                        tracing::warn!(task = %id, error = %e, "reflecting an artifact failed");
                    }
                }
                Reflect::Status { state, message } => {
                    self.remote_state = Some(state);
                    let msg = message.and_then(|m| self.agent_message(&m));
                    self.set_state(state, msg).await;
                }
                Reflect::Message(m) => {
                    let msg = self.agent_message(&m);
                    if self.remote_task.is_none() {
                        // A direct answer: the exchange is over.
                        self.remote_state = Some(State::Completed);
                        self.set_state(State::Completed, msg).await;
                    } else if msg.is_some() {
                        self.set_state(State::Working, msg).await;
                    }
                }
            }
        }
    }

    /// A remote message as a broker status message, once per message id.
    fn agent_message(&mut self, v: &Value) -> Option<Message> {
        let mut m = message_from_v1(v, new_id)?;
        if m.message_id.len() > A2A_MAX_ID_BYTES {
            m.message_id = new_id();
        }
        self.messages.insert(m.message_id.clone()).then_some(m)
    }

    /// Moves the broker task towards `target` (see [`status_steps`]), the
    /// message riding on the last step.
    async fn set_state(&mut self, target: State, mut message: Option<Message>) {
        let steps = status_steps(self.state, target, message.is_some());
        let n = steps.len();
        for (i, step) in steps.into_iter().enumerate() {
            let msg = if i + 1 == n { message.take() } else { None };
            let id = self.task_id.clone();
            match broker(self.shared.agent.set_status(&id, step, msg)).await {
                Ok(task) => self.state = task.status.state,
                Err(e) => {
                    tracing::warn!(task = %id, state = step.as_str(), error = %e, "reflecting a status failed");
                    // The task may have ended meanwhile (a cancel): read it.
                    if let Ok(t) = broker(self.shared.agent.get_task(&id, Some(0))).await {
                        self.state = t.status.state;
                    }
                    return;
                }
            }
        }
    }

    /// Fails the broker task with `why` (unless it already ended).
    async fn fail(&mut self, why: &str) {
        let name = self.shared.card.read().card.name.clone();
        tracing::info!(task = %self.task_id, remote = %name, error = %why, "remote task failed");
        let msg = text_message(&format!("remote agent {name}: {why}"));
        self.set_state(State::Failed, Some(msg)).await;
    }

    /// Cancels the remote task, if there is one and it may still run,
    /// with the requester's reason. A remote that cannot be reached is
    /// tried again (backing off to the poll interval's bound) for
    /// [`REMOTE_CANCEL_RETRY`]. Whether the remote answered (or there was
    /// nothing to cancel).
    async fn cancel_remote(&mut self, reason: Option<&str>) -> bool {
        let Some(remote) = self.remote_task.clone() else {
            return true;
        };
        if self.remote_state.is_some_and(State::is_terminal) {
            return true;
        }
        let deadline = Instant::now() + REMOTE_CANCEL_RETRY;
        let settle = self.shared.settle.clone();
        let mut interval = settle.poll_min;
        loop {
            match self
                .shared
                .probe("CancelTask", cancel_params(&remote, reason))
                .await
            {
                Ok(_) => {
                    self.remote_state = Some(State::Canceled);
                    return true;
                }
                Err(e) if e.is_unreachable() && Instant::now() < deadline => {
                    tracing::debug!(task = %self.task_id, error = %e, "canceling the remote task failed; retrying");
                    if e.suggests_card_refresh() {
                        self.shared.refresh_after_failure().await;
                    }
                    tokio::time::sleep(interval).await;
                    interval = (interval * 2).min(settle.poll_max);
                }
                Err(e) => {
                    tracing::info!(task = %self.task_id, error = %e, "canceling the remote task failed");
                    // Answered (not cancelable: it ended; unknown): done.
                    return !e.is_unreachable();
                }
            }
        }
    }

    /// A call to the remote failed without a word about the task: from the
    /// first such failure on, the remote counts as unreachable once
    /// [`REMOTE_UNREACHABLE_AFTER`] passes, and the requester is told then
    /// (once) by a status message; the task keeps its state.
    async fn unreachable(&mut self, e: &RemoteError) {
        let since = *self.failing_since.get_or_insert_with(Instant::now);
        if self.told_unreachable || since.elapsed() < REMOTE_UNREACHABLE_AFTER {
            return;
        }
        self.told_unreachable = true;
        let name = self.shared.card.read().card.name.clone();
        tracing::warn!(task = %self.task_id, remote = %name, error = %e, "remote agent unreachable");
        let text = format!(
            "remote agent {name} is unreachable ({e}); the task keeps its state and is checked again every {} s at most",
            self.shared.settle.poll_max.as_secs().max(1)
        );
        self.notice(NOTICE_UNREACHABLE, &text).await;
    }

    /// The remote answered: if the requester was told it was unreachable,
    /// it is told it is back (the task then takes the remote's state).
    async fn reachable(&mut self) {
        self.failing_since = None;
        if std::mem::take(&mut self.told_unreachable) {
            let name = self.shared.card.read().card.name.clone();
            tracing::info!(task = %self.task_id, remote = %name, "remote agent reachable again");
            let text = format!("remote agent {name} answers again");
            self.notice(NOTICE_REACHABLE, &text).await;
        }
    }

    /// How long to wait before the next try: the backoff `interval`, but
    /// never past the moment the remote counts as unreachable (so the
    /// requester is told within that bound, not a poll interval later).
    fn retry_wait(&self, interval: Duration) -> Duration {
        match (self.failing_since, self.told_unreachable) {
            (Some(since), false) => {
                let left =
                    (since + REMOTE_UNREACHABLE_AFTER).saturating_duration_since(Instant::now());
                interval.min(left).max(Duration::from_millis(10))
            }
            _ => interval,
        }
    }

    /// Waits `wait` before the next try. While the remote is failing, its
    /// card is fetched meanwhile every [`REMOTE_PROBE_EVERY`] (one fetch per
    /// remote however many tasks wait: the refresh is debounced), and the
    /// wait ends as soon as the remote answers, so a task resumes within
    /// about that long of the remote's return, not a poll interval later.
    async fn pause(&self, wait: Duration) {
        let Some(since) = self.failing_since else {
            tokio::time::sleep(wait).await;
            return;
        };
        let end = Instant::now() + wait;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left.min(REMOTE_PROBE_EVERY)).await;
            self.shared.refresh_after_failure().await;
            if self.shared.last_answer.lock().is_some_and(|t| t > since) {
                return;
            }
        }
    }

    /// A `working` status message of the gateway's own (marked with
    /// [`NOTICE_KEY`]), on a task that is working or about to; an
    /// interrupted or ended task is left alone.
    async fn notice(&mut self, kind: &str, text: &str) {
        if !matches!(self.state, State::Submitted | State::Working) {
            return;
        }
        let mut msg = text_message(text);
        msg.role = Role::Agent;
        let mut md = serde_json::Map::new();
        md.insert(NOTICE_KEY.into(), Value::String(kind.into()));
        msg.metadata = Some(Object::from(md));
        self.set_state(State::Working, Some(msg)).await;
    }
}

/// How a piece of an actor's work ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Done,
    /// The requester canceled the task (with this reason).
    Canceled(Option<String>),
    /// The bridge went away (stopping, suspending, or its connection
    /// closed): the task is left as it is, for a bridge that comes back.
    Orphaned,
}

/// Runs `work` until it ends or a cancel comes; other commands arriving
/// meanwhile are queued for later.
async fn cancellable(
    work: impl std::future::Future<Output = ()>,
    rx: &mut mpsc::UnboundedReceiver<Cmd>,
    queued: &mut VecDeque<Cmd>,
) -> Outcome {
    tokio::pin!(work);
    loop {
        tokio::select! {
            () = &mut work => return Outcome::Done,
            c = rx.recv() => match c {
                Some(Cmd::Cancel { reason }) => return Outcome::Canceled(reason),
                None => return Outcome::Orphaned,
                Some(other) => queued.push_back(other),
            },
        }
    }
}
