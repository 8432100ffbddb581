//! Generates the prost messages, the tonic client and server, and the
//! ProtoJSON serde impls of `proto/a2a.proto`, with no protoc binary: protox
//! (a protobuf compiler in Rust) makes the descriptor set that tonic's and
//! pbjson's generators read. The descriptor set is also kept in OUT_DIR so
//! that the crate can hand its own descriptor to the conformance check.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed=proto/a2a.proto");
    let fds = protox::compile(["a2a.proto"], ["proto"])?;
    let bytes = fds.encode_to_vec();
    std::fs::write(out.join("a2a_descriptor.bin"), &bytes)?;

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Transports are the embedder's: the gateway serves the generated
        // service through its own hyper server, and a client brings a channel.
        .build_transport(false)
        // The well-known types with ProtoJSON serde (Struct as a JSON object)
        // instead of prost-types' plain structs; Timestamp is ours
        // (src/timestamp.rs says why).
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::pbjson_types")
        .extern_path(".google.protobuf.Timestamp", "crate::timestamp::Timestamp")
        .compile_fds(fds)?;

    pbjson_build::Builder::new()
        .register_descriptors(&bytes)?
        .extern_path(".google.protobuf", "::pbjson_types")
        .extern_path(".google.protobuf.Timestamp", "crate::timestamp::Timestamp")
        // A peer newer than this file may send fields it does not know;
        // ProtoJSON parsers skip them as the binary decoder does.
        .ignore_unknown_fields()
        .build(&[".lf.a2a.v1"])?;
    Ok(())
}
