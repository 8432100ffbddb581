//! `serve-tck`: the A2A TCK's system under test, made of the real parts: a
//! broker child process on a temporary database, a local agent that
//! behaves as the TCK expects, and the gateway serving it.
//!
//! The broker is the real `a2a-broker` binary (found beside this one, or
//! on `PATH`, or given with `--broker`), spawned with a fresh secret in
//! its environment and its stdin held open (the broker exits when that
//! pipe closes, so it never outlives this process). A child process rather
//! than the broker's library in-process: the TCK then checks exactly what
//! a user runs (the gateway as a socket client of a separate broker), and
//! this crate does not link the broker.
//!
//! The agent ([`sut_handler`]) chooses what to do from the `messageId`
//! prefix of each message it receives (the client's id, which the gateway
//! keeps in the message metadata): complete, ask for input, answer with a
//! message, produce text/file/data artifacts, stream. Longer prefixes are
//! matched first (`tck-artifact-file-url` before `tck-artifact-file`).

use crate::mapping::GATEWAY_KEY;
use crate::security::WebhookPolicy;
use crate::server::{self, Running, ServeOptions};
use a2a_client::{agent_card, new_id, skill, Agent, Client, Delivery, EventHandler};
use a2a_proto::types::{
    Artifact, FileContent, Message, Notification, Object, Part, Role, State, StreamEvent,
};
use serde_json::json;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The SUT agent's name (and URL path segment).
pub const SUT_NAME: &str = "tck";

/// Why `serve-tck` could not start.
#[derive(Debug, thiserror::Error)]
pub enum TckError {
    #[error("no a2a-broker binary beside a2a-gateway or on PATH (build it: cargo build -p a2a-broker, or pass --broker)")]
    NoBroker,
    #[error("broker: {0}")]
    Broker(String),
    #[error(transparent)]
    Serve(#[from] server::ServeError),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// One step of the agent's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Status(State, Option<Message>),
    Artifact(Artifact),
}

fn agent_message(task_id: &str, text: &str, message_response: bool) -> Message {
    Message {
        role: Role::Agent,
        parts: vec![Part::text(text)],
        message_id: new_id(),
        task_id: Some(task_id.to_owned()),
        context_id: None,
        from: None,
        to: None,
        metadata: message_response.then(|| {
            let m = json!({GATEWAY_KEY: {"messageResponse": true}});
            match m {
                serde_json::Value::Object(o) => Object::from(o),
                _ => Object::default(),
            }
        }),
    }
}

fn artifact(parts: Vec<Part>) -> Artifact {
    Artifact {
        artifact_id: format!("artifact-{}", new_id()),
        name: None,
        description: None,
        parts,
        metadata: None,
    }
}

fn file_part(bytes: Option<&str>, uri: Option<&str>) -> Part {
    Part::File {
        file: FileContent {
            name: Some("output.txt".into()),
            mime_type: Some("text/plain".into()),
            uri: uri.map(str::to_owned),
            bytes: bytes.map(str::to_owned),
        },
        metadata: None,
    }
}

/// What the SUT does for a message whose client id is `message_id`.
pub fn plan(message_id: &str, task_id: &str) -> Vec<Step> {
    let done =
        |text: &str| Step::Status(State::Completed, Some(agent_message(task_id, text, false)));
    let text_artifact = |t: &str| Step::Artifact(artifact(vec![Part::text(t)]));
    let working = || Step::Status(State::Working, None);
    // Longest prefixes first.
    let table: [(&str, Vec<Step>); 13] = [
        (
            "tck-artifact-file-url",
            vec![
                Step::Artifact(artifact(vec![file_part(
                    None,
                    Some("https://example.com/output.txt"),
                )])),
                done("Artifact produced"),
            ],
        ),
        (
            "tck-artifact-file",
            vec![
                // base64("file content from TCK")
                Step::Artifact(artifact(vec![file_part(
                    Some("ZmlsZSBjb250ZW50IGZyb20gVENL"),
                    None,
                )])),
                done("Artifact produced"),
            ],
        ),
        (
            "tck-artifact-text",
            vec![
                text_artifact("Generated text content"),
                done("Artifact produced"),
            ],
        ),
        (
            "tck-artifact-data",
            vec![
                Step::Artifact(artifact(vec![Part::Data {
                    data: match json!({"key": "value", "count": 42}) {
                        serde_json::Value::Object(o) => Object::from(o),
                        _ => Object::default(),
                    },
                    metadata: None,
                }])),
                done("Artifact produced"),
            ],
        ),
        (
            "tck-stream-ordering-001",
            vec![working(), text_artifact("Ordered output"), done("Done")],
        ),
        (
            "tck-stream-001",
            vec![
                working(),
                text_artifact("Stream hello from TCK"),
                done("Hello from TCK"),
            ],
        ),
        ("tck-stream-002", vec![done("Hello from TCK")]),
        (
            "tck-stream-003",
            vec![
                working(),
                text_artifact("Stream task lifecycle"),
                done("Done"),
            ],
        ),
        (
            "tck-message-response",
            vec![Step::Status(
                State::Completed,
                Some(agent_message(task_id, "Direct message response", true)),
            )],
        ),
        (
            "tck-input-required",
            vec![Step::Status(
                State::InputRequired,
                Some(agent_message(task_id, "Please provide more input", false)),
            )],
        ),
        (
            "tck-reject-task",
            vec![Step::Status(
                State::Rejected,
                Some(agent_message(task_id, "Rejected", false)),
            )],
        ),
        ("tck-complete-task", vec![done("Hello from TCK")]),
        ("tck-", vec![done("Hello from TCK")]),
    ];
    table
        .into_iter()
        .find(|(prefix, _)| message_id.starts_with(prefix))
        .map(|(_, steps)| steps)
        .unwrap_or_else(|| vec![done("Hello from TCK")])
}

/// The client's id of a message the gateway forwarded (else its own).
pub fn client_message_id(m: &Message) -> String {
    m.metadata
        .as_ref()
        .and_then(|md| md.get(GATEWAY_KEY))
        .and_then(|g| g.get("messageId"))
        .and_then(|v| v.as_str())
        .map_or_else(|| m.message_id.clone(), str::to_owned)
}

/// Runs `steps` on `task_id` one after the other (each submitted when the
/// previous is answered), without blocking the reader thread.
fn run(agent: Agent, task_id: String, mut steps: VecDeque<Step>) {
    let Some(step) = steps.pop_front() else {
        return;
    };
    let submitted = match step {
        Step::Status(state, msg) => agent.set_status_async(&task_id, state, msg),
        Step::Artifact(a) => agent.add_artifact_async(&task_id, a, false, true),
    };
    match submitted {
        Ok(p) => {
            let next = agent.clone();
            p.on_complete(move |r| match r {
                Ok(_) => run(next, task_id, steps),
                Err(e) => tracing::warn!(task_id, error = %e, "tck agent step failed"),
            });
        }
        Err(e) => tracing::warn!(task_id, error = %e, "tck agent step not sent"),
    }
}

/// The SUT agent's event handler: acts on each requester message.
pub fn sut_handler() -> EventHandler {
    Box::new(|agent, event| {
        let Notification::TaskEvent(p) = event else {
            return;
        };
        let StreamEvent::Status(s) = p.event else {
            return;
        };
        if s.status.state.is_terminal() {
            return;
        }
        let Some(m) = s.status.message.as_deref() else {
            return;
        };
        if m.role != Role::User {
            return;
        }
        let steps = plan(&client_message_id(m), &s.task_id);
        run(agent.clone(), s.task_id.clone(), steps.into());
    })
}

/// Registers the SUT agent on `client`.
pub fn register_sut(client: &Client) -> Result<Agent, a2a_client::ClientError> {
    let mut card = agent_card(SUT_NAME);
    card.description = "The A2A TCK's system under test, served by a2a-gateway".into();
    card.version = env!("CARGO_PKG_VERSION").into();
    card.skills = vec![skill("tck", &["tck"])];
    card.skills[0].name = "TCK".into();
    card.skills[0].description = "Behaves as the TCK's messageId prefixes ask".into();
    let agent = client.register("tck-sut", card, Delivery::Push)?;
    agent.set_event_handler(Some(sut_handler()));
    Ok(agent)
}

/// Finds the broker binary: `explicit`, else beside this executable, else
/// on `PATH`.
pub fn find_broker(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.exists().then(|| p.to_path_buf());
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("a2a-broker")))
        .filter(|p| p.exists());
    beside.or_else(|| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("a2a-broker"))
                .find(|p| p.exists())
        })
    })
}

