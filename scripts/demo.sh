#!/usr/bin/env bash
# One command from a fresh clone to a finished agent run: `bash scripts/demo.sh ["PROMPT"]`.
#   virtualenv + install -> Temporal dev server (SQLite in .state/, Web UI on :8233)
#   -> model server (the offline fake_llm, unless you point at a real one) -> worker -> a run.
# Real model: OPENAI_API_KEY=sk-... bash scripts/demo.sh   (or LLM_BASE_URL / LLM_MODEL / LLM_API_KEY)
# An example instead of the weather demo: `bash scripts/demo.sh --example support_team ["PROMPT"]`
#   (the worker serves only that example's agents, and the run's steps print as they happen).
# Your own agents, scripted offline: `bash scripts/demo.sh --model my_agents:MODEL --agent assistant ["PROMPT"]`
#   (the worker serves my_agents' agents; fake_llm answers with its ScriptedModel or FunctionModel
#   MODEL: docs/testing.md, "The demo and a worker on your own script").
# Everything keeps running afterwards for client.py and the UI; `bash scripts/stop.sh` stops it.
# Temporal is found as the `temporal` CLI finds it (TEMPORAL_ADDRESS, TEMPORAL_API_KEY, TEMPORAL_TLS_*,
#   a profile): a dev server is started only when that is the default localhost:7233.
# Encrypted payloads: PAYLOAD_CODEC_KEYS=... bash scripts/demo.sh also runs the codec server on :8234
#   and starts the dev server with its UI wired to it (docs/production.md: "Encrypted payloads").
# Ports, when the defaults are taken: TEMPORAL_PORT (7233), UI_PORT (8233), FAKE_LLM_PORT (8400),
#   CODEC_PORT (8234), CONSOLE_PORT (8237: the web console, docs/console.md), e.g. `TEMPORAL_PORT=17233 UI_PORT=18233 bash scripts/demo.sh`.
# A run that needs a person's approval is not waited on: the demo prints the waiting call and the
#   command that approves it, and leaves the run waiting (durably) for that command.
source "$(dirname "$0")/common.sh"
EXAMPLE="" OWN_MODEL="" OWN_AGENT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --example) EXAMPLE="${2:-}" ;;
    --model) OWN_MODEL="${2:-}" ;;
    --agent) OWN_AGENT="${2:-}" ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) echo "error: unknown option '$1' (known: --example NAME, --model MODULE:ATTR --agent NAME, --help;" \
      "a prompt that starts with '-' goes after --)" >&2; exit 2 ;;
    *) break ;;
  esac
  shift $(($# < 2 ? $# : 2))
done
FAKE_ARGS=()  # fake_llm's model: the default scenarios, or --model's own
if [ -n "$OWN_MODEL" ]; then
  if [ -n "$EXAMPLE" ] || [ -z "$OWN_AGENT" ] || ! [[ "$OWN_MODEL" =~ ^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$ ]]; then
    echo "error: --model MODULE:ATTR needs --agent NAME (the agent to run), and no --example" >&2
    exit 2
  fi
  EXAMPLE=own
fi
case "$EXAMPLE" in  # the worker's modules, the run's agent, the offline model's scenario
  "") WORKER_ARGS=() RUN_ARGS=() FAKE_MODEL=demo
    DEFAULT_PROMPT="What's the weather in Tokyo and Paris right now? Which is warmer, in Fahrenheit?" ;;
  support_team) WORKER_ARGS=(--tools examples.support_team) RUN_ARGS=(--agent triage) FAKE_MODEL=team
    DEFAULT_PROMPT="I was charged twice for order 1234, please refund" ;;
  mcp_agent) WORKER_ARGS=(--tools examples.mcp_agent) RUN_ARGS=(--agent mcp_weather) FAKE_MODEL=demo
    DEFAULT_PROMPT="What's the weather in Tokyo and Paris right now? Which is warmer, in Fahrenheit?" ;;
  own) WORKER_ARGS=(--tools "${OWN_MODEL%%:*}") RUN_ARGS=(--agent "$OWN_AGENT") FAKE_MODEL=offline
    FAKE_ARGS=(--model "$OWN_MODEL") DEFAULT_PROMPT="Hello" ;;
  *) echo "error: unknown example '$EXAMPLE'; known: support_team, mcp_agent" >&2; exit 2 ;;
