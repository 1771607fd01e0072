#!/bin/sh
# Waits for the Temporal server, then makes sure the namespace exists and the project's
# custom search attributes are registered in it. Runs in temporalio/admin-tools after the
# server is up; the worker starts only once this has exited 0. Safe to run again: what
# already exists is left alone.
#
#   TEMPORAL_ADDRESS   host:port of the frontend (temporal:7233)
#   TEMPORAL_NAMESPACE namespace to create and register into (default)
#   SEARCH_ATTRIBUTES  space-separated Name=Type pairs, e.g. "AgentName=Keyword AgentTurn=Int"
set -eu

ADDRESS="${TEMPORAL_ADDRESS:-temporal:7233}"
NAMESPACE="${TEMPORAL_NAMESPACE:-default}"
ATTEMPTS="${SETUP_ATTEMPTS:-60}"
: "${SEARCH_ATTRIBUTES:?SEARCH_ATTRIBUTES must list Name=Type pairs}"

# retry DESCRIPTION COMMAND...: run COMMAND until it succeeds, at most $ATTEMPTS times.
retry() {
  what=$1
  shift
  n=1
  until "$@"; do
    if [ "$n" -ge "$ATTEMPTS" ]; then
      echo "gave up: $what" >&2
      return 1
    fi
    echo "not yet: $what ($n/$ATTEMPTS), retrying"
    n=$((n + 1))
    sleep 2
  done
}

ensure_namespace() {
  temporal operator namespace describe --namespace "$NAMESPACE" --address "$ADDRESS" >/dev/null 2>&1 ||
    temporal operator namespace create --namespace "$NAMESPACE" --address "$ADDRESS"
}

has_search_attribute() {
  temporal operator search-attribute list --namespace "$NAMESPACE" --address "$ADDRESS" 2>/dev/null |
    grep -qw "$1"
}

# Creating one that exists fails with "already exists"; the list check makes a re-run a no-op,
# and a failure for any other reason (namespace not visible yet) is retried.
ensure_search_attribute() {
  has_search_attribute "$1" && return 0
  temporal operator search-attribute create --namespace "$NAMESPACE" --address "$ADDRESS" \
    --name "$1" --type "$2" || true
  has_search_attribute "$1"
}

retry "Temporal at $ADDRESS healthy" temporal operator cluster health --address "$ADDRESS"
retry "namespace $NAMESPACE" ensure_namespace
for pair in $SEARCH_ATTRIBUTES; do
  name=${pair%%=*}
  type=${pair#*=}
  retry "search attribute $name ($type)" ensure_search_attribute "$name" "$type"
done

echo "Temporal setup complete: namespace $NAMESPACE, search attributes: $SEARCH_ATTRIBUTES"
