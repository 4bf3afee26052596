#!/usr/bin/env bash
# The model card's chat transcripts for one model file: the first N (default 5: the card's) of
# train/chat_prompts.txt, each answered four times sampled (seeds 1-4) and once greedy with DRY,
# through llama.cpp's `llama-completion --jinja -cnv -st` (the GGUF's own chat template), as
# Markdown sections to append to docs/flash-mini/transcripts.md. `[end of text]` in an answer
# is the model's own end of turn; an answer without it was cut at the token limit.
# usage: train/transcripts.sh MODEL.gguf LABEL OUT.md [N]   (TEMP=T samples at T instead of 0.7)
set -euo pipefail
M=$1; L=$2; O=$3; N=${4:-5}; TEMP=${TEMP:-0.7}
R=$(cd "$(dirname "$0")/.." && pwd)
B=${STRATA_LLAMA_CPP_DIR:-$HOME/.cache/strata/llama.cpp-11434}/build/bin
test -x "$B/llama-completion" || { echo "transcripts.sh: no $B/llama-completion (scripts/llama-cpp/build.sh)" >&2; exit 1; }
test -f "$M" || { echo "transcripts.sh: no model file $M" >&2; exit 1; }
answer() {   # answer PROMPT ARGS...: the answer's text, blank lines at its ends dropped
  local p=$1; shift
  nice "$B/llama-completion" -m "$M" --jinja -cnv -st -p "$p" -t 2 -c 1024 --no-display-prompt "$@" \
      < /dev/null 2> /dev/null | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' | sed '/./,$!d'
}
block() {   # block HEADING TEXT
  printf '#### %s\n\n```text\n%s\n```\n\n' "$1" "$2"
}
: > "$O"
i=1
while IFS= read -r P; do
  printf '### %d. %s\n\n' "$i" "$P" >> "$O"
  for s in 1 2 3 4; do
    block "$L, sampled, seed $s" \
        "$(answer "$P" -n 200 --temp "$TEMP" --top-p 0.9 --repeat-penalty 1.15 --seed "$s")" >> "$O"
  done
  block "$L, greedy + DRY" "$(answer "$P" -n 160 --temp 0 --dry-multiplier 0.8)" >> "$O"
  i=$((i + 1))
done < <(grep -v '^#' "$R/train/chat_prompts.txt" | head -n "$N")
echo "transcripts.sh: $((i - 1)) prompts x 5 answers of $M -> $O"