/// A broker child on a temporary database, killed on drop.
pub struct BrokerChild {
    child: Child,
    pub socket: PathBuf,
    pub secret: String,
    _dir: tempfile::TempDir,
}

impl BrokerChild {
    /// The broker process's id (the benchmarks read its CPU time).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for BrokerChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a broker of the TCK and the benches lives: a temporary directory
/// with its database and, in a private `run/` beneath it, its socket, and
/// the secret its socket asks for.
pub struct BrokerHome {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub socket: PathBuf,
    pub secret: String,
}

impl BrokerHome {
    /// A fresh home with a new random secret.
    pub fn new() -> Result<BrokerHome, TckError> {
        let dir = tempfile::tempdir()?;
        // The broker wants its socket's directory private.
        std::fs::create_dir(dir.path().join("run"))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(
                dir.path().join("run"),
                std::fs::Permissions::from_mode(0o700),
            )?;
        }
        let mut secret = [0u8; 16];
        getrandom::fill(&mut secret).map_err(|e| TckError::Broker(e.to_string()))?;
        Ok(BrokerHome {
            db: dir.path().join("tck.db"),
            socket: dir.path().join("run").join("broker.sock"),
            secret: secret.iter().map(|b| format!("{b:02x}")).collect(),
            dir,
        })
    }
}

