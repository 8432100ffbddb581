//! Fuzz target: no peer-chosen string, rendered for a model by `a2a-tool`,
//! opens or closes a `<peer-text>` frame or breaks a single-line field
//! (`a2a_tool::fuzz::frame` panics if one does).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| a2a_tool::fuzz::frame(data));
