#!/bin/sh
# The Node addon's CI step (called from .ci/run): install the npm
# dependencies from package-lock.json, which builds the addon from source
# with cargo (the `install` script; debug profile here, sharing the
# artifacts of `cargo test --workspace`), then run the node --test suite
# against the real a2a-broker binary.
set -eu
cd "$(dirname "$0")"
export A2A_NODE_PROFILE="${A2A_NODE_PROFILE:-debug}"
if [ -z "${A2A_BROKER_BIN:-}" ]; then
  # The test kit's rule for the broker binary (builds it if missing).
  A2A_BROKER_BIN="$(cargo run -q -p a2a-testkit --bin a2a-broker-path)"
  export A2A_BROKER_BIN
fi
npm ci --no-audit --no-fund || npm install --no-audit --no-fund
# `npm ci` runs the install script, but a cached node_modules may skip it:
# build explicitly (a no-op for cargo when nothing changed).
npm run build
npm test
