//! Replays the committed fuzz corpus through the wire core's fuzz entry
//! point (`a2a_client::wire::fuzz`, the `wire` target of `fuzz/`): its own
//! corpus (`fuzz/corpus/wire/`) and the protocol's byte streams the
//! `binary` and `ndjson` targets kept, so every input a fuzzer found stays
//! a regression test of the ordinary test command.

use std::path::Path;

fn replay(target: &str) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let outcome = std::panic::catch_unwind(|| a2a_client::wire::fuzz(&data));
        assert!(outcome.is_ok(), "wire panicked on {}", path.display());
        n += 1;
    }
    n
}

#[test]
fn wire_corpus() {
    assert!(replay("wire") > 0);
}

#[test]
fn binary_and_ndjson_corpora_through_the_wire_core() {
    assert!(replay("binary") > 0);
    assert!(replay("ndjson") > 0);
}
