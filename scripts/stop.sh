#!/usr/bin/env bash
# Stop what scripts/demo.sh started (web console, worker, fake_llm, codec server, Temporal dev server). History stays in .state/.
cd "$(dirname "$0")/.."
for name in console worker fake_llm codec temporal; do
  pidfile=".state/$name.pid"
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    kill -TERM "$(cat "$pidfile")" && echo "stopped $name"
  fi
  rm -f "$pidfile"
done
