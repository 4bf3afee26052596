"""Packed weights (train.py pack) -> a transformers checkpoint dir with the `mtp.*` tensors,
the config llama.cpp's converter reads, and SmolLM2's tokenizer + chat template.

  python train/export.py --pack DIR --tok TOKDIR --out HFDIR [--tiny]
"""
import argparse
import glob
import json
import os
import sys

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as fm  # noqa: E402


def pack_top_k(d):
    """The experts per token a pack was trained with (train.write_pack's metadata; packs written
    before it was recorded were all top 4)."""
    from safetensors import safe_open
    ks = set()
    for f in glob.glob(os.path.join(d, "pack-*.safetensors")):
        with safe_open(f, "pt") as h:
            ks.add(int((h.metadata() or {}).get("experts_per_tok", fm.TOP_K)))
    if len(ks) > 1:
        raise SystemExit(f"{d}: its pack files record different experts per token: {sorted(ks)}")
    return ks.pop() if ks else fm.TOP_K


def unpack(d):
    raw = {}
    for f in sorted(glob.glob(os.path.join(d, "pack-*.safetensors"))):
        raw.update(load_file(f))
    sd = {}
    for k, v in raw.items():
        if k.endswith(".q8"):
            base = k[:-3]
            dd = raw[base + ".d"].float()                              # (..., in/32)
            q = v.float().reshape(*v.shape[:-1], v.shape[-1] // 32, 32)
            sd[base] = (q * dd.unsqueeze(-1)).reshape(v.shape)
        elif k.endswith(".bf16"):
            sd[k[:-5]] = v.float()
        elif k.endswith(".f32"):
            sd[k[:-4]] = v.float()
    return sd


def write_checkpoint(sd, tok_dir, out, tiny=False, top_k=fm.TOP_K):
    """A transformers checkpoint dir at `out` from trunk and `mtp.*` weights, routing `top_k`
    experts per token; returns the two counts."""
    from transformers import AutoTokenizer, Qwen4ExpForCausalLM
    mtp = {k: v for k, v in sd.items() if k.startswith("mtp.")}
    trunk = {k: v for k, v in sd.items() if not k.startswith("mtp.")}
    # the weights' own depth and expert count (train.py --layout), so any layout exports
    m = fm.load_trunk(Qwen4ExpForCausalLM(fm.flash_mini_config(tiny, layout=fm.layout_of(trunk, top_k))), trunk)
    m.save_pretrained(out, safe_serialization=True)
    # the MTP block in its own shard; the converter indexes every *.safetensors in the dir
    save_file({k: v.contiguous() for k, v in mtp.items()}, os.path.join(out, "model-mtp.safetensors"))
    idx_path = os.path.join(out, "model.safetensors.index.json")
    if os.path.exists(idx_path):
        idx = json.load(open(idx_path))
        for k in mtp:
            idx["weight_map"][k] = "model-mtp.safetensors"
        json.dump(idx, open(idx_path, "w"), indent=2)
    c = json.load(open(os.path.join(out, "config.json")))
    # the real checkpoint names its QSA layers "full_attention"; the converter keys the
    # compress ratios on that name
    c["layer_types"] = ["full_attention" if t != "linear_attention" else t for t in c["layer_types"]]
    c["mtp_num_hidden_layers"] = 1 if mtp else 0
    c["architectures"] = ["Qwen4ExpForCausalLM"]
    json.dump(c, open(os.path.join(out, "config.json"), "w"), indent=2)
    AutoTokenizer.from_pretrained(tok_dir).save_pretrained(out)
    return len(trunk), len(mtp)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pack", required=True)
    p.add_argument("--tok", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--tiny", action="store_true")
    a = p.parse_args()
    n_trunk, n_mtp = write_checkpoint(unpack(a.pack), a.tok, a.out, a.tiny, pack_top_k(a.pack))
    print(f"wrote {a.out}: {n_trunk} trunk + {n_mtp} mtp tensors")


if __name__ == "__main__":
    main()
