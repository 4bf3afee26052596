"""The held-out tail of the teacher data (never trained on: train.py's --holdout 0.01 is the
last 1% of the token stream) as plain text: the assistant replies, one paragraph each."""
import sys

import numpy as np
from transformers import AutoTokenizer

data, tok_dir, out, n_tok = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
d = np.fromfile(data, dtype=np.uint16)
hold = d[len(d) - int(len(d) * 0.01):]
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
