#!/usr/bin/env bash
# The load test (tests/load/locustfile.py, Locust headless): many concurrent writers of
# one tenant and several tenants at once against CAIRN_API_URL, then a check that
# nothing was lost. `make bench` runs it against its local stack; against a deployed
# stack give the URL and the keys of tenants with credits:
#
#   CAIRN_API_URL=https://…/api/v1 CAIRN_LOAD_KEYS=cairn_busy,cairn_b,cairn_c bash infra/scripts/load.sh
#
# Without CAIRN_LOAD_KEYS it makes four tenants with `cairn-admin` (CAIRN_ADMIN, the
# binary; the tables of TABLE_PREFIX on AWS_ENDPOINT_URL_DYNAMODB). LOAD_USERS (24),
# LOAD_SECONDS (60) and CAIRN_LOAD_STEPS (3 checkpoints a run) size it; it stops by
# itself.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
: "${CAIRN_API_URL:?CAIRN_API_URL: the API to load, ending in /api/v1}"
pinned_venv load-venv tests/load/requirements.txt
if [ -z "${CAIRN_LOAD_KEYS:-}" ]; then
  : "${CAIRN_ADMIN:?CAIRN_ADMIN: the cairn-admin binary, to make the tenants}"
  keys=()
  for credits in 1000000 100000 100000 100000; do
    tenant=$("$CAIRN_ADMIN" tenant create --name "load test")
    "$CAIRN_ADMIN" credits grant --tenant "$tenant" --credits "$credits" >/dev/null
    keys+=("$("$CAIRN_ADMIN" key create --tenant "$tenant")")
  done
  CAIRN_LOAD_KEYS=$(IFS=,; echo "${keys[*]}")
fi
users=${LOAD_USERS:-24}
log "load: $users users for ${LOAD_SECONDS:-60} s against $CAIRN_API_URL"
CAIRN_API_URL="$CAIRN_API_URL" CAIRN_LOAD_KEYS="$CAIRN_LOAD_KEYS" \
  "$LOCAL/load-venv/bin/locust" -f tests/load/locustfile.py --headless --only-summary \
  -u "$users" -r "$users" -t "${LOAD_SECONDS:-60}s" --stop-timeout 30 --loglevel WARNING
