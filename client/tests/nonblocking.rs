//! The non-blocking core against the real broker binary: every `_async`
//! method, consumed in every way a `Pending` allows (wait, try_take,
//! on_complete, `.await` from tokio); thousands of calls in flight from one
//! thread; what a SIGKILLed broker does to pending calls, events, handlers
//! and streams; event handlers (ordering, queued events first, removal,
//! replacement from inside, dropping the client from inside, blocking calls
//! from inside); the pull agent's second `wait`; typed error kinds.

mod common;

use a2a_client::proto::params::SendConfiguration;
use a2a_client::{
    agent_card, message_to, task_message, text_artifact, A2aErrorCode, Agent, Client, ClientError,
    CloseReason, Delivery, ErrorKind, Event, EventHandler, ListRole, Pending, PushConfig, State,
    Task, TaskQuery,
};
use common::*;
use futures_core::Stream;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn register(client: &Client, ctx: &str, name: &str) -> Agent {
    client
        .register(ctx, agent_card(name), Delivery::Push)
        .expect("register")
}

/// Takes a `Pending`'s answer by polling `try_take`, with a deadline.
fn poll_take<T>(mut p: Pending<T>) -> Result<T, ClientError> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(r) = p.try_take() {
            assert!(p.try_take().is_none(), "an answer is taken once");
            return r;
        }
        assert!(Instant::now() < deadline, "no answer by try_take");
        std::thread::yield_now();
    }
}

/// Takes a `Pending`'s answer through `on_complete`, with a deadline.
fn via_callback<T: Send + 'static>(p: Pending<T>) -> Result<T, ClientError> {
    let (tx, rx) = mpsc::channel();
    p.on_complete(move |r| {
        let _ = tx.send(r);
    });
    rx.recv_timeout(TIMEOUT).expect("on_complete never ran")
}

fn task_ids(evs: &[Event]) -> Vec<String> {
    evs.iter()
        .filter_map(|e| status_of(e).map(|(id, _, _)| id.to_owned()))
        .collect()
}

#[test]
fn every_async_method_answers_through_every_way_of_taking_it() {
    let b = Broker::start();
    let (ca, cb) = (b.connect(), b.connect());
    let r = ca
        .register_async("ctx-r", agent_card("asker"), Delivery::Push)
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    let w = via_callback(
        cb.register_async("ctx-w", agent_card("doer"), Delivery::Push)
            .unwrap(),
    )
    .unwrap();
    assert_eq!((r.id(), w.id()), ("asker", "doer"));

    let peers = poll_take(r.list_agents_async(None).unwrap()).unwrap();
    assert_eq!(
        peers.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["doer"]
    );

    let t = r
        .send_async(message_to("doer", "do it"), None)
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    assert_eq!((t.status.state, t.version), (State::Submitted, 1));
    assert_eq!(task_ids(&collect_n(&w, 1)), [t.id.as_str()]);

    let got = via_callback(w.get_task_async(&t.id, Some(1)).unwrap()).unwrap();
    assert_eq!((got.id.as_str(), got.history.len()), (t.id.as_str(), 1));

    let t2 = poll_take(
        w.set_status_async(&t.id, State::Working, Some(task_message(&t.id, "on it")))
            .unwrap(),
    )
    .unwrap();
    assert_eq!((t2.status.state, t2.version), (State::Working, 2));
    let t3 = w
        .add_artifact_async(&t.id, text_artifact("out", "v3"), false, true)
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    assert_eq!((t3.version, t3.artifacts.len()), (3, 1));
    assert_eq!(collect_n(&r, 2).len(), 2);

    let cfg = PushConfig {
        id: "cfg-1".into(),
        url: None,
        token: None,
    };
    let set = via_callback(w.set_push_config_async(&t.id, cfg.clone()).unwrap()).unwrap();
    assert_eq!(set.as_ref().map(|c| c.id.as_str()), Some("cfg-1"));
    let read = poll_take(w.push_config_async(&t.id).unwrap()).unwrap();
    assert_eq!(read, set);

    let again = r
        .resubscribe_async(&t.id, None)
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    assert_eq!(again.version, 3);
    assert_eq!(task_ids(&collect_n(&r, 1)), [t.id.as_str()]);

    let s = via_callback(r.stream_async(message_to("doer", "stream")).unwrap()).unwrap();
    assert_eq!(task_ids(&collect_n(&r, 1)), [s.id.as_str()]);
    assert_eq!(task_ids(&collect_n(&w, 1)), [s.id.as_str()]);

    let all = poll_take(r.broadcast_async(message_to("*", "hello"), None).unwrap()).unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(collect_n(&w, 1).len(), 1);

    let page = r
        .list_tasks_async(TaskQuery {
            role: ListRole::Requester,
            ..TaskQuery::default()
        })
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    assert_eq!(page.tasks.len(), 3);

    let c = via_callback(r.cancel_async(&s.id, None).unwrap()).unwrap();
    assert_eq!(c.status.state, State::Canceled);

    // Broker errors keep their kind and typed A2A code.
    let e = r
        .get_task_async("no-such-task", None)
        .unwrap()
        .wait(TIMEOUT);
    let e = e.expect_err("unknown task");
    assert_eq!(e.kind(), ErrorKind::Rpc);
    assert_eq!(e.a2a_code(), Some(A2aErrorCode::UnknownTask));

    // The escape hatches, submitted.
    let o = ca.call_json_async("a2a.agents.list", serde_json::json!({"token": r.token()}));
    let v = o.unwrap().wait(TIMEOUT).unwrap();
    assert_eq!(v["agents"][0]["name"], "doer");

    // Deregistration: answered, then every later submission fails at once.
    poll_take(w.deregister_async().unwrap()).unwrap();
    assert!(w.is_deregistered());
    let e = w.get_task_async(&t.id, None).expect_err("deregistered");
    assert_eq!(e.kind(), ErrorKind::Deregistered);
    // Events queued before the deregistration stay readable; then `wait`
    // says why no more will come (at once: the queue is closed).
    loop {
        match w.wait(Duration::from_secs(60)) {
            Ok(evs) => assert!(!evs.is_empty(), "a closed queue never waits"),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Deregistered, "{e}");
                break;
            }
        }
    }
}

