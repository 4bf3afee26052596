#!/usr/bin/env bash
# A pack that came back from the GPU, judged the way the model card judges a stage, in one go:
# export, convert (trunk with MTP, and the MTP-only sidecar), Q4_K_M with the HC tensors BF16,
# perplexity on the two held texts, the teacher's relevance verdict on both question files (over
# whole answers and over their first 64 tokens, where shorter answers gain nothing), and
# MTP acceptance through llama.cpp's draft-mtp path. Nothing here trains.
#   train/evaluate.sh PACKDIR OUTDIR [N_TEMPLATE]
# env: PY (the train venv's python), LC (llama.cpp 11434's source), TOK (SmolLM2's tokenizer
# dir), TEACHER (SmolLM2-135M-Instruct.Q4_1.gguf), JUDGE (the judge's answer cache, kept across
# stages so the teacher's own answers are written once). OUTDIR/summary.txt collects the figures.
# BASE=OUTDIR of an earlier stage's run puts that stage first in every comparison, so the judge
# and the prompt gain print paired differences against it; HELD=DATA.u16 also judges 60 of that
# data file's held-out questions and measures the prompt gain on 100 of its conversations.
# SHIPPED=FILE: below. JUDGE_SEEDS (default 1,2,3): the judge's sampling seeds; every question
# is answered once per seed and a question's relevance is the mean over them. One seed's draw
# moves all of a model's answers together, by more than the ± a single seed prints (stage 11's
# mean on the 30 chat prompts: 0.227, 0.332, 0.354 at seeds 1, 2, 3; docs/flash-mini.md, "The
# same model, rounded again"), so a decision reads the pairs by seed that judge.py prints.
set -euo pipefail
export JUDGE_SEEDS=${JUDGE_SEEDS:-1,2,3}
PACK=$1; O=$2; NT=${3:-100}
PY=${PY:-$HOME/.cache/strata/train-venv/bin/python}
LC=${LC:-$HOME/.cache/strata/llama.cpp-11434/src}
B=${STRATA_LLAMA_CPP_DIR:-$HOME/.cache/strata/llama.cpp-11434}/build/bin
TOK=${TOK:-/tmp/smoltok}
TEACHER=${TEACHER:-.strata/models/SmolLM2-135M-Instruct.Q4_1.gguf}
JUDGE=${JUDGE:-$HOME/.cache/strata/flash-mini/judge}
R=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$O"; S=$O/summary.txt; : > "$S"
"$PY" "$R/train/export.py" --pack "$PACK" --tok "$TOK" --out "$O/hf"
"$PY" "$R/train/convert.py" "$LC" "$O/hf" --outtype bf16 --outfile "$O/flash-mini-bf16.gguf" > "$O/convert.log" 2>&1
"$PY" "$R/train/convert.py" "$LC" "$O/hf" --mtp --outtype bf16 --outfile "$O/flash-mini-mtp-bf16.gguf" >> "$O/convert.log" 2>&1
M=$O/flash-mini-Q4_K_M.gguf
# SHIPPED=FILE judges that Q4_K_M file itself (the committed one, whose pack from_gguf.py made):
# quantizing its dequantized weights again would round a second time
if [ -n "${SHIPPED:-}" ]; then cp "$SHIPPED" "$M"; QUANTIZE=(flash-mini-mtp); else QUANTIZE=(flash-mini flash-mini-mtp); fi
for f in "${QUANTIZE[@]}"; do
  "$B/llama-quantize" --tensor-type "hc_=bf16" "$O/$f-bf16.gguf" "$O/$f-Q4_K_M.gguf" Q4_K_M 2 > "$O/quantize-$f.log" 2>&1
done
echo "file $(stat -c %s "$M") bytes, sha256 $(sha256sum "$M" | cut -c1-64)" | tee -a "$S"
for t in docs/flash-mini/held_chat.txt assets/nll_sample.txt; do
  L=$O/ppl-$(basename "$t" .txt).log
  "$B/llama-perplexity" -m "$M" -f "$R/$t" -c 256 -b 256 -t 2 > "$L" 2>&1
  echo "perplexity $t: $(grep -o 'Final estimate: PPL = [0-9.]* +/- [0-9.]*' "$L")" | tee -a "$S"
done
# The judge keeps answers per model file's folder and name: a link names this stage's file
# after OUTDIR so stages do not share answers, and a rerun into the same OUTDIR (a new pack)
# drops the answers an earlier run cached under that name.
mkdir -p "$O/judged"; J=$O/judged/$(basename "$O")-Q4_K_M.gguf; ln -sf "$(realpath "$M")" "$J"
rm -rf "$JUDGE/judged_$(basename "$J")"*   # and its JUDGE_TEMP and seed variants
MODELS=("$J" "$TEACHER"); HF=("$O/hf" "$TEACHER")
if [ -n "${BASE:-}" ]; then
  MODELS=("$BASE/judged/$(basename "$BASE")-Q4_K_M.gguf" "${MODELS[@]}"); HF=("$BASE/hf" "${HF[@]}")
fi
judge() {   # judge QUESTIONS N LABEL LOG
  "$PY" "$R/train/judge.py" "$1" "$TOK" "$2" "$TEACHER" "$JUDGE" "${MODELS[@]}" 2>&1 | tee "$O/$4" \
      | grep -E "relevance|paired" | sed "s/^/$3: /" | tee -a "$S"
}
judge "$R/train/chat_prompts.txt" 30 "free-form (chat_prompts 30)" judge-chat.log
judge "$R/train/template_prompts.txt" "$NT" "template ($NT)" judge-template.log
if [ -n "${HELD:-}" ]; then
  judge "$HELD" 60 "held free-form ($(basename "$HELD") 60)" judge-held.log
  "$PY" "$R/train/prompt_gain.py" "$HELD" "$TOK" 100 "${HF[@]}" 2>&1 | tee "$O/prompt-gain.log" \
      | grep -E "prompt gain|paired" | sed "s/^/prompt gain ($(basename "$HELD") 100): /" | tee -a "$S"
fi
STRATA_PY=$PY TOK=$TOK "$R/train/spec.sh" "$M" "$O/spec" > "$O/spec.log"
tail -1 "$O/spec.log" | tee -a "$S"
