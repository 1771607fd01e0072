# Shared by scripts/demo.sh and scripts/test.sh: a virtualenv with the project installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"

ensure_venv() {
  local python="${PYTHON:-python3}"
  if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "error: Python 3.11 or newer is required ($python is $("$python" --version 2>&1))" >&2
    exit 2
  fi
  [ -x "$PY" ] || "$python" -m venv "$VENV"
  # Reinstall only when pyproject.toml changed since the last install.
  local stamp="$VENV/.installed-$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    echo "installing into $VENV (first run takes a minute)…" >&2
    "$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
    "$PY" -m pip install --quiet --disable-pip-version-check -e "$ROOT[dev]" >&2
    rm -f "$VENV"/.installed-* && touch "$stamp"
  fi
}
