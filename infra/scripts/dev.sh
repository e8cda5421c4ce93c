#!/usr/bin/env bash
# `make dev`: the whole API on http://127.0.0.1:3000/api/v1 with DynamoDB Local on
# 127.0.0.1:8000 (data kept in .local/dynamodb), the tables of template.yaml, and a demo
# tenant whose key it prints. Ctrl-C stops everything it started.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

DDB_PORT=${DDB_PORT:-8000}
API_PORT=${API_PORT:-3000}
STRIPE_PORT=${STRIPE_PORT:-8420}
export TABLE_PREFIX=${TABLE_PREFIX:-cairn-}
export STRIPE_WEBHOOK_SECRET=${STRIPE_WEBHOOK_SECRET:-whsec_cairn_local_dev}
export_local_stripe "$STRIPE_PORT"
export_local_webhooks "$LOCAL/webhook-secrets-key"

ensure_tools
require_free_port "$DDB_PORT"
require_free_port "$API_PORT"
require_free_port "$STRIPE_PORT"

cleanup() { stop_group "${RELAY_PID:-}"; stop_group "${JANITOR_PID:-}"; stop_group "${LOCALSTRIPE_PID:-}"; stop_group "${DYNAMODB_PID:-}"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

log "starting DynamoDB Local on 127.0.0.1:$DDB_PORT (data in .local/dynamodb)"
start_dynamodb "$DDB_PORT" "$LOCAL/dynamodb" "$LOCAL/dynamodb.log"
export_local_aws "$DDB_PORT"

log "starting localstripe (a local Stripe) on 127.0.0.1:$STRIPE_PORT (state in .local/localstripe.pickle)"
start_localstripe "$STRIPE_PORT" "$LOCAL/localstripe.pickle" "$LOCAL/localstripe.log" \
  "http://127.0.0.1:$API_PORT/api/v1/billing/webhooks/stripe" "$STRIPE_WEBHOOK_SECRET"

log "building the functions and cairn-admin"
cargo build --workspace --bins

target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
admin="$target_dir/debug/cairn-admin"
"$admin" tables create
key=$("$admin" demo --key-file "$LOCAL/demo-key")

# The janitor's schedule (template.yaml: every 5 minutes), which cargo lambda watch does
# not play: finishes deletions left unfinished (docs/operations.md, "The janitor").
setsid bash -c "while sleep 300; do '$admin' janitor || true; done" >>"$LOCAL/janitor.log" 2>&1 &
JANITOR_PID=$!
# --ttl: DynamoDB's TTL played too, so that retention expires what it says locally.
start_relay "$target_dir/debug/cairn-relay" "$LOCAL/relay-position.json" "$LOCAL/relay.log" --ttl

cat >&2 <<BANNER

  Cairn is starting on http://127.0.0.1:$API_PORT/api/v1
  The dashboard: http://127.0.0.1:$API_PORT/ (sign in with the key below)

  Demo API key (with 1000 credits; tenant id and key are in .local/demo-key):

    $key

  Try:
    curl -s http://127.0.0.1:$API_PORT/api/v1/workflows -H "X-API-Key: $key"

  The Python client and the cairn command line (pip install -e clients/python):
    export CAIRN_API_URL=http://127.0.0.1:$API_PORT/api/v1 CAIRN_API_KEY=$key CAIRN_COMPRESS_REQUESTS=0
    cairn executions list
  (CAIRN_COMPRESS_REQUESTS=0: cargo lambda watch cannot take compressed bodies; API Gateway can.)

  The MCP server for coding agents: http://127.0.0.1:$API_PORT/api/v1/mcp
    (cairn mcp config --client claude-code|cursor|vscode|claude-desktop; docs/mcp.md)

  The janitor runs every 5 minutes (log: .local/janitor.log); webhooks are delivered
  from DynamoDB Local's streams, loopback receivers allowed (log: .local/relay.log).
  Ctrl-C stops the API and DynamoDB Local; the data stays for the next run.

BANNER

cargo lambda watch --invoke-address 127.0.0.1 --invoke-port "$API_PORT" \
  --env-var "TABLE_PREFIX=$TABLE_PREFIX" --env-var "AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB" \
  "${STRIPE_ENV_ARGS[@]}" "${WEBHOOK_ENV_ARGS[@]}"
