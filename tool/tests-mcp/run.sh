#!/usr/bin/env bash
# `a2a-broker mcp` driven by an MCP client nobody here wrote: the official
# MCP Python SDK (`mcp` on PyPI, python/test_mcp.py) runs two servers as two
# agents of one broker through a whole delegation (discover, send, wait,
# input-required, answer, artifact, complete, get, misuses, deregistration
# when stdin closes); then the official MCP Inspector's CLI
# (`@modelcontextprotocol/inspector`, js/) lists the tool and calls it;
# and the Pi agent runtime's loop (`@mariozechner/pi-agent-core`, js/
# pi_loop.test.mjs) holding the Node addon's `agent.tool()`, with a scripted
# model, delegates from one agent to another and finishes the task, as does
# the Vercel AI SDK's loop (`ai`, its mock language model scripted:
# js/ai_sdk_loop.test.mjs). Last, the official MCP conformance suite
# (`@modelcontextprotocol/conformance`, js/) runs its server scenarios that
# apply to a server with one tool and no other capability: server-initialize,
# ping, tools-list. (The rest need the suite's own fixture tools, such as
# `test_simple_text`, or logging, completions, resources, prompts,
# elicitation, or test an HTTP server's transport.) The suite reaches servers
# only by URL (Streamable HTTP); the Inspector's own proxy (its server,
# already in js/) carries each scenario to an `a2a-broker mcp` it starts on
# stdio. 0.1.13 is the last version that runs on Node 20 (0.1.14 on import
# `fs.globSync`, Node >= 22).
#
# Installs what it needs first: a venv at tool/tests-mcp/.venv from PyPI
# (python/requirements.txt, pinned by python/constraints.txt) and the npm
# packages of js/ (`npm ci`). Prints each
# command it runs; exits non-zero if anything failed. Every wait has a
# deadline.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"

NAME=tests-mcp
# shellcheck source=../../scripts/lib.sh
. "$ROOT/scripts/lib.sh"

# ---------------------------------------------------------------- install
install_deps mcp @modelcontextprotocol/inspector

# scripts/test-all.sh sets A2A_PREBUILT after `cargo test --workspace`, which
# built these with the workspace's features: a build of single packages
# would resolve other features and compile dependencies again.
[ -n "${A2A_PREBUILT:-}" ] || run cargo build -q -p a2a-cli || die "cargo build failed"
BROKER="${CARGO_TARGET_DIR:-$ROOT/target}/debug/a2a-broker"
# The Node addon (built by the node stage before this one; else here).
if [ ! -f "$ROOT/node-binding/a2a.node" ]; then
  run env A2A_NODE_PROFILE=debug node "$ROOT/node-binding/scripts/build.js" || die "cannot build the Node addon"
fi

# ---------------------------------------------------------------- broker
WORK="$(mktemp -d)"
BPID=""
PROXY_PID=""
cleanup() {
  if [ -n "$PROXY_PID" ]; then
    kill -TERM "$PROXY_PID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$PROXY_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PROXY_PID" 2>/dev/null
  fi
  if [ -n "$BPID" ]; then
    kill -TERM "$BPID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$BPID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$BPID" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

SOCK="$WORK/run/sock"
echo "+ $BROKER serve --db $WORK/db --socket $SOCK --no-stdio" >&2
"$BROKER" serve --db "$WORK/db" --socket "$SOCK" --no-stdio 2>"$WORK/broker.log" &
BPID=$!
for _ in $(seq 600); do
  grep -q '"ready":true' "$WORK/broker.log" 2>/dev/null && break
  kill -0 "$BPID" 2>/dev/null || { cat "$WORK/broker.log" >&2; die "the broker exited"; }
  sleep 0.1
done
grep -q '"ready":true' "$WORK/broker.log" || { cat "$WORK/broker.log" >&2; die "the broker is not ready within 60 s"; }

step "python mcp SDK: two a2a-broker mcp servers through a delegation" \
  timeout 300 "$VENV/bin/python" "$HERE/python/test_mcp.py" --broker "$BROKER" --socket "$SOCK"

# The Inspector's CLI starts `a2a-broker mcp` itself, once per call.
INSPECT=(timeout 120 node "$HERE/js/node_modules/@modelcontextprotocol/inspector/cli/build/cli.js" --cli
  "$BROKER" mcp --socket "$SOCK" --as inspector)
inspector_lists() {
  "${INSPECT[@]}" --method tools/list >"$WORK/list.json" || return 1
  "$VENV/bin/python" - "$WORK/list.json" <<'PY'
import json, sys
tools = json.load(open(sys.argv[1]))["tools"]
assert [t["name"] for t in tools] == ["A2A"], tools
assert tools[0]["inputSchema"]["properties"]["action"]["enum"][0] == "discover", tools
assert tools[0]["outputSchema"]["type"] == "object", tools
PY
}
inspector_calls() {
  "${INSPECT[@]}" --method tools/call --tool-name A2A --tool-arg action=send \
    --tool-arg to=nobody --tool-arg text=hello >"$WORK/call.json" || return 1
  "$VENV/bin/python" - "$WORK/call.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["isError"] is True, r
assert r["structuredContent"]["error"]["code"] == "unknown-peer", r
assert 'There is no peer "nobody"' in r["content"][0]["text"], r
PY
}
step "MCP Inspector CLI: tools/list" inspector_lists
step "MCP Inspector CLI: tools/call" inspector_calls

step "Pi agent loop with agent.tool() and a scripted model" \
  env A2A_BROKER_BIN="$BROKER" timeout 300 node --test "$HERE/js/pi_loop.test.mjs"

step "Vercel AI SDK loop with the A2A tool and a scripted mock model" \
  env A2A_BROKER_BIN="$BROKER" timeout 300 node --test "$HERE/js/ai_sdk_loop.test.mjs"

# The conformance suite, through the Inspector's proxy (127.0.0.1, a free
# port; its auth is off because the suite cannot send the proxy's token
# header). One `a2a-broker mcp` (and agent name) per scenario: a name is held
# by one connection, and the proxy keeps each server until it exits.
PORT="$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
echo "+ HOST=127.0.0.1 PORT=$PORT DANGEROUSLY_OMIT_AUTH=true node $HERE/js/node_modules/@modelcontextprotocol/inspector/server/build/index.js" >&2
HOST=127.0.0.1 PORT="$PORT" DANGEROUSLY_OMIT_AUTH=true \
  node "$HERE/js/node_modules/@modelcontextprotocol/inspector/server/build/index.js" >"$WORK/proxy.log" 2>&1 &
PROXY_PID=$!
for _ in $(seq 300); do
  grep -q 'listening on' "$WORK/proxy.log" 2>/dev/null && break
  kill -0 "$PROXY_PID" 2>/dev/null || break
  sleep 0.1
done
urlenc() { "$VENV/bin/python" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
conformance() { # conformance SCENARIO
  grep -q 'listening on' "$WORK/proxy.log" || { cat "$WORK/proxy.log" >&2; echo "the Inspector's proxy is not listening" >&2; return 1; }
  local url="http://127.0.0.1:$PORT/mcp?transportType=stdio&command=$(urlenc "$BROKER")&args=$(urlenc "mcp --socket $SOCK --as conformance-$1")"
  run timeout 120 node "$HERE/js/node_modules/@modelcontextprotocol/conformance/dist/index.js" server \
    --url "$url" --scenario "$1" -o "$WORK/conformance"
}
for scenario in server-initialize ping tools-list; do
  step "MCP conformance suite: $scenario" conformance "$scenario"
done

echo "tests-mcp: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
