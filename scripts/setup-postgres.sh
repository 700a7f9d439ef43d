#!/usr/bin/env bash
# PostgreSQL for the `postgres` tests (the PostgreSQL store backend), run by scripts/test.sh
# as root, idempotent (seconds when already up):
#  1. install Debian's postgresql server if missing, and psycopg 3 into this python;
#  2. a cluster `replaykit` (Debian's pg_createcluster) listening on 127.0.0.1 only,
#     port $REPLAYKIT_PG_PORT (default 54329), started if down;
#  3. a role `replaykit` (password `replaykit`, may create databases) and its database.
# Tests find it at $REPLAYKIT_TEST_POSTGRES (default
# postgresql://replaykit:replaykit@127.0.0.1:54329/replaykit); each test makes its own database.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${REPLAYKIT_PG_PORT:-54329}
CLUSTER=replaykit
PY=${PYTHON:-python3}

if ! command -v pg_createcluster >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup-postgres: the postgresql server is missing and this is not root; apt-get install postgresql" >&2
    exit 1
  fi
  echo "setup-postgres: installing postgresql"
  apt-get update -qq || echo "setup-postgres: apt-get update reported errors; trying the install anyway" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi

if ! "$PY" -c "import psycopg" >/dev/null 2>&1; then
  echo "setup-postgres: installing psycopg 3"
  "$PY" -m pip install -q "psycopg[binary]>=3.1"
fi

VERSION=$(ls /usr/lib/postgresql | sort -n | tail -1)
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

if ! pg_lsclusters -h | awk '{print $2}' | grep -qx "$CLUSTER"; then
  echo "setup-postgres: creating cluster $VERSION/$CLUSTER on 127.0.0.1:$PORT"
  pg_createcluster "$VERSION" "$CLUSTER" --port "$PORT" --locale C.UTF-8 \
    -- --auth-local=peer --auth-host=scram-sha-256 >/dev/null
  conf=/etc/postgresql/$VERSION/$CLUSTER/postgresql.conf
  echo "listen_addresses = '127.0.0.1'" >>"$conf"
  echo "fsync = off" >>"$conf" # a test cluster: speed over durability
  echo "synchronous_commit = off" >>"$conf"
  echo "max_connections = 200" >>"$conf"
fi

if ! pg_lsclusters -h | awk -v c="$CLUSTER" '$2 == c {print $4}' | grep -qx online; then
  echo "setup-postgres: starting cluster $VERSION/$CLUSTER"
  pg_ctlcluster "$VERSION" "$CLUSTER" start
fi

for _ in $(seq 1 60); do
  as_postgres psql -p "$PORT" -XAtqc "SELECT 1" postgres >/dev/null 2>&1 && break
  sleep 0.5
done
if ! as_postgres psql -p "$PORT" -XAtqc "SELECT 1" postgres >/dev/null 2>&1; then
  echo "setup-postgres: cluster $VERSION/$CLUSTER does not answer on port $PORT; see /var/log/postgresql/postgresql-$VERSION-$CLUSTER.log" >&2
  exit 1
fi

as_postgres psql -p "$PORT" -XAtq postgres <<'SQL' >/dev/null
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'replaykit') THEN
    CREATE ROLE replaykit LOGIN CREATEDB PASSWORD 'replaykit';
  END IF;
END $$;
SQL
if [ "$(as_postgres psql -p "$PORT" -XAtqc "SELECT 1 FROM pg_database WHERE datname = 'replaykit'" postgres)" != 1 ]; then
  as_postgres psql -p "$PORT" -XAtqc "CREATE DATABASE replaykit OWNER replaykit" postgres >/dev/null
fi
echo "setup-postgres: ready at postgresql://replaykit@127.0.0.1:$PORT/replaykit"
