//! `a2a-broker reply` (a module of the binary): an agent that answers each
//! task sent to it with a command's output, as `nats reply --command`
//! does for NATS. It is the smallest agent that answers: enough to try the
//! gateway from `curl`, or to put a script behind an agent name.
//!
//! For each new task (its `submitted` event) it reads the task's latest
//! message, moves the task to `working`, runs the command with the
//! message's text on stdin (and `A2A_TASK_ID`, `A2A_CONTEXT_ID`, `A2A_FROM`
//! in the environment), and settles the task: `completed` with the
//! command's stdout as the status message when it exits 0, else `failed`
//! with its exit status and the end of its stderr.
//!
//! Up to `--concurrency` tasks are answered at once, each by a worker
//! thread of its own (a command is mostly waiting: a model, a network, a
//! disk); with 1 they are answered one at a time, in the order they came.
//! A command of plain words is run directly, without a shell: `sh -c`
//! costs a second fork and exec per task, more than the broker's whole
//! round trip (see [`Plan`]).

use a2a_client::proto::types::{Notification, State, StreamEvent, Task};
use a2a_client::{agent_card, task_message, Agent, Client, ClientError, ClientOptions, Delivery};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `reply` was asked.
pub struct Options {
    /// `--socket NAME`: a path, or a name as `serve --socket` places it.
    pub socket: String,
    /// `--as NAME`: the agent to register and answer as.
    pub as_agent: String,
    /// `--context C`: the context to register it in.
    pub context: String,
    /// `--exec CMD`: the command run for each task (directly, or by
    /// `sh -c` when it needs a shell).
    pub exec: String,
    /// `--wait SECS`: how long to wait for a broker to listen at the
    /// socket, so that `reply` can be started together with the broker.
    pub wait: Duration,
    /// `--concurrency N`: how many tasks are answered at once (at least 1).
    pub concurrency: usize,
}

/// `--concurrency`'s default: enough that a fan-out of a few dozen
/// delegates is not answered one by one, few enough that as many commands
/// at once do not swamp a laptop.
pub const DEFAULT_CONCURRENCY: u16 = 16;

/// How often a broker that is not there yet is looked for again.
const RETRY_EVERY: Duration = Duration::from_millis(100);

/// The most of a failed command's stderr put into the task's message (its
/// end: the error is usually the last thing a program says).
const STDERR_TAIL: usize = 2048;

/// Registers the agent and answers its tasks until the broker goes away
/// (or Ctrl-C); `Err` is the line to print.
pub fn run(o: &Options) -> Result<(), String> {
    let client = connect_waiting(o)?;
    let agent = client
        .register(&o.context, agent_card(&o.as_agent), Delivery::Push)
        .map_err(|e| format!("cannot register {}: {e}", o.as_agent))?;
    if agent.id() != o.as_agent {
        // The broker suffixed the name: another connection holds it, and
        // tasks sent to that name go there, not here.
        return Err(format!(
            "agent `{}` is live on another connection, so tasks sent to it would not reach \
             this command: stop that program, or answer as another name with --as",
            o.as_agent
        ));
    }
    eprintln!(
        "a2a-broker reply: answering tasks sent to {} (context {}) with `{}`, {} at once; \
         Ctrl-C to stop",
        agent.id(),
        agent.context_id(),
        o.exec,
        o.concurrency
    );
    let plan = Arc::new(Plan::of(&o.exec));
    // Task ids, first come first served; the workers end when it closes.
    let (tasks, queue) = crossbeam_channel::unbounded::<String>();
    let workers: Vec<_> = (0..o.concurrency.max(1))
        .map(|_| {
            let (agent, plan, queue) = (agent.clone(), plan.clone(), queue.clone());
            std::thread::spawn(move || {
                for task_id in queue {
                    if let Err(why) = answer(&agent, &plan, &task_id) {
                        // The connection is gone: the event loop sees it
                        // too and ends the run with the same line.
                        eprintln!("a2a-broker reply: {why}");
                        return;
                    }
                }
            })
        })
        .collect();
    let ended = loop {
        let events = match agent.wait(Duration::from_secs(3600)) {
            Ok(evs) => evs,
            Err(e) => break format!("the broker went away: {e}"),
        };
        for ev in events {
            if let Some(task_id) = new_task(&agent, &ev) {
                // The receivers live until `tasks` is dropped below.
                let _ = tasks.send(task_id);
            }
        }
    };
    drop(tasks);
    for w in workers {
        let _ = w.join();
    }
    Err(ended)
}

