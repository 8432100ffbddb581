//! Two hosts' agents cooperating through their gateways, as two
//! hosts would run them: two real brokers (each its own database, socket
//! and secret) and one `a2a-gateway serve --remote` process per host,
//! which exposes the host's `coder` and bridges the other host's, in both
//! directions at once: `planner-b` delegates to `coder-a` through B's
//! bridge and A's server, `planner-a` to `coder-b` the other way.
//!
//! The coders are workers in this process that act on the first word of a
//! task's first text (`complete`, `input`, `fail`, `chunks`, `slow`,
//! `talk`). After every exchange the task on the requester's host and its
//! counterpart on the worker's host must hold the same history (roles,
//! texts, the agent messages' sender), the same artifacts and the same
//! state; the gateway's own notices (metadata `a2aGatewayNotice`) are the
//! requester host's alone and are skipped. Every task reaches each coder
//! exactly once, and nothing is left open at the end.

mod common;

use a2a_client::proto::types::{Part, Role};
use a2a_client::{
    agent_card, message_to, task_message, text_message, A2aErrorCode, Agent, Artifact, Client,
    ClientError, Delivery, Event, ListRole, Message, SendConfiguration, State, Task, TaskQuery,
};
use a2a_gateway::NOTICE_KEY;
use a2a_testkit::process::free_port;
use a2a_testkit::{BrokerProcess, Spawn};
use common::tck;
use common::GatewayProc;
use futures_util::StreamExt;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bounds every wait; only stops a hang, never measures speed.
const TIMEOUT: Duration = Duration::from_secs(30);

// ------------------------------------------------------------ a coder

/// A worker agent acting on each task's first word, recording every task
/// it is given (by its first text) so the test can check exactly-once.
struct Coder {
    agent: Agent,
    /// First text -> the ids of the tasks that brought it.
    seen: Mutex<HashMap<String, Vec<String>>>,
    /// Task id -> first text.
    tasks: Mutex<HashMap<String, String>>,
}

