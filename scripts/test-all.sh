#!/usr/bin/env bash
# Every test of the project, as the README says: the Rust workspace (unit
# tests, integration tests that spawn the real broker, the C ABI's C test
# program, plainly and under Valgrind when it is installed) and the Node
# addon's `node --test` suite (built from source by `npm install`), and the
# gateway driven by the official A2A SDKs (gateway/sdk-tests/run.sh: Python
# `a2a-sdk` in a venv from PyPI, `@a2a-js/sdk` from npm).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test --workspace"
cargo test --workspace

echo "== node addon (node-binding/ci.sh)"
node-binding/ci.sh

echo "== A2A SDK tests (gateway/sdk-tests/run.sh)"
gateway/sdk-tests/run.sh
