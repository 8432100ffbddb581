//! The live agents: who is registered, with which token, and where their
//! events go; who may address whom. Above `core` (the rules it applies:
//! parties, errors) and `delivery` (an agent's endpoint is its
//! connection's outbox or its own pull queue), so the core stays free of
//! delivery.
//!
//! - [`registry`]: live agents, peer ids, capability tokens, endpoints.
//! - [`addressing`]: who may address whom, and the `to` resolution rules.

pub mod addressing;
pub mod registry;