fn texts(parts: &[Part]) -> Vec<String> {
    parts
        .iter()
        .map(|p| match p {
            Part::Text { text, .. } => text.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn agent_msg(text: &str) -> Message {
    let mut m = text_message(text);
    m.role = Role::Agent;
    m
}

async fn call<T>(p: Result<a2a_client::Pending<T>, ClientError>) -> Result<T, ClientError> {
    tokio::time::timeout(TIMEOUT, p?)
        .await
        .expect("the broker answers in time")
}

impl Coder {
    async fn start(client: &Client, name: &str) -> Arc<Coder> {
        let agent =
            call(client.register_async(&format!("ctx-{name}"), agent_card(name), Delivery::Push))
                .await
                .expect("the coder registers");
        let coder = Arc::new(Coder {
            agent,
            seen: Mutex::default(),
            tasks: Mutex::default(),
        });
        let c = coder.clone();
        tokio::spawn(async move {
            let mut events = c.agent.events();
            while let Some(ev) = events.next().await {
                let Event::TaskEvent(p) = ev else { continue };
                let a2a_client::proto::types::StreamEvent::Status(su) = p.event else {
                    continue;
                };
                if su.status.state.is_terminal() {
                    continue;
                }
                let Some(m) = su.status.message.as_deref() else {
                    continue;
                };
                if m.role != Role::User {
                    continue;
                }
                let text = texts(&m.parts).join(" ");
                let known = c.tasks.lock().get(&su.task_id).cloned();
                let c2 = c.clone();
                let id = su.task_id.clone();
                tokio::spawn(async move { c2.act(&id, &text, known.is_some()).await });
            }
        });
        coder
    }

    async fn status(&self, id: &str, state: State, text: Option<&str>) {
        call(self.agent.set_status_async(id, state, text.map(agent_msg)))
            .await
            .unwrap_or_else(|e| panic!("coder status {state:?} on {id}: {e}"));
    }

    async fn artifact(&self, id: &str, a: Artifact, append: bool, last: bool) {
        call(self.agent.add_artifact_async(id, a, append, last))
            .await
            .unwrap_or_else(|e| panic!("coder artifact on {id}: {e}"));
    }

    async fn act(&self, id: &str, text: &str, follow_up: bool) {
        if follow_up {
            self.status(id, State::Completed, Some(&format!("got: {text}")))
                .await;
            return;
        }
        self.tasks.lock().insert(id.to_owned(), text.to_owned());
        self.seen
            .lock()
            .entry(text.to_owned())
            .or_default()
            .push(id.to_owned());
        match text.split(' ').next().unwrap_or("") {
            "input" => {
                self.status(id, State::InputRequired, Some("which one?"))
                    .await
            }
            "fail" => {
                self.status(id, State::Failed, Some(&format!("cannot: {text}")))
                    .await
            }
            "talk" => {
                self.status(id, State::Completed, Some(&format!("reply: {text}")))
                    .await
            }
            "slow" => self.status(id, State::Working, Some("on it")).await,
            "chunks" => {
                self.status(id, State::Working, Some("streaming")).await;
                for i in 0..10 {
                    let mut a = a2a_client::text_artifact("log", &format!("line {i}"));
                    a.name = Some("log".into());
                    self.artifact(id, a, i > 0, i == 9).await;
                }
                self.status(id, State::Completed, Some("done")).await;
            }
            _ => {
                let mut a = a2a_client::text_artifact("result", &format!("echo: {text}"));
                a.name = Some("result".into());
                self.artifact(id, a, false, true).await;
                self.status(id, State::Completed, Some(&format!("done: {text}")))
                    .await;
            }
        }
    }

    /// Completes the `slow` task that `text` started.
    async fn finish(&self, text: &str) {
        let id = self.task_of(text);
        let a = a2a_client::text_artifact("result", &format!("finished: {text}"));
        self.artifact(&id, a, false, true).await;
        self.status(&id, State::Completed, Some(&format!("finished: {text}")))
            .await;
    }

    /// The id of the one task `text` started here (panics unless exactly
    /// one did: every remote task runs exactly once).
    fn task_of(&self, text: &str) -> String {
        let seen = self.seen.lock();
        let ids = seen.get(text).cloned().unwrap_or_default();
        assert_eq!(ids.len(), 1, "{text}: tasks here {ids:?}");
        ids[0].clone()
    }

    /// Waits until `text` reached this coder.
    async fn until_seen(&self, text: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if self.seen.lock().contains_key(text) {
                return self.task_of(text);
            }
            assert!(Instant::now() < deadline, "{text} never reached the coder");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

// ------------------------------------------------------------ a host

struct Host {
    _dir: tempfile::TempDir,
    _broker: BrokerProcess,
    socket: PathBuf,
    secret: String,
    state: PathBuf,
    listen: String,
    client: Client,
    coder: Arc<Coder>,
    planner: Agent,
    gateway: Option<GatewayProc>,
    /// The other host's coder, as this host's gateway bridges it.
    remote_url: String,
    /// The other host's coder's name (its peer id here).
    remote_coder: String,
}

impl Host {
    async fn new(me: &str, other: &str, my_port: u16, other_port: u16) -> Host {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("run").join("sock");
        let broker = Spawn::new(dir.path().join("db"))
            .socket(&socket)
            .no_stdio()
            .start(TIMEOUT)
            .expect("broker starts");
        let secret = broker.secret().expect("secret file");
        let client = Client::connect(&socket, &secret).expect("connect");
        // `GatewayProc` exposes the TCK's agent too.
        tck::register_sut(&client).expect("the SUT registers");
        let coder = Coder::start(&client, &format!("coder-{me}")).await;
        let planner = call(client.register_async(
            &format!("ctx-planner-{me}"),
            agent_card(&format!("planner-{me}")),
            Delivery::Push,
        ))
        .await
        .expect("the planner registers");
        let state = dir.path().join("gateway.db");
        Host {
            _dir: dir,
            _broker: broker,
            socket,
            secret,
            state,
            listen: format!("127.0.0.1:{my_port}"),
            client,
            coder,
            planner,
            gateway: None,
            remote_url: format!("http://127.0.0.1:{other_port}/agents/coder-{other}"),
            remote_coder: format!("coder-{other}"),
        }
    }

    /// `a2a-gateway serve --expose coder-X --remote <the other's coder>`.
    fn start_gateway(&mut self) {
        let expose = self.coder.agent.id().to_owned();
        self.gateway = Some(GatewayProc::start_on(
            &self.listen,
            &self.socket,
            &self.secret,
            &self.state,
            &["--expose", &expose, "--remote", &self.remote_url],
        ));
    }

    /// Waits until this host's broker lists the other host's coder.
    async fn until_bridged(&self) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let cards = call(self.planner.list_agents_async(None))
                .await
                .expect("list");
            if cards.iter().any(|c| c.name == self.remote_coder) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} never bridged",
                self.remote_coder
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn stop_gateway(&mut self, signal: &str) {
        self.gateway.take().expect("a gateway runs").kill(signal);
    }
}

// ------------------------------------------------------------ the requester's side

fn blocking() -> Option<SendConfiguration> {
    Some(SendConfiguration {
        blocking: Some(true),
        history_length: None,
        push_notification_config: None,
    })
}

async fn get(a: &Agent, id: &str) -> Task {
    call(a.get_task_async(id, None)).await.expect("get ok")
}

/// Polls until the task is in one of `states`.
async fn until_state(a: &Agent, id: &str, states: &[State]) -> Task {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let t = get(a, id).await;
        if states.contains(&t.status.state) {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "task {id} stays {:?}, not {states:?}: {:?}",
            t.status.state,
            view(&t)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const SETTLED: [State; 5] = [
    State::Completed,
    State::Failed,
    State::Canceled,
    State::Rejected,
    State::InputRequired,
];

/// A send that waits (in the broker) until the task settles.
async fn ask(a: &Agent, m: Message) -> Task {
    let t = call(a.send_async(m, blocking())).await.expect("send ok");
    until_state(a, &t.id, &SETTLED).await
}

/// What both hosts must agree on: the state, each message (role, texts,
/// and the sender of the agent's: a user message's sender is the local
/// requester on each host), each artifact (id, name, texts).
#[derive(Debug, PartialEq)]
struct View {
    state: State,
    messages: Vec<(String, Vec<String>, Option<String>)>,
    artifacts: Vec<(String, Option<String>, Vec<String>)>,
}

fn is_notice(m: &Message) -> bool {
    m.metadata
        .as_ref()
        .is_some_and(|md| md.get(NOTICE_KEY).is_some())
}

fn view(t: &Task) -> View {
    View {
        state: t.status.state,
        messages: t
            .history
            .iter()
            .filter(|m| !is_notice(m))
            .map(|m| {
                let agent = m.role == Role::Agent;
                (
                    format!("{:?}", m.role).to_lowercase(),
                    texts(&m.parts),
                    agent.then(|| m.from.clone()).flatten(),
                )
            })
            .collect(),
        artifacts: t
            .artifacts
            .iter()
            .map(|a| (a.artifact_id.clone(), a.name.clone(), texts(&a.parts)))
            .collect(),
    }
}

/// The requester's task `id` on `req` and its counterpart on `work`'s
/// coder (the task `text` started there) hold the same history.
async fn same_on_both(req: &Host, id: &str, work: &Host, text: &str) -> View {
    let here = get(&req.planner, id).await;
    let there_id = work.coder.task_of(text);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let there = get(&work.coder.agent, &there_id).await;
        let (a, b) = (view(&here), view(&there));
        if a == b {
            return a;
        }
        assert!(
            Instant::now() < deadline,
            "{text}: the hosts' histories differ\nrequester: {a:?}\nworker:    {b:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ------------------------------------------------------------ scenarios

/// input-required, artifacts (whole and appended), failure, and cancel
/// with a reason, from `req`'s planner to `work`'s coder.
async fn exchanges(req: &Host, work: &Host, tag: &str) {
    let peer = req.remote_coder.as_str();
    let p = &req.planner;

    let text = format!("complete {tag}");
    let t = ask(p, message_to(peer, &text)).await;
    assert_eq!(t.status.state, State::Completed, "{:?}", view(&t));
    let v = same_on_both(req, &t.id, work, &text).await;
    assert_eq!(
        v.artifacts,
        vec![(
            "result".into(),
            Some("result".into()),
            vec![format!("echo: {text}")]
        )]
    );
    assert_eq!(v.messages.last().map(|m| m.2.as_deref()), Some(Some(peer)));

    let text = format!("input {tag}");
    let t = ask(p, message_to(peer, &text)).await;
    assert_eq!(t.status.state, State::InputRequired, "{:?}", view(&t));
    let t = ask(p, task_message(&t.id, "the blue one")).await;
    assert_eq!(t.status.state, State::Completed, "{:?}", view(&t));
    let v = same_on_both(req, &t.id, work, &text).await;
    let roles: Vec<&str> = v.messages.iter().map(|m| m.0.as_str()).collect();
    assert_eq!(roles, ["user", "agent", "user", "agent"], "{v:?}");
    assert_eq!(v.messages[3].1, ["got: the blue one"]);

    let text = format!("fail {tag}");
    let t = ask(p, message_to(peer, &text)).await;
    assert_eq!(t.status.state, State::Failed);
    let v = same_on_both(req, &t.id, work, &text).await;
    assert_eq!(
        v.messages.last().map(|m| m.1.clone()),
        Some(vec![format!("cannot: {text}")])
    );

    let text = format!("chunks {tag}");
    let t = ask(p, message_to(peer, &text)).await;
    assert_eq!(t.status.state, State::Completed);
    let v = same_on_both(req, &t.id, work, &text).await;
    let lines: Vec<String> = (0..10).map(|i| format!("line {i}")).collect();
    assert_eq!(v.artifacts, vec![("log".into(), Some("log".into()), lines)]);

    let text = format!("slow cancel {tag}");
    let t = call(p.send_async(message_to(peer, &text), None))
        .await
        .expect("send");
    until_state(p, &t.id, &[State::Working]).await;
    let there = work.coder.until_seen(&text).await;
    until_state(&work.coder.agent, &there, &[State::Working]).await;
    let mut reason = text_message("not needed after all");
    reason.task_id = Some(t.id.clone());
    let c = call(p.cancel_async(&t.id, Some(reason)))
        .await
        .expect("cancel ok");
    assert_eq!(c.status.state, State::Canceled);
    until_state(&work.coder.agent, &there, &[State::Canceled]).await;
    let v = same_on_both(req, &t.id, work, &text).await;
    assert_eq!(
        v.messages.last().map(|m| (m.0.as_str(), m.1.clone())),
        Some(("user", vec!["not needed after all".to_owned()])),
        "the cancel's reason crossed: {v:?}"
    );
}

/// 16 tasks at once, each completed with its artifact, once.
async fn concurrent(req: &Host, work: &Host, tag: &str) {
    let sends = (0..16).map(|i| {
        let text = format!("complete {tag} {i}");
        async move {
            let t = ask(&req.planner, message_to(&req.remote_coder, &text)).await;
            assert_eq!(t.status.state, State::Completed, "{text}");
            same_on_both(req, &t.id, work, &text).await;
        }
    });
    futures_util::future::join_all(sends).await;
}

/// One conversation of 1,000 messages (500 exchanges in one context), its
/// requester registering again as its sends run out (docs/protocol.md §9,
/// `A2A_MAX_SENDS_PER_RUN`), as `a2a-fanout` does; on the worker's host
/// the gateway does the same under the hood.
async fn long_conversation(req: &Host, work: &Host) -> Duration {
    let ctx = "ctx-talk";
    let register = || async {
        call(
            req.client
                .register_async(ctx, agent_card("talker"), Delivery::Push),
        )
        .await
        .expect("the talker registers")
    };
    let mut talker = register().await;
    let started = Instant::now();
    let mut contexts_there = std::collections::HashSet::new();
    for i in 0..500 {
        let text = format!("talk {i}");
        let t =
            match call(talker.send_async(message_to(&req.remote_coder, &text), blocking())).await {
                Err(e) if e.a2a_code() == Some(A2aErrorCode::SendCap) => {
                    call(talker.deregister_async()).await.expect("deregister");
                    talker = register().await;
                    call(talker.send_async(message_to(&req.remote_coder, &text), blocking()))
                        .await
                        .expect("send after registering again")
                }
                other => other.expect("send ok"),
            };
        let t = until_state(&talker, &t.id, &SETTLED).await;
        assert_eq!(
            t.status.state,
            State::Completed,
            "message {i}: {:?}",
            view(&t)
        );
        let reply = t.status.message.as_deref().map(|m| texts(&m.parts));
        assert_eq!(reply, Some(vec![format!("reply: {text}")]), "message {i}");
        if i % 50 == 0 {
            let there = get(&work.coder.agent, &work.coder.task_of(&text)).await;
            assert_eq!(view(&there), view(&t), "message {i}");
            contexts_there.insert(there.context_id.clone());
        }
    }
    // One conversation here is one there.
    assert_eq!(contexts_there.len(), 1, "{contexts_there:?}");
    started.elapsed()
}

/// A `slow` task from `req` to `work`, working on both hosts.
async fn slow(req: &Host, work: &Host, text: &str) -> String {
    let t = call(
        req.planner
            .send_async(message_to(&req.remote_coder, text), None),
    )
    .await
    .expect("send");
    until_state(&req.planner, &t.id, &[State::Working]).await;
    work.coder.until_seen(text).await;
    t.id
}

/// Waits until the requester's task holds the gateway's `kind` notice
/// (with `working`: and is still working); how long that took.
async fn until_notice(req: &Host, id: &str, kind: &str, working: bool) -> Duration {
    let started = Instant::now();
    loop {
        let t = get(&req.planner, id).await;
        let noticed = t.history.iter().any(|m| {
            m.metadata
                .as_ref()
                .and_then(|md| md.get(NOTICE_KEY))
                .and_then(|v| v.as_str())
                == Some(kind)
        });
        if noticed {
            if working {
                assert_eq!(t.status.state, State::Working, "the state is kept");
            }
            return started.elapsed();
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "no {kind} notice on {id}: {:?}",
            view(&t)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `host`'s gateway process dies (`signal`) mid-task, in both directions:
/// the other host's requester is told its remote is unreachable within
/// the bound, the coder behind the dead gateway completes meanwhile, and
/// once the gateway is back both tasks complete (never failed), each run
/// once, with equal histories. Answers to two `input-required` tasks are
/// sent while the gateway is down, one each way: both are delivered once
/// it is back.
async fn restart(a: &mut Host, b: &mut Host, signal: &str, tag: &str) {
    // `a` is the host whose gateway restarts.
    let into_a = format!("slow into {tag}");
    let from_a = format!("slow from {tag}");
    let t_into = slow(b, a, &into_a).await;
    let t_from = slow(a, b, &from_a).await;
    let ask_into = format!("input into {tag}");
    let ask_from = format!("input from {tag}");
    let q_into = ask(&b.planner, message_to(&b.remote_coder, &ask_into)).await;
    let q_from = ask(&a.planner, message_to(&a.remote_coder, &ask_from)).await;
    for q in [&q_into, &q_from] {
        assert_eq!(q.status.state, State::InputRequired, "{:?}", view(q));
    }
    let stopping = Instant::now();
    a.stop_gateway(signal);
    eprintln!("{tag}: the gateway exited in {:?}", stopping.elapsed());
    // Into `a`: `b`'s bridge cannot reach it; from `a`: no bridge reads it.
    for (planner, q) in [(&b.planner, &q_into), (&a.planner, &q_from)] {
        call(planner.send_async(task_message(&q.id, "the one from before"), None))
            .await
            .expect("an answer sent while the gateway is down");
    }
    let waited = until_notice(b, &t_into, a2a_gateway::NOTICE_UNREACHABLE, true).await;
    assert!(
        waited <= a2a_gateway::REMOTE_UNREACHABLE_AFTER + Duration::from_secs(3),
        "told after {waited:?}"
    );
    // Both coders finish while the gateway is down.
    a.coder.finish(&into_a).await;
    b.coder.finish(&from_a).await;
    assert_eq!(get(&b.planner, &t_into).await.status.state, State::Working);
    a.start_gateway();
    let back = Instant::now();
    let done = until_state(&b.planner, &t_into, &[State::Completed, State::Failed]).await;
    assert_eq!(done.status.state, State::Completed, "{:?}", view(&done));
    let done = until_state(&a.planner, &t_from, &[State::Completed, State::Failed]).await;
    assert_eq!(done.status.state, State::Completed, "{:?}", view(&done));
    eprintln!(
        "{tag}: both tasks completed {:?} after the gateway came back",
        back.elapsed()
    );
    // Resumed within about REMOTE_PROBE_EVERY of the return, not a poll
    // interval later (slack for a loaded machine).
    assert!(
        back.elapsed() <= a2a_gateway::REMOTE_PROBE_EVERY + Duration::from_secs(5),
        "resumed {:?} after the gateway came back",
        back.elapsed()
    );
    until_notice(b, &t_into, a2a_gateway::NOTICE_REACHABLE, false).await;
    same_on_both(b, &t_into, a, &into_a).await;
    same_on_both(a, &t_from, b, &from_a).await;
    for (req, q, work, text) in [
        (&*b, &q_into, &*a, &ask_into),
        (&*a, &q_from, &*b, &ask_from),
    ] {
        let done = until_state(&req.planner, &q.id, &[State::Completed, State::Failed]).await;
        assert_eq!(done.status.state, State::Completed, "{:?}", view(&done));
        let v = same_on_both(req, &q.id, work, text).await;
        assert_eq!(
            v.messages.last().map(|m| m.1.clone()),
            Some(vec!["got: the one from before".to_owned()]),
            "{v:?}"
        );
    }
}

/// No task left open on either host, and every task reached its coder
/// once.
async fn nothing_hanging(hosts: [&Host; 2]) {
    for h in hosts {
        for (agent, role) in [
            (&h.planner, ListRole::Requester),
            (&h.coder.agent, ListRole::Worker),
        ] {
            for state in [
                State::Submitted,
                State::Working,
                State::InputRequired,
                State::AuthRequired,
            ] {
                let q = TaskQuery {
                    role,
                    state: Some(state),
                    limit: Some(100),
                    cursor: None,
                };
                let page = call(agent.list_tasks_async(q)).await.expect("list");
                assert!(
                    page.tasks.is_empty(),
                    "{} holds {state:?} tasks: {:?}",
                    agent.id(),
                    page.tasks.iter().map(view).collect::<Vec<_>>()
                );
            }
        }
        for (text, ids) in h.coder.seen.lock().iter() {
            assert_eq!(
                ids.len(),
                1,
                "{text} ran {} times on {}",
                ids.len(),
                h.coder.agent.id()
            );
        }
    }
}

fn wait_socket(p: &Path) {
    assert!(p.exists(), "{}", p.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_cooperate_through_their_gateways() {
    let started = Instant::now();
    let (pa, pb) = (free_port(), free_port());
    let mut a = Host::new("a", "b", pa, pb).await;
    let mut b = Host::new("b", "a", pb, pa).await;
    wait_socket(&a.socket);
    // A starts first: its bridge waits for B's gateway (any order works).
    a.start_gateway();
    b.start_gateway();
    a.until_bridged().await;
    b.until_bridged().await;

    eprintln!("two hosts up: {:?}", started.elapsed());

    tokio::join!(exchanges(&b, &a, "b2a"), exchanges(&a, &b, "a2b"));
    eprintln!("exchanges: {:?}", started.elapsed());
    tokio::join!(concurrent(&b, &a, "b2a"), concurrent(&a, &b, "a2b"));
    eprintln!("16 at once: {:?}", started.elapsed());
    let talk = long_conversation(&b, &a).await;
    eprintln!("1,000 messages in one conversation: {talk:?}");

    restart(&mut a, &mut b, "KILL", "a-killed").await;
    eprintln!("A's gateway killed and back: {:?}", started.elapsed());
    restart(&mut b, &mut a, "TERM", "b-stopped").await;
    eprintln!("B's gateway stopped and back: {:?}", started.elapsed());

    nothing_hanging([&a, &b]).await;
    eprintln!("federation test: {:?}", started.elapsed());
}

/// `serve --remote-bearer-env VAR`: the bridge sends the token the other
/// host's gateway requires, read from the environment (never the command
/// line, where `ps` would show it). With a wrong token a task fails with
/// the remote's refusal; with the right one it crosses and completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_that_requires_a_token_is_sent_the_one_in_the_environment() {
    let (pa, pb) = (free_port(), free_port());
    let mut a = Host::new("a", "b", pa, pb).await;
    let mut b = Host::new("b", "a", pb, pa).await;
    let coder_a = a.coder.agent.id().to_owned();
    a.gateway = Some(GatewayProc::start_on(
        &a.listen,
        &a.socket,
        &a.secret,
        &a.state,
        &[
            "--expose",
            &coder_a,
            "--token",
            "host-b=fed-secret-of-host-b",
        ],
    ));
    let coder_b = b.coder.agent.id().to_owned();
    let bridge = |b: &Host, token: &str| {
        GatewayProc::start_on_env(
            &b.listen,
            &b.socket,
            &b.secret,
            &b.state,
            &[
                "--expose",
                &coder_b,
                "--remote",
                &b.remote_url,
                "--remote-bearer-env",
                "FED_TOKEN",
            ],
            &[("FED_TOKEN", token)],
        )
    };
    // A wrong token: the card is public, so A's coder is bridged, but A
    // refuses the call and the task fails saying so.
    b.gateway = Some(bridge(&b, "not-the-secret-of-host-b"));
    b.until_bridged().await;
    let t = ask(
        &b.planner,
        message_to(&b.remote_coder, "complete without a token"),
    )
    .await;
    assert_eq!(t.status.state, State::Failed, "{:?}", view(&t));
    let why = t
        .status
        .message
        .as_ref()
        .map(|m| m.text())
        .unwrap_or_default();
    eprintln!("refused: {why}");
    assert!(why.contains("401"), "the reason names the refusal: {why}");
    assert!(a.coder.seen.lock().is_empty(), "A's coder saw nothing");
    b.stop_gateway("TERM");
    b.gateway = Some(bridge(&b, "fed-secret-of-host-b"));
    b.until_bridged().await;
    let t = ask(
        &b.planner,
        message_to(&b.remote_coder, "complete with a token"),
    )
    .await;
    assert_eq!(t.status.state, State::Completed, "{:?}", view(&t));
    a.coder.until_seen("complete with a token").await;
}
