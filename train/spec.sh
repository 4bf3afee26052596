#!/usr/bin/env bash
# MTP speculative decoding with llama.cpp's own path: the first N (default 5: the model card's
# chat prompts) of train/chat_prompts.txt, 3 drafts, greedy.
# usage: train/spec.sh MODEL.gguf OUTDIR [N]   (needs STRATA_PY with transformers for the template)
set -euo pipefail
M=$1; O=$2; N=${3:-5}; mkdir -p "$O"
R=$(cd "$(dirname "$0")/.." && pwd)
B=${STRATA_LLAMA_CPP_DIR:-$HOME/.cache/strata/llama.cpp-11434}/build/bin
PY=${STRATA_PY:-python3}
TOK=${TOK:-/tmp/smoltok}
rm -f "$O"/spec-*.log   # the totals read every spec-*.log: none left from a longer run
i=0
while IFS= read -r P; do
  T=$("$PY" -c "import sys
from transformers import AutoTokenizer
t = AutoTokenizer.from_pretrained(sys.argv[1])
print(t.apply_chat_template([{'role': 'user', 'content': sys.argv[2]}], tokenize=False, add_generation_prompt=True), end='')" "$TOK" "$P" < /dev/null)
  nice "$B/llama-speculative-simple" -m "$M" --spec-type draft-mtp --spec-draft-n-max 3 -p "$T" -n 128 \
      -t 2 -c 1024 --temp 0 < /dev/null > "$O/spec-$i.log" 2>&1   # stdin holds the prompts
  grep -E "n_predict|n_drafted|n_accept|accept " "$O/spec-$i.log" | sed 's/^[0-9.]* I //'
  i=$((i + 1))
done < <(grep -v '^#' "$R/train/chat_prompts.txt" | head -n "$N")
# the totals; a verify window yields its accepted drafts plus the target's own token
awk '/n_predict =/ {n += $NF} /n_drafted =/ {d += $NF} /n_accept  =/ {a += $NF}
     END {w = n - a; printf "MTP: %d predicted, %d drafted, %d accepted (%.1f%%), %d windows: %.2f accepted drafts per window\n",
          n, d, a, 100 * a / (d ? d : 1), w, a / (w ? w : 1)}' "$O"/spec-*.log
