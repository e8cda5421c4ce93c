#!/usr/bin/env bash
# `make bench`: benchmarks against a fresh in-memory DynamoDB Local (release builds).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_tools
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/cairn-bench.XXXXXX")
cleanup() {
  stop_postgres "${POSTGRES_DIR:-}"
  stop_group "${WATCH_PID:-}"
  stop_group "${DYNAMODB_PID:-}"
  rm -rf "$run_dir"
}
trap cleanup EXIT
port=$(free_port)
start_dynamodb "$port" "" "$run_dir/dynamodb.log"
export_local_aws "$port"
export TABLE_PREFIX="bench-"
# The overhead bench makes thousands of requests a minute as one tenant; the limit is
# measured (one window update per request), not enforced.
export RATE_LIMIT_PER_MINUTE=1000000
cargo run -q -p infra --bin cairn-admin -- tables create
cargo bench -q -p api-tests --bench checkpoints
cargo bench -q -p api-tests --bench overhead
cargo bench -q -p api-tests --bench scale
cargo bench -q -p api-tests --bench storage
cargo bench -q -p api-tests --bench export
cargo bench -q -p api-tests --bench capacity
export_local_webhooks "$run_dir/webhook-secrets-key"
cargo bench -q -p api-tests --bench webhooks
# Cold starts spawn the functions' release binaries (native, like the bench itself),
# built one at a time as `cargo lambda watch` below runs each (`cargo run --bin`): built
# together, their dependencies' features would be unified across them, and the watch
# would build every function again (about a minute each, past its warm-up's 180 s).
for function in workflows executions checkpoints failures billing keys; do
  cargo build -q --release --bin "$function"
done
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
CAIRN_RELEASE_DIR="$target_dir/release" cargo bench -q -p api-tests --bench cold_start

# Throughput through cargo lambda watch, serving the same release binaries.
api_port=$(free_port)
setsid cargo lambda watch --release --ignore-changes --invoke-address 127.0.0.1 --invoke-port "$api_port" \
  --env-var "TABLE_PREFIX=$TABLE_PREFIX" --env-var "AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB" \
  --env-var "RATE_LIMIT_PER_MINUTE=$RATE_LIMIT_PER_MINUTE" >"$run_dir/watch.log" 2>&1 &
WATCH_PID=$!
wait_for_port "$api_port" 120 || { cat "$run_dir/watch.log" >&2; exit 1; }
warm_up "http://127.0.0.1:$api_port/api/v1" workflows executions checkpoints failures billing/balance keys
CAIRN_API_URL="http://127.0.0.1:$api_port/api/v1" cargo bench -q -p api-tests --bench throughput

# The Python client's overhead per checkpointed step over a raw HTTP call.
client_venv
admin="$target_dir/release/cairn-admin"
cargo build -q --release -p infra --bin cairn-admin
tenant=$("$admin" tenant create --name "client bench")
"$admin" credits grant --tenant "$tenant" --credits 10 >/dev/null
CAIRN_API_KEY=$("$admin" key create --tenant "$tenant") CAIRN_API_URL="http://127.0.0.1:$api_port/api/v1" \
  "$LOCAL/client-venv/bin/python" clients/python/bench/overhead.py

# The load test: many writers of one tenant and several tenants at once, bounded in
# time, then nothing lost (tests/load/locustfile.py).
CAIRN_API_URL="http://127.0.0.1:$api_port/api/v1" CAIRN_ADMIN="$admin" LOAD_SECONDS=60 bash infra/scripts/load.sh

# LangGraph on each checkpointer, side by side (a thread per run: a credit each), with
# PostgresSaver on a local PostgreSQL (Debian's).
ensure_postgres
POSTGRES_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cairn-postgres.XXXXXX")
start_postgres "$POSTGRES_DIR" "$(free_port)"
"$admin" credits grant --tenant "$tenant" --credits 200 >/dev/null
CAIRN_API_KEY=$("$admin" key create --tenant "$tenant") CAIRN_API_URL="http://127.0.0.1:$api_port/api/v1" \
  CAIRN_BENCH_POSTGRES_DSN="$POSTGRES_DSN" "$LOCAL/client-venv/bin/python" clients/python/bench/langgraph.py

# Each framework integration's cost: HTTP requests and time per framework call
# (clients/python/bench/<module>.py, run in the integration's own venv).
for pins in clients/python/requirements-*.txt; do
  extra=$(basename "$pins" .txt); extra=${extra#requirements-}
  module=${extra//-/_}
  [ -f "clients/python/bench/$module.py" ] || continue
  framework_venv "$extra"
  CAIRN_API_KEY=$("$admin" key create --tenant "$tenant") CAIRN_API_URL="http://127.0.0.1:$api_port/api/v1" \
    "$LOCAL/$extra-venv/bin/python" "clients/python/bench/$module.py"
done
