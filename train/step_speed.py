"""One trunk training step's time and loss on fixed weights and a fixed batch: run it once with
transformers' own PyTorch Gated DeltaNet and once with `fla` (flash-linear-attention) on the
path, which transformers then uses for the DeltaNet kernels, and compare the two lines.

  python train/step_speed.py [--pack DIR] [--data FILE.u16] [--batch 64 --seq 512 --steps 10]
  python train/step_speed.py --compare TORCH.json FLA.json --ok FILE

Without --pack the weights are a seeded random init, without --data the tokens are seeded
random ids: the comparison needs the same inputs in both runs, not trained ones.

Prints one JSON line: which DeltaNet implementation ran, the loss and gradient norm of the
first step (the same weights and batch either way, so they must agree to bf16 rounding), and
the median time of the timed steps (forward + backward, no optimizer, no teacher).
--compare reads two such lines and writes FILE (train/gpu.sh's signal to put fla on the path)
only if the second ran fla's kernels, its loss agrees to 0.2% and its gradient norm to 2%, and
its step is faster.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as fm  # noqa: E402
from train import load_pack  # noqa: E402


def deltanet_impl(wrapped):
    """The module of the function transformers' wrapper calls: its own fallback or fla's kernel
    (the wrapper keeps the fallback's name, so the closure is what tells)."""
    for c in wrapped.__closure__ or ():
        f = c.cell_contents
        if callable(f) and getattr(f, "__module__", "").startswith("fla"):
            return f.__module__
    return wrapped.__module__


def compare(torch_json, fla_json, ok_file):
    t = json.load(open(torch_json))
    try:
        f = json.load(open(fla_json))
    except (ValueError, OSError):
        print("fla: no result, the PyTorch DeltaNet stays")
        return
    same = (f["deltanet"].startswith("fla") and abs(f["loss"] - t["loss"]) <= 0.002 * t["loss"]
            and abs(f["grad_norm"] - t["grad_norm"]) <= 0.02 * t["grad_norm"])
    faster = f["step_ms"] < t["step_ms"]
    print(f"fla: same loss {same}, step {t['step_ms']:.0f} -> {f['step_ms']:.0f} ms "
          f"({t['step_ms'] / f['step_ms']:.2f}x)")
    if same and faster:
        with open(ok_file, "w") as fh:
            fh.write("ok\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--compare", nargs=2, metavar=("TORCH_JSON", "FLA_JSON"))
    p.add_argument("--ok", default="")
    p.add_argument("--pack", default="")
    p.add_argument("--data", default="")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args()
    if a.compare:
        return compare(*a.compare, a.ok)
    from transformers import Qwen4ExpForCausalLM
    from transformers.models.qwen4_exp import modeling_qwen4_exp as q4
    impl = deltanet_impl(q4.torch_chunk_gated_delta_rule)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    fm.patch_indexer()
    torch.manual_seed(0)
    weights = load_pack(a.pack) if a.pack else None
    m = Qwen4ExpForCausalLM(fm.flash_mini_config(layout=fm.layout_of(weights) if weights else ""))
    if weights:
        fm.load_trunk(m, weights)
    m = m.to(dev).train()
    rng = np.random.default_rng(0)
    if a.data:
        d = np.fromfile(a.data, dtype=np.uint16)
    else:
        d = rng.integers(0, fm.VOCAB, 1 << 20).astype(np.uint16)
    starts = rng.integers(0, len(d) - a.seq - 1, a.batch)
    x = torch.from_numpy(np.stack([d[s:s + a.seq] for s in starts]).astype(np.int64)).to(dev)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    times, first = [], None
    for i in range(a.steps + 2):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.time()
        with amp:
            loss = m(input_ids=x, labels=x, use_cache=False).loss
        m.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(m.parameters(), 1e9)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        if i == 0:
            first = (loss.item(), gn.item())
        if i >= 2:                      # the first steps compile kernels
            times.append(time.time() - t0)
    print(json.dumps({"deltanet": impl, "loss": first[0], "grad_norm": first[1],
                      "step_ms": 1000 * statistics.median(times), "batch": a.batch, "seq": a.seq,
                      "weights": a.pack or "random", "tokens": a.data or "random",
                      "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"}))


if __name__ == "__main__":
    main()
