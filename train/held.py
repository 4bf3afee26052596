"""The held-out tail of a teacher data file (never trained on: train.py's --holdout 0.01 keeps
each file's last 1% out, split_held) as plain text: the assistant replies, one paragraph each."""
import os
import sys

import numpy as np
from transformers import AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import split_held  # noqa: E402

data, tok_dir, out, n_tok = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
_, hold = split_held(np.fromfile(data, dtype=np.uint16), 0.01)
tok = AutoTokenizer.from_pretrained(tok_dir)
text = tok.decode(hold.tolist())
replies = [c.split("<|im_end|>")[0].strip() for c in text.split("<|im_start|>assistant\n")[1:]]
replies = [r for r in replies if r]
outs, total = [], 0
for r in replies[1:]:                      # the first may start mid-conversation
    outs.append(r)
    total += len(tok(r).input_ids)
    if total >= n_tok:
        break
open(out, "w").write("\n\n".join(outs) + "\n")
print(f"{len(outs)} replies, ~{total} tokens")
