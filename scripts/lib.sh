# Shell functions shared by the end-to-end scripts that drive the project
# with other people's SDKs (gateway/sdk-tests/run.sh, tool/tests-mcp/run.sh).
# Sourced, not run: the script sets NAME (the prefix of its messages) and
# HERE (its own folder, holding python/ and js/) first.

run() { echo "+ $*" >&2; "$@"; }
die() { echo "$NAME: $*" >&2; exit 1; }

# install_venv WHO: a venv at $HERE/.venv from PyPI
# (python/requirements.txt, pinned by python/constraints.txt), made again
# only when its pins changed. WHO names what needs Python >= 3.10, for the
# message. Sets PY (the system Python) and VENV.
install_venv() {
  PY="$(command -v python3.11 || command -v python3)" || die "python3 is required"
  "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || die "$1 needs Python >= 3.10 ($PY)"
  VENV="$HERE/.venv"
  local stamp="$VENV/.installed"
  if [ ! -x "$VENV/bin/python" ] || ! cmp -s "$HERE/python/constraints.txt" "$stamp"; then
    run "$PY" -m venv "$VENV" || die "cannot create $VENV (python3-venv missing?)"
    run "$VENV/bin/pip" install -q --disable-pip-version-check \
      -r "$HERE/python/requirements.txt" -c "$HERE/python/constraints.txt" || die "pip install failed"
    cp "$HERE/python/constraints.txt" "$stamp"
  fi
}

# install_deps WHO MODULE: install_venv WHO, and the npm packages of
# $HERE/js (`npm ci`), again only when its pins changed (or
# js/node_modules/MODULE is missing).
install_deps() {
  install_venv "$1"
  if [ ! -d "$HERE/js/node_modules/$2" ] ||
    ! cmp -s "$HERE/js/package-lock.json" "$HERE/js/node_modules/.package-lock.json.stamp"; then
    (cd "$HERE/js" && run npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"
    cp "$HERE/js/package-lock.json" "$HERE/js/node_modules/.package-lock.json.stamp"
  fi
}

PASSED=0
FAILED=0
step() { # step NAME COMMAND...: runs it, counts it in PASSED or FAILED
  local name="$1"; shift
  if run "$@"; then PASSED=$((PASSED + 1)); echo "== ok: $name"
  else FAILED=$((FAILED + 1)); echo "== FAILED: $name"; fi
}