#[test]
fn a_frame_too_large_fails_at_submission_and_the_connection_stays_usable() {
    let b = Broker::start();
    let c = b.connect();
    let a = register(&c, "ctx", "big");
    let huge = "x".repeat(a2a_client::proto::limits::MAX_FRAME_BYTES + 1);
    let e = a
        .send_async(message_to("nobody", &huge), None)
        .expect_err("too large");
    assert_eq!(e.kind(), ErrorKind::FrameTooLarge);
    assert!(a.list_agents(None).unwrap().is_empty());
}

#[test]
fn thousands_of_calls_in_flight_from_one_thread_complete_exactly_once() {
    const N: usize = 4000;
    let b = Broker::start();
    let c = b.connect();
    let r = register(&c, "ctx", "asker");
    let _w = register(&c, "ctx", "doer");
    let t = r.send(message_to("doer", "read me"), None).unwrap();

    // Every other call completes through a callback, counted per call; the
    // rest are kept and taken afterwards.
    let counts: Arc<Vec<AtomicU8>> = Arc::new((0..N).map(|_| AtomicU8::new(0)).collect());
    let wrong = Arc::new(AtomicUsize::new(0));
    let (before_frames, before_writes) = c.write_stats();
    let mut kept = Vec::new();
    for i in 0..N {
        let p = r.get_task_async(&t.id, Some(1)).unwrap();
        if i % 2 == 0 {
            let (counts, wrong, id) = (counts.clone(), wrong.clone(), t.id.clone());
            p.on_complete(move |res| {
                if !matches!(&res, Ok(task) if task.id == id) {
                    wrong.fetch_add(1, Ordering::Relaxed);
                }
                counts[i].fetch_add(1, Ordering::Relaxed);
            });
        } else {
            kept.push((i, p));
        }
    }
    for (i, p) in kept {
        let task = p.wait(TIMEOUT).unwrap();
        assert_eq!(task.id, t.id);
        counts[i].fetch_add(1, Ordering::Relaxed);
    }
    // The callbacks of answers that came before the last kept one have run;
    // the rest run on the reader thread: wait for them.
    let deadline = Instant::now() + TIMEOUT;
    while counts.iter().any(|n| n.load(Ordering::Relaxed) == 0) {
        assert!(Instant::now() < deadline, "some completions never came");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(counts.iter().all(|n| n.load(Ordering::Relaxed) == 1));
    assert_eq!(wrong.load(Ordering::Relaxed), 0);
    // The writer coalesced the burst: fewer write calls than frames.
    let (frames, writes) = c.write_stats();
    assert_eq!(frames - before_frames, N as u64);
    assert!(
        writes - before_writes < N as u64,
        "{} writes for {N} frames",
        writes - before_writes
    );
}

#[test]
fn a_killed_broker_fails_every_pending_call_with_closed_and_ends_events() {
    let mut b = Broker::start();
    let (ca, cb) = (b.connect(), b.connect());
    let r = register(&ca, "ctx-r", "asker");
    let w = register(&cb, "ctx-w", "doer");
    let streamer = register(&ca, "ctx-s", "streamer");

    // Blocking sends the broker holds (until the worker answers, or 30 s):
    // pending when the broker dies. One of each way of taking an answer.
    let blocking = || {
        Some(SendConfiguration {
            blocking: Some(true),
            history_length: None,
            push_notification_config: None,
        })
    };
    let held: Vec<Pending<Task>> = (0..3)
        .map(|i| r.send_async(message_to("doer", &format!("hold {i}")), blocking()))
        .collect::<Result<_, _>>()
        .unwrap();
    collect_n(&w, 3);
    let (tx, rx) = mpsc::channel();
    let mut held = held.into_iter();
    let cb_tx = tx.clone();
    held.next().unwrap().on_complete(move |res| {
        let _ = cb_tx.send(res.map(|_| ()));
    });
    let mut polled = held.next().unwrap();
    let waited = held.next().unwrap();
    let wait_tx = tx.clone();
    let waiter = std::thread::spawn(move || {
        let _ = wait_tx.send(waited.wait(Duration::from_secs(300)).map(|_| ()));
    });
    // A handler on the worker, a stream on the third agent.
    let dropped = Arc::new(AtomicBool::new(false));
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let flag = Flag(dropped.clone());
    w.set_event_handler(Some(Box::new(move |_, _| {
        let _ = &flag;
    })));
    let mut stream = streamer.events();

    b.kill();
    for _ in 0..2 {
        let res = rx
            .recv_timeout(TIMEOUT)
            .expect("a pending call did not fail");
        assert!(
            matches!(res, Err(ClientError::Closed(CloseReason::ByBroker))),
            "{res:?}"
        );
    }
    waiter.join().unwrap();
    let deadline = Instant::now() + TIMEOUT;
    let res = loop {
        if let Some(r) = polled.try_take() {
            break r;
        }
        assert!(Instant::now() < deadline, "try_take never saw the failure");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(res.map(|_| ()).unwrap_err().kind(), ErrorKind::Closed);
    // Later submissions fail at once; the events side ends too.
    assert_eq!(
        r.get_task_async("x", None).unwrap_err().kind(),
        ErrorKind::Closed
    );
    assert!(matches!(
        r.wait(Duration::from_secs(60)),
        Err(ClientError::Closed(_))
    ));
    let deadline = Instant::now() + TIMEOUT;
    while !dropped.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "the handler was never dropped");
        std::thread::sleep(Duration::from_millis(1));
    }
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    assert_eq!(
        Pin::new(&mut stream).poll_next(&mut cx),
        std::task::Poll::Ready(None),
        "the stream ends with the connection"
    );
}

