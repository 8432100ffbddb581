//! `a2a-broker call` and `a2a-broker watch` (modules of the binary): one
//! call, or an agent's events, from a shell, as `redis-cli` or `nats req`
//! give. Both speak to a running broker's local socket through
//! `a2a-client`; the handshake and its secret (from `A2A_BROKER_SECRET`, or
//! the owner-only file beside the socket) are done for the user, and with
//! `--as NAME` an agent is registered first and its token put into the
//! call's params.

use a2a_broker::transport::socket::socket_path;
use a2a_client::{agent_card, read_secret, Client, ClientOptions, Delivery};
use std::time::Duration;

/// What `call` and `watch` were asked.
pub struct Options {
    /// `--socket NAME`: a path, or a name as `serve --socket` places it.
    pub socket: String,
    /// `--as NAME`: register an agent under this name first.
    pub as_agent: Option<String>,
    /// `--context C`: the context to register it in.
    pub context: String,
    /// `watch --event-ring BYTES`: ask for an event ring of this size.
    pub event_ring: Option<usize>,
}

fn connect(o: &Options) -> Result<(Client, Option<a2a_client::Agent>), String> {
    let path = socket_path(&o.socket);
    let secret = read_secret(&path).map_err(|e| {
        format!(
            "no secret for {}: set A2A_BROKER_SECRET or make {} readable ({e})",
            path.display(),
            a2a_client::secret_file(&path).display()
        )
    })?;
    let options = ClientOptions {
        event_ring_bytes: o.event_ring,
        ..Default::default()
    };
    let client = Client::connect_with(&path, secret.trim(), options)
        .map_err(|e| format!("cannot connect to {}: {e}", path.display()))?;
    let agent = match &o.as_agent {
        Some(name) => Some(
            client
                .register(&o.context, agent_card(name), Delivery::Push)
                .map_err(|e| format!("cannot register {name}: {e}"))?,
        ),
        None => None,
    };
    Ok((client, agent))
}

/// Makes one call and prints its result as JSON; `Err` is the line to print.
pub fn call(o: &Options, method: &str, params: Option<&str>) -> Result<(), String> {
    let mut params: serde_json::Value = match params {
        Some(p) => serde_json::from_str(p).map_err(|e| format!("params are not JSON: {e}"))?,
        None => serde_json::json!({}),
    };
    if !params.is_object() {
        return Err("params must be a JSON object".into());
    }
    let (client, agent) = connect(o)?;
    if let Some(a) = &agent {
        if params.get("token").is_none() {
            params["token"] = a.token().into();
        }
    }
    match client.call_json(method, params) {
        Ok(result) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&result).expect("a JSON value")
            );
            Ok(())
        }
        Err(e) => Err(format!("{method}: {e}")),
    }
}

/// Registers `--as NAME` and prints its events, one JSON line each, until
/// the broker goes away (or Ctrl-C).
pub fn watch(o: &Options) -> Result<(), String> {
    let (client, agent) = connect(o)?;
    let agent = agent.ok_or("watch needs --as NAME: the agent whose events to print")?;
    let path = match &client.handshake_result().event_ring {
        Some(ring) => format!("event ring {} ({} bytes)", ring.name, ring.bytes),
        None if o.event_ring.is_some() => "the socket (the broker granted no event ring)".into(),
        None => "the socket".into(),
    };
    eprintln!(
        "watching {} (context {}) through {path}; Ctrl-C to stop",
        agent.id(),
        agent.context_id()
    );
    loop {
        match agent.wait(Duration::from_secs(3600)) {
            Ok(events) => {
                for ev in events {
                    println!(
                        "{}",
                        serde_json::to_string(&ev).expect("an event serializes")
                    );
                }
            }
            Err(e) => return Err(format!("the broker went away: {e}")),
        }
    }
}
