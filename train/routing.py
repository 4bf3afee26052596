"""Expert routing of flash-mini over a text: the trace file and the per-layer histogram.

  python train/routing.py HFDIR TEXT OUT.tsv OUT.png

The router is the HF model's (the same weights as the GGUF; llama.cpp's gating is the same
softmax -> top-k -> renormalise, see docs/qwen4exp.md), run over the whole text at once.
Trace lines: layer <TAB> position <TAB> token id <TAB> expert ids in slot order (comma-separated).
"""
import sys

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import model as fm  # noqa: E402


def main():
    hf, text, out_tsv, out_png = sys.argv[1:5]
    fm.patch_indexer()
    from transformers import AutoTokenizer, Qwen4ExpForCausalLM
    tok = AutoTokenizer.from_pretrained(hf)
    m = Qwen4ExpForCausalLM.from_pretrained(hf).eval()
    ids = tok(open(text).read()).input_ids
    with torch.no_grad():
        out = m(input_ids=torch.tensor([ids]), output_router_logits=True, use_cache=False)
    k, e = m.config.num_experts_per_tok, m.config.num_experts
    counts = np.zeros((len(out.router_logits), e), dtype=np.int64)
    with open(out_tsv, "w") as f:
        f.write("# flash-mini expert trace: layer\tposition\ttoken\texperts (slot order)\n")
        for layer, lg in enumerate(out.router_logits):
            top = torch.softmax(lg.float(), -1).topk(k, -1).indices.numpy()   # (tokens, k)
            for pos, row in enumerate(top):
                f.write(f"{layer}\t{pos}\t{ids[pos]}\t{','.join(map(str, row))}\n")
                counts[layer, row] += 1
    frac = counts / counts.sum(1, keepdims=True)
    ent = -(frac * np.log2(np.maximum(frac, 1e-12))).sum(1)
    for layer in range(len(counts)):
        print(f"layer {layer}: max share {frac[layer].max():.3f}, min {frac[layer].min():.3f}, "
              f"entropy {ent[layer]:.2f} bits (uniform {np.log2(e):.2f}), unused {(counts[layer] == 0).sum()}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(counts), 1, figsize=(9, 1.3 * len(counts)), sharex=True)
    for layer, ax in enumerate(axes):
        ax.bar(np.arange(e), frac[layer] * 100, color="C0" if m.config.layer_types[layer] == "linear_attention" else "C1")
        ax.axhline(100 / e, color="gray", lw=0.6, ls="--")
        ax.set_ylabel(f"L{layer}\n%", rotation=0, labelpad=18, fontsize=8)
        ax.tick_params(labelsize=7)
    axes[-1].set_xlabel("expert id (share of the token's 4 slots over the text; dashed: uniform)")
    fig.suptitle(f"flash-mini routing over {len(ids)} tokens of {text.rsplit('/', 1)[-1]} "
                 "(blue: DeltaNet layer, orange: attention layer)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out_png, dpi=90)
    print(f"{len(ids)} tokens, wrote {out_tsv} and {out_png}")


if __name__ == "__main__":
    main()
