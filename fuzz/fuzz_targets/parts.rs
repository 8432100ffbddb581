//! Fuzz target: `a2a_broker::fuzz_entry::parts` must never panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| a2a_broker::fuzz_entry::parts(data));
