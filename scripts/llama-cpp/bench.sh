#!/usr/bin/env bash
# Decode and prompt speed of a synthetic qwen4exp file: Strata's `strata bench` beside llama.cpp's
# `llama-bench` on the same file, interleaved A B A B so drift hits both, median of the runs
# (issue 25). Outside CI: needs llama.cpp built by build.sh (~5 min on 2 cores, cached).
#
# Usage: scripts/llama-cpp/bench.sh [PRESET=seeds] [RUNS=5] [N_GEN=32] [N_PROMPT=64]
# The per-site hyper-connection read figures: `cargo bench --bench hc_read`.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"
PRESET="${1:-seeds}"
RUNS="${2:-5}"
N_GEN="${3:-32}"
N_PROMPT="${4:-64}"
declare -A SEED=([tiny]=1 [small]=2 [seeds]=3)
WORK="${STRATA_BENCH_WORK:-${TMPDIR:-/tmp}/strata-qwen4exp-bench}"
LLAMA_BENCH="${STRATA_LLAMA_CPP_DIR:-$HOME/.cache/strata/llama.cpp-11434}/build/bin/llama-bench"

"$HERE/build.sh" >/dev/null
set -a
# shellcheck disable=SC1091
. .strata/env
set +a
STRATA="${STRATA_BIN:-$ROOT/target/release/strata}"
if [ -z "${STRATA_BIN:-}" ]; then
    nice cargo build --release --bin strata
fi
mkdir -p "$WORK"
MODEL="$WORK/$PRESET.gguf"
[ -f "$MODEL" ] || "$STRATA" synth --preset "$PRESET" --seed "${SEED[$PRESET]:-1}" -o "$MODEL" >/dev/null

# one figure per run: tok/s of the named test from JSON lines with "test" and "avg_ts"
figure() { python3 -c '
import json, sys
want = sys.argv[1]
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{") and not line.startswith("["):
        continue
    rows = json.loads(line)
    for r in rows if isinstance(rows, list) else [rows]:
        if r.get("test", "") == want or (want.startswith("tg") and r.get("n_gen") == int(want[2:]) and r.get("n_prompt") == 0) or (want.startswith("pp") and r.get("n_prompt") == int(want[2:]) and r.get("n_gen") == 0):
            print(r["avg_ts"])
' "$1"; }

declare -a S_TG S_PP L_TG L_PP
for i in $(seq 1 "$RUNS"); do
    out=$("$STRATA" bench -m "$MODEL" -p "$N_PROMPT" -n "$N_GEN" -r 1 --json 2>/dev/null)
    S_PP+=("$(echo "$out" | figure "pp$N_PROMPT")")
    S_TG+=("$(echo "$out" | figure "tg$N_GEN")")
    out=$("$LLAMA_BENCH" -m "$MODEL" -p "$N_PROMPT" -n "$N_GEN" -r 1 -t 2 -o jsonl 2>/dev/null)
    L_PP+=("$(echo "$out" | figure "pp$N_PROMPT")")
    L_TG+=("$(echo "$out" | figure "tg$N_GEN")")
    echo "run $i: strata pp ${S_PP[-1]} tg ${S_TG[-1]} | llama.cpp pp ${L_PP[-1]} tg ${L_TG[-1]}" >&2
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {printf "%.1f", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "| file | test | Strata tok/s | llama.cpp tok/s (2 threads) | Strata / llama.cpp |"
echo "|---|---|---|---|---|"
for t in pp tg; do
    if [ "$t" = pp ]; then s=$(median "${S_PP[@]}"); l=$(median "${L_PP[@]}"); n=$N_PROMPT
    else s=$(median "${S_TG[@]}"); l=$(median "${L_TG[@]}"); n=$N_GEN; fi
    echo "| $PRESET ($(basename "$MODEL")) | $t$n | $s | $l | $(python3 -c "print(f'{$s/$l:.2f}')") |"
done
echo "(median of $RUNS interleaved runs; $(date -u +%Y-%m-%d), strata $(git rev-parse --short HEAD))"
