"""Average packs trained from one start (a "model soup"): train/soup.py OUT PACK PACK [PACK ...]

Runs trained from the same weights stay in one basin, expert for expert (no run permutes the
experts of another), so their element-wise mean is a model of the same layout. Every tensor of
every pack is averaged, the MTP block's too; the packs must hold the same tensors, shapes and
experts per token, or nothing is written. Runs on the CPU in seconds.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export import pack_top_k, unpack  # noqa: E402
from train import write_pack  # noqa: E402


def soup(packs):
    """The element-wise mean of the packs' state dicts; SystemExit naming the pack and tensor
    where one holds no pack files or differs from the first in keys or shape."""
    total = {}
    for p in packs:
        sd = unpack(p)
        if not sd:
            raise SystemExit(f"{p}: no pack-*.safetensors in it")
        if not total:
            total = {k: v.double() for k, v in sd.items()}
            continue
        if sd.keys() != total.keys():
            diff = sorted(sd.keys() ^ total.keys())[:3]
            raise SystemExit(f"{p}: its tensors differ from {packs[0]}'s, e.g. {diff}")
        for k, v in sd.items():
            if v.shape != total[k].shape:
                raise SystemExit(f"{p}: tensor {k} is {tuple(v.shape)}, {packs[0]} has {tuple(total[k].shape)}")
            total[k] += v.double()
    return {k: (v / len(packs)).float() for k, v in total.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("packs", nargs="+")
    a = ap.parse_args()
    if len(a.packs) < 2:
        raise SystemExit("a soup needs two packs or more")
    ks = {p: pack_top_k(p) for p in a.packs}
    if len(set(ks.values())) > 1:
        raise SystemExit(f"the packs route different experts per token: {ks}")
    write_pack(soup(a.packs), a.out, top_k=ks[a.packs[0]])


if __name__ == "__main__":
    main()