/// Sends `n` tasks from `r` to `w`'s name; returns their ids.
fn send_n(r: &Agent, to: &str, n: usize, tag: &str) -> Vec<String> {
    (0..n)
        .map(|i| {
            r.send(message_to(to, &format!("{tag} {i}")), None)
                .unwrap()
                .id
        })
        .collect()
}

/// Waits (with a deadline) until `f` holds.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !f() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn handlers_get_queued_events_first_in_order_and_stop_when_removed() {
    let b = Broker::start();
    let (ca, cb) = (b.connect(), b.connect());
    let r = register(&ca, "ctx-r", "asker");
    let w = register(&cb, "ctx-w", "doer");

    // Three creation events queued before any handler: the worker's own
    // resubscribe is answered after them on its connection, so when it
    // returns they (and its status event) are queued.
    let first = send_n(&r, "doer", 3, "early");
    w.resubscribe(&first[2], None).unwrap();
    assert!(w.has_events());

    let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let after_removal = Arc::new(AtomicBool::new(false));
    let late_calls = Arc::new(AtomicUsize::new(0));
    let handler: EventHandler = {
        let (seen, after_removal, late_calls) =
            (seen.clone(), after_removal.clone(), late_calls.clone());
        Box::new(move |agent, ev| {
            if after_removal.load(Ordering::SeqCst) {
                late_calls.fetch_add(1, Ordering::SeqCst);
            }
            assert_eq!(agent.id(), "doer");
            let thread = std::thread::current().name().unwrap_or("").to_owned();
            let id = status_of(&ev).map(|s| s.0.to_owned()).unwrap_or_default();
            seen.lock().unwrap().push((id, thread));
        })
    };
    w.set_event_handler(Some(handler));
    // The queued ones were handed over before `set_event_handler` returned,
    // in order, on this thread.
    {
        let seen = seen.lock().unwrap();
        let ids: Vec<&str> = seen.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, [&first[0], &first[1], &first[2], &first[2]]);
    }
    let mut none = Vec::new();
    assert_eq!(
        w.try_events(&mut none, 10),
        0,
        "events go only to the handler"
    );

    // Later events arrive on the reader thread, in order.
    let later = send_n(&r, "doer", 20, "later");
    eventually("the later events reach the handler", || {
        seen.lock().unwrap().len() == 24
    });
    {
        let seen = seen.lock().unwrap();
        let ids: Vec<String> = seen[4..].iter().map(|(id, _)| id.clone()).collect();
        assert_eq!(ids, later);
        assert!(seen[4..].iter().all(|(_, t)| t == "a2a-client-reader"));
    }

    // Removal while events flow: none is handled after it returns; they
    // queue for `wait` again.
    let flood = {
        let r = r.clone();
        std::thread::spawn(move || send_n(&r, "doer", 50, "flood"))
    };
    std::thread::sleep(Duration::from_millis(5));
    w.set_event_handler(None);
    after_removal.store(true, Ordering::SeqCst);
    let flood = flood.join().unwrap();
    let handled = seen.lock().unwrap().len() - 24;
    let rest = collect_n(&w, 50 - handled);
    assert_eq!(late_calls.load(Ordering::SeqCst), 0);
    let mut all: Vec<String> = seen.lock().unwrap()[24..]
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    all.extend(task_ids(&rest));
    assert_eq!(all, flood, "each event once, in order, across the switch");
}

