#!/usr/bin/env bash
# The gateway driven by the official A2A SDKs, as independent programs:
#
#  1. inbound: `a2a-gateway serve-tck` exposes a local agent; the Python SDK
#     (`a2a-sdk`, python/test_clients.py) and the JS SDK (`@a2a-js/sdk`,
#     js/test_clients.mjs) send, stream, subscribe, cancel and list.
#  2. outbound: a remote agent served by the Python SDK's server
#     (python/remote_agent.py) is added with `a2a-gateway remote add`; a local
#     delegate (the Rust example `remote_delegate`, plain a2a-client) calls it
#     through the broker and checks the events and the completed task.
#
# Installs what it needs first: a venv at gateway/sdk-tests/.venv from PyPI
# (python/requirements.txt, pinned by python/constraints.txt) and the npm
# packages of js/ (`npm ci`). Prints each command it runs; exits non-zero if
# anything failed. Every wait has a deadline.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"

run() { echo "+ $*" >&2; "$@"; }
die() { echo "sdk-tests: $*" >&2; exit 1; }

# ---------------------------------------------------------------- install
PY="$(command -v python3.11 || command -v python3)" || die "python3 is required"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || die "a2a-sdk needs Python >= 3.10 ($PY)"
VENV="$HERE/.venv"
STAMP="$VENV/.installed"
if [ ! -x "$VENV/bin/python" ] || ! cmp -s "$HERE/python/constraints.txt" "$STAMP"; then
  run "$PY" -m venv "$VENV" || die "cannot create $VENV (python3-venv missing?)"
  run "$VENV/bin/pip" install -q --disable-pip-version-check \
    -r "$HERE/python/requirements.txt" -c "$HERE/python/constraints.txt" || die "pip install failed"
  cp "$HERE/python/constraints.txt" "$STAMP"
fi
if [ ! -d "$HERE/js/node_modules/@a2a-js/sdk" ] ||
  ! cmp -s "$HERE/js/package-lock.json" "$HERE/js/node_modules/.package-lock.json.stamp"; then
  (cd "$HERE/js" && run npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"
  cp "$HERE/js/package-lock.json" "$HERE/js/node_modules/.package-lock.json.stamp"
fi

run cargo build -q -p a2a-broker -p a2a-gateway --example remote_delegate || die "cargo build failed"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/debug"
BROKER="$TARGET/a2a-broker"
GATEWAY="$TARGET/a2a-gateway"
DELEGATE="$TARGET/examples/remote_delegate"

# ---------------------------------------------------------------- helpers
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# wait_for FILE PATTERN PID WHAT: until FILE has a line matching PATTERN
# (60 s at most), or the process PID exits.
wait_for() {
  for _ in $(seq 600); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || { echo "--- $4 exited early; its log:" >&2; cat "$1" >&2; return 1; }
    sleep 0.1
  done
  echo "--- $4 not ready within 60 s; its log:" >&2
  cat "$1" >&2
  return 1
}

PASSED=0
FAILED=0
step() { # step NAME COMMAND...: runs it, counts it
  local name="$1"; shift
  if run "$@"; then PASSED=$((PASSED + 1)); echo "== ok: $name"
  else FAILED=$((FAILED + 1)); echo "== FAILED: $name"; fi
}

# ---------------------------------------------------------------- 1. inbound
PORT="$(free_port)"
echo "+ $GATEWAY serve-tck --listen 127.0.0.1:$PORT" >&2
"$GATEWAY" serve-tck --listen "127.0.0.1:$PORT" --broker "$BROKER" >"$WORK/tck.out" 2>"$WORK/tck.log" &
PIDS+=($!)
if wait_for "$WORK/tck.log" '"ready":true' "$!" "a2a-gateway serve-tck"; then
  URL="http://127.0.0.1:$PORT"
  step "python a2a-sdk clients against serve-tck" timeout 300 "$VENV/bin/python" "$HERE/python/test_clients.py" --url "$URL"
  step "js @a2a-js/sdk clients against serve-tck" env A2A_GATEWAY_URL="$URL" timeout 300 node --test "$HERE/js/test_clients.mjs"
else
  FAILED=$((FAILED + 2))
fi

# ---------------------------------------------------------------- 2. outbound
SOCK="$WORK/broker/run/sock"
mkdir -p "$WORK/broker"
echo "+ $BROKER serve --db $WORK/broker/db --socket $SOCK --no-stdio" >&2
"$BROKER" serve --db "$WORK/broker/db" --socket "$SOCK" --no-stdio 2>"$WORK/broker.log" &
BPID=$!
PIDS+=($BPID)
RPORT="$(free_port)"
echo "+ $VENV/bin/python $HERE/python/remote_agent.py --port $RPORT" >&2
"$VENV/bin/python" "$HERE/python/remote_agent.py" --port "$RPORT" >"$WORK/remote.log" 2>&1 &
RPID=$!
PIDS+=($RPID)
if wait_for "$WORK/broker.log" '"ready":true' "$BPID" "a2a-broker" &&
  wait_for "$WORK/remote.log" '^READY' "$RPID" "python remote agent"; then
  echo "+ $GATEWAY remote add --socket $SOCK http://127.0.0.1:$RPORT" >&2
  "$GATEWAY" remote add --socket "$SOCK" "http://127.0.0.1:$RPORT" >"$WORK/remote-add.out" 2>"$WORK/remote-add.log" &
  GPID=$!
  PIDS+=($GPID)
  if wait_for "$WORK/remote-add.out" '^remote .* -> peer ' "$GPID" "a2a-gateway remote add"; then
    PEER="$(sed -n 's/^remote .* -> peer //p' "$WORK/remote-add.out" | head -1)"
    step "a local delegate calls the Python SDK's server through the broker" \
      timeout 300 "$DELEGATE" --socket "$SOCK" --peer "$PEER"
    # The delegate's cancel must have reached the remote agent.
    for _ in $(seq 100); do grep -q '^CANCELED ' "$WORK/remote.log" && break; sleep 0.1; done
    if grep -q '^CANCELED ' "$WORK/remote.log"; then
      PASSED=$((PASSED + 1)); echo "== ok: the remote agent saw the delegate's cancel"
    else
      FAILED=$((FAILED + 1)); echo "== FAILED: the remote agent never saw the delegate's cancel"
      cat "$WORK/remote.log" "$WORK/remote-add.log" >&2
    fi
  else
    FAILED=$((FAILED + 2))
  fi
else
  FAILED=$((FAILED + 2))
fi

echo "sdk-tests: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
