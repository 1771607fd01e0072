#!/bin/sh
# Creates Temporal's two PostgreSQL databases and brings their schemas up to date.
# Runs in temporalio/admin-tools before the server starts. Safe to run again on every
# `docker compose up`: `create` ignores an existing database, `setup-schema` skips a
# versioned schema, and `update-schema` applies only the versions not yet applied.
set -eu

: "${POSTGRES_SEEDS:?POSTGRES_SEEDS must name the PostgreSQL host}"
: "${POSTGRES_USER:?POSTGRES_USER must be set}"
: "${SQL_PASSWORD:?SQL_PASSWORD must be set}"
DB_PORT="${DB_PORT:-5432}"
SCHEMA_ROOT=/etc/temporal/schema/postgresql/v12

attempt=1
until nc -z -w 5 "$POSTGRES_SEEDS" "$DB_PORT"; do
  if [ "$attempt" -ge 30 ]; then
    echo "PostgreSQL at $POSTGRES_SEEDS:$DB_PORT did not answer" >&2
    exit 1
  fi
  echo "waiting for PostgreSQL at $POSTGRES_SEEDS:$DB_PORT ($attempt/30)"
  attempt=$((attempt + 1))
  sleep 2
done

sql_tool() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" "$@"
}

# database name, then its schema directory under $SCHEMA_ROOT
for pair in temporal:temporal temporal_visibility:visibility; do
  db=${pair%%:*}
  dir=${pair#*:}
  echo "setting up database $db"
  sql_tool --db "$db" create
  sql_tool --db "$db" setup-schema -v 0.0
  sql_tool --db "$db" update-schema -d "$SCHEMA_ROOT/$dir/versioned"
done

echo "PostgreSQL schema setup complete"
