#!/usr/bin/env bash
# `make bench`: benchmarks against a fresh in-memory DynamoDB Local (release builds).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_tools
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/cairn-bench.XXXXXX")
cleanup() { stop_group "${DYNAMODB_PID:-}"; rm -rf "$run_dir"; }
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
# Cold starts spawn the functions' release binaries (native, like the bench itself).
cargo build -q --release -p workflows -p executions -p checkpoints -p failures -p billing --bins
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
CAIRN_RELEASE_DIR="$target_dir/release" cargo bench -q -p api-tests --bench cold_start
