//! Fuzz target: `a2a_client::wire::fuzz` (the client's wire core: both
//! framers, both decoders, the JSON envelope scanner) must never panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| a2a_client::wire::fuzz(data));
