# The two commands: `make run` (the app on the default model) and `make test` (the whole suite).
# Both run scripts/setup.sh first (idempotent: ~1 s when everything is installed).
SHELL := /bin/bash
ENV = set -a; . .strata/env; set +a;

.PHONY: setup run test build
setup:
	@./scripts/setup.sh

build: setup
	@$(ENV) cargo build --release

run: setup
	@$(ENV) cargo run --release --quiet -- $(ARGS)

test: setup
	@$(ENV) cargo test --release
