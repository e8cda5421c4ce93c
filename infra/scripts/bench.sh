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
cargo run -q -p infra --bin cairn-admin -- tables create
cargo bench -q -p api-tests --bench checkpoints
