//! Push notifications: the v1.0 config methods (create, get, list, delete,
//! keyed by task and config id) and their delivery: each event of a task
//! with configs is POSTed to every config's URL as a v1.0
//! `StreamResponse`, with `Authorization: <scheme> <credentials>` and the
//! config's `token` (as `X-A2A-Notification-Token`).
//!
//! The broker keeps one push config per task and never contacts its URL;
//! v1.0 allows several per task and expects delivery, so the gateway holds
//! them, in its state file (written before the config is acknowledged,
//! read back at start, with the version last queued per task), and
//! delivers: a webhook registered before a restart hears what follows it. Targets
//! pass [`WebhookPolicy`] when a config is created and again, on the
//! resolved address, at each delivery; the request goes to that checked
//! address (no second lookup), with redirects off.
//!
//! Delivery never blocks the broker connection: events go through a
//! bounded queue to one delivery task (in order; a full queue drops the
//! event with a warning); each POST has a timeout.

use crate::mapping::{self, GatewayError};
use crate::security::WebhookPolicy;
use crate::store::Store;
use crate::v1;
use a2a_proto::types::StreamEvent;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Configs held per task at most.
pub const MAX_CONFIGS_PER_TASK: usize = 16;
/// Deliveries queued at most.
const QUEUE: usize = 4096;
/// One POST's time bound.
const POST_TIMEOUT: Duration = Duration::from_secs(5);

/// A push config the gateway holds for a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub identity: String,
    pub config: v1::TaskPushNotificationConfig,
}

struct Delivery {
    config: v1::TaskPushNotificationConfig,
    body: String,
}

struct Inner {
    policy: WebhookPolicy,
    /// Task id -> its configs, in creation order, and the version of the
    /// last event queued for it (an event can be published twice: from the
    /// broker, and from the result of the gateway's own call).
    configs: Mutex<HashMap<String, (Vec<Stored>, u64)>>,
    queue: Option<mpsc::Sender<Delivery>>,
    store: Store,
    /// Sends whose push config is stored only once their task exists (a
    /// config given in `SendMessage`): while any is under way, events of
    /// tasks without a config are held here, and delivered once the
    /// config is stored ([`Pusher::replay`]).
    holding: AtomicUsize,
    held: Mutex<Held>,
}

/// Events held per task: (version, event).
type Held = HashMap<String, Vec<(u64, Arc<StreamEvent>)>>;

/// Events held per task at most, and tasks held at most.
const HELD_PER_TASK: usize = 64;
const HELD_TASKS: usize = 1024;

/// Holds events for tasks without a config while alive (see
/// [`Pusher::hold`]).
pub struct Hold {
    inner: Arc<Inner>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.inner.holding.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.inner.held.lock().clear();
        }
    }
}

/// The push config store and deliverer (cheap to clone).
#[derive(Clone)]
pub struct Pusher {
    inner: Arc<Inner>,
}

