#!/usr/bin/env bash
# Our stack beside the official Python SDK's own server, paired in one run
# (BENCHMARKS.md, "Beside the official SDK"): makes the SDK stage's venv
# (gateway/sdk-tests/.venv from PyPI, pinned by python/constraints.txt, as
# run.sh does; again only when the pins change), builds the release
# binaries and runs gateway/examples/sdk_bench.rs. Arguments go to
# sdk_bench (`--blocks 5 --calls 1000 --seq 200 --concurrency 16` by
# default; `--exec CMD`, `--no-lean`). A measurement: not in the test
# command.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"
NAME=sdk-bench
# shellcheck source=../../scripts/lib.sh
. "$ROOT/scripts/lib.sh"

install_venv a2a-sdk

run cargo build --release -q -p a2a-cli -p a2a-gateway --example sdk_bench --example tck_agent
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/release"
run "$TARGET/examples/sdk_bench" --python "$VENV/bin/python" "$@"