/// Connects through the locator, retrying while no broker listens yet (up
/// to `--wait`); a secret error or any other failure is reported at once.
fn connect_waiting(o: &Options) -> Result<Client, String> {
    let broker = a2a_client::locate(&o.socket);
    let deadline = Instant::now() + o.wait;
    loop {
        match broker.connect(None, ClientOptions::default()) {
            Ok(c) => return Ok(c),
            Err(ClientError::NoBroker(_)) if Instant::now() < deadline => {
                std::thread::sleep(RETRY_EVERY)
            }
            Err(e @ (ClientError::NoBroker(_) | ClientError::Secret(_))) => {
                return Err(e.to_string())
            }
            Err(e) => {
                return Err(format!(
                    "cannot connect to {}: {e}",
                    broker.socket.display()
                ))
            }
        }
    }
}

/// The id of a task just sent to this agent (its `submitted` event as the
/// worker), else `None`.
fn new_task(agent: &Agent, ev: &Notification) -> Option<String> {
    let Notification::TaskEvent(p) = ev else {
        return None;
    };
    match &p.event {
        StreamEvent::Status(s)
            if s.status.state == State::Submitted && p.recipient == agent.id() =>
        {
            Some(s.task_id.clone())
        }
        _ => None,
    }
}

/// Runs the command for one task and settles it. Only a broker that went
/// away is an `Err`: a task that cannot be answered is failed, or left as
/// the broker refused to move it (said on stderr), and the next one is
/// served.
fn answer(agent: &Agent, plan: &Plan, task_id: &str) -> Result<(), String> {
    let task = match agent.get_task(task_id, None) {
        Ok(t) => t,
        Err(e) => return report(task_id, e),
    };
    if task.agent_name != agent.id() {
        return Ok(()); // a task this agent asked for, not one it works on
    }
    if let Err(e) = agent.set_status(task_id, State::Working, None) {
        return report(task_id, e);
    }
    let (state, text) = match run_command(plan, &task) {
        Ok(out) => (State::Completed, out),
        Err(why) => (State::Failed, why),
    };
    match agent.set_status(task_id, state, Some(task_message(task_id, &text))) {
        Ok(_) => Ok(()),
        // Most likely the output is over the broker's bounds: the task
        // fails with the reason instead of staying `working`.
        Err(e) if state == State::Completed && e.rpc().is_some() => {
            let why = format!("the answer was refused: {e}");
            match agent.set_status(task_id, State::Failed, Some(task_message(task_id, &why))) {
                Ok(_) => Ok(()),
                Err(e) => report(task_id, e),
            }
        }
        Err(e) => report(task_id, e),
    }
}

/// Says on stderr why a task was not answered; `Err` only when the
/// connection is gone (nothing more can be answered).
fn report(task_id: &str, e: ClientError) -> Result<(), String> {
    if matches!(e, ClientError::Closed(_)) {
        return Err(format!("the broker went away: {e}"));
    }
    eprintln!("a2a-broker reply: task {task_id}: {e}");
    Ok(())
}

/// The text of the task's latest message: what the command reads.
fn latest_text(task: &Task) -> String {
    task.history.last().map(|m| m.text()).unwrap_or_default()
}

/// How the command is run: directly when it is plain words, else by
/// `sh -c`. Plain means nothing a shell would read differently from a
/// split on blanks: no quote, escape, expansion, redirection, pipe, list,
/// glob, assignment or comment, and a first word that is not a shell
/// keyword or a builtin without a program of its own (`cd`, `export`, …).
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// The program and its arguments.
    Direct { exec: String, argv: Vec<String> },
    /// `sh -c exec`.
    Shell { exec: String },
}

/// Characters that make a command the shell's to read.
const SHELL_SYNTAX: &[char] = &[
    '|', '&', ';', '<', '>', '(', ')', '$', '`', '\\', '"', '\'', '*', '?', '[', ']', '#', '~',
    '=', '%', '{', '}', '!', '\n',
];

/// First words a shell runs itself (keywords, and builtins with no program
/// of their own): only `sh -c` runs those.
const SHELL_WORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "case", "esac", "do", "done",
    "function", "cd", "exit", "export", "source", ".", "set", "unset", "alias", "unalias", "read",
    "eval", "exec", "return", "shift", "trap", "ulimit", "umask", "wait", "local", "declare",
    "typeset", "readonly", "break", "continue", "command", "type", "hash", "times", "getopts",
    "jobs", "fg", "bg",
];

impl Plan {
    pub fn of(exec: &str) -> Plan {
        let argv: Vec<String> = exec.split_whitespace().map(str::to_owned).collect();
        let plain = !exec.contains(SHELL_SYNTAX)
            && argv
                .first()
                .is_some_and(|first| !SHELL_WORDS.contains(&first.as_str()));
        if plain {
            Plan::Direct {
                exec: exec.to_owned(),
                argv,
            }
        } else {
            Plan::Shell {
                exec: exec.to_owned(),
            }
        }
    }

