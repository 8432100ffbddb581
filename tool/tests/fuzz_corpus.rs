//! Replays the committed corpus of the `frame` fuzz target
//! (`fuzz/corpus/frame/`) through its entry point: every input a fuzzer
//! kept stays a regression test of the ordinary test command.

use std::path::Path;

#[test]
fn frame_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/frame");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("entry").path();
        let data = std::fs::read(&path).expect("read");
        let outcome = std::panic::catch_unwind(|| a2a_tool::fuzz::frame(&data));
        assert!(outcome.is_ok(), "frame broke on {}", path.display());
        n += 1;
    }
    assert!(n > 0, "no corpus in {}", dir.display());
}
