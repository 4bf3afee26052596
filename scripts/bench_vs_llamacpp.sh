#!/usr/bin/env bash
# Strata vs llama.cpp speed table (docs/performance.md, "Strata vs llama.cpp").
# Builds the release binary (a no-op when up to date), loads .strata/env, then runs
# scripts/bench_vs_llamacpp.py with the given arguments (--rounds, -r, --spec, --models ...).
# llama.cpp comes from scripts/llamacpp_setup.sh (optional); without it, Strata's figures only.
set -euo pipefail
cd "$(dirname "$0")/.."
set -a
. .strata/env
set +a
if [ -z "${STRATA_BIN:-}" ]; then
    cargo build --release --quiet
fi
exec python3 scripts/bench_vs_llamacpp.py "$@"