#[test]
fn a_handler_can_replace_itself_and_answer_without_blocking() {
    let b = Broker::start();
    let (ca, cb) = (b.connect(), b.connect());
    let r = register(&ca, "ctx-r", "asker");
    let w = register(&cb, "ctx-w", "doer");

    // The first handler answers its first task with an `_async` call from
    // inside, and a blocking call fails instead of deadlocking; then it
    // installs a second handler in its own place.
    let (tx, rx) = mpsc::channel::<String>();
    let tx2 = tx.clone();
    w.set_event_handler(Some(Box::new(move |agent, ev| {
        let Some((id, _, _)) = status_of(&ev) else {
            return;
        };
        let blocking = agent.get_task(id, None);
        tx.send(format!(
            "blocking: {:?}",
            blocking.map(|_| ()).map_err(|e| e.kind())
        ))
        .unwrap();
        let wait = agent.wait(Duration::from_secs(30));
        tx.send(format!(
            "wait: {:?}",
            wait.map(|_| ()).map_err(|e| e.kind())
        ))
        .unwrap();
        let cb_tx = tx.clone();
        agent
            .set_status_async(id, State::Completed, None)
            .unwrap()
            .on_complete(move |res| {
                cb_tx
                    .send(format!("answered: {:?}", res.map(|t| t.status.state)))
                    .unwrap();
            });
        let tx2 = tx2.clone();
        agent.set_event_handler(Some(Box::new(move |_, ev| {
            if let Some((id, _, _)) = status_of(&ev) {
                tx2.send(format!("second: {id}")).unwrap();
            }
        })));
    })));
    let ids = send_n(&r, "doer", 2, "job");
    let mut got: Vec<String> = (0..4)
        .map(|_| rx.recv_timeout(TIMEOUT).expect("handler output"))
        .collect();
    // The answer to the handler's call and the second task's event race
    // each other; everything else is ordered.
    got[2..].sort();
    assert_eq!(
        got,
        [
            "blocking: Err(WouldDeadlock)".to_owned(),
            "wait: Err(WouldDeadlock)".to_owned(),
            "answered: Ok(Completed)".to_owned(),
            format!("second: {}", ids[1]),
        ]
    );
    // The requester saw its first task completed by the handler's answer.
    let evs = collect_until(&r, |evs| {
        evs.iter()
            .any(|e| status_of(e) == Some((ids[0].as_str(), State::Completed, true)))
    });
    assert!(!evs.is_empty());
}

