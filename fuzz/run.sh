#!/usr/bin/env bash
# Runs every fuzz target for a set time (default 60 s each; the release bar
# is 600 s each): ./fuzz/run.sh [SECONDS]. New corpus entries land in
# fuzz/corpus/<target>/ (commit them: the test suite replays the corpus);
# crashes land in fuzz/artifacts/<target>/ and must become regression tests.
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). The machine's toolchain is
# stable, so RUSTC_BOOTSTRAP=1 lets it take the sanitizer flags cargo-fuzz passes.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
export RUSTC_BOOTSTRAP=1
for target in ndjson binary parts frame wire; do
    mkdir -p "corpus/$target" "artifacts/$target"
    echo "== fuzzing $target for ${secs}s"
    cargo fuzz run "$target" "corpus/$target" -- \
        -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="artifacts/$target/" 2>&1 | grep -E '^#[0-9]+.*(DONE|pulse)|ERROR|panicked|SUMMARY' | tail -n 5
done
