//! A2A v1.0's gRPC binding: the messages and the `A2AService` of the
//! specification's `a2a.proto` (package `lf.a2a.v1`, written out in
//! `proto/a2a.proto`), as prost types with a tonic client and server, and
//! ProtoJSON serde on every message, so that a gRPC message converts to the
//! same JSON that the JSON-RPC binding carries (one mapping, three framings).

pub mod conformance;
pub mod json;
pub mod status;
pub mod timestamp;

/// The generated messages, enums, client and server of `lf.a2a.v1`.
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.serde.rs"));
}

/// The encoded `FileDescriptorSet` of `proto/a2a.proto` and its imports,
/// as compiled by build.rs.
pub const DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/a2a_descriptor.bin"));
