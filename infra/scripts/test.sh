#!/usr/bin/env bash
# `make test`, also what CI runs: formatting, lints, unit tests, and the integration and
# black-box tests against a DynamoDB Local and a `cargo lambda watch` that this script
# starts on free ports and stops afterwards (in memory: every run starts empty).
# Arguments go to `cargo test` (e.g. `bash infra/scripts/test.sh --test subscriptions`).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

ensure_tools
client_venv

log "cargo fmt --check"
cargo fmt --all --check

log "cfn-lint template.yaml"
cfn-lint template.yaml

# The SAM translator (offline; dummy credentials, no telemetry): bad events, references.
log "sam validate --region us-east-1 (the SAM translator)"
AWS_ACCESS_KEY_ID=none AWS_SECRET_ACCESS_KEY=none SAM_CLI_TELEMETRY=0 \
  "$LOCAL/sam-venv/bin/sam" validate --region us-east-1 --config-env translate

log "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

log "the Python client: ruff, mypy --strict, unit tests"
(
  cd clients/python
  # The framework integrations' suites (tests_<module>/) are linted here too.
  "$LOCAL/client-venv/bin/ruff" check src tests $(ls -d tests_* 2>/dev/null)
  "$LOCAL/client-venv/bin/ruff" format --check src tests $(ls -d tests_* 2>/dev/null)
  # The load test (tests/load), by the client's rules.
  "$LOCAL/client-venv/bin/ruff" check --config pyproject.toml ../../tests/load
  "$LOCAL/client-venv/bin/ruff" format --config pyproject.toml --check ../../tests/load
  # The MCP server's Python tests (tests/mcp), by the client's rules too.
  "$LOCAL/client-venv/bin/ruff" check --config pyproject.toml ../../tests/mcp
  "$LOCAL/client-venv/bin/ruff" format --config pyproject.toml --check ../../tests/mcp
  # The browser tests (tests/browser), by the client's rules too.
  "$LOCAL/client-venv/bin/ruff" check --config pyproject.toml ../../tests/browser
  "$LOCAL/client-venv/bin/ruff" format --config pyproject.toml --check ../../tests/browser
  "$LOCAL/client-venv/bin/mypy"
  "$LOCAL/client-venv/bin/pytest" -q -m "not live" -p no:cacheprovider
)

log "building tests and functions"
cargo build --workspace --bins --locked
cargo test --workspace --locked --no-run

run_dir=$(mktemp -d "${TMPDIR:-/tmp}/cairn-test.XXXXXX")
cleanup() {
  stop_postgres "${POSTGRES_DIR:-}"
  stop_group "${RELAY_PID:-}"
  stop_group "${LOCALSTRIPE_PID:-}"
  stop_group "${WATCH_PID:-}"
  stop_group "${DYNAMODB_PID:-}"
  if [ "${KEEP_TEST_LOGS:-}" = "" ]; then rm -rf "$run_dir"; else echo "logs kept in $run_dir" >&2; fi
}
trap cleanup EXIT

ddb_port=$(free_port)
log "starting DynamoDB Local (in memory) on 127.0.0.1:$ddb_port"
start_dynamodb "$ddb_port" "" "$run_dir/dynamodb.log"
export_local_aws "$ddb_port"
export TABLE_PREFIX="test-"
# The API under test allows 100000 requests a minute per tenant so that schemathesis
# measures the API, not the limiter (which has its own tests at a limit of 3).
export RATE_LIMIT_PER_MINUTE=100000
# DynamoDB Local commits contended transactions far slower than DynamoDB (a test starts
# forty executions on one balance at once, on a loaded 2-core machine): optimistic
# writes get 30 s to win their races here instead of the deployed 8 s.
export RACE_BUDGET_MS=30000
# For the same reason one DynamoDB call gets 10 s an attempt and 25 s in all (deployed:
# 2 s and 5 s): sixty-four writes of one tenant at once queue in DynamoDB Local for
# seconds. tests/tests/faults.rs checks the deployed timeouts against a silent DynamoDB.
export DYNAMODB_ATTEMPT_TIMEOUT_MS=10000 DYNAMODB_OPERATION_TIMEOUT_MS=25000
export STRIPE_WEBHOOK_SECRET="whsec_cairn_test_$(python3 -c 'import secrets; print(secrets.token_hex(16))')"

