//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the
//! fuzz targets' entry points: every input a fuzzer kept, or a crash it
//! found and we fixed, stays a regression test of the ordinary test command.

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "{target} panicked on {}", path.display());
        n += 1;
    }
    n
}

#[test]
fn ndjson_corpus() {
    assert!(replay("ndjson", a2a_proto::fuzz::ndjson) > 0);
}

#[test]
fn binary_corpus() {
    assert!(replay("binary", a2a_proto::fuzz::binary) > 0);
}

#[test]
fn parts_corpus() {
    assert!(replay("parts", a2a_proto::fuzz::parts) > 0);
}
