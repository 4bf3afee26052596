#!/usr/bin/env bash
# Issue 28: which of llama.cpp's CPU matmul paths moves Gemma 3's logits. llama-perplexity
# (the build of scripts/llama-cpp/build.sh, -c 512 -b 512, assets/kld_sample.txt) scores each
# variant against a base of the default run and against one of `-nr`; prints each variant's
# mean KLD and "Same top p". The variants (see docs/kld.md, "llama.cpp's repacked Q4_K path"):
#   default            Q4_K (attn_output, most ffn_down) in the CPU_REPACK buffer: gemm/gemv
#                      q4_K_8x8_q8_K; Q6_K ffn_down through the tiled K-quant matmul (tiled/)
#   -nr                Q4_K and Q6_K through the tiled matmul (batch >= 8 rows)
#   GGML_CPU_TILED_MM=0        default, but Q6_K through ggml_vec_dot_q6_K_q8_K
#   -nr GGML_CPU_TILED_MM=0    Q4_K and Q6_K through ggml_vec_dot_*_q8_K (the "reference" path)
#   -t 1               default on one thread (a control: the chunking changes, no element's sum)
# Outside CI. Env: STRATA_MODEL_GEMMA3 (from .strata/env), RP_KLD_WORK (default /tmp/rp_kld).
# Takes ~4 minutes on two cores (each pass ~30 s); bases are 535 MB each.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"
set -a
# shellcheck disable=SC1091
. .strata/env
set +a
PPL="${STRATA_LLAMA_CPP_DIR:-$HOME/.cache/strata/llama.cpp-11434}/build/bin/llama-perplexity"
WORK="${RP_KLD_WORK:-/tmp/rp_kld}"
MODEL="${RP_KLD_MODEL:-$STRATA_MODEL_GEMMA3}"
TEXT=assets/kld_sample.txt
mkdir -p "$WORK"

run() { # run NAME [ENV=..] -- [llama-perplexity flags]: writes $WORK/NAME.kld
    local name="$1"; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env ${envs[@]+"${envs[@]}"} nice "$PPL" -m "$MODEL" -f "$TEXT" -c 512 -b 512 -t "${RP_KLD_THREADS:-2}" "$@" \
        --kl-divergence-base "$WORK/$name.kld" > "$WORK/$name.log" 2>&1
}
score() { # score NAME BASE [ENV=..] -- [flags]: this variant against BASE.kld
    local name="$1" base="$2"; shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env ${envs[@]+"${envs[@]}"} nice "$PPL" -m "$MODEL" -t "${RP_KLD_THREADS:-2}" -b 512 "$@" \
        --kl-divergence --kl-divergence-base "$WORK/$base.kld" > "$WORK/$name.vs.$base.log" 2>&1
    printf '%-28s vs %-10s %s | %s\n' "$name" "$base" \
        "$(grep -E '^Mean +KLD' "$WORK/$name.vs.$base.log" | tr -s ' ')" \
        "$(grep -E '^Same top p' "$WORK/$name.vs.$base.log" | tr -s ' ')"
}

[ -s "$WORK/default.kld" ] || run default --
[ -s "$WORK/nr.kld" ] || run nr -- -nr
score default            default --          # control: bitwise reproducible
score nr                 default -- -nr
score tiled0             default GGML_CPU_TILED_MM=0 --
score nr_tiled0          default GGML_CPU_TILED_MM=0 -- -nr
score nr_tiled0          nr      GGML_CPU_TILED_MM=0 -- -nr
score t1                 default -- -t 1
