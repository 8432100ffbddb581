#!/usr/bin/env bash
# The gateway driven by the official A2A SDKs, as independent programs:
#
#  1. inbound: `a2a-gateway serve-tck` exposes a local agent; the Python SDK
#     (`a2a-sdk`, python/test_clients.py, over JSON-RPC and then HTTP+JSON)
#     and the JS SDK (`@a2a-js/sdk`, js/test_clients.mjs) send, stream,
#     subscribe, cancel and list; the Python SDK of A2A v0.3
#     (`a2a-sdk==0.3.26`, python/test_clients_v03.py) runs a whole v0.3
#     delegation against the gateway's v0.3 compatibility, and so does the
#     JS SDK of A2A v0.3 (`@a2a-js/sdk` 0.3.x, js-v03/test_clients_v03.mjs).
#  2. outbound: a remote agent served by the Python SDK's server
#     (python/remote_agent.py) is added with `a2a-gateway remote add`; a local
#     delegate (the Rust example `remote_delegate`, plain a2a-client) calls it
#     through the broker and checks the events and the completed task; then
#     the same against the SDK's server offering only HTTP+JSON (2b), and
#     against a v0.3 agent served by a2a-sdk 0.3.26 (python/remote_agent_v03.py,
#     2c), which the gateway speaks A2A v0.3 to, as its card says.
#  3. restarts: `a2a-gateway serve` in front of the TCK agent and a sink
#     (the Rust example `tck_agent`, a process of its own) is stopped with
#     SIGTERM, then with SIGKILL, and started again on its state file; the
#     Python SDK (python/restart_clients.py) makes tasks in every state and
#     push configs before, and checks after that every read is as before,
#     that a follow-up, a subscription and a cancel still work, and that a
#     webhook registered before hears the terminal states. The JS SDK
#     (js/restart_reads.mjs) reads the same tasks first, after each restart.
#  4. restarts of `remote add`: the Python SDK's server, streaming and then
#     not (`--no-streaming`: the gateway forwards with unary calls), behind a
#     `remote add` that the delegate (`remote_delegate --restarts`) stops
#     three times (SIGTERM, SIGKILL, SIGTERM) and starts again on its state
#     file: both open tasks resume, a follow-up and a cancel reach the
#     remote, and the remote ran each message exactly once.
#  5. gRPC: our grpc/proto/a2a.proto against the descriptor of the
#     normative a2a.proto that the Python SDK ships (a2a_pb2), field for
#     field (python/check_grpc_descriptor.py and the Rust example
#     descriptor_check), and the check itself fails on one changed number.
#
# Installs what it needs first: a venv at gateway/sdk-tests/.venv from PyPI
# (python/requirements.txt, pinned by python/constraints.txt), one at
# .v03/.venv for the v0.3 SDK (python/requirements-v03.txt, pinned by
# python/constraints-v03.txt) and the npm
# packages of js/ and js-v03/ (`npm ci`). Prints each command it runs; exits non-zero if
# anything failed. Every wait has a deadline.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"

NAME=sdk-tests
# shellcheck source=../../scripts/lib.sh
. "$ROOT/scripts/lib.sh"

# ---------------------------------------------------------------- install
install_deps a2a-sdk @a2a-js/sdk
# The v0.3 SDK is the same package as the 1.x one: a venv of its own, made
# again only when its pins change.
VENV03="$HERE/.v03/.venv"
if [ ! -x "$VENV03/bin/python" ] || ! cmp -s "$HERE/python/constraints-v03.txt" "$VENV03/.installed"; then
  run "$PY" -m venv "$VENV03" || die "cannot create $VENV03 (python3-venv missing?)"
  run "$VENV03/bin/pip" install -q --disable-pip-version-check \
    -r "$HERE/python/requirements-v03.txt" -c "$HERE/python/constraints-v03.txt" || die "pip install (v0.3 SDK) failed"
  cp "$HERE/python/constraints-v03.txt" "$VENV03/.installed"
fi
# And its JS SDK, beside the 1.x one the same way (npm ci on a change).
if [ ! -d "$HERE/js-v03/node_modules/@a2a-js/sdk" ] ||
  ! cmp -s "$HERE/js-v03/package-lock.json" "$HERE/js-v03/node_modules/.package-lock.json.stamp"; then
  (cd "$HERE/js-v03" && run npm ci --no-audit --no-fund --loglevel=error) || die "npm ci (v0.3 SDK) failed"
  cp "$HERE/js-v03/package-lock.json" "$HERE/js-v03/node_modules/.package-lock.json.stamp"
