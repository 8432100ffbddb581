//! `a2a-broker reply` as an agent, against a lean agent in the same run
//! (BENCHMARKS.md, "The README's agent"). Sixteen requesters each make
//! blocking sends (`blocking: true`, answered with the completed task)
//! to one worker:
//! - `lean`: an `a2a-client` worker in this process that completes each
//!   task at once with its text (no command): the baseline;
//! - `reply-1-sh`: `a2a-broker reply --concurrency 1` running `sh -c` per
//!   task (`tr a-z A-Z;`: the `;` makes it the shell's), the agent as it
//!   answered before `--concurrency` and direct runs;
//! - `reply`: `a2a-broker reply` as the README starts it (`--exec 'tr a-z
//!   A-Z'`: run directly, 16 at once).
//!
//! ```text
//! cargo build --release -p a2a-cli -p a2a-benches --bins --examples
//! target/release/examples/reply_rate [SENDS_PER_REQUESTER]
//! ```

use a2a_client::proto::types::{Notification, StreamEvent};
use a2a_client::{message_to, task_message, Agent, Client, Delivery, SendConfiguration, State};
use a2a_testkit::{Spawn, TIMEOUT};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const REQUESTERS: usize = 16;

fn main() {
    let per: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SENDS_PER_REQUESTER"))
        .unwrap_or(50);
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("a2a-broker");
    let dir = tempfile::tempdir().unwrap();
    let broker = Spawn::new(dir.path().join("db"))
        .bin(&bin)
        .socket(dir.path().join("run").join("main.sock"))
        .no_stdio()
        .start(TIMEOUT)
        .expect("broker ready");
    let (socket, secret) = (broker.socket().unwrap(), broker.secret().unwrap());
    let client = Client::connect(&socket, &secret).unwrap();
    println!("{REQUESTERS} requesters x {per} blocking sends each, one worker");
    let mut rows = Vec::new();
    for round in 0..2 {
        for mode in ["lean", "reply-1-sh", "reply"] {
            let worker = format!("w-{mode}-{round}");
            let _child: Option<Child>;
            let _lean;
            match mode {
                "lean" => {
                    _child = None;
                    _lean = Some(lean_worker(&client, &worker));
                }
                m => {
                    let mut c = Command::new(&bin);
                    c.args([
                        "reply",
                        "--socket",
                        socket.to_str().unwrap(),
                        "--as",
                        &worker,
                    ])
                    .args(["--context", "bench"])
                    .env("A2A_BROKER_SECRET", &secret)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped());
                    if m == "reply-1-sh" {
                        c.args(["--exec", "tr a-z A-Z;", "--concurrency", "1"]);
                    } else {
                        c.args(["--exec", "tr a-z A-Z"]);
                    }
                    let mut child = c.spawn().unwrap();
                    answering(&mut child);
                    _child = Some(child);
                    _lean = None;
                }
            }
            let t0 = Instant::now();
            std::thread::scope(|s| {
                for r in 0..REQUESTERS {
                    let (client, worker) = (&client, &worker);
                    s.spawn(move || {
                        let me = client
                            .register(
                                "bench",
                                a2a_client::agent_card(&format!("r{r}-{worker}")),
                                Delivery::Push,
                            )
                            .unwrap();
                        for i in 0..per {
                            let t = me
                                .send(message_to(worker, &format!("job {i}")), blocking())
                                .unwrap();
                            assert_eq!(t.status.state, State::Completed, "{worker}");
                        }
                        me.deregister().unwrap();
                    });
                }
            });
            let took = t0.elapsed();
            if let Some(mut c) = _child {
                let _ = c.kill();
                let _ = c.wait();
            }
            rows.push((mode, round, (REQUESTERS * per) as f64 / took.as_secs_f64()));
        }
    }
    for mode in ["lean", "reply-1-sh", "reply"] {
        let rates: Vec<f64> = rows.iter().filter(|r| r.0 == mode).map(|r| r.2).collect();
        let lean: Vec<f64> = rows.iter().filter(|r| r.0 == "lean").map(|r| r.2).collect();
        let ratio: Vec<String> = rates
            .iter()
            .zip(&lean)
            .map(|(a, b)| format!("{:.2}x", a / b))
            .collect();
        println!(
            "{mode:>11}: {} tasks/s; vs lean: {}",
            rates
                .iter()
                .map(|r| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            ratio.join(", ")
        );
    }
}

fn blocking() -> Option<SendConfiguration> {
    Some(SendConfiguration {
        blocking: Some(true),
        history_length: None,
        push_notification_config: None,
    })
}

/// Waits for `reply`'s line saying it answers (it is registered by then),
/// then lets its stderr drain on a thread of its own.
fn answering(child: &mut Child) {
    use std::io::{BufRead, BufReader};
    let mut lines = BufReader::new(child.stderr.take().expect("stderr piped")).lines();
    loop {
        match lines.next() {
            Some(Ok(line)) if line.contains("answering tasks sent to") => break,
            Some(Ok(_)) => {}
            other => panic!("a2a-broker reply ended before it answered: {other:?}"),
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
}

/// A worker that completes each new task at once with its text, on its own
/// thread; it ends with the returned handle's agent.
fn lean_worker(client: &Client, name: &str) -> Agent {
    let agent = client
        .register("bench", a2a_client::agent_card(name), Delivery::Push)
        .unwrap();
    let a = agent.clone();
    std::thread::spawn(move || loop {
        let Ok(events) = a.wait(Duration::from_secs(1)) else {
            return;
        };
        if a.is_deregistered() {
            return;
        }
        for ev in events {
            if let Notification::TaskEvent(p) = ev {
                if let StreamEvent::Status(s) = &p.event {
                    if s.status.state == State::Submitted && p.recipient == a.id() {
                        let _ = a.set_status(
                            &s.task_id,
                            State::Completed,
                            Some(task_message(&s.task_id, "ok")),
                        );
                    }
                }
            }
        }
    });
    agent
}
