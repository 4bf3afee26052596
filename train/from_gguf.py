"""A flash-mini GGUF back into a pack (train.py pack's format), so training can resume from the
committed file (assets/models/flash-mini-Q4_K_M.gguf) when the packs of the run that made it
are gone: the weights are the file's own, dequantized.

  python train/from_gguf.py LLAMA_CPP_SRC FILE.gguf --tok TOKDIR --out PACKDIR [--check]

The inverse of llama.cpp's converter is not written by hand. Its converter (train/convert.py)
runs on two probe checkpoints of FILE's layout, at F32: in probe A every element holds its own
index + 1, in probe B every tensor holds one constant that names it. Where an element lands in
the probe files, and what the converter did to it on the way (copied, +1 on the zero-centred
gammas, -exp on A_log; recognised from probe B's value), gives its place in FILE. Splits,
concatenations and the DeltaNet V-head reordering are all just places.

--check converts a checkpoint of random weights the same way and inverts it: the round trip has
to give the weights back (printed: the largest difference), or the run stops.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as fm  # noqa: E402
from export import write_checkpoint  # noqa: E402

COPY, PLUS1, NEGEXP = 0, 1, 2
SCALE = 1024.0        # probe B: tensor number t holds (t + 1) / SCALE, exact in F32


def layout_of_gguf(reader) -> str:
    f = reader.fields
    arch = bytes(f["general.architecture"].parts[-1]).decode()

    def num(key):
        return int(f[f"{arch}.{key}"].parts[-1][0])
    n_layer = num("block_count") - (num("nextn_predict_layers") if f"{arch}.nextn_predict_layers" in f else 0)
    # ssm.time_step_rank: the DeltaNet value heads
    return fm.layout_name(n_layer, num("expert_count"), num("embedding_length"), num("ssm.time_step_rank"),
                          num("expert_used_count"))


def shapes(layout):
    """(name, shape) of every trunk and `mtp.*` weight of a flash-mini of this layout."""
    from transformers import Qwen4ExpForCausalLM
    cfg = fm.flash_mini_config(layout=layout)
    with torch.device("meta"):
        trunk = Qwen4ExpForCausalLM(cfg).state_dict()
        mtp = fm.MTPBlock(cfg).state_dict()
    out = [(k, tuple(v.shape)) for k, v in trunk.items() if k != "lm_head.weight"]
    return out + [("mtp." + k, tuple(v.shape)) for k, v in mtp.items()]


def convert(lc, sd, tok, work, tag):
    """sd -> checkpoint -> llama.cpp's converter at F32; returns {gguf name: flat float64 array}."""
    from gguf import GGUFReader
    hf = os.path.join(work, tag)
    write_checkpoint(sd, tok, hf)
    out = os.path.join(work, tag + ".gguf")
    conv = os.path.join(os.path.dirname(os.path.abspath(__file__)), "convert.py")
    subprocess.run([sys.executable, conv, lc, hf, "--outtype", "f32", "--outfile", out],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = GGUFReader(out)
    res = {}
    for t in r.tensors:
        if t.tensor_type.name != "F32":
            sys.exit(f"{out}: tensor {t.name} is {t.tensor_type.name}, the probe needs F32 throughout")
        res[t.name] = np.asarray(t.data, dtype=np.float64).reshape(-1)
    return res


def undo(kind, x):
    """The converter's elementwise step undone: x - 1 where it added 1, log(-x) where it took -exp."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(kind == PLUS1, x - 1, np.where(kind == NEGEXP, np.log(-np.minimum(x, -1e-30)), x))


def build_map(lc, layout, tok, work):
    """For every GGUF tensor: per element (source tensor number, source index, transform)."""
    names = shapes(layout)
    a = {k: torch.arange(1, int(np.prod(s)) + 1, dtype=torch.float32).reshape(s) for k, s in names}
    if max(int(np.prod(s)) for _, s in names) >= 2**24:
        sys.exit("from_gguf: a tensor has 2^24 elements or more, its indices are not exact in F32")
    b = {k: torch.full(s, (i + 1) / SCALE) for i, (k, s) in enumerate(names)}
    ga, gb = convert(lc, a, tok, work, "probe_a"), convert(lc, b, tok, work, "probe_b")
    places = {}
    for g in ga:
        va, vb = ga[g], gb[g]
        kind = np.where(vb > 1, PLUS1, np.where(vb < 0, NEGEXP, COPY))
        src = np.rint(undo(kind, vb) * SCALE).astype(np.int64) - 1     # probe B: which tensor
        pos = np.rint(undo(kind, va))                                  # probe A: which element, + 1
        if not (pos[kind == NEGEXP] <= 80).all():   # exp() of larger indices overflows or rounds
            sys.exit(f"from_gguf: {g}: -exp on a tensor too long to index through exp()")
        places[g] = (src, pos.astype(np.int64) - 1, kind)
    return names, places


def invert(names, places, tensors):
    """{gguf name: flat values} -> {hf name: tensor}, every element of every weight placed."""
    flat = [np.full(int(np.prod(s)), np.nan) for _, s in names]
    for g, (src, idx, kind) in places.items():
        if g not in tensors:
            sys.exit(f"from_gguf: the file has no tensor {g}")
        v = undo(kind, tensors[g])
        for t in np.unique(src):
            m = src == t
            flat[t][idx[m]] = v[m]
    out = {}
    for (k, s), f in zip(names, flat):
        if np.isnan(f).any():
            sys.exit(f"from_gguf: {int(np.isnan(f).sum())} elements of {k} are in no tensor of the file")
        out[k] = torch.from_numpy(f.astype(np.float32)).reshape(s)
    return out


def read_gguf(path):
    from gguf import GGUFReader
    from gguf.quants import dequantize
    r = GGUFReader(path)
    return r, {t.name: dequantize(t.data, t.tensor_type).astype(np.float64).reshape(-1) for t in r.tensors}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("llama_cpp_src")
    p.add_argument("gguf")
    p.add_argument("--tok", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--check", action="store_true")
    a = p.parse_args()
    reader, tensors = read_gguf(a.gguf)
    layout = layout_of_gguf(reader)
    with tempfile.TemporaryDirectory() as work:
        names, places = build_map(a.llama_cpp_src, layout, a.tok, work)
        if a.check:
            g = torch.Generator().manual_seed(0)
            rnd = {k: torch.randn(s, generator=g) * 0.05 for k, s in names}
            for k in rnd:
                if k.endswith("A_log"):
                    rnd[k] = torch.rand(rnd[k].shape, generator=g) * 2 - 1
            back = invert(names, places, convert(a.llama_cpp_src, rnd, a.tok, work, "check"))
            err = max((back[k] - rnd[k]).abs().max().item() for k in rnd)
            print(f"round trip through the converter: largest difference {err:.3g}")
            if err > 1e-6:
                sys.exit("from_gguf: the round trip does not give the weights back")
    sd = invert(names, places, tensors)
    from train import write_pack
    write_pack(sd, a.out, top_k=fm.top_k_of(layout))
    print(f"{a.gguf} ({layout}) -> {a.out}: {len(sd)} tensors")


if __name__ == "__main__":
    main()
