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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as fm  # noqa: E402
from train import ANSWER_HEADER, split_held  # noqa: E402


def conversations(d):
    """(start, end) of each conversation of a flat stream that starts at a conversation's start:
    one starts wherever the stream's first two tokens (`<|im_start|>system`) recur. The last one
    may be cut where split_held's tail begins; main() drops it."""
    s = np.flatnonzero((d[:-1] == d[0]) & (d[1:] == d[1]))
    return list(zip(s, list(s[1:]) + [len(d)]))


def answer_length(c):
    """Tokens of the conversation's answer before its `<|im_end|>`; None without an answer."""
    k = len(ANSWER_HEADER)
    hdr = np.flatnonzero(np.all([c[i:len(c) - k + 1 + i] == t for i, t in enumerate(ANSWER_HEADER)], 0))
    if len(hdr) != 1:
        return None
    a = hdr[0] + k
    ends = np.flatnonzero(c[a:] == fm.EOS_ID)
    return int(ends[0]) if len(ends) else None


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
    kept, n_conv, lens = [], 0, []
    for s, e in conversations(head):
        c = head[s:e]
        n = answer_length(c)
        if n is None:
            continue
        n_conv += 1
        lens.append(n)
        if a.min_answer <= n <= a.max_answer and e < len(head):   # the head's last piece may be cut short
            kept.append(c)
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