fi

# scripts/test-all.sh sets A2A_PREBUILT after `cargo test --workspace`, which
# built these with the workspace's features: a build of single packages
# would resolve other features and compile dependencies again.
[ -n "${A2A_PREBUILT:-}" ] || run cargo build -q -p a2a-cli -p a2a-gateway -p a2a-grpc --example remote_delegate --example tck_agent --example descriptor_check || die "cargo build failed"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/debug"
BROKER="$TARGET/a2a-broker"
GATEWAY="$TARGET/a2a-gateway"
DELEGATE="$TARGET/examples/remote_delegate"
TCK_AGENT="$TARGET/examples/tck_agent"
DESCRIPTOR_CHECK="$TARGET/examples/descriptor_check"

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

# ---------------------------------------------------------------- 1. inbound
PORT="$(free_port)"
echo "+ $GATEWAY serve-tck --listen 127.0.0.1:$PORT" >&2
"$GATEWAY" serve-tck --listen "127.0.0.1:$PORT" --broker "$BROKER" >"$WORK/tck.out" 2>"$WORK/tck.log" &
PIDS+=($!)
if wait_for "$WORK/tck.log" '"ready":true' "$!" "a2a-gateway serve-tck"; then
  URL="http://127.0.0.1:$PORT"
  step "python a2a-sdk clients against serve-tck" timeout 300 "$VENV/bin/python" "$HERE/python/test_clients.py" --url "$URL"
  step "python a2a-sdk clients over HTTP+JSON against serve-tck" timeout 300 "$VENV/bin/python" "$HERE/python/test_clients.py" --url "$URL" --binding HTTP+JSON
  step "js @a2a-js/sdk clients against serve-tck" env A2A_GATEWAY_URL="$URL" timeout 300 node --test "$HERE/js/test_clients.mjs"
  step "python a2a-sdk 0.3 clients (A2A v0.3) against serve-tck" timeout 300 "$VENV03/bin/python" "$HERE/python/test_clients_v03.py" --url "$URL"
  step "js @a2a-js/sdk 0.3 clients (A2A v0.3) against serve-tck" env A2A_GATEWAY_URL="$URL" timeout 300 node --test "$HERE/js-v03/test_clients_v03.mjs"
else
  FAILED=$((FAILED + 5))
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

# ---------------------------------------------------------------- 2b. outbound over HTTP+JSON
# The Python SDK's server offering only its REST routes (streaming, then
# not), added to the broker of section 2 and driven by the same delegate.
for MODE in streaming unary; do
  FLAG=""
  [ "$MODE" = unary ] && FLAG="--no-streaming"
  P2="$(free_port)"
  LOG2="$WORK/remote-rest-$MODE.log"
  echo "+ $VENV/bin/python $HERE/python/remote_agent.py --port $P2 --name py-rest-$MODE --binding HTTP+JSON $FLAG" >&2
  # shellcheck disable=SC2086
  "$VENV/bin/python" "$HERE/python/remote_agent.py" --port "$P2" --name "py-rest-$MODE" --binding HTTP+JSON $FLAG >"$LOG2" 2>&1 &
  P2PID=$!
  PIDS+=($P2PID)
  if kill -0 "$BPID" 2>/dev/null && wait_for "$LOG2" '^READY' "$P2PID" "python REST remote agent ($MODE)"; then
    echo "+ $GATEWAY remote add --socket $SOCK http://127.0.0.1:$P2" >&2
    "$GATEWAY" remote add --socket "$SOCK" "http://127.0.0.1:$P2" >"$WORK/remote-add-rest-$MODE.out" 2>"$WORK/remote-add-rest-$MODE.log" &
    PIDS+=($!)
    if wait_for "$WORK/remote-add-rest-$MODE.out" '^remote .* -> peer ' "$!" "a2a-gateway remote add (REST, $MODE)"; then
      PEER="$(sed -n 's/^remote .* -> peer //p' "$WORK/remote-add-rest-$MODE.out" | head -1)"
      step "a local delegate calls the Python SDK's $MODE REST-only server through the broker" \
        timeout 300 "$DELEGATE" --socket "$SOCK" --peer "$PEER"
      for _ in $(seq 100); do grep -q '^CANCELED ' "$LOG2" && break; sleep 0.1; done
      if grep -q '^CANCELED ' "$LOG2"; then
        PASSED=$((PASSED + 1)); echo "== ok: the $MODE REST remote saw the delegate's cancel"
      else
        FAILED=$((FAILED + 1)); echo "== FAILED: the $MODE REST remote never saw the delegate's cancel"
        cat "$LOG2" "$WORK/remote-add-rest-$MODE.log" >&2
      fi
    else
      FAILED=$((FAILED + 2))
    fi
  else
    FAILED=$((FAILED + 2))
  fi
