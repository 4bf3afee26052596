#!/usr/bin/env bash
# KL divergence and top-1 agreement of Strata against llama.cpp (issue 28): llama.cpp's own
# `llama-perplexity --kl-divergence-base` writes the base (CPU build, -c 512, the same GGUF and
# text), then `strata nll --kld` scores the same tokens against it and prints llama-perplexity's
# statistics (mean KLD ± err, percentiles, RMS Δp, same top p). Outside CI: needs llama.cpp
# built by scripts/llama-cpp/build.sh. Bases are large (n_vocab x 2 bytes per scored position:
# Gemma 3's 1020 positions are 535 MB) and go to $STRATA_KLD_WORK (default /tmp/strata-kld).
#
# Usage: scripts/kld_vs_llamacpp.sh [MODEL_ENV...]   (default: STRATA_MODEL_SMOLLM2 STRATA_MODEL_GEMMA3)
# Env:   STRATA_KLD_F16=1 compares the models' F16 files instead (every quantized matrix widened
#        to F16 by `strata convert --to f16`, the bytes llama-quantize's F16 target writes: no
#        8-bit rounding of matmul inputs in either tool; 0.27 / 0.54 GB each, in $STRATA_KLD_WORK),
#        STRATA_KLD_TEXT (default assets/kld_sample.txt), STRATA_KLD_CTX (512),
#        STRATA_BIN (default target/release/strata, built if unset), extra strata flags in
#        STRATA_KLD_ARGS (e.g. --f32-act), and any STRATA_* engine flag (STRATA_VNNI=1 ...).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
cd "$ROOT"
set -a
# shellcheck disable=SC1091
. .strata/env
set +a
TEXT="${STRATA_KLD_TEXT:-assets/kld_sample.txt}"
CTX="${STRATA_KLD_CTX:-512}"
WORK="${STRATA_KLD_WORK:-${TMPDIR:-/tmp}/strata-kld}"
PERPLEXITY="${STRATA_LLAMA_CPP_DIR:-$HOME/.cache/strata/llama.cpp-11434}/build/bin/llama-perplexity"
[ -x "$PERPLEXITY" ] || "$HERE/llama-cpp/build.sh" >/dev/null
STRATA="${STRATA_BIN:-$ROOT/target/release/strata}"
if [ -z "${STRATA_BIN:-}" ]; then
    nice cargo build --release --bin strata
fi
mkdir -p "$WORK"
MODELS=("$@")
[ ${#MODELS[@]} -gt 0 ] || MODELS=(STRATA_MODEL_SMOLLM2 STRATA_MODEL_GEMMA3)
for env in "${MODELS[@]}"; do
    model="${!env}"
    if [ "${STRATA_KLD_F16:-0}" = 1 ]; then
        f16="$WORK/$(basename "$model" .gguf).f16.gguf"
        [ -s "$f16" ] && [ "$f16" -nt "$model" ] || "$STRATA" convert --to f16 --from "$model" -o "$f16" >/dev/null
        model="$f16"
    fi
    base="$WORK/$(basename "$model" .gguf).c$CTX.kld"
    # the base depends only on llama.cpp, the model and the text: reuse it when newer than both
    if [ ! -s "$base" ] || [ "$base" -ot "$model" ] || [ "$base" -ot "$TEXT" ]; then
        "$PERPLEXITY" -m "$model" -f "$TEXT" -c "$CTX" -b "$CTX" -t "$(nproc)" \
            --kl-divergence-base "$base" > "$base.log" 2>&1 ||
            { tail -20 "$base.log"; exit 1; }
    fi
    echo "== $(basename "$model") vs llama.cpp (-c $CTX, $TEXT)"
    # shellcheck disable=SC2086
    "$STRATA" nll -m "$model" -f "$TEXT" --kld "$base" ${STRATA_KLD_ARGS:-} 2>/dev/null |
        grep -E "^(Mean PPL|Mean    KLD|Maximum KLD|99.0%   KLD|Median  KLD|RMS Δp|Same top p)"
done
