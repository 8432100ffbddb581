//! The integration suite of `a2a-broker`, as one test binary (one link
//! instead of one per file): every test spawns the real
//! `a2a-broker serve` binary through `a2a-testkit` and speaks the `a2a.*`
//! protocol (docs/protocol.md) to it over NDJSON, on stdio and on the local
//! socket (`on_both_transports!`), except the transcripts, which run in
//! memory and over stdio.
//!
//! `cargo test -p a2a-integration <module>` runs one area; `::socket` or
//! `::stdio` one transport.

mod agents;
mod bindings;
mod bounds;
mod doc_refs;
mod docs;
mod durability;
mod events;
mod framing;
mod handshake;
mod idempotency;
mod kit;
mod leases;
mod lifecycle;
mod migration;
mod one_codec;
mod send;
mod tasks;
mod transcripts;
mod tree;
