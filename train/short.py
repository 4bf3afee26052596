"""The conversations of a teacher data file whose answer ends by itself within N tokens.

  python train/short.py DATA.u16 OUT.u16 [--max-answer 128] [--min-answer 16] [--cap 320]

`train.py gen` stops the teacher at `--max-new` tokens (320) and writes `<|im_end|>` after the
reply either way, so 28% of chat9's answers end mid-sentence at exactly 320 tokens and the
median answer is 205 tokens. flash-mini drifts off its question after about 64 answer tokens
(the card's prompt gain by distance), so this keeps the answers the teacher ended itself
(`<|im_end|>` before the cap) within `--max-answer` tokens: its short, finished answers.

Only DATA's trained head is read (train.py's split_held: its last 1% is the judge's held
questions and the card's held text), so nothing of the held tail reaches OUT. OUT's own last 1%
is then held out again by train.py, as for every data file.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import answer_mask, conversation_starts, split_held  # noqa: E402


def conversations(d):
    """(start, end) of each whole conversation of a flat stream that starts at a conversation's
    start: one starts wherever the stream's first two tokens (`<|im_start|>system`) recur, and
    the piece after the last start is left out (split_held's tail may have cut it)."""
    s = conversation_starts(d, d[:2])
    return list(zip(s[:-1], s[1:]))


def answer_tokens(d):
    """(len(d) + 1,) running count of d's answer tokens, `<|im_end|>` included, as training
    marks them (train.answer_mask): tokens s..e-1 hold count[e] - count[s] of them."""
    m = answer_mask(torch.from_numpy(d[None].astype(np.int64)))[0].numpy()   # label t + 1
    return np.concatenate([[0, 0], np.cumsum(m)])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("--max-answer", type=int, default=128)
    p.add_argument("--min-answer", type=int, default=16,
                   help="shorter answers are mostly a salutation or an echo (the reward's --op-min-len)")
    p.add_argument("--cap", type=int, default=320, help="train.py gen's --max-new for DATA")
    p.add_argument("--holdout", type=float, default=0.01)
    a = p.parse_args()
    if a.max_answer >= a.cap:
        sys.exit(f"--max-answer {a.max_answer} must be under --cap {a.cap}: an answer of {a.cap} tokens was cut")
    head, _ = split_held(np.fromfile(a.data, dtype=np.uint16), a.holdout)
    count = answer_tokens(head)
    kept, n_conv, lens = [], 0, []
    for s, e in conversations(head):
        n = count[e] - count[s] - 1   # its answer's tokens before `<|im_end|>`; -1: none
        if n < 0:
            continue
        n_conv += 1
        lens.append(n)
        if a.min_answer <= n <= a.max_answer:
            kept.append(head[s:e])
    if not kept:
        sys.exit(f"{a.data}: no answer of {a.min_answer}..{a.max_answer} tokens in {n_conv} conversations")
    out = np.concatenate(kept)
    out.tofile(a.out)
    lens = np.array(lens)
    print(f"{a.data}: {n_conv} conversations in the trained head, median answer {np.median(lens):.0f} tokens, "
          f"{(lens >= a.cap).mean():.1%} cut at {a.cap}; kept {len(kept)} ({len(kept) / n_conv:.1%}) "
          f"with answers of {a.min_answer}..{a.max_answer} tokens: {len(out)} tokens -> {a.out}")


if __name__ == "__main__":
    main()