    fn exec(&self) -> &str {
        match self {
            Plan::Direct { exec, .. } | Plan::Shell { exec } => exec,
        }
    }

    fn command(&self) -> Command {
        match self {
            Plan::Direct { argv, .. } => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
            Plan::Shell { exec } => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(exec);
                c
            }
        }
    }
}

/// Runs the command with the task's text on stdin: its stdout (without the
/// trailing newlines, as `$(...)` takes it) when it exits 0, else why not.
/// A program that cannot be started directly is left to `sh -c`, so that
/// its failure reads as the shell's would (`not found`, exit 127).
fn run_command(plan: &Plan, task: &Task) -> Result<String, String> {
    let exec = plan.exec();
    let spawn = |plan: &Plan| {
        plan.command()
            .env("A2A_TASK_ID", &task.id)
            .env("A2A_CONTEXT_ID", &task.context_id)
            .env("A2A_FROM", &task.requester_name)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    };
    let mut child = match spawn(plan) {
        Ok(c) => c,
        Err(_) if matches!(plan, Plan::Direct { .. }) => spawn(&Plan::Shell {
            exec: exec.to_owned(),
        })
        .map_err(|e| format!("cannot run `{exec}`: {e}"))?,
        Err(e) => return Err(format!("cannot run `{exec}`: {e}")),
    };
    let input = latest_text(task);
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // Written from its own thread: a command that prints before it has
    // read all its input would otherwise fill its stdout pipe and stall.
    let writer = std::thread::spawn(move || {
        // A command that does not read its input closes the pipe early.
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child
        .wait_with_output()
        .map_err(|e| format!("cannot run `{exec}`: {e}"))?;
    let _ = writer.join();
    if out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        return Ok(text.trim_end_matches('\n').to_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr = stderr.trim_end();
    let tail_from = stderr
        .char_indices()
        .rev()
        .nth(STDERR_TAIL)
        .map_or(0, |(i, _)| i);
    let status = match out.status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "was killed by a signal".to_owned(),
    };
    Err(format!("`{exec}` {status}: {}", &stderr[tail_from..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_client::proto::types::TaskStatus;
    use a2a_client::text_message;
    use std::sync::Arc;

    fn task(text: &str) -> Task {
        Task {
            kind: "task".into(),
            id: "t1".into(),
            context_id: "c1".into(),
            status: TaskStatus {
                state: State::Working,
                message: None,
                timestamp: String::new(),
            },
            history: vec![Arc::new(text_message(text))],
            artifacts: vec![],
            agent_name: "coder".into(),
            requester_name: "planner".into(),
            version: 1,
        }
    }

    fn run(exec: &str, task: &Task) -> Result<String, String> {
        run_command(&Plan::of(exec), task)
    }

    #[test]
    fn plain_words_run_directly_and_anything_else_by_the_shell() {
        assert_eq!(
            Plan::of("  tr a-z\tA-Z "),
            Plan::Direct {
                exec: "  tr a-z\tA-Z ".into(),
                argv: vec!["tr".into(), "a-z".into(), "A-Z".into()]
            }
        );
        for shell in [
            "tr a-z A-Z | rev",
            "echo $HOME",
            "echo 'a b'",
            "FOO=1 env",
            "ls *.rs",
            "cd /tmp",
            "if true",
            "a && b",
            "cat > out",
            "echo ~",
            "# nothing",
            "",
            "   ",
        ] {
            assert!(
                matches!(Plan::of(shell), Plan::Shell { .. }),
                "{shell:?} is the shell's"
            );
        }
    }

    #[test]
    fn a_program_that_cannot_start_fails_as_the_shell_says() {
        let t = task("x");
        let got = run("no-such-program-a2a", &t).unwrap_err();
        assert!(got.contains("exited with status 127"), "{got}");
    }

    #[test]
    fn the_command_reads_the_text_and_its_output_is_the_answer() {
        let t = task("hello");
        assert_eq!(run("tr a-z A-Z", &t), Ok("HELLO".into()));
        assert_eq!(
            run("echo \"$A2A_FROM asks $A2A_TASK_ID\"", &t),
            Ok("planner asks t1".into())
        );
        // Run directly, the environment is the same.
        assert_eq!(run("printenv A2A_FROM", &t), Ok("planner".into()));
    }

    #[test]
    fn a_failing_command_says_its_status_and_its_stderr() {
        let t = task("x");
        assert_eq!(
            run("echo out; echo broken >&2; exit 3", &t),
            Err("`echo out; echo broken >&2; exit 3` exited with status 3: broken".into())
        );
    }

    #[test]
    fn a_command_that_ignores_its_input_still_answers() {
        let t = task(&"x".repeat(1 << 20));
        assert_eq!(run("echo done", &t), Ok("done".into()));
    }
}
