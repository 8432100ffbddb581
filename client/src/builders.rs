//! Small constructors for the values callers build most: cards, text
//! messages, text artifacts, and fresh ids. They live here, not in
//! `a2a-proto`, because they make choices (random ids, defaults) that the
//! wire types should not.

use a2a_proto::types::{AgentCard, AgentSkill, Artifact, Capabilities, Message, Part, Role};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A fresh id, unique across processes: a random 64-bit prefix drawn once
/// per process, and a counter. (Message ids key the broker's idempotency,
/// so two clients must never mint the same one.)
pub fn new_id() -> String {
    static PREFIX: OnceLock<String> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let prefix = PREFIX.get_or_init(|| {
        let mut b = [0u8; 8];
        // Without a random source, fall back to the pid and the clock: still
        // distinct between processes that are alive at the same time.
        if getrandom::fill(&mut b).is_err() {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            b = (t ^ (u64::from(std::process::id()) << 32)).to_le_bytes();
        }
        format!("{:016x}", u64::from_le_bytes(b))
    });
    format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A card asking for `name`, with the broker's defaults for the rest.
pub fn agent_card(name: &str) -> AgentCard {
    AgentCard {
        name: name.to_owned(),
        description: String::new(),
        version: String::new(),
        skills: Vec::new(),
        capabilities: Capabilities::default(),
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        context_id: None,
        kind: None,
    }
}

/// A skill whose id is also its name, with `tags`.
pub fn skill(id: &str, tags: &[&str]) -> AgentSkill {
    AgentSkill {
        id: id.to_owned(),
        name: id.to_owned(),
        description: String::new(),
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
    }
}

/// A one-part text message with a fresh `messageId`, addressed to nobody
/// (the broker picks the only peer) and on no task (it creates one).
pub fn text_message(text: &str) -> Message {
    Message {
        role: Role::User,
        parts: vec![Part::text(text)],
        message_id: new_id(),
        task_id: None,
        context_id: None,
        from: None,
        to: None,
        metadata: None,
    }
}

/// A text message that creates a task for the agent `to`.
pub fn message_to(to: &str, text: &str) -> Message {
    Message {
        to: Some(to.to_owned()),
        ..text_message(text)
    }
}

/// A text message on the existing task `task_id` (a reply, a follow-up, or
/// the message of a status change).
pub fn task_message(task_id: &str, text: &str) -> Message {
    Message {
        task_id: Some(task_id.to_owned()),
        ..text_message(text)
    }
}

/// A one-part text artifact.
pub fn text_artifact(artifact_id: &str, text: &str) -> Artifact {
    Artifact {
        artifact_id: artifact_id.to_owned(),
        name: None,
        description: None,
        parts: vec![Part::text(text)],
        metadata: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct() {
        let a = new_id();
        let b = new_id();
        assert_ne!(a, b);
        assert_eq!(a.split('-').next(), b.split('-').next());
    }

    #[test]
    fn messages_carry_address_and_task() {
        let m = message_to("w", "hi");
        assert_eq!(m.to.as_deref(), Some("w"));
        assert_eq!(m.task_id, None);
        assert_eq!(m.parts, vec![Part::text("hi")]);
        let r = task_message("t1", "more");
        assert_eq!(r.task_id.as_deref(), Some("t1"));
        assert_ne!(m.message_id, r.message_id);
    }

    #[test]
    fn card_json_has_the_defaults() {
        let v = serde_json::to_value(agent_card("w")).unwrap();
        assert_eq!(v["name"], "w");
        assert_eq!(v["capabilities"]["streaming"], true);
        assert_eq!(v["defaultInputModes"][0], "text/plain");
    }
}
