//! Many connections at once, a client that never reads, and a client
//! process killed mid-call: the broker keeps serving everyone else, and
//! every event reaches the agent it is addressed to. Deadlines bound every
//! wait; nothing here measures speed.

mod common;

use a2a_client::proto::binary::{ClientFrame, ServerFrame};
use a2a_client::proto::call::{Call, Outcome};
use a2a_client::proto::params::{GetParams, RegisterParams};
use a2a_client::A2aErrorCode;
use a2a_client::{
    agent_card, message_to, task_message, Agent, Client, Delivery, Notification, State,
};
use common::*;
use serde_json::json;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Lets threads proceed once all have arrived; a thread that waits past
/// the deadline fails (a sibling died) instead of hanging.
struct Latch {
    left: Mutex<usize>,
    all_in: Condvar,
}

impl Latch {
    fn new(n: usize) -> Latch {
        Latch {
            left: Mutex::new(n),
            all_in: Condvar::new(),
        }
    }

    fn arrive_and_wait(&self) {
        let deadline = Instant::now() + TIMEOUT;
        let mut left = self.left.lock().unwrap();
        *left -= 1;
        if *left == 0 {
            self.all_in.notify_all();
        }
        while *left > 0 {
            let wait = deadline.saturating_duration_since(Instant::now());
            assert!(!wait.is_zero(), "latch: {} threads never arrived", *left);
            left = self.all_in.wait_timeout(left, wait).unwrap().0;
        }
    }
}

/// Joins every thread, re-raising the first panic with its message.
fn join_all(handles: Vec<std::thread::JoinHandle<()>>) {
    let mut first = None;
    for h in handles {
        if let Err(p) = h.join() {
            first.get_or_insert(p);
        }
    }
    if let Some(p) = first {
        std::panic::resume_unwind(p);
    }
}

fn spawn_named(name: String, f: impl FnOnce() + Send + 'static) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name(name)
        .stack_size(512 * 1024)
        .spawn(f)
        .expect("spawn thread")
}

const CLIENTS: usize = 256;
const TASKS_EACH: usize = 2;

#[test]
fn many_clients_delegate_across_connections_and_every_event_arrives() {
    let b = Arc::new(Broker::start());
    let latch = Arc::new(Latch::new(CLIENTS));
    let handles: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (b, latch) = (b.clone(), latch.clone());
            spawn_named(format!("client-{i}"), move || one_client(&b, &latch, i))
        })
        .collect();
    join_all(handles);
}

/// Client `i`: a worker and a requester on its own connection; the
/// requester delegates to the worker of client `i + 1`.
fn one_client(b: &Broker, latch: &Latch, i: usize) {
    let c = b.connect();
    let w = c
        .register(
            &format!("ctx-w-{i}"),
            agent_card(&format!("worker-{i}")),
            Delivery::Push,
        )
        .unwrap();
    let r = c
        .register(
            &format!("ctx-r-{i}"),
            agent_card(&format!("req-{i}")),
            Delivery::Push,
        )
        .unwrap();
    assert_eq!(w.id(), format!("worker-{i}"));
    latch.arrive_and_wait();

    let target = format!("worker-{}", (i + 1) % CLIENTS);
    let mine: HashSet<String> = (0..TASKS_EACH)
        .map(|k| {
            let t = r
                .send(message_to(&target, &format!("job {k} from {i}")), None)
                .unwrap();
            assert_eq!(t.agent_name, target);
            t.id
        })
        .collect();

    // Serve the tasks of client i - 1.
    let created = collect_n(&w, TASKS_EACH);
    for ev in &created {
        assert_eq!(ev.recipient(), (w.id(), w.context_id()));
        let (task, state, _) = status_of(ev).expect("a status update");
        assert_eq!(state, State::Submitted);
        assert!(!mine.contains(task), "a worker got its own client's task");
        w.set_status(task, State::Completed, Some(task_message(task, "done")))
            .unwrap();
    }

    // Hear that our own tasks were completed, and nothing else.
    let done = collect_n(&r, TASKS_EACH);
    let finished: HashSet<String> = done
        .iter()
        .map(|ev| {
            assert_eq!(ev.recipient(), (r.id(), r.context_id()));
            let (task, state, fin) = status_of(ev).expect("a status update");
            assert_eq!((state, fin), (State::Completed, true));
            task.to_owned()
        })
        .collect();
    assert_eq!(finished, mine);
    assert_quiet(&w);
    assert_quiet(&r);
}

