#!/usr/bin/env bash
# `make build`: the functions as Lambda deploys them: release, arm64 (cross-compiled
# with the zig that comes with cargo-lambda's PyPI package), each zipped as
# target/lambda/<function>/bootstrap.zip; one line per function with its zipped size
# (bytes and MiB) and its unzipped bootstrap.
# Every function of template.yaml; `make build FUNCTIONS=billing` builds one alone.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_tools
read -r -a functions <<<"${FUNCTIONS:-$(template_functions | tr '\n' ' ')}"
bins=()
for function in "${functions[@]}"; do bins+=(--bin "$function"); done
log "cargo lambda build --release --arm64 --output-format zip ${bins[*]}"
cargo lambda build --release --arm64 --output-format zip "${bins[@]}"
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
python3 - "$target_dir" "${functions[@]}" <<'PY'
import os, sys, zipfile
target, functions = sys.argv[1], sys.argv[2:]
print(f"{'function':<12} {'zipped':>22} {'bootstrap':>11}")
for function in functions:
    path = os.path.join(target, "lambda", function, "bootstrap.zip")
    zipped = os.path.getsize(path)
    unpacked = sum(i.file_size for i in zipfile.ZipFile(path).infolist())
    print(f"{function:<12} {zipped:>10,} B {zipped / 2**20:>5.2f} MiB {unpacked / 2**20:>7.2f} MiB")
PY
