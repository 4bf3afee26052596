#!/usr/bin/env bash
# Makes the quantized test files the way users make theirs (issue 31): an importance matrix with
# llama-imatrix, then llama-quantize --imatrix --allow-requantize into the 12 common types, for
# SmolLM2-135M-Instruct ($STRATA_MODEL_SMOLLM2) and Gemma 3 270M ($STRATA_MODEL_GEMMA3, whose
# 640-wide rows make llama-quantize store many K-quant/i-quant tensors as IQ4_NL / Q5_0 / ...).
# Outside CI (CI cannot run llama-quantize: tests/data/quant/ holds small excerpts instead).
#
# Output: ~/.cache/strata/quant/<model>-<TYPE>.gguf, <model>.imatrix.gguf, logs beside them.
# Idempotent: a file that exists is kept (delete it to remake it). nice, $JOBS threads.
#
# Texts (neither is the evaluation text of scripts/llama-cpp/quant_table.sh):
#   calibration = /usr/share/common-licenses/GFDL-1.3 + Artistic (Debian base-files, fixed text)
#
# Needs scripts/llama-cpp/build.sh (llama-imatrix, llama-quantize).
# Env: STRATA_QUANT_DIR (default ~/.cache/strata/quant), STRATA_LLAMA_CPP_DIR, STRATA_LLAMA_CPP_JOBS,
# QUANT_MODELS (default "smollm2 gemma3"), QUANT_TYPES (default: the 12 below).
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
MODELS="${QUANT_MODELS:-smollm2 gemma3}"
TYPES="${QUANT_TYPES:-Q8_0 Q5_0 Q5_1 Q4_0 Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_NL IQ4_XS IQ3_XXS}"

for t in llama-imatrix llama-quantize; do
    [ -x "$BIN/$t" ] || { echo "missing $BIN/$t: run scripts/llama-cpp/build.sh" >&2; exit 1; }
done
mkdir -p "$OUT"

CALIB="$OUT/calibration.txt"
if [ ! -s "$CALIB" ]; then
    cat /usr/share/common-licenses/GFDL-1.3 /usr/share/common-licenses/Artistic > "$CALIB.tmp"
    mv "$CALIB.tmp" "$CALIB"
fi

src_of() {
    case "$1" in
        smollm2) echo "${STRATA_MODEL_SMOLLM2:?set STRATA_MODEL_SMOLLM2 (.strata/env)}" ;;
        gemma3) echo "${STRATA_MODEL_GEMMA3:?set STRATA_MODEL_GEMMA3 (.strata/env)}" ;;
        *) echo "unknown model $1" >&2; exit 1 ;;
    esac
}

for m in $MODELS; do
    src="$(src_of "$m")"
    imat="$OUT/$m.imatrix.gguf"
    if [ ! -s "$imat" ]; then
        echo "imatrix $m <- $src"
        nice "$BIN/llama-imatrix" -m "$src" -f "$CALIB" -o "$imat.tmp.gguf" -c 512 -t "$JOBS" \
            > "$OUT/imatrix-$m.log" 2>&1
        mv "$imat.tmp.gguf" "$imat"
    fi
    for ty in $TYPES; do
        f="$OUT/$m-$ty.gguf"
        [ -s "$f" ] && { echo "have $f"; continue; }
        echo "quantize $m -> $ty"
        nice "$BIN/llama-quantize" --allow-requantize --imatrix "$imat" "$src" "$f.tmp" "$ty" "$JOBS" \
            > "$OUT/quantize-$m-$ty.log" 2>&1
        mv "$f.tmp" "$f"
    done
done
echo "files in $OUT"
