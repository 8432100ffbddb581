//! Params and results of every method (docs/protocol.md §2, §5), and
//! beside each params type what the method table needs of it: its
//! [`Precheck`] (what it can be refused for without the broker's state;
//! empty when nothing) and, when it carries the caller's token, its
//! [`Authed`]. A new method's params are one place in this file.
//!
//! `token` fields are read leniently: an absent or non-string token is kept
//! as `None` so that the broker answers `A2A_UNKNOWN_TOKEN` (as the contract
//! says) rather than a params error.

use crate::check::{self, CheckError, Precheck};
use crate::types::{AgentCard, Artifact, Delivery, Message, Notification, PushConfig, State, Task};
// In `types` (a notification carries it too); named here with the
// results that return it.
pub use crate::types::Lease;
use bincode::{Decode, Encode};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Params that carry the caller's capability token, which a client fills
/// in for the agent it calls as.
pub trait Authed {
    fn set_token(&mut self, token: String);
}

/// `Authed` for a params type with a `token` field.
macro_rules! authed {
    ($t:ty) => {
        impl Authed for $t {
            fn set_token(&mut self, token: String) {
                self.token = Some(token);
            }
        }
    };
}

fn lenient_token<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        _ => None,
    })
}

/// `app.handshake` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct HandshakeParams {
    pub protocol_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
    /// (ext) The broker's secret; required on local-socket connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// (ext) Ask for a shared-memory event ring of this size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_ring: Option<EventRingRequest>,
}

impl Precheck for HandshakeParams {}

/// (ext) The size of the event ring a client asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct EventRingRequest {
    pub bytes: u64,
}

/// (ext) The event ring the broker made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct EventRingInfo {
    pub name: String,
    pub bytes: u64,
}

/// `app.handshake` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct HandshakeResult {
    pub protocol_version: u32,
    pub host: String,
    pub host_version: String,
    pub features: Vec<String>,
    pub capabilities: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_ring: Option<EventRingInfo>,
}

/// `a2a.agents.register` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct RegisterParams {
    pub context_id: String,
    pub card: AgentCard,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
    /// (ext) Plumbing, not a peer to discover (the A2A gateway's
    /// requesters): not listed by `a2a.agents.list`, not chosen by `to: "*"`
    /// nor by an omitted `to`; still addressable by its exact peer id.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
}

impl Precheck for RegisterParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        check::check_id("contextId", &self.context_id)?;
        check::check_card(&self.card).map(|()| 0)
    }
}

/// `a2a.agents.register` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct RegisterResult {
    pub agent_id: String,
    pub token: String,
    pub card: AgentCard,
}

/// Params of methods that take only a token (`a2a.agents.deregister`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, Encode, Decode)]
pub struct TokenParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
}

impl Precheck for TokenParams {}
authed!(TokenParams);

/// `{ok: true}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct OkResult {
    pub ok: bool,
}

/// `a2a.agents.list` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, Encode, Decode)]
pub struct ListAgentsParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
}

impl Precheck for ListAgentsParams {}
authed!(ListAgentsParams);

/// `a2a.agents.list` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct AgentsResult {
    pub agents: Vec<AgentCard>,
}

/// `configuration` of `a2a.message.send`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct SendConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notification_config: Option<PushConfig>,
}

/// `a2a.message.send` and `a2a.message.stream` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct SendParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendConfiguration>,
}

impl Precheck for SendParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        check::normalize_message(&mut self.message);
        let bytes = check::check_message(&self.message)?;
        if let Some(c) = self
            .configuration
            .as_ref()
            .and_then(|c| c.push_notification_config.as_ref())
        {
            check::check_id("config.id", &c.id)?;
        }
        Ok(bytes)
    }
}
authed!(SendParams);

/// `{task}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct TaskResult {
    pub task: Task,
}

/// `{tasks}` (a broadcast send).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct TasksResult {
    pub tasks: Vec<Task>,
}

/// `a2a.tasks.get` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct GetParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<u64>,
}

impl Precheck for GetParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        check::check_id("id", &self.id).map(|()| 0)
    }
}
authed!(GetParams);

/// `a2a.tasks.status` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct StatusParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    pub id: String,
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
}

impl Precheck for StatusParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        check::check_task_message(&self.id, self.message.as_mut())
    }
}
authed!(StatusParams);

/// `a2a.tasks.cancel` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct CancelParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
}

impl Precheck for CancelParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        check::check_task_message(&self.id, self.message.as_mut())
    }
}
authed!(CancelParams);

/// `a2a.tasks.resubscribe` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct ResubscribeParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_version: Option<u64>,
}

impl Precheck for ResubscribeParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        check::check_id("id", &self.id).map(|()| 0)
    }
}
authed!(ResubscribeParams);

