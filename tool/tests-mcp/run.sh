#!/usr/bin/env bash
# `a2a-broker mcp` driven by an MCP client nobody here wrote: the official
# MCP Python SDK (`mcp` on PyPI, python/test_mcp.py) runs two servers as two
# agents of one broker through a whole delegation (discover, send, wait,
# input-required, answer, artifact, complete, get, misuses, deregistration
# when stdin closes).
#
# Installs what it needs first: a venv at tool/tests-mcp/.venv from PyPI
# (python/requirements.txt, pinned by python/constraints.txt). Prints each
# command it runs; exits non-zero if anything failed. Every wait has a
# deadline.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"

run() { echo "+ $*" >&2; "$@"; }
die() { echo "tests-mcp: $*" >&2; exit 1; }

# ---------------------------------------------------------------- install
PY="$(command -v python3.11 || command -v python3)" || die "python3 is required"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || die "mcp needs Python >= 3.10 ($PY)"
VENV="$HERE/.venv"
STAMP="$VENV/.installed"
if [ ! -x "$VENV/bin/python" ] || ! cmp -s "$HERE/python/constraints.txt" "$STAMP"; then
  run "$PY" -m venv "$VENV" || die "cannot create $VENV (python3-venv missing?)"
  run "$VENV/bin/pip" install -q --disable-pip-version-check \
    -r "$HERE/python/requirements.txt" -c "$HERE/python/constraints.txt" || die "pip install failed"
  cp "$HERE/python/constraints.txt" "$STAMP"
fi

run cargo build -q -p a2a-broker || die "cargo build failed"
BROKER="${CARGO_TARGET_DIR:-$ROOT/target}/debug/a2a-broker"

# ---------------------------------------------------------------- broker
WORK="$(mktemp -d)"
BPID=""
cleanup() {
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

PASSED=0
FAILED=0
step() { # step NAME COMMAND...: runs it, counts it
  local name="$1"; shift
  if run "$@"; then PASSED=$((PASSED + 1)); echo "== ok: $name"
  else FAILED=$((FAILED + 1)); echo "== FAILED: $name"; fi
}

step "python mcp SDK: two a2a-broker mcp servers through a delegation" \
  timeout 300 "$VENV/bin/python" "$HERE/python/test_mcp.py" --broker "$BROKER" --socket "$SOCK"

echo "tests-mcp: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
