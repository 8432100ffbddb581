//! `a2a-broker call` and `a2a-broker watch` (modules of the binary): one
//! call, or an agent's events, from a shell, as `redis-cli` or `nats req`
//! give. Both find the broker through `a2a-client`'s locator (a NAME or a
//! path, the broker's own rule) and speak to its local socket; the
//! handshake and its secret (from `A2A_BROKER_SECRET`, or the owner-only
//! file beside the socket) are done for the user, and with
//! `--as NAME` an agent is registered first and its token put into the
//! call's params.

use a2a_client::{agent_card, Client, ClientError, ClientOptions, Delivery};
use a2a_proto::call::Call;
use a2a_proto::error::A2aErrorCode;
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

/// Connects through the client's locator (so "no broker there" and "wrong
/// secret" are told apart) and registers `--as NAME` if asked.
fn connect(o: &Options) -> Result<(Client, Option<a2a_client::Agent>), String> {
    let broker = a2a_client::locate(&o.socket);
    let options = ClientOptions {
        event_ring_bytes: o.event_ring,
        ..Default::default()
    };
    let client = broker.connect(None, options).map_err(|e| match e {
        ClientError::NoBroker(_) | ClientError::Secret(_) => e.to_string(),
        e => format!("cannot connect to {}: {e}", broker.socket.display()),
    })?;
    let agent = match &o.as_agent {
        Some(name) => {
            let agent = client
                .register(&o.context, agent_card(name), Delivery::Push)
                .map_err(|e| format!("cannot register {name}: {e}"))?;
            if agent.id() != name {
                // The broker suffixed the name: another connection holds
                // it, and its token works only there.
                return Err(name_held_elsewhere(name));
            }
            Some(agent)
        }
        None => None,
    };
    Ok((client, agent))
}

/// Why `--as NAME` cannot act as the live agent NAME, and what to do.
fn name_held_elsewhere(name: &str) -> String {
    format!(
        "agent `{name}` is live on another connection (a running `a2a-broker watch --as {name}`, \
         or another program), and an agent's token works only on the connection that \
         registered it, so this command cannot act as `{name}`: make the call from the program \
         that holds `{name}`, or stop it and run this again (then `{name}` is registered \
         for this call only), or use another name with --as"
    )
}

/// Makes one call and prints its result as JSON; `Err` is the line to print.
pub fn call(o: &Options, method: &str, params: Option<&str>) -> Result<(), String> {
    let text = params.unwrap_or("{}");
    let mut params: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("params are not JSON: {e}"))?;
    if !params.is_object() {
        return Err("params must be a JSON object".into());
    }
    // Checked as typed, before the token is put in: a bad field's line and
    // column are then those of the user's own JSON.
    Call::from_json(method, text).map_err(|e| format!("{method}: {e}"))?;
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
        Err(e) if agent.is_none() && is_missing_token(&e) => Err(format!(
            "{method}: {e}; pass --as NAME to register an agent for this call and use its token"
        )),
        Err(e) => Err(format!("{method}: {e}")),
    }
}

/// The broker's answer to a call that needs a token and has none.
fn is_missing_token(e: &ClientError) -> bool {
    e.a2a_code() == Some(A2aErrorCode::UnknownToken)
        && e.rpc()
            .and_then(|r| r.data.as_ref())
            .and_then(|d| d.get("reason"))
            .and_then(|r| r.as_str())
            == Some("missing token")
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
