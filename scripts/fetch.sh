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
PY="$(command -v python3.11 || command -v python3)" || fail "python3 is required (the SDK and MCP tests)"

# The five installs below wait on the network, not on the CPU: they run at
# once, each in its own subshell whose failure line is kept for the end.
node_addon() {
  # The addon's install script is its cargo build: not here (its stage runs
  # `npm ci` again, from npm's cache, and builds).
  echo "+ (cd node-binding && npm ci --ignore-scripts)" >&2
  (cd node-binding && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) ||
    fail "cannot install node-binding's npm packages (registry.npmjs.org unreachable?)"
}
js_dir() {
  local dir="$1" stamp="$1/node_modules/.package-lock.json.stamp"
  [ -f "$dir/package-lock.json" ] || return 0
  # The stage's own rule (its run.sh): node_modules whose stamp is the lock.
  cmp -s "$dir/package-lock.json" "$stamp" && return 0
  echo "+ (cd $dir && npm ci)" >&2
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) ||
    fail "cannot install $dir's npm packages (registry.npmjs.org unreachable?)"
  cp "$dir/package-lock.json" "$stamp"
}
venv_dir() {
  local here="$1" venv="$ROOT/$1/.venv"
  local stamp="$venv/.installed"
  [ -f "$here/python/requirements.txt" ] || return 0
  # The stage's own rule (its run.sh): a venv whose stamp is its constraints.
  [ -x "$venv/bin/python" ] && cmp -s "$here/python/constraints.txt" "$stamp" && return 0
  echo "+ $PY -m venv $venv && pip install -r $here/python/requirements.txt" >&2
  "$PY" -m venv "$venv" || fail "cannot create $venv (python3-venv missing?)"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    -r "$here/python/requirements.txt" -c "$here/python/constraints.txt" ||
    fail "cannot install $here's Python packages (pypi.org unreachable?)"
  cp "$here/python/constraints.txt" "$stamp"
}

pids=()
node_addon & pids+=($!)
for dir in gateway/sdk-tests/js tool/tests-mcp/js; do js_dir "$dir" & pids+=($!); done
for here in gateway/sdk-tests tool/tests-mcp; do venv_dir "$here" & pids+=($!); done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || fail "an install above failed (its line says which)"
echo "scripts/fetch.sh: crates, npm and PyPI packages are here" >&2