esac
PROMPT="${*:-$DEFAULT_PROMPT}"  # the words after the options: quoted or not, one prompt
ensure_venv  # after the arguments: a mistyped option costs no install
cd "$ROOT"
STATE="$ROOT/.state"
mkdir -p "$STATE"
port_var() {  # port_var NAME DEFAULT: the port in $NAME, checked, else DEFAULT
  local value="${!1:-$2}"
  if ! [[ "$value" =~ ^[0-9]{1,5}$ ]] || [ "$value" -lt 1 ] || [ "$value" -gt 65535 ]; then
    echo "error: $1 must be a port number (1-65535), not '$value'" >&2
    exit 2
  fi
  echo "$value"
}
TEMPORAL_PORT="$(port_var TEMPORAL_PORT 7233)"
UI_PORT="$(port_var UI_PORT 8233)"
FAKE_LLM_PORT="$(port_var FAKE_LLM_PORT 8400)"
CODEC_PORT="$(port_var CODEC_PORT 8234)"
CONSOLE_PORT="$(port_var CONSOLE_PORT 8237)"
# A chosen Temporal port is where the worker and client.py connect, unless TEMPORAL_ADDRESS says otherwise.
if [ "$TEMPORAL_PORT" != 7233 ] && [ -z "${TEMPORAL_ADDRESS:-}" ]; then
  export TEMPORAL_ADDRESS="localhost:$TEMPORAL_PORT"
fi
# Where Temporal is, as the worker and client.py resolve it (durable_agent_runner/config/connection.py); the CLI
# resolves the same variables and profile itself, so none is exported over a profile's address.
read -r ADDRESS NAMESPACE <<<"$("$PY" -c 'from durable_agent_runner.config.connection import address, namespace
print(address(), namespace())')"
export TEMPORAL_UI_URL="${TEMPORAL_UI_URL:-http://localhost:$UI_PORT}"
TEMPORAL="$VENV/bin/temporal"

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local seconds="$1" what="$2"; shift 2
  for _ in $(seq $((seconds * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "error: $what did not come up in ${seconds}s; see $STATE/*.log" >&2
  exit 1
}
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
wait_started() {  # wait_started SECONDS DESCRIPTION PIDFILE LOG PATTERN: up, or at once the last line of a process that ended
  local seconds="$1" what="$2" pidfile="$3" log="$4" pattern="$5"
  for _ in $(seq $((seconds * 5))); do
    grep -q "$pattern" "$log" 2>/dev/null && return 0
    alive "$pidfile" || { echo "error: $what stopped: $(tail -n 1 "$log")" >&2; exit 1; }
    sleep 0.2
  done
  echo "error: $what did not come up in ${seconds}s; see $log" >&2
  exit 1
}
temporal_up() { "$TEMPORAL" operator namespace describe >/dev/null 2>&1; }
http_up() { "$PY" -c "import httpx,sys; sys.exit(httpx.get(sys.argv[1], timeout=2).status_code != 200)" "$1" 2>/dev/null; }

# 0. Encrypted payloads: a fresh codec server for the Web UI (its keys may have changed).
CODEC_ARGS=()
if [ -n "${PAYLOAD_CODEC_KEYS:-}" ]; then
  if alive "$STATE/codec.pid"; then kill -TERM "$(cat "$STATE/codec.pid")"; sleep 0.5; fi
  nohup "$PY" -m durable_agent_runner.cli.codec_server --port "$CODEC_PORT" --origin "$TEMPORAL_UI_URL" \
    --origin "http://localhost:$UI_PORT" --origin "http://127.0.0.1:$UI_PORT" >"$STATE/codec.log" 2>&1 &
  echo $! >"$STATE/codec.pid"
  wait_started 10 "the codec server" "$STATE/codec.pid" "$STATE/codec.log" "codec server on"
  CODEC_ARGS=(--ui-codec-endpoint "http://127.0.0.1:$CODEC_PORT")
  echo "✓ payloads encrypted; codec server for the Web UI at http://127.0.0.1:$CODEC_PORT (log: .state/codec.log)"
fi

# 1. Temporal: reuse a server that answers, else start the dev server, persisted to SQLite.
if temporal_up; then
  echo "✓ Temporal at $ADDRESS"
  if [ -n "${PAYLOAD_CODEC_KEYS:-}" ] && [ -f "$STATE/temporal.pid" ] && [ ! -f "$STATE/temporal.codec" ]; then
    echo "  (this dev server's UI was started without the codec server: it shows ciphertext;" \
      "bash scripts/stop.sh and run again to wire it)"
  fi
else
  case "$ADDRESS" in
    "localhost:$TEMPORAL_PORT"|"127.0.0.1:$TEMPORAL_PORT") ;;
    *) echo "error: cannot reach Temporal at $ADDRESS" >&2; exit 1 ;;
  esac
  # The run's search attributes (workflows/types/names.py), so "runs waiting for me" is a UI filter.
  read -r -a SA_ARGS <<<"$("$PY" -c 'from durable_agent_runner.workflows.types import SEARCH_ATTRIBUTES as s