#[test]
fn a_handler_that_drops_the_last_handle_closes_the_client_without_deadlock() {
    let b = Broker::start();
    let ca = b.connect();
    let r = register(&ca, "ctx-r", "asker");
    let cb = b.connect();
    let w = register(&cb, "ctx-w", "doer");

    // The handler owns the only handles left of its client and agent, and
    // drops them on its first event: the connection is dropped on its own
    // reader thread.
    let owned: Arc<Mutex<Option<(Client, Agent)>>> = Arc::new(Mutex::new(None));
    let (tx, rx) = mpsc::channel();
    {
        let owned = owned.clone();
        w.set_event_handler(Some(Box::new(move |agent, _| {
            let gone = owned.lock().unwrap().take();
            tx.send(agent.id().to_owned()).unwrap();
            drop(gone);
        })));
    }
    *owned.lock().unwrap() = Some((cb, w));
    r.send(message_to("doer", "drop everything"), None).unwrap();
    assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), "doer");
    // The connection closed: the broker frees the name for a newcomer.
    let fresh = b.connect();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let a = fresh
            .register("ctx-w", agent_card("doer"), Delivery::Push)
            .unwrap();
        if a.id() == "doer" {
            break;
        }
        a.deregister().unwrap();
        assert!(Instant::now() < deadline, "the name never became free");
        std::thread::sleep(Duration::from_millis(10));
    }
    // And the asker's connection is unaffected.
    assert_eq!(r.list_agents(None).unwrap().len(), 1);
}

#[test]
fn a_handler_that_closes_its_client_from_inside_ends_it_cleanly() {
    let b = Broker::start();
    let (ca, cb) = (b.connect(), b.connect());
    let r = register(&ca, "ctx-r", "asker");
    let w = register(&cb, "ctx-w", "doer");
    let (tx, rx) = mpsc::channel();
    w.set_event_handler(Some(Box::new(move |agent, _| {
        agent.client().close();
        tx.send(agent.client().close_reason()).unwrap();
    })));
    r.send(message_to("doer", "close"), None).unwrap();
    assert_eq!(
        rx.recv_timeout(TIMEOUT).unwrap(),
        Some(CloseReason::Shutdown)
    );
    assert!(matches!(
        w.get_task("x", None),
        Err(ClientError::Closed(CloseReason::Shutdown))
    ));
    drop((w, cb));
}