/// `a2a.tasks.pushNotificationConfig.set` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct PushSetParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    pub task_id: String,
    pub config: PushConfig,
}

impl Precheck for PushSetParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        check::check_id("taskId", &self.task_id)?;
        check::check_id("config.id", &self.config.id).map(|()| 0)
    }
}
authed!(PushSetParams);

/// `a2a.tasks.pushNotificationConfig.get` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct PushGetParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    pub task_id: String,
}

impl Precheck for PushGetParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        check::check_id("taskId", &self.task_id).map(|()| 0)
    }
}
authed!(PushGetParams);

/// `{config}`; `null` when none is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct ConfigResult {
    pub config: Option<PushConfig>,
}

/// Which of the caller's tasks `a2a.tasks.list` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "lowercase")]
pub enum ListRole {
    Worker,
    Requester,
    #[default]
    Any,
}

/// `a2a.tasks.list` (ext) params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, Encode, Decode)]
pub struct ListTasksParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    #[serde(default)]
    pub role: ListRole,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl Precheck for ListTasksParams {}
authed!(ListTasksParams);

/// `a2a.tasks.list` (ext) result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct TaskListResult {
    pub tasks: Vec<Task>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

fn yes() -> bool {
    true
}

/// `a2a.tasks.artifact` (ext) params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    pub id: String,
    pub artifact: Artifact,
    #[serde(default)]
    pub append: bool,
    #[serde(default = "yes")]
    pub last_chunk: bool,
}

impl Precheck for ArtifactParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        check::check_id("id", &self.id)?;
        check::check_artifact(&self.artifact).map(|bytes| bytes as usize)
    }
}
authed!(ArtifactParams);

/// `a2a.events.wait` (ext) params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct WaitParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seq: Option<u64>,
}

impl Precheck for WaitParams {}
authed!(WaitParams);

/// `a2a.events.wait` (ext) result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct WaitResult {
    pub events: Vec<Notification>,
    pub timed_out: bool,
}

/// `a2a.leases.acquire` (ext) params. The numbers are read as signed
/// integers so that a negative one gets the bound's error, not a shape error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct AcquireLeaseParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    pub paths: Vec<String>,
    pub ttl_seconds: i64,
    #[serde(default = "yes")]
    pub exclusive: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<i64>,
}

impl Precheck for AcquireLeaseParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        let reason = self.reason.as_deref();
        check::check_acquire(&mut self.paths, self.ttl_seconds, self.wait_seconds, reason)
            .map(|()| 0)
    }
}
authed!(AcquireLeaseParams);

/// `a2a.leases.renew` (ext) params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct RenewLeaseParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    pub lease_id: String,
    pub ttl_seconds: i64,
}

impl Precheck for RenewLeaseParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        check::check_id("leaseId", &self.lease_id)?;
        check::check_ttl(self.ttl_seconds).map(|()| 0)
    }
}
authed!(RenewLeaseParams);

/// `a2a.leases.release` (ext) params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseLeaseParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    pub lease_id: String,
}

impl Precheck for ReleaseLeaseParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        check::check_id("leaseId", &self.lease_id).map(|()| 0)
    }
}
authed!(ReleaseLeaseParams);

/// `a2a.leases.list` (ext) params: the caller's context's live leases,
/// only those that overlap `path` when it is given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, Encode, Decode)]
pub struct ListLeasesParams {
    #[serde(default, deserialize_with = "lenient_token")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl Precheck for ListLeasesParams {
    fn precheck(&mut self) -> Result<usize, CheckError> {
        if let Some(p) = &self.path {
            self.path = Some(check::check_lease_path(p)?);
        }
        Ok(0)
    }
}
authed!(ListLeasesParams);

/// `{lease}` (`a2a.leases.acquire`, `.renew`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct LeaseResult {
    pub lease: Lease,
}

/// `{leases}` (`a2a.leases.list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Encode, Decode)]
pub struct LeasesResult {
    pub leases: Vec<Lease>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn token_is_lenient() {
        let p: TokenParams = serde_json::from_value(json!({"token": 5})).unwrap();
        assert_eq!(p.token, None);
        let p: TokenParams = serde_json::from_value(json!({})).unwrap();
        assert_eq!(p.token, None);
        let p: TokenParams = serde_json::from_value(json!({"token": "t"})).unwrap();
        assert_eq!(p.token.as_deref(), Some("t"));
    }

    #[test]
    fn artifact_defaults() {
        let p: ArtifactParams = serde_json::from_value(json!({
            "token": "t", "id": "x",
            "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "hi"}]}
        }))
        .unwrap();
        assert!(!p.append);
        assert!(p.last_chunk);
    }

    #[test]
    fn config_null_is_written() {
        let r = ConfigResult { config: None };
        assert_eq!(serde_json::to_value(&r).unwrap(), json!({"config": null}));
    }
}
