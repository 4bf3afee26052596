"""Packs side by side on the same held windows: the CE over all tokens and over the answers'.

  python train/held_ce.py DATA.u16[,DATA2.u16] PACK [PACK ...] [--windows 16]

The windows are grow.held_windows' (conversation starts in each file's held 1%, which train.py
never trains on), so every pack reads the same tokens; a file a pack trained on elsewhere says
how well it generalizes, a file none of them saw says more. PyTorch on the CPU, the packs' own
(Q8_0-rounded) weights, not a quantized GGUF.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as fm  # noqa: E402
from export import unpack  # noqa: E402
from grow import build, held_windows  # noqa: E402
from train import answer_mask, masked_losses  # noqa: E402


def ce_by_part(model, ids):
    """(CE over every next token, CE over the answer tokens alone) of (windows, seq) ids, scored
    as train.py scores its held windows (masked_losses over answer_mask)."""
    with torch.no_grad():
        _, answer_ce, _, nll, _ = masked_losses(model, None, ids, answer_mask(ids))
    return nll.mean().item(), answer_ce.item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data", help="token files, comma-separated: each gives --windows windows")
    p.add_argument("packs", nargs="+")
    p.add_argument("--windows", type=int, default=16)
    a = p.parse_args()
    sets = {os.path.basename(d): held_windows(d, a.windows) for d in a.data.split(",")}
    print("pack | " + " | ".join(f"{n} CE (answers)" for n in sets))
    for pk in a.packs:
        sd = {k: v for k, v in unpack(pk).items() if not k.startswith("mtp.")}
        model = build(sd)
        row = []
        for ids in sets.values():
            ce, ans = ce_by_part(model, ids)
            row.append(f"{ce:.4f} ({ans:.4f})")
        print(f"{pk} [{fm.layout_of(sd)}] | " + " | ".join(row), flush=True)


if __name__ == "__main__":
    main()