print(" ".join(f"--search-attribute {k}={v}" for k, v in s.items()))')"
  # SQLite in WAL mode with synchronous=normal (survives a killed server, and is faster), and the
  # transfer-queue poll limit lifted (docs/benchmark.md: "Tuning the server"): one list, in durable_agent_runner/testing/devserver.py.
  read -r -a TUNING <<<"$("$PY" -c 'from durable_agent_runner.testing.devserver import tuning_flags; print(" ".join(tuning_flags()))')"
  nohup "$TEMPORAL" server start-dev --db-filename "$STATE/temporal.db" --port "$TEMPORAL_PORT" \
    --ui-port "$UI_PORT" "${CODEC_ARGS[@]}" \
    "${TUNING[@]}" --log-level warn "${SA_ARGS[@]}" >"$STATE/temporal.log" 2>&1 &
  echo $! >"$STATE/temporal.pid"
  if [ ${#CODEC_ARGS[@]} -gt 0 ]; then touch "$STATE/temporal.codec"; else rm -f "$STATE/temporal.codec"; fi
  wait_for 60 "the Temporal dev server" temporal_up
  echo "✓ Temporal dev server started (history in .state/temporal.db, UI $TEMPORAL_UI_URL)"
fi

# 2. The model: a real one if you named it, else the offline test double.
if [ -z "${LLM_BASE_URL:-}" ] && [ -z "${LLM_API_KEY:-}${OPENAI_API_KEY:-}" ]; then
  export LLM_BASE_URL="http://127.0.0.1:$FAKE_LLM_PORT/v1" LLM_MODEL="${LLM_MODEL:-$FAKE_MODEL}"
  # fake_llm speaks Anthropic's and Gemini's APIs too: `--model anthropic:demo` and `gemini:demo`
  # reach it, unless you gave that provider a key of your own.
  if [ -z "${ANTHROPIC_API_KEY:-}" ]; then
    export ANTHROPIC_BASE_URL="http://127.0.0.1:$FAKE_LLM_PORT" ANTHROPIC_API_KEY="offline-demo-key"
  fi
  if [ -z "${GEMINI_API_KEY:-}${GOOGLE_API_KEY:-}" ]; then
    export GEMINI_BASE_URL="http://127.0.0.1:$FAKE_LLM_PORT" GEMINI_API_KEY="offline-demo-key"
  fi
  export OPENAI_BASE_URL="${OPENAI_BASE_URL:-http://127.0.0.1:$FAKE_LLM_PORT/v1}" OPENAI_API_KEY="offline-demo-key"
  SERVES="${OWN_MODEL:-default scenarios}"  # what fake_llm answers with; a running one of ours that serves other is replaced
  if alive "$STATE/fake_llm.pid" && [ "$(cat "$STATE/fake_llm.model" 2>/dev/null || echo "default scenarios")" != "$SERVES" ]; then
    OLD_LLM="$(cat "$STATE/fake_llm.pid")"
    kill -TERM "$OLD_LLM"
    wait_for 20 "the old fake_llm's exit" bash -c "! kill -0 $OLD_LLM"
  elif [ -n "$OWN_MODEL" ] && ! alive "$STATE/fake_llm.pid" && http_up "http://127.0.0.1:$FAKE_LLM_PORT/healthz"; then
    echo "error: port $FAKE_LLM_PORT answers, but not with a fake_llm this script started: set FAKE_LLM_PORT" >&2
    exit 1
  fi
  if ! http_up "http://127.0.0.1:$FAKE_LLM_PORT/healthz"; then
    nohup "$PY" -m durable_agent_runner.testing.fake_llm --host 127.0.0.1 --port "$FAKE_LLM_PORT" "${FAKE_ARGS[@]}" \
      >"$STATE/fake_llm.log" 2>&1 &
    echo $! >"$STATE/fake_llm.pid"
    echo "$SERVES" >"$STATE/fake_llm.model"
    for _ in $(seq 100); do  # 20 s, or until it exits (a --model it cannot load: its one-line reason)
      http_up "http://127.0.0.1:$FAKE_LLM_PORT/healthz" && break
      if ! alive "$STATE/fake_llm.pid"; then tail -n 1 "$STATE/fake_llm.log" >&2; exit 2; fi
      sleep 0.2
    done
    wait_for 1 "fake_llm" http_up "http://127.0.0.1:$FAKE_LLM_PORT/healthz"
  fi
  if [ -n "$OWN_MODEL" ]; then
    echo "✓ model: fake_llm answering with your $OWN_MODEL, at $LLM_BASE_URL"
  else
    echo "✓ model: fake_llm, the offline test double, at $LLM_BASE_URL (set OPENAI_API_KEY for a real model)"
  fi
else
  if [ -n "$OWN_MODEL" ]; then echo "  (--model $OWN_MODEL unused: a real model is named)"; fi
  echo "✓ model: ${LLM_MODEL:-gpt-4.1-mini} at ${LLM_BASE_URL:-https://api.openai.com/v1}"
fi

# 3. A fresh worker, so code edits and model settings take effect.
if alive "$STATE/worker.pid"; then
  OLD_WORKER="$(cat "$STATE/worker.pid")"
  kill -TERM "$OLD_WORKER"
  wait_for 20 "the old worker's exit" bash -c "! kill -0 $OLD_WORKER"
fi
: >"$STATE/worker.log"
# Replies stream in (the worker's default; LLM_STREAM=0 turns it off), so `client.py watch`
# shows text as it is written.
nohup "$PY" worker.py "${WORKER_ARGS[@]}" >"$STATE/worker.log" 2>&1 &
echo $! >"$STATE/worker.pid"
wait_started 30 "the worker" "$STATE/worker.pid" "$STATE/worker.log" "worker polling"
echo "✓ worker running (log: .state/worker.log)"

# 4. The web console (docs/console.md), fresh like the worker, on 127.0.0.1.
if alive "$STATE/console.pid"; then  # its port is free once it has gone (an open page's stream may hold it a while)
  OLD_CONSOLE="$(cat "$STATE/console.pid")"
  kill -TERM "$OLD_CONSOLE"
  wait_for 20 "the old console's exit" bash -c "! kill -0 $OLD_CONSOLE"
fi
nohup "$PY" client.py console --port "$CONSOLE_PORT" >"$STATE/console.log" 2>&1 &
echo $! >"$STATE/console.pid"
wait_started 30 "the web console" "$STATE/console.pid" "$STATE/console.log" "^console: "
CONSOLE_URL="http://127.0.0.1:$CONSOLE_PORT"
echo "✓ web console at $CONSOLE_URL (log: .state/console.log)"

# 5. The demo run: followed until it ends, or until it waits for a person.
echo
echo "› $PROMPT"
# The run's id on stdout; its stderr (a "follow it" hint, or the one-line error) shown only if it fails.
RUN_ID="$("$PY" client.py run "${RUN_ARGS[@]}" -- "$PROMPT" 2>"$STATE/run.err")" || {
  code=$?; cat "$STATE/run.err" >&2; exit "$code"; }
run_status() {  # the run's status word (running, awaiting_approval, paused, completed, ...), or "unknown"
  "$PY" client.py status --json "$RUN_ID" 2>/dev/null |
    "$PY" -c 'import json, sys; print(json.load(sys.stdin).get("status") or "unknown")' 2>/dev/null || echo unknown
}
WATCHER=""
if [ -n "$EXAMPLE" ]; then  # the example's steps as they happen
  "$PY" client.py watch "$RUN_ID" &
  WATCHER=$!
fi
STATUS="$(run_status)"
while [ "$STATUS" = running ]; do
  sleep 1
  STATUS="$(run_status)"
done
# What a waiting run waits for, and the exact commands that go on (status --json on stdin).
read -r -d '' WAITING <<'PYTHON' || true
import json, sys
s, py = json.load(sys.stdin), sys.argv[1]
run = s["run_id"]
for p in s.get("pending_approvals", []):
    print(f"  {p['call_id']}  {p['tool']}({json.dumps(p['arguments'], ensure_ascii=False)})")
if s.get("paused"):
    print(f"  paused: {s['paused']['why']}")
    print(f"To go on:  {py} client.py inspect {run}   then   {py} client.py resume {run}")
for p in s.get("pending_approvals", []):
    print(f"To approve: {py} client.py approve {run} {p['call_id']}")
    print(f"To reject:  {py} client.py reject {run} {p['call_id']} --reason 'not now'")
print(f"Then the answer: {py} client.py result {run}   (or follow it: {py} client.py watch {run})")
PYTHON
SHOW_PY="${PY#"$ROOT"/}"  # .venv/bin/python: the commands below run from this directory
links() {
  echo
  echo "run id:  $RUN_ID"
  echo "web UI:  $TEMPORAL_UI_URL/namespaces/$NAMESPACE/workflows/$RUN_ID"
  echo "console: $CONSOLE_URL/runs/$RUN_ID   (inbox: $CONSOLE_URL/inbox)"
  echo "status:  $SHOW_PY client.py status $RUN_ID"
  if [ "$TEMPORAL_PORT" != 7233 ] || [ "$UI_PORT" != 8233 ]; then  # so later commands find this server
    echo "(in another shell, first: export TEMPORAL_ADDRESS=$ADDRESS TEMPORAL_UI_URL=$TEMPORAL_UI_URL)"
  fi
}
if [ "$STATUS" = awaiting_approval ] || [ "$STATUS" = paused ]; then
  # The run waits, durably, for a person: say for what and how to go on, rather than block here.
  if [ -n "$WATCHER" ]; then sleep 0.5; kill "$WATCHER" 2>/dev/null; wait "$WATCHER" 2>/dev/null || true; fi
  echo
  echo "The run is waiting for a person ($STATUS):"
  "$PY" client.py status --json "$RUN_ID" | "$PY" -c "$WAITING" "$SHOW_PY" || true
  links
  exit 0
fi
OUTCOME=0  # a failed run (a tripped guardrail, say) still gets its links below
if [ -n "$WATCHER" ]; then
  wait "$WATCHER" || OUTCOME=$?
else
  "$PY" client.py result "$RUN_ID" || OUTCOME=$?
fi
links
exit "$OUTCOME"