done

# ---------------------------------------------------------------- 2c. outbound to an A2A v0.3 agent
# The v0.3 SDK's server (its card: protocolVersion 0.3.0, `url`), streaming
# and then not (`message/stream`, then `message/send`), added to the broker
# of section 2 and driven by the same delegate: input-required, artifacts,
# a direct message, a failure and a cancel, all through v0.3.
for MODE in streaming unary; do
  FLAG=""
  [ "$MODE" = unary ] && FLAG="--no-streaming"
  P3="$(free_port)"
  LOG3="$WORK/remote-v03-$MODE.log"
  echo "+ $VENV03/bin/python $HERE/python/remote_agent_v03.py --port $P3 --name py-v03-$MODE $FLAG" >&2
  # shellcheck disable=SC2086
  "$VENV03/bin/python" "$HERE/python/remote_agent_v03.py" --port "$P3" --name "py-v03-$MODE" $FLAG >"$LOG3" 2>&1 &
  P3PID=$!
  PIDS+=($P3PID)
  if kill -0 "$BPID" 2>/dev/null && wait_for "$LOG3" '^READY' "$P3PID" "python v0.3 remote agent ($MODE)"; then
    echo "+ $GATEWAY remote add --socket $SOCK http://127.0.0.1:$P3" >&2
    "$GATEWAY" remote add --socket "$SOCK" "http://127.0.0.1:$P3" >"$WORK/remote-add-v03-$MODE.out" 2>"$WORK/remote-add-v03-$MODE.log" &
    PIDS+=($!)
    if wait_for "$WORK/remote-add-v03-$MODE.out" '^remote .* -> peer ' "$!" "a2a-gateway remote add (v0.3, $MODE)"; then
      PEER="$(sed -n 's/^remote .* -> peer //p' "$WORK/remote-add-v03-$MODE.out" | head -1)"
      step "a local delegate calls a2a-sdk 0.3's $MODE server (A2A v0.3) through the broker" \
        timeout 300 "$DELEGATE" --socket "$SOCK" --peer "$PEER"
      for _ in $(seq 100); do grep -q '^CANCELED ' "$LOG3" && break; sleep 0.1; done
      if grep -q '^CANCELED ' "$LOG3" && grep -q 'A2A v0.3' "$WORK/remote-add-v03-$MODE.log"; then
        PASSED=$((PASSED + 1)); echo "== ok: the $MODE v0.3 remote, spoken to in v0.3, saw the delegate's cancel"
      else
        FAILED=$((FAILED + 1)); echo "== FAILED: the $MODE v0.3 remote never saw the delegate's cancel (or was not spoken to in v0.3)"
        cat "$LOG3" "$WORK/remote-add-v03-$MODE.log" >&2
      fi
    else
      FAILED=$((FAILED + 2))
    fi
  else
    FAILED=$((FAILED + 2))
  fi
done

