//! Fuzz target: `a2a_proto::fuzz::binary` must never panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| a2a_proto::fuzz::binary(data));