export_local_webhooks "$run_dir/webhook-secrets-key"

target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
"$target_dir/debug/cairn-admin" tables create
log "starting the webhook relay (DynamoDB Local's streams to the dispatcher)"
start_relay "$target_dir/debug/cairn-relay" "$run_dir/relay-position.json" "$run_dir/relay.log"
# A test kills and restarts a relay of its own (tests/tests/webhooks.rs).
export CAIRN_RELAY="$target_dir/debug/cairn-relay"

api_port=$(free_port)
stripe_port=$(free_port)
export_local_stripe "$stripe_port"
log "starting localstripe on 127.0.0.1:$stripe_port"
start_localstripe "$stripe_port" "$run_dir/localstripe.pickle" "$run_dir/localstripe.log" \
  "http://127.0.0.1:$api_port/api/v1/billing/webhooks/stripe" "$STRIPE_WEBHOOK_SECRET"

log "starting cargo lambda watch on 127.0.0.1:$api_port"
setsid cargo lambda watch --ignore-changes --invoke-address 127.0.0.1 --invoke-port "$api_port" \
  --env-var "TABLE_PREFIX=$TABLE_PREFIX" --env-var "AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB" \
  "${STRIPE_ENV_ARGS[@]}" --env-var "RATE_LIMIT_PER_MINUTE=$RATE_LIMIT_PER_MINUTE" \
  --env-var "RACE_BUDGET_MS=$RACE_BUDGET_MS" "${WEBHOOK_ENV_ARGS[@]}" \
  --env-var "DYNAMODB_ATTEMPT_TIMEOUT_MS=$DYNAMODB_ATTEMPT_TIMEOUT_MS" \
  --env-var "DYNAMODB_OPERATION_TIMEOUT_MS=$DYNAMODB_OPERATION_TIMEOUT_MS" \
  >"$run_dir/watch.log" 2>&1 &
WATCH_PID=$!
wait_for_port "$api_port" 120 || { cat "$run_dir/watch.log" >&2; exit 1; }
export CAIRN_API_URL="http://127.0.0.1:$api_port/api/v1"
# Start every function's instance now: cargo lambda watch starts one with `cargo run`,
# which would wait for cargo's locks while `cargo test` below holds them.
log "starting the function instances"
warm_up "$CAIRN_API_URL" workflows executions checkpoints failures billing/balance keys mcp \
  "http://127.0.0.1:$api_port/dashboard" || { tail -n 30 "$run_dir/watch.log" >&2; exit 1; }
export CAIRN_WATCH_LOG="$run_dir/watch.log"

log "cargo test"
if ! cargo test --workspace --locked "$@" 2>&1 | tee "$run_dir/test.log"; then
  echo "---- last lines of the cargo lambda watch log ----" >&2
  tail -n 50 "$run_dir/watch.log" >&2
  exit 1
fi

