#!/usr/bin/env bash
# Every test of the project, as the README says: the Rust workspace (unit
# tests, integration tests that spawn the real broker, the C ABI's C test
# program, plainly and under Valgrind when it is installed, and the one-minute
# soak of fanout/tests/soak.rs: the -wal bound and the RSS slope) and the Node
# addon's `node --test` suite (built from source by `npm install`), the
# event ring's producer/consumer protocol under the loom model checker, and
# the gateway driven by the official A2A SDKs (gateway/sdk-tests/run.sh:
# Python `a2a-sdk` in a venv from PyPI, `@a2a-js/sdk` from npm),
# and the A2A tool a model holds driven by the official MCP Python SDK,
# the MCP Inspector's CLI and the Pi agent loop (tool/tests-mcp/run.sh).
# First it fetches everything it needs from crates.io, npm and PyPI
# (scripts/fetch.sh), so that a registry out of reach fails it at once.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's line says how long the run has taken so far, and the last
# line the whole time: README states the time from an empty target
# directory, and these lines are how it is measured.
stage() { echo "== [$SECONDS s] $*"; }
trap 'echo "== test command: exit $? after $SECONDS s"' EXIT

stage "fetch crates, npm and PyPI packages (scripts/fetch.sh)"
scripts/fetch.sh

stage "cargo test --workspace"
cargo test --workspace
# What the later stages run was built just now (binaries and examples, with
# the workspace's features): they use it instead of building single
# packages, whose own feature sets would compile dependencies again.
export A2A_PREBUILT=1
export A2A_BROKER_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/a2a-broker"

stage "node addon (node-binding/ci.sh)"
node-binding/ci.sh

# Its own target directory (under CARGO_TARGET_DIR when set): `--cfg loom`
# rebuilds everything it touches, which must not invalidate the
# workspace's build.
stage "event ring under loom (a2a-ring, tests/loom.rs)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/loom" cargo test -p a2a-ring --release --test loom

stage "A2A SDK tests (gateway/sdk-tests/run.sh)"
gateway/sdk-tests/run.sh

stage "the A2A tool by clients nobody here wrote: MCP Python SDK, MCP Inspector CLI, Pi agent loop (tool/tests-mcp/run.sh)"
tool/tests-mcp/run.sh
