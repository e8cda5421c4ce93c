#!/usr/bin/env bash
# `make independent-builds`: shows that a change to one function's code changes that
# function's deployable alone. Builds every release arm64 bootstrap, changes only
# billing's code (a probe line in functions/billing/src/main.rs, restored on exit),
# forces every function crate to compile and link again from scratch (`cargo clean -p`;
# the shared and domain crates stay cached, as they are unchanged), builds again, and
# compares: every other bootstrap must be byte-identical (reproducible builds) and
# billing's must differ. SAM uploads and deploys a function only when its artifact
# changes, so the same change redeploys billing alone.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_tools
mapfile -t functions < <(template_functions)
bins=()
for function in "${functions[@]}"; do bins+=(--bin "$function"); done
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
triple=aarch64-unknown-linux-gnu

build() {
  cargo lambda build --release --arm64 "${bins[@]}" >&2
  for function in "${functions[@]}"; do
    printf '%s %s\n' "$function" "$(sha256sum "$target_dir/lambda/$function/bootstrap" | cut -c1-16)"
  done
}

log "building every bootstrap"
before=$(build)

main=functions/billing/src/main.rs
cp "$main" "$main.orig"
trap 'mv -f "$main.orig" "$main"' EXIT
nonce=$(date +%s%N)
sed -i "s|    shared::http::init_logging();|    shared::http::init_logging();\n    std::hint::black_box(\"independent-build probe $nonce\");|" "$main"
grep -q "probe $nonce" "$main"

log "billing's code changed; every function crate compiled and linked again"
cargo clean --release --target "$triple" "${bins[@]/--bin/-p}" >&2
after=$(build)

python3 - "$before" "$after" <<'PY'
import sys
before = dict(line.split() for line in sys.argv[1].splitlines())
after = dict(line.split() for line in sys.argv[2].splitlines())
print(f"{'function':<12} {'before':<18} {'after':<18} result")
ok = True
for function in before:
    same = before[function] == after[function]
    expected = function != "billing"
    ok &= same == expected
    verdict = ("byte-identical" if same else "changed") + ("" if same == expected else "  <-- unexpected")
    print(f"{function:<12} {before[function]:<18} {after[function]:<18} {verdict}")
sys.exit(0 if ok else 1)
PY
