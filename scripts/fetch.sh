#!/usr/bin/env bash
# Fetches everything the test command needs from the network before any of
# it builds or runs, so that a machine without a registry fails in seconds
# with one line naming the registry, not after 15 minutes of building:
#
# - crates.io: `cargo fetch --locked` (the workspace's crates, loom's too);
# - npm: the Node addon's packages (`npm ci --ignore-scripts`: its stage
#   installs again from npm's cache, and builds), and the SDK and MCP tests'
#   js/ (`npm ci`, with the stamp their run.sh checks, which then skips it);
# - PyPI: the venvs of gateway/sdk-tests and tool/tests-mcp, made as their
#   run.sh makes them (same place, same stamp), which then finds them ready.
#
# Offline with filled caches: CARGO_NET_OFFLINE=true and npm's `--offline`
# config (npm_config_offline=true) make the first two work from the caches.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

fail() {
  echo "scripts/fetch.sh: $*" >&2
  exit 1
}

echo "+ cargo fetch --locked" >&2
cargo fetch --locked ||
  fail "cannot fetch the Rust crates (crates.io unreachable, or Cargo.lock out of date): the tests cannot build"

command -v npm >/dev/null 2>&1 || fail "npm is not installed: the Node addon's tests need Node.js 20 with npm"
# The addon's install script is its cargo build: not here (its stage runs
# `npm ci` again, from npm's cache, and builds).
echo "+ (cd node-binding && npm ci --ignore-scripts)" >&2
(cd node-binding && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) ||
  fail "cannot install node-binding's npm packages (registry.npmjs.org unreachable?)"
for dir in gateway/sdk-tests/js tool/tests-mcp/js; do
  [ -f "$dir/package-lock.json" ] || continue
  stamp="$dir/node_modules/.package-lock.json.stamp"
  # The stage's own rule (its run.sh): node_modules whose stamp is the lock.
  cmp -s "$dir/package-lock.json" "$stamp" && continue
  echo "+ (cd $dir && npm ci)" >&2
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) ||
    fail "cannot install $dir's npm packages (registry.npmjs.org unreachable?)"
  cp "$dir/package-lock.json" "$stamp"
done

PY="$(command -v python3.11 || command -v python3)" || fail "python3 is required (the SDK and MCP tests)"
for here in gateway/sdk-tests tool/tests-mcp; do
  [ -f "$here/python/requirements.txt" ] || continue
  venv="$ROOT/$here/.venv"
  stamp="$venv/.installed"
  # The stage's own rule (its run.sh): a venv whose stamp is its constraints.
  if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/python/constraints.txt" "$stamp"; then
    echo "+ $PY -m venv $venv && pip install -r $here/python/requirements.txt" >&2
    "$PY" -m venv "$venv" || fail "cannot create $venv (python3-venv missing?)"
    "$venv/bin/pip" install -q --disable-pip-version-check \
      -r "$here/python/requirements.txt" -c "$here/python/constraints.txt" ||
      fail "cannot install $here's Python packages (pypi.org unreachable?)"
    cp "$here/python/constraints.txt" "$stamp"
  fi
done
echo "scripts/fetch.sh: crates, npm and PyPI packages are here" >&2