/// Spawns `broker` on a fresh database and waits for its ready line.
pub fn spawn_broker(broker: &Path) -> Result<BrokerChild, TckError> {
    let BrokerHome {
        dir,
        db,
        socket,
        secret,
    } = BrokerHome::new()?;
    let mut child = Command::new(broker)
        .arg("serve")
        .arg("--db")
        .arg(&db)
        .arg("--socket")
        .arg(&socket)
        .arg("--durability")
        .arg("normal")
        .env(a2a_client::SECRET_ENV, &secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| TckError::Broker("no stderr".into()))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if !sent && line.contains("\"ready\"") {
                let _ = tx.send(Ok(()));
                sent = true;
            } else if !sent {
                let _ = tx.send(Err(line));
            }
            // Later lines: the broker's log, dropped.
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut last = String::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(Ok(())) => break,
            Ok(Err(line)) => last = line,
            Err(_) => {
                let _ = child.kill();
                return Err(TckError::Broker(format!("not ready: {last}")));
            }
        }
    }
    Ok(BrokerChild {
        child,
        socket,
        secret,
        _dir: dir,
    })
}

/// A running SUT: the broker, its agent, and the gateway.
pub struct Sut {
    pub gateway: Running,
    pub agent: Agent,
    pub broker: BrokerChild,
}

/// What the SUT declares (the TCK runs the tests of a capability, or the
/// tests of its absence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub streaming: bool,
    pub push: bool,
    pub extended_card: bool,
    /// The card carries A2A v0.3's fields (the v0.3 TCK and clients need
    /// them; the v1.0 TCK's closed card schema refuses them).
    pub v03_card: bool,
    /// An extension URI declared as required (the TCK's CORE-CAP-004).
    pub required_extension: Option<&'static str>,
}

impl Profile {
    /// Everything declared.
    pub const FULL: Profile = Profile {
        streaming: true,
        push: true,
        extended_card: true,
        v03_card: true,
        required_extension: None,
    };
}

/// Starts the SUT on `listen` (loopback), declaring `profile`, with
/// loopback webhooks allowed (the TCK's webhook receiver is local),
/// `example.com` webhooks allowed, and no rate limit.
pub async fn start(
    listen: SocketAddr,
    broker: Option<&Path>,
    profile: Profile,
) -> Result<Sut, TckError> {
    let bin = find_broker(broker).ok_or(TckError::NoBroker)?;
    let b = tokio::task::spawn_blocking(move || spawn_broker(&bin))
        .await
        .map_err(|e| TckError::Broker(e.to_string()))??;
    let (socket, secret) = (b.socket.clone(), b.secret.clone());
    let agent = tokio::task::spawn_blocking(move || -> Result<Agent, TckError> {
        let client =
            Client::connect(&socket, &secret).map_err(|e| TckError::Broker(e.to_string()))?;
        register_sut(&client).map_err(|e| TckError::Broker(e.to_string()))
    })
    .await
    .map_err(|e| TckError::Broker(e.to_string()))??;
    let mut opts = ServeOptions::new(
        b.socket.clone(),
        b.secret.clone(),
        vec![agent.id().to_owned()],
    );
    opts.listen = listen;
    opts.rate = 0.0;
    // The TCK's webhook receiver is on loopback; its config-CRUD tests
    // register `https://example.com/...` (on completed tasks: nothing is
    // ever delivered there).
    if profile.push {
        opts.webhooks = WebhookPolicy {
            allow_hosts: vec!["example.com".into()],
            allow_loopback: true,
        };
    }
    opts.streaming = profile.streaming;
    opts.extended_card = profile.extended_card;
    opts.v03_card = profile.v03_card;
    opts.required_extensions = profile
        .required_extension
        .map(|u| vec![u.to_owned()])
        .unwrap_or_default();
    let gateway = server::start(opts).await?;
    Ok(Sut {
        gateway,
        agent,
        broker: b,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .map(|s| match s {
                Step::Status(st, _) => st.as_str().to_owned(),
                Step::Artifact(_) => "artifact".into(),
            })
            .collect()
    }

    #[test]
    fn prefixes_choose_the_behaviour_longest_first() {
        assert_eq!(kinds(&plan("tck-complete-task-ab12", "t")), ["completed"]);
        assert_eq!(
            kinds(&plan("tck-input-required-x", "t")),
            ["input-required"]
        );
        assert_eq!(
            kinds(&plan("tck-stream-001-x", "t")),
            ["working", "artifact", "completed"]
        );
        assert_eq!(kinds(&plan("something-else", "t")), ["completed"]);
        let url = plan("tck-artifact-file-url-1", "t");
        match &url[0] {
            Step::Artifact(a) => match &a.parts[0] {
                Part::File { file, .. } => assert!(file.uri.is_some() && file.bytes.is_none()),
                p => panic!("{p:?}"),
            },
            s => panic!("{s:?}"),
        }
        let raw = plan("tck-artifact-file-1", "t");
        match &raw[0] {
            Step::Artifact(a) => match &a.parts[0] {
                Part::File { file, .. } => assert!(file.bytes.is_some()),
                p => panic!("{p:?}"),
            },
            s => panic!("{s:?}"),
        }
        match &plan("tck-message-response-1", "t")[0] {
            Step::Status(State::Completed, Some(m)) => {
                assert!(crate::mapping::is_message_response(m))
            }
            s => panic!("{s:?}"),
        }
    }
}