impl Pusher {
    /// A pusher under `policy`. Must be made inside a tokio runtime when
    /// the policy enables push (it starts the delivery task).
    /// The configs of `store` are loaded.
    pub fn new(policy: WebhookPolicy, store: Store) -> Pusher {
        let queue = policy.enabled().then(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            tokio::spawn(deliver(rx, policy.clone()));
            tx
        });
        let mut configs: HashMap<String, (Vec<Stored>, u64)> = HashMap::new();
        for (task_id, identity, json) in store.all_push() {
            match serde_json::from_str::<v1::TaskPushNotificationConfig>(&json) {
                Ok(config) => configs
                    .entry(task_id)
                    .or_default()
                    .0
                    .push(Stored { identity, config }),
                Err(e) => tracing::warn!(task_id, error = %e, "unreadable stored push config"),
            }
        }
        for (task_id, version) in store.all_push_sent() {
            if let Some((_, last)) = configs.get_mut(&task_id) {
                *last = version;
            }
        }
        Pusher {
            inner: Arc::new(Inner {
                policy,
                configs: Mutex::new(configs),
                queue,
                store,
                holding: AtomicUsize::new(0),
                held: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Holds the events of tasks that have no config yet, until the guard
    /// is dropped: for a send whose config is stored once its task exists.
    pub fn hold(&self) -> Hold {
        self.inner.holding.fetch_add(1, Ordering::AcqRel);
        Hold {
            inner: Arc::clone(&self.inner),
        }
    }

    /// Delivers the held events of `task_id` (after its config is stored).
    pub fn replay(&self, task_id: &str) {
        let mut events = self.inner.held.lock().remove(task_id).unwrap_or_default();
        events.sort_by_key(|(v, _)| *v);
        for (version, event) in events {
            self.notify(task_id, version, &event);
        }
    }

    /// Push notifications are offered.
    pub fn enabled(&self) -> bool {
        self.inner.queue.is_some()
    }

    /// Checks a config as a client gave it (id defaulted later).
    pub fn check(
        &self,
        c: &v1::TaskPushNotificationConfig,
    ) -> Result<v1::TaskPushNotificationConfig, GatewayError> {
        if !self.enabled() {
            return Err(GatewayError::PushNotSupported);
        }
        self.inner
            .policy
            .check_url(&c.url)
            .map_err(|e| GatewayError::InvalidParams(e.to_string()))?;
        if c.id.len() > 256 {
            return Err(GatewayError::InvalidParams("config id too long".into()));
        }
        Ok(c.clone())
    }

    /// Stores a checked config for `task_id` (replacing one with the same
    /// id); returns it as stored.
    pub fn store(
        &self,
        identity: &str,
        task_id: &str,
        mut c: v1::TaskPushNotificationConfig,
    ) -> Result<v1::TaskPushNotificationConfig, GatewayError> {
        c.task_id = task_id.to_owned();
        if c.id.is_empty() {
            c.id = uuid::Uuid::new_v4().to_string();
        }
        let mut map = self.inner.configs.lock();
        let (list, _) = map.entry(task_id.to_owned()).or_default();
        list.retain(|s| s.config.id != c.id);
        if list.len() >= MAX_CONFIGS_PER_TASK {
            return Err(GatewayError::InvalidParams(format!(
                "at most {MAX_CONFIGS_PER_TASK} push configs per task"
            )));
        }
        let json = serde_json::to_string(&c).map_err(|e| GatewayError::Internal(e.to_string()))?;
        self.inner
            .store
            .put_push(task_id, &c.id, identity, &json)
            .map_err(|e| GatewayError::Internal(format!("gateway state: {e}")))?;
        list.push(Stored {
            identity: identity.to_owned(),
            config: c.clone(),
        });
        Ok(c)
    }

    /// The config `id` of `task_id`.
    pub fn get(&self, task_id: &str, id: &str) -> Option<v1::TaskPushNotificationConfig> {
        let map = self.inner.configs.lock();
        map.get(task_id)?
            .0
            .iter()
            .find(|s| s.config.id == id)
            .map(|s| s.config.clone())
    }

    /// Every config of `task_id`.
    pub fn list(&self, task_id: &str) -> Vec<v1::TaskPushNotificationConfig> {
        let map = self.inner.configs.lock();
        map.get(task_id)
            .map(|(l, _)| l.iter().map(|s| s.config.clone()).collect())
            .unwrap_or_default()
    }

    /// Deletes config `id` of `task_id` (absent is not an error: delete is
    /// idempotent).
    pub fn delete(&self, task_id: &str, id: &str) {
        let mut map = self.inner.configs.lock();
        self.inner.store.delete_push(task_id, id);
        if let Some((list, _)) = map.get_mut(task_id) {
            list.retain(|s| s.config.id != id);
            if list.is_empty() {
                map.remove(task_id);
            }
        }
    }

    /// Queues the delivery of one task event (the task's `version` after
    /// it) to the task's configs, unless an event of that version was
    /// queued already. Called on the broker client's reader thread, in
    /// version order: never blocks.
    pub fn notify(&self, task_id: &str, version: u64, event: &StreamEvent) {
        let Some(queue) = &self.inner.queue else {
            return;
        };
        let configs: Vec<v1::TaskPushNotificationConfig> = {
            let mut map = self.inner.configs.lock();
            match map.get_mut(task_id) {
                Some((l, last)) if version > *last && !l.is_empty() => {
                    *last = version;
                    self.inner.store.note_push_sent(task_id, version);
                    l.iter().map(|s| s.config.clone()).collect()
                }
                None if self.inner.holding.load(Ordering::Acquire) > 0 => {
                    drop(map);
                    let mut held = self.inner.held.lock();
                    if held.len() < HELD_TASKS || held.contains_key(task_id) {
                        let list = held.entry(task_id.to_owned()).or_default();
                        if list.len() < HELD_PER_TASK {
                            list.push((version, Arc::new(event.clone())));
                        }
                    }
                    return;
                }
                _ => return,
            }
        };
        let body = match serde_json::to_string(&mapping::event_out(event)) {
            Ok(b) => b,
            Err(_) => return,
        };
        for config in configs {
            let d = Delivery {
                config,
                body: body.clone(),
            };
            if queue.try_send(d).is_err() {
                tracing::warn!(task_id, "push queue full: notification dropped");
            }
        }
    }
}

/// The delivery task: one POST at a time, in queue order.
async fn deliver(mut rx: mpsc::Receiver<Delivery>, policy: WebhookPolicy) {
    while let Some(d) = rx.recv().await {
        if let Err(e) = post(&policy, &d).await {
            tracing::warn!(
                task_id = d.config.task_id.as_str(),
                error = e.as_str(),
                "push not delivered"
            );
        }
    }
}

async fn post(policy: &WebhookPolicy, d: &Delivery) -> Result<(), String> {
    let url = policy.check_url(&d.config.url).map_err(|e| e.to_string())?;
    let host = url.host_str().ok_or("no host")?.to_owned();
    let port = url.port_or_known_default().ok_or("no port")?;
    let bare = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((bare.as_str(), port))
        .await
        .map_err(|e| format!("resolve {host}: {e}"))?
        .collect();
    // The first address that passes the policy is the one connected to.
    let addr = addrs
        .into_iter()
        .find(|a| {
            policy
                .check_addr(&bare.to_ascii_lowercase(), a.ip())
                .is_ok()
        })
        .ok_or_else(|| format!("no allowed address for {host}"))?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(POST_TIMEOUT)
        .resolve(&bare, addr)
        .build()
        .map_err(|e| e.to_string())?;
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .body(d.body.clone());
    if let Some(auth) = &d.config.authentication {
        let value = match &auth.credentials {
            Some(c) => format!("{} {}", auth.scheme, c),
            None => auth.scheme.clone(),
        };
        req = req.header("authorization", value);
    }
    if let Some(t) = &d.config.token {
        req = req.header("x-a2a-notification-token", t);
    }
    let resp = req.send().await.map_err(|e| e.to_string())?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(format!("webhook answered {}", resp.status()))
    }
}
