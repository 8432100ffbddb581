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
# The packed tarball installs in a project of its own, away from the
# workspace, and loads: it carries the addon built above (`prepack` is a
# no-op for cargo here), since there is no workspace there to build in.
pack_dir="$(mktemp -d)"
trap 'rm -rf "$pack_dir"' EXIT
npm pack --pack-destination "$pack_dir" >/dev/null
(
  cd "$pack_dir"
  echo '{ "name": "a2a-pack-check", "private": true }' > package.json
  npm install --no-audit --no-fund ./a2a-broker-node-*.tgz
  # What the package's install script does where npm runs it (npm 11 may
  # hold it back until approved): no workspace here, so the packed addon.
  (cd node_modules/@a2a-broker/node && node scripts/build.js)
  node -e "
    const a2a = require('@a2a-broker/node')
    if (typeof a2a.Broker !== 'function') throw new Error('the packed addon has no Broker')
    console.error('a2a-node: the packed tarball installs and loads')
  "
)
