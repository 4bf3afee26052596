#!/usr/bin/env bash
# The issue-31 table: for every file scripts/llama-cpp/quantize.sh made, `strata nll --half
# --ctx 512` beside llama-perplexity (-c 512) on the same file and the same text, as a Markdown
# table (docs/quant.md, "Files from llama-quantize").
#
# Evaluation text: the first 294 lines (15 KB) of /usr/share/common-licenses/GPL-3 (Debian
# base-files), written to $OUT/eval.txt: 6 chunks of 512 tokens, so that the 24 files x 2 tools
# run in well under an hour on two shared cores. Not the calibration text of quantize.sh.
# Both score the second half of each 512-token chunk. Their chunking differs slightly past the
# first chunk: llama-perplexity cuts the BOS-prefixed token array into n_ctx pieces and overwrites
# each piece's first token with BOS; `strata nll` takes ctx-1 text tokens after a BOS (and ctx
# when the model adds none, as SmolLM2) -- within a chunk the scored positions see the same
# amount of context, so the two agree to well under 1% on a sane engine (docs/engine.md).
#
# Results are cached per file and tool in $OUT/results/ (delete one to re-measure); a file that
# strata refuses gets its error in the table instead of a number.
# Env: STRATA_QUANT_DIR, STRATA_LLAMA_CPP_DIR, STRATA_LLAMA_CPP_JOBS, STRATA_BIN (default
# target/release/strata), QUANT_MODELS, QUANT_TYPES, QUANT_TOOLS (default "strata llama").
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
if [ -f "$ROOT/.strata/env" ]; then
    set -a
    # shellcheck disable=SC1091
    . "$ROOT/.strata/env"
    set +a
fi
DIR="${STRATA_LLAMA_CPP_DIR:-$HOME/.cache/strata/llama.cpp-11434}"
BIN="$DIR/build/bin"
OUT="${STRATA_QUANT_DIR:-$HOME/.cache/strata/quant}"
JOBS="${STRATA_LLAMA_CPP_JOBS:-2}"
STRATA="${STRATA_BIN:-$ROOT/target/release/strata}"
MODELS="${QUANT_MODELS:-smollm2 gemma3}"
TYPES="${QUANT_TYPES:-Q8_0 Q5_0 Q5_1 Q4_0 Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_NL IQ4_XS IQ3_XXS}"
TOOLS="${QUANT_TOOLS:-strata llama}"
TEXT="$OUT/eval.txt"
RES="$OUT/results"
mkdir -p "$RES"
[ -s "$TEXT" ] || head -n 294 /usr/share/common-licenses/GPL-3 > "$TEXT"

measure() { # model type tool -> writes $RES/<m>-<ty>.<tool>.txt
    local f="$OUT/$1-$2.gguf" r="$RES/$1-$2.$3.txt"
    [ -s "$r" ] && return 0
    [ -s "$f" ] || return 0
    case "$3" in
        strata)
            if ! nice "$STRATA" nll -m "$f" -f "$TEXT" --half --ctx 512 > "$r.log" 2>&1; then
                echo "refused: $(grep -m1 -i 'error\|not supported' "$r.log" | cut -c1-160)" > "$r"
                return 0
            fi
            grep -o 'mean NLL [0-9.]*, perplexity [0-9.]*' "$r.log" | tail -1 > "$r"
            ;;
        llama)
            nice "$BIN/llama-perplexity" -m "$f" -f "$TEXT" -c 512 -b 512 -t "$JOBS" > "$r.log" 2>&1
            grep -o 'Final estimate: PPL = [0-9.]*' "$r.log" | tail -1 > "$r"
            ;;
    esac
}

for m in $MODELS; do
    for ty in $TYPES; do
        for tool in $TOOLS; do
            measure "$m" "$ty" "$tool"
        done
    done
done

# the table: file, tensor types in it, strata ppl, llama.cpp ppl, difference
types_of() {
    "${STRATA_PYTHON:-python3}" - "$1" <<'EOF'
import collections, sys, gguf
r = gguf.GGUFReader(sys.argv[1])
c = collections.Counter(t.tensor_type.name for t in r.tensors if t.tensor_type.name != "F32")
print(" ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: -kv[1])))
EOF
}
echo "| file | tensor types (count) | strata ppl | llama.cpp ppl | strata − llama.cpp |"
echo "|---|---|---|---|---|"
for m in $MODELS; do
    for ty in $TYPES; do
        f="$OUT/$m-$ty.gguf"
        [ -s "$f" ] || continue
        s="$(cat "$RES/$m-$ty.strata.txt" 2>/dev/null || true)"
        l="$(cat "$RES/$m-$ty.llama.txt" 2>/dev/null || true)"
        sp="$(echo "$s" | sed -n 's/.*perplexity \([0-9.]*\).*/\1/p')"
        lp="$(echo "$l" | sed -n 's/.*PPL = \([0-9.]*\).*/\1/p')"
        if [ -n "$sp" ] && [ -n "$lp" ]; then
            d="$(awk -v a="$sp" -v b="$lp" 'BEGIN { printf "%+.2f%%", 100 * (a - b) / b }')"
        else
            d="–"
        fi
        [ -z "$sp" ] && sp="${s:-not run}"
        echo "| $m-$ty | $(types_of "$f") | $sp | ${lp:-not run} | $d |"
    done
done