# The Python client, the cairn CLI and the LangGraph checkpointer (with LangGraph's own
# conformance suite, its report saved in target/) against the same running stack.
# `cargo lambda watch` answers compressed request bodies with a 500 of its own, so the
# client sends them plain here (API Gateway takes them; the in-process tests cover gzip).
if [ $# -eq 0 ] || [ "${CAIRN_CLIENT:-}" = 1 ]; then
  log "the Python client and the LangGraph checkpointer against $CAIRN_API_URL"
  # PostgresSaver, a migration source the tests judge by, on a throwaway cluster.
  ensure_postgres
  POSTGRES_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cairn-postgres.XXXXXX")
  start_postgres "$POSTGRES_DIR" "$(free_port)"
  report="$target_dir/langgraph-conformance.txt"
  rm -f "$report"
  if ! (cd clients/python && CAIRN_TEST_ADMIN="$target_dir/debug/cairn-admin" CAIRN_COMPRESS_REQUESTS=0 \
      CAIRN_CONFORMANCE_REPORT="$report" CAIRN_TEST_POSTGRES_DSN="$POSTGRES_DSN" \
      "$LOCAL/client-venv/bin/pytest" -q -m live -p no:cacheprovider --tb=short) >"$run_dir/python.log" 2>&1; then
    tail -n 80 "$run_dir/python.log" >&2
    KEEP_TEST_LOGS=1
    exit 1
  fi
  tail -n 1 "$run_dir/python.log" >&2
  [ -f "$report" ] && cat "$report" >&2
fi

# Each framework integration (cairn.crewai, cairn.openai_agents, ...) in its own venv,
# against the same stack: its module under mypy --strict, and its suite
# (clients/python/tests_<module>/: the framework's reference backend and ours through the
# same tests, and real runs on the framework's offline test models).
framework_logs=()
if [ $# -eq 0 ] || [ "${CAIRN_CLIENT:-}" = 1 ]; then
  for pins in clients/python/requirements-*.txt; do
    extra=$(basename "$pins" .txt); extra=${extra#requirements-}
    [ "$extra" = dev ] && continue
    module=${extra//-/_}
    framework_logs+=("$run_dir/$module.log")
    framework_venv "$extra"
    log "cairn.$module in .local/$extra-venv: mypy --strict and its suite against $CAIRN_API_URL"
    if ! (cd clients/python && "$LOCAL/$extra-venv/bin/mypy" --strict $(find "src/cairn/$module" -name '*.py') &&
        CAIRN_TEST_ADMIN="$target_dir/debug/cairn-admin" CAIRN_COMPRESS_REQUESTS=0 \
        "$LOCAL/$extra-venv/bin/pytest" -q -p no:cacheprovider --tb=short "tests_$module") >"$run_dir/$module.log" 2>&1; then
      tail -n 80 "$run_dir/$module.log" >&2
      KEEP_TEST_LOGS=1
      exit 1
    fi
    tail -n 1 "$run_dir/$module.log" >&2
  done
fi

# The dashboard in a real browser (Debian's Chromium driven by Playwright) against the
# same stack; a screenshot of every page it visits is kept in target/dashboard-screenshots.
if [ $# -eq 0 ] || [ "${CAIRN_BROWSER:-}" = 1 ]; then
  ensure_chromium
  browser_venv
  log "the dashboard in headless Chromium ($(/usr/bin/chromium --version 2>/dev/null | head -n 1))"
  rm -rf "$target_dir/dashboard-screenshots"
  if ! (cd tests/browser && CAIRN_TEST_ADMIN="$target_dir/debug/cairn-admin" \
      CAIRN_DASHBOARD_URL="http://127.0.0.1:$api_port/dashboard" CAIRN_SCREENSHOTS="$target_dir/dashboard-screenshots" CAIRN_BROWSER_REQUIRED=1 \
      "$LOCAL/browser-venv/bin/pytest" -q -p no:cacheprovider) >"$run_dir/browser.log" 2>&1; then
    tail -n 80 "$run_dir/browser.log" >&2
    KEEP_TEST_LOGS=1
    exit 1
  fi
  tail -n 1 "$run_dir/browser.log" >&2
  echo "screenshots: $target_dir/dashboard-screenshots" >&2
fi

# The MCP server judged by the protocol's own tools against the same stack: its official
# Python SDK as a client, and its conformance suite (tests/mcp).
if [ $# -eq 0 ] || [ "${CAIRN_MCP:-}" = 1 ]; then
  conformance=$(ensure_mcp_conformance)
  inspector=$(ensure_mcp_inspector)
  mcp_venv
  log "the MCP server: MCP's Python SDK, conformance suite $MCP_CONFORMANCE_VERSION and Inspector $MCP_INSPECTOR_VERSION (tests/mcp)"
  if ! (cd tests/mcp && CAIRN_TEST_ADMIN="$target_dir/debug/cairn-admin" CAIRN_MCP_CONFORMANCE="$conformance" \
      CAIRN_MCP_INSPECTOR="$inspector" \
      CAIRN_MCP_REQUIRED=1 "$LOCAL/mcp-venv/bin/pytest" -q -p no:cacheprovider) >"$run_dir/mcp.log" 2>&1; then
    tail -n 120 "$run_dir/mcp.log" >&2
    KEEP_TEST_LOGS=1
    exit 1
  fi
  tail -n 1 "$run_dir/mcp.log" >&2
fi

# schemathesis against the running stack, as two tenants that must not see each other's
# objects. Skipped when arguments narrowed `cargo test` to some tests.
if [ $# -eq 0 ] || [ "${CAIRN_FUZZ:-}" = 1 ]; then
  log "schemathesis $SCHEMATHESIS_VERSION against $CAIRN_API_URL (infra/schemathesis.toml)"
  export CAIRN_FUZZ_AUTH="$run_dir/fuzz-auth.json"
  python3 - "$target_dir/debug/cairn-admin" "$CAIRN_FUZZ_AUTH" <<'PY'
import json, subprocess, sys
admin, path = sys.argv[1:]
def run(*args):
    return subprocess.run([admin, *args], check=True, capture_output=True, text=True).stdout.strip()
users = []
for name in ("alice", "bob"):
    tenant = run("tenant", "create", "--name", f"fuzz {name}")
    key = run("key", "create", "--tenant", tenant)
    run("credits", "grant", "--tenant", tenant, "--credits", "1000000")
    users.append({"name": name, "fixedHeaders": [{"name": "X-API-Key", "value": key}]})
with open(path, "w") as f:
    json.dump({"auth": users}, f)
PY
  if ! "$LOCAL/fuzz-venv/bin/st" --config-file infra/schemathesis.toml --no-color run infra/openapi.yaml \
      --url "$CAIRN_API_URL" >"$run_dir/schemathesis.log" 2>&1; then
    tail -n 150 "$run_dir/schemathesis.log" >&2
    KEEP_TEST_LOGS=1
    exit 1
  fi
  grep -E "passed|failed|Operations|Test cases" "$run_dir/schemathesis.log" | tail -n 5 >&2 || true
fi

# Every log of the run (the functions' under cargo lambda watch, the tests' in-process
# ones, localstripe's): no API key (`cairn_` + 43 base62 characters) and no Stripe secret
# may appear in any of them.
log "checking the run's logs for API keys, Stripe and webhook secrets"
logs=("$run_dir/watch.log" "$run_dir/test.log" "$run_dir/localstripe.log" "$run_dir/relay.log")
[ -f "$run_dir/python.log" ] && logs+=("$run_dir/python.log")
[ -f "$run_dir/browser.log" ] && logs+=("$run_dir/browser.log")
[ -f "$run_dir/mcp.log" ] && logs+=("$run_dir/mcp.log")
logs+=("${framework_logs[@]}")
leaks=$(grep -E -o -h 'cairn_[0-9A-Za-z]{43}' "${logs[@]}" | sort -u | head -n 5 || true)
for secret in "$STRIPE_WEBHOOK_SECRET" "$STRIPE_SECRET_KEY" "$WEBHOOK_SECRETS_KEY"; do
  if grep -F -q -- "$secret" "${logs[@]}"; then leaks+=$'\n'"a secret (${secret:0:8}...)"; fi
done
# Webhook endpoint secrets (whsec_ and the base64 of 32 bytes).
leaks+=$(grep -E -o -h 'whsec_[A-Za-z0-9+/]{43}=' "${logs[@]}" | sort -u | head -n 5 || true)
if [ -n "$leaks" ]; then
  echo "secrets found in the logs of this run (kept in $run_dir):" >&2
  echo "$leaks" >&2
  KEEP_TEST_LOGS=1
  exit 1
fi
lines=$(cat "${logs[@]}" | wc -l)
log "no secrets in $lines log lines"
