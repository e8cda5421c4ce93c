# Cairn: the two commands of the README, and a few helpers.
.PHONY: dev test build independent-builds bench fmt lint clean-local

## The whole API on http://127.0.0.1:3000/api/v1 with DynamoDB Local and a demo key.
dev:
	bash infra/scripts/dev.sh

## Every check and test; what CI runs.
test:
	bash infra/scripts/test.sh

## Every function for Lambda: release, arm64, zipped, with their sizes
## (FUNCTIONS="billing" builds one alone).
build:
	bash infra/scripts/build.sh

## Changes billing's code alone, rebuilds, and shows every other bootstrap
## byte-identical (reproducible, independent builds).
independent-builds:
	bash infra/scripts/independent_builds.sh

## Benchmarks against DynamoDB Local (release build); figures in docs/benchmarks.md.
bench:
	bash infra/scripts/bench.sh

fmt:
	cargo fmt --all

lint:
	cargo clippy --workspace --all-targets -- -D warnings

## Forget the local stack's data and tools (.local/).
clean-local:
	rm -rf .local