#[test]
fn try_events_and_the_stream_drain_without_blocking() {
    let b = Broker::start();
    let c = b.connect();
    let r = register(&c, "ctx", "asker");
    let w = register(&c, "ctx", "doer");
    let mut out = Vec::new();
    assert_eq!(w.try_events(&mut out, 10), 0);
    let ids = send_n(&r, "doer", 5, "job");
    let deadline = Instant::now() + TIMEOUT;
    while out.len() < 5 {
        assert!(Instant::now() < deadline, "events never queued: {out:?}");
        if w.try_events(&mut out, 2) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    assert_eq!(task_ids(&out), ids);
    assert_eq!(out.len(), 5);

    // The stream: a task per event, woken by the reader thread.
    let more = send_n(&r, "doer", 3, "more");
    let mut stream = w.events();
    let got: Vec<Event> = block_on_n(&mut stream, 3);
    assert_eq!(task_ids(&got), more);
}

/// Takes `n` items of a stream, parking this thread between polls (a
/// minimal executor: the waker unparks it), with a deadline.
fn block_on_n(stream: &mut a2a_client::Events, n: usize) -> Vec<Event> {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let deadline = Instant::now() + TIMEOUT;
    let mut got = Vec::new();
    while got.len() < n {
        match Pin::new(&mut *stream).poll_next(&mut cx) {
            std::task::Poll::Ready(Some(ev)) => got.push(ev),
            std::task::Poll::Ready(None) => panic!("stream ended"),
            std::task::Poll::Pending => {
                assert!(Instant::now() < deadline, "stream stalled");
                std::thread::park_timeout(Duration::from_millis(100));
            }
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_calls_and_events_await_from_tokio() {
    let b = Broker::start();
    let c = b.connect();
    let r = register(&c, "ctx", "asker");
    let w = register(&c, "ctx", "doer");
    let t = tokio::time::timeout(
        TIMEOUT,
        r.send_async(message_to("doer", "go"), None).unwrap(),
    )
    .await
    .expect("send answered")
    .unwrap();
    // Many awaited at once, joined by tokio.
    let handles: Vec<_> = (0..50)
        .map(|_| tokio::spawn(w.get_task_async(&t.id, None).unwrap()))
        .collect();
    for h in handles {
        let got = tokio::time::timeout(TIMEOUT, h)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(got.id, t.id);
    }
    // The event stream, awaited.
    let mut events = w.events();
    let ev = tokio::time::timeout(
        TIMEOUT,
        std::future::poll_fn(|cx| Pin::new(&mut events).poll_next(cx)),
    )
    .await
    .expect("event awaited")
    .expect("stream open");
    assert_eq!(status_of(&ev).map(|s| s.0.to_owned()), Some(t.id.clone()));
    // Errors come through `.await` too.
    let e = tokio::time::timeout(TIMEOUT, r.cancel_async("nope", None).unwrap())
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(e.a2a_code(), Some(A2aErrorCode::UnknownTask));
}

#[test]
fn a_second_pull_wait_gives_up_at_its_own_timeout() {
    let b = Broker::start();
    let c = b.connect();
    let pull = c
        .register("ctx", agent_card("puller"), Delivery::Pull)
        .unwrap();
    // The first wait holds the agent's wait for a long while (no events).
    let (tx, rx) = mpsc::channel();
    let first = {
        let pull = pull.clone();
        std::thread::spawn(move || tx.send(pull.wait(Duration::from_secs(20))).unwrap())
    };
    // Let it take the agent's wait first: if it has not yet, the second
    // wait below simply runs first, which the assertions also accept.
    std::thread::sleep(Duration::from_millis(100));
    let second = pull.wait(Duration::from_millis(200)).unwrap();
    assert!(second.is_empty());
    // The second returned while the first still waits: it did not queue
    // behind it for longer than its own timeout.
    assert!(
        rx.try_recv().is_err(),
        "the first wait ended before the second"
    );
    // An event ends the first wait.
    let r = register(&c, "ctx", "asker");
    r.send(message_to("puller", "wake"), None).unwrap();
    let got = rx.recv_timeout(TIMEOUT).unwrap().unwrap();
    assert_eq!(got.len(), 1);
    first.join().unwrap();
}

#[test]
fn a_pull_agent_feeds_its_handler_and_stream_without_a_thread() {
    let b = Broker::start();
    let c = b.connect();
    let pull = c
        .register("ctx", agent_card("puller"), Delivery::Pull)
        .unwrap();
    let r = register(&c, "ctx", "asker");

    // A handler: the pump fetches the events and hands them over in order,
    // on the reader thread.
    let (tx, rx) = mpsc::channel();
    pull.set_event_handler(Some(Box::new(move |_, ev| {
        let thread = std::thread::current().name().unwrap_or("").to_owned();
        tx.send((status_of(&ev).map(|s| s.0.to_owned()), thread))
            .unwrap();
    })));
    let ids = send_n(&r, "puller", 5, "pulled");
    let got: Vec<(Option<String>, String)> = (0..5)
        .map(|_| rx.recv_timeout(TIMEOUT).expect("handled"))
        .collect();
    assert_eq!(
        got.iter()
            .map(|(id, _)| id.clone().unwrap())
            .collect::<Vec<_>>(),
        ids
    );
    assert!(got.iter().all(|(_, t)| t == "a2a-client-reader"));

    // Removed: later events are fetched by `wait` (from the pump's last
    // batch or directly), each once.
    pull.set_event_handler(None);
    let later = send_n(&r, "puller", 3, "later");
    let evs = collect_until(&pull, |evs| evs.len() >= 3);
    assert_eq!(task_ids(&evs), later);
    assert!(rx.try_recv().is_err(), "no handler call after removal");

    // A stream keeps the pump going while it lives.
    let mut stream = pull.events();
    let more = send_n(&r, "puller", 2, "streamed");
    assert_eq!(task_ids(&block_on_n(&mut stream, 2)), more);
    drop(stream);
    // With the stream gone, the next event reaches `wait` exactly once,
    // whether the pump's last call or a direct wait fetched it.
    let last = send_n(&r, "puller", 1, "last");
    let evs = collect_until(&pull, |evs| !evs.is_empty());
    assert_eq!(task_ids(&evs), last);
    let mut rest = Vec::new();
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        rest.extend(pull.wait(Duration::from_millis(50)).unwrap());
    }
    assert!(rest.is_empty(), "delivered twice: {rest:#?}");
}
