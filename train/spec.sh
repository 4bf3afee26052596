#!/usr/bin/env bash
# MTP speculative decoding with llama.cpp's own path: 5 chat prompts, 3 drafts, greedy.
# usage: train/spec.sh MODEL.gguf OUTDIR   (needs STRATA_PY with transformers for the template)
# PROMPTS=FILE takes the prompts from FILE instead, one per line ('#' lines skipped), as
# train/chat_prompts.txt, whose first five are the card's.
set -euo pipefail
M=$1; O=$2; mkdir -p "$O"
B=${STRATA_LLAMA_CPP_DIR:-$HOME/.cache/strata/llama.cpp-11434}/build/bin
PY=${STRATA_PY:-python3}
TOK=${TOK:-/tmp/smoltok}
prompts() {
  if [ -n "${PROMPTS:-}" ]; then grep -v '^#' "$PROMPTS"; return; fi
  printf '%s\n' "Why do we need to drink water?" "Write a short story about a dog who finds a ball." \
    "Give me three tips for learning to cook." "What is the difference between a planet and a star?" \
    "How can I be a better friend?"
}
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
done < <(prompts)
# the totals; a verify window yields its accepted drafts plus the target's own token
awk '/n_predict =/ {n += $NF} /n_drafted =/ {d += $NF} /n_accept  =/ {a += $NF}
     END {w = n - a; printf "MTP: %d predicted, %d drafted, %d accepted (%.1f%%), %d windows: %.2f accepted drafts per window\n",
          n, d, a, 100 * a / (d ? d : 1), w, a / (w ? w : 1)}' "$O"/spec-*.log
