#!/usr/bin/env bash
# The whole test suite, on a fresh clone or a warm checkout: `bash scripts/test.sh [PYTEST ARGS]`.
# Tests start their own Temporal dev server and fake model server on free ports.
source "$(dirname "$0")/common.sh"
ensure_venv
cd "$ROOT"
"$VENV/bin/ruff" check .
"$VENV/bin/mypy"
exec "$PY" -m pytest "$@"
