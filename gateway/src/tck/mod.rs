//! `serve-tck`: the A2A TCK's system under test, made of the real parts: a
//! broker child process on a temporary database, a local agent that
//! behaves as the TCK expects ([`harness`], shared with the tests and
//! examples), and the gateway serving it. The broker binary is found
//! beside this one, or on `PATH`, or given with `--broker`.

mod harness;

use a2a_client::{Agent, Client};
use a2a_gateway::{Running, ServeOptions, WebhookPolicy};
use harness::{register_sut, spawn_broker, BrokerChild};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Why `serve-tck` could not start.
#[derive(Debug, thiserror::Error)]
pub enum TckError {
    #[error("no a2a-broker binary beside a2a-gateway or on PATH (build it: cargo build -p a2a-cli, or pass --broker)")]
    NoBroker,
    #[error("broker: {0}")]
    Broker(String),
    #[error(transparent)]
    Spawn(#[from] harness::SpawnError),
    #[error(transparent)]
    Serve(#[from] a2a_gateway::ServeError),
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

/// A running SUT: the broker, its agent, and the gateway.
pub struct Sut {
    pub gateway: Running,
    /// Held while the SUT runs: dropped, the agent leaves the broker.
    _agent: Agent,
    /// Held while the SUT runs: dropped, the broker child is killed.
    _broker: BrokerChild,
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
    let gateway = a2a_gateway::serve(opts).await?;
    Ok(Sut {
        gateway,
        _agent: agent,
        _broker: b,
    })
}

#[cfg(test)]
mod tests {
    use super::harness::{plan, Step};
    use a2a_proto::types::{Part, State};

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
                let flag = m
                    .metadata
                    .as_ref()
                    .and_then(|md| md.get(a2a_gateway::GATEWAY_KEY));
                assert_eq!(
                    flag.and_then(|g| g.get("messageResponse")),
                    Some(&true.into())
                );
            }
            s => panic!("{s:?}"),
        }
    }
}