/// A misbehaving client: registers, then writes `a2a.tasks.get` requests
/// forever and never reads another byte. Returns how it ended: `true` when
/// the broker cut it off (a write failed), `false` if it wrote `cap`
/// requests unhindered.
fn rude_client(b: &Broker, binary: bool, name: &str, cap: u64) -> bool {
    let mut raw = Raw::connect(&b.socket);
    let register = RegisterParams {
        context_id: format!("ctx-{name}"),
        card: agent_card(name),
        delivery: None,
        hidden: false,
    };
    // The handshake and the registration are the only replies it reads.
    let token = if binary {
        raw.preamble();
        raw.send(&handshake_frame(1, Some(&b.secret))).unwrap();
        raw.send(&ClientFrame::Request {
            id: 2,
            call: Call::Register(register),
        })
        .unwrap();
        let mut token = None;
        while token.is_none() {
            match raw.recv().expect("reply") {
                ServerFrame::Response {
                    id: 2,
                    result: Ok(Outcome::Registered(r)),
                } => token = Some(r.token),
                ServerFrame::Response { result: Err(e), .. } => panic!("{e}"),
                _ => {}
            }
        }
        token.unwrap()
    } else {
        raw.send_line(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "app.handshake",
            "params": {"protocolVersion": 10, "secret": b.secret}}),
        );
        raw.send_line(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "a2a.agents.register",
            "params": register}),
        );
        loop {
            let v = raw.recv_line().expect("reply");
            if v["id"] == 2 {
                break v["result"]["token"].as_str().expect("token").to_owned();
            }
        }
    };
    // Batches of requests per write, so the loop is cheap on our side.
    let mut bytes = Vec::new();
    let mut id = 10u64;
    while id < cap {
        bytes.clear();
        for _ in 0..256 {
            id += 1;
            if binary {
                let frame = ClientFrame::Request {
                    id,
                    call: Call::Get(GetParams {
                        token: Some(token.clone()),
                        id: "no-such-task".into(),
                        history_length: None,
                    }),
                };
                a2a_client::proto::binary::encode_frame(&frame, &mut bytes).unwrap();
            } else {
                let line = json!({"jsonrpc": "2.0", "id": id, "method": "a2a.tasks.get",
                    "params": {"token": token, "id": "no-such-task"}});
                bytes.extend_from_slice(format!("{line}\n").as_bytes());
            }
        }
        if raw.stream.write_all(&bytes).is_err() {
            return true;
        }
    }
    false
}

#[test]
fn a_client_that_never_reads_does_not_stall_the_others() {
    const PAIRS: usize = 8;
    const ROUNDS: usize = 25;
    let broker = Arc::new(Broker::start());

    let rude: Vec<_> = [(true, "rude-bin"), (false, "rude-json")]
        .into_iter()
        .map(|(binary, name)| {
            let b = broker.clone();
            spawn_named(name.into(), move || {
                // Far more unread responses than the broker keeps for one
                // connection: it must cut this client off.
                let cut_off = rude_client(&b, binary, name, 200_000);
                assert!(
                    cut_off,
                    "{name}: the broker never closed a client that does not read"
                );
            })
        })
        .collect();

    let latch = Arc::new(Latch::new(PAIRS));
    let mut normal = Vec::new();
    for i in 0..PAIRS {
        let (b, latch) = (broker.clone(), latch.clone());
        normal.push(spawn_named(format!("pair-{i}"), move || {
            let c = b.connect();
            let w = c
                .register(
                    &format!("ctx-w-{i}"),
                    agent_card(&format!("w-{i}")),
                    Delivery::Push,
                )
                .unwrap();
            let r = c
                .register(
                    &format!("ctx-r-{i}"),
                    agent_card(&format!("r-{i}")),
                    Delivery::Push,
                )
                .unwrap();
            latch.arrive_and_wait();
            let worker = spawn_named(format!("worker-{i}"), move || serve(&w, ROUNDS));
            let target = format!("w-{}", (i + 1) % PAIRS);
            for k in 0..ROUNDS {
                let t = r
                    .send(message_to(&target, &format!("round {k}")), None)
                    .unwrap();
                let evs = collect_n(&r, 1);
                assert_eq!(
                    status_of(&evs[0]),
                    Some((t.id.as_str(), State::Completed, true))
                );
            }
            // Events for the rude agents pile up on their connections,
            // never here.
            for rude in ["rude-bin", "rude-json"] {
                match r.send(message_to(rude, "are you there?"), None) {
                    Ok(t) => assert_eq!(t.agent_name, rude),
                    // Already cut off: its agent is gone.
                    Err(e) => assert_eq!(e.a2a_code(), Some(A2aErrorCode::UnknownAgent), "{e}"),
                }
            }
            worker.join().unwrap();
        }));
    }
    join_all(normal);
    join_all(rude);

    // The broker is alive and serves a newcomer.
    let mut broker = Arc::try_unwrap(broker)
        .ok()
        .expect("no other broker handle");
    assert!(broker.alive());
    let c = broker.connect();
    let a = c
        .register("ctx-new", agent_card("newcomer"), Delivery::Push)
        .unwrap();
    let z = c
        .register("ctx-new2", agent_card("other"), Delivery::Push)
        .unwrap();
    let t = a.send(message_to("other", "still there?"), None).unwrap();
    assert_eq!(
        status_of(&collect_n(&z, 1)[0]),
        Some((t.id.as_str(), State::Submitted, false))
    );
}

