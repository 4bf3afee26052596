"""The held-out tail of a teacher data file (never trained on: train.py's --holdout 0.01 keeps
each file's last 1% out, split_held) as plain text: the assistant replies, one paragraph each.

  python train/held.py DATA.u16 TOKDIR OUT.txt N_TOKENS

The replies are prompt_gain.py's held conversations' answers, so the card's held text and its
prompt-gain answers come from one reading of the tail.
"""
import os
import sys

from transformers import AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prompt_gain import held_conversations  # noqa: E402

data, tok_dir, out, n_tok = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tok = AutoTokenizer.from_pretrained(tok_dir)
outs, total = [], 0
for _, a in held_conversations(data, tok, 10**9):
    outs.append(a.strip())
    total += len(tok(outs[-1]).input_ids)
    if total >= n_tok:
        break
open(out, "w").write("\n\n".join(outs) + "\n")
print(f"{len(outs)} replies, ~{total} tokens")