# ---------------------------------------------------------------- 3. restarts
R="$WORK/restart"
mkdir -p "$R"
RSOCK="$R/run/sock"
RESTART="$HERE/python/restart_clients.py"
echo "+ $BROKER serve --db $R/db --socket $RSOCK --no-stdio" >&2
"$BROKER" serve --db "$R/db" --socket "$RSOCK" --no-stdio 2>"$R/broker.log" &
RBPID=$!
PIDS+=($RBPID)
HPORT="$(free_port)"
GWPID=""
# start_gateway: `a2a-gateway serve` on the state file, on a fresh port.
start_gateway() {
  local port
  port="$(free_port)"
  echo "+ $GATEWAY serve --socket $RSOCK --listen 127.0.0.1:$port --expose tck --expose sink --state $R/gateway.db" >&2
  "$GATEWAY" serve --socket "$RSOCK" --listen "127.0.0.1:$port" --expose tck --expose sink \
    --state "$R/gateway.db" --allow-loopback-webhooks --rate 0 >/dev/null 2>"$R/gateway.log" &
  GWPID=$!
  PIDS+=($GWPID)
  GWURL="http://127.0.0.1:$port"
  wait_for "$R/gateway.log" '"ready":true' "$GWPID" "a2a-gateway serve"
}
# stop_gateway SIGNAL: and wait (10 s at most) until it is gone.
stop_gateway() {
  echo "+ kill -$1 $GWPID" >&2
  kill "-$1" "$GWPID"
  for _ in $(seq 100); do kill -0 "$GWPID" 2>/dev/null || return 0; sleep 0.1; done
  echo "--- a2a-gateway did not exit on SIG$1" >&2
  return 1
}
if wait_for "$R/broker.log" '"ready":true' "$RBPID" "a2a-broker" &&
  { "$TCK_AGENT" --socket "$RSOCK" >"$R/agent.out" 2>"$R/agent.log" & APID=$!; PIDS+=($APID); wait_for "$R/agent.out" '^READY' "$APID" "tck_agent"; } &&
  { "$VENV/bin/python" "$RESTART" webhook --port "$HPORT" --out "$R/hook.jsonl" >"$R/hook.log" 2>&1 & HPID=$!; PIDS+=($HPID); wait_for "$R/hook.log" '^READY' "$HPID" "webhook"; } &&
  start_gateway; then
  for SIG in TERM KILL; do
    if step "python a2a-sdk: tasks and push configs before SIG$SIG" \
      timeout 120 "$VENV/bin/python" "$RESTART" before --url "$GWURL" --hook "http://127.0.0.1:$HPORT/hook" --out "$R/saved.json" &&
      stop_gateway "$SIG" && start_gateway; then
      step "js @a2a-js/sdk: the same reads after SIG$SIG and a restart" \
        env A2A_GATEWAY_URL="$GWURL" A2A_RESTART_STATE="$R/saved.json" timeout 120 node --test "$HERE/js/restart_reads.mjs"
      step "python a2a-sdk: the same after SIG$SIG and a restart" \
        timeout 120 "$VENV/bin/python" "$RESTART" after --url "$GWURL" --in "$R/saved.json" --hook-file "$R/hook.jsonl"
    else
      FAILED=$((FAILED + 1))
    fi
  done
else
  FAILED=$((FAILED + 4))
fi

# ---------------------------------------------------------------- 4. restarts of remote add
# On the broker of section 2; the delegate runs `remote add` itself.
for MODE in streaming unary; do
  FLAG=""
  [ "$MODE" = unary ] && FLAG="--no-streaming"
  P4="$(free_port)"
  LOG4="$WORK/remote-$MODE.log"
  echo "+ $VENV/bin/python $HERE/python/remote_agent.py --port $P4 --name py-$MODE $FLAG" >&2
  # shellcheck disable=SC2086
  "$VENV/bin/python" "$HERE/python/remote_agent.py" --port "$P4" --name "py-$MODE" $FLAG >"$LOG4" 2>&1 &
  P4PID=$!
  PIDS+=($P4PID)
  if kill -0 "$BPID" 2>/dev/null && wait_for "$LOG4" '^READY' "$P4PID" "python remote agent ($MODE)"; then
    step "a $MODE remote task runs once across three restarts of remote add" \
      timeout 300 "$DELEGATE" --socket "$SOCK" --restarts "$GATEWAY" --url "http://127.0.0.1:$P4" \
      --remote-log "$LOG4" --state "$WORK/remotes-$MODE.db"
  else
    FAILED=$((FAILED + 1))
  fi
done

# ---------------------------------------------------------------- 5. gRPC descriptor
step "grpc/proto/a2a.proto matches the a2a-sdk's a2a.proto field for field" \
  timeout 120 "$VENV/bin/python" "$HERE/python/check_grpc_descriptor.py" --checker "$DESCRIPTOR_CHECK"

echo "sdk-tests: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