/// A worker completing `n` tasks as they come.
fn serve(w: &Agent, n: usize) {
    let mut served = 0;
    let deadline = Instant::now() + TIMEOUT;
    while served < n {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "{}: served {served} of {n}", w.id());
        for ev in w.wait(left).unwrap() {
            if let Some((task, State::Submitted, _)) = status_of(&ev) {
                w.set_status(task, State::Completed, None).unwrap();
                served += 1;
            }
        }
    }
}

/// Env var that turns this test binary into the child client of
/// `killing_a_client_mid_call_leaves_its_tasks_open`.
const CHILD_ENV: &str = "A2A_CLIENT_TEST_CHILD";

/// Not a test of its own: the entry point of the child process (run as
/// `<this exe> --exact child_process_main` with `A2A_CLIENT_TEST_CHILD`
/// set). Without that variable it returns at once.
#[test]
fn child_process_main() {
    let Ok(socket) = std::env::var(CHILD_ENV) else {
        return;
    };
    let secret = std::env::var("A2A_CLIENT_TEST_SECRET").unwrap();
    let c = Client::connect(&socket, &secret).unwrap();
    let victim = c
        .register("ctx-victim", agent_card("victim"), Delivery::Push)
        .unwrap();
    let asker = c
        .register("ctx-vreq", agent_card("victim-req"), Delivery::Push)
        .unwrap();
    let t2 = asker
        .send(message_to("helper", "help the victim"), None)
        .unwrap();
    println!("CHILD READY {}", t2.id);
    std::io::stdout().flush().unwrap();
    // The parent now gives the victim a task; serve it forever, from
    // several threads, so calls are always in flight when the kill comes.
    let evs = collect_n(&victim, 1);
    let t1 = status_of(&evs[0]).unwrap().0.to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    let threads: Vec<_> = (0..4)
        .map(|k| {
            let (victim, asker, t1, t2) =
                (victim.clone(), asker.clone(), t1.clone(), t2.id.clone());
            std::thread::spawn(move || {
                // Bounded, in case the parent dies without killing us.
                while Instant::now() < deadline {
                    let _ = victim.set_status(&t1, State::Working, None);
                    let _ = asker.get_task(&t2, Some(k));
                    let _ = victim.list_agents(None);
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

#[test]
fn killing_a_client_mid_call_leaves_its_tasks_open() {
    let b = Broker::start();
    let c = b.connect();
    let boss = c
        .register("ctx-boss", agent_card("boss"), Delivery::Push)
        .unwrap();
    let helper = c
        .register("ctx-helper", agent_card("helper"), Delivery::Push)
        .unwrap();

    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_main",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, &b.socket)
        .env("A2A_CLIENT_TEST_SECRET", &b.secret)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stdout = child.stdout.take().unwrap();
    let mut child = KillOnDrop(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // The harness may have started the line ("test name ... ").
            if let Some((_, id)) = line.split_once("CHILD READY ") {
                let _ = tx.send(id.trim().to_owned());
            }
        }
    });
    let t2 = rx.recv_timeout(TIMEOUT).expect("the child never got ready");
    assert_eq!(
        status_of(&collect_n(&helper, 1)[0]).map(|s| s.0),
        Some(t2.as_str())
    );

    // Give the victim a task, and see it working on it in a loop.
    let t1 = boss
        .send(message_to("victim", "work until killed"), None)
        .unwrap()
        .id;
    collect_until(&boss, |evs| evs.len() >= 3);
    child.0.kill().unwrap();
    child.0.wait().unwrap();

    // The broker lives and serves a new client.
    let fresh = b.connect();
    fresh
        .register("ctx-fresh", agent_card("fresh"), Delivery::Push)
        .unwrap();
    // The killed client's tasks stay open, readable by their counterparts.
    let t1_now = boss.get_task(&t1, None).unwrap();
    assert_eq!(t1_now.status.state, State::Working);
    let t2_now = helper.get_task(&t2, None).unwrap();
    assert_eq!(t2_now.status.state, State::Submitted);
    helper.set_status(&t2, State::Working, None).unwrap();

    // Its name becomes free (once the broker has seen the disconnect), and
    // the same party, registering again, sees its task.
    let deadline = Instant::now() + TIMEOUT;
    let victim = loop {
        let a = fresh
            .register("ctx-victim", agent_card("victim"), Delivery::Push)
            .unwrap();
        if a.id() == "victim" {
            break a;
        }
        a.deregister().unwrap();
        assert!(
            Instant::now() < deadline,
            "the killed client's name never became free"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(
        victim.get_task(&t1, None).unwrap().status.state,
        State::Working
    );
    let boss_events = boss.wait(Duration::ZERO).unwrap();
    assert!(
        boss_events
            .iter()
            .all(|e| matches!(e, Notification::TaskEvent(_))
                && status_of(e).map(|s| s.1) == Some(State::Working)),
        "{boss_events:#?}"
    );
}
