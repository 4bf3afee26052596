"""A trained flash-mini pack made wider (and its experts pruned) so the wider layout starts from
what the narrow one learned instead of from random weights.

  python train/widen.py PACK DATA.u16 OUT_PACK [--layout 8x32h8] [--windows 16]

The deeper trunk (grow.py) lowered the loss without using the question more, so this widens
instead (model.parse_layout): more attention and DeltaNet heads (head_dim 64; half as many kv /
key heads) and shared expert units (64 per head) at the same residual width (`hH`), or a wider
residual too (`wN`).
The wide model starts as a seeded fresh init; every old weight is copied into the slots its
indices have in the wide one, and the rest stays fresh, except:
  - every projection that writes into the residual streams (DeltaNet out_proj, attention o_proj,
    the experts' and the shared expert's down_proj, the MTP block's fc_embedding and fc_hidden)
    is zero outside the old block, so new heads and units add nothing and the new residual
    dimensions stay zero;
  - the embedding's new columns are zero, so those dimensions start at zero;
  - every RMS norm over the residual (the hyper-connection norms per stream, the MTP block's
    input norms) is scaled by sqrt(256 / N): the mean square of a vector padded with zeros falls
    by that factor, and the (1 + weight) gain undoes it.
So the wide model computes what the narrow one did (to the norms' eps), and training opens the new
dimensions up (their readers are fresh, so the zeroed writers get gradient from the first step).
Experts are pruned per layer as grow.py prunes them (routed weight over DATA's held tail). It
prints the held CE of both models; with as many experts as before they must agree.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as fm  # noqa: E402
from grow import EXPERT_ROWS, WRITERS, held_ce, prepare  # noqa: E402
from train import write_pack  # noqa: E402

MTP_WRITERS = ("fc_embedding.weight", "fc_hidden.weight")
# RMS norms whose input is residual-wide (per stream for the hyper-connection ones)
RESIDUAL_NORMS = ("hc_norm.weight", "pre_fc_norm_hidden.weight", "pre_fc_norm_embedding.weight")


def axis_map(key, axis, old_n, new_n, old_w, new_w, heads):
    """Where index i of `key`'s axis `axis` (old_n long) goes in the wide tensor (new_n long)."""
    if old_n == new_n:
        return torch.arange(old_n)
    s = old_n // old_w
    if old_n == s * old_w and s > 1 and ("hyper_connection" in key or "pre_fc_norm_hidden" in key):
        # S streams of the residual side by side (stream-major): stream s, dim d -> s * new_w + d
        return (torch.arange(s)[:, None] * new_w + torch.arange(old_w)[None]).reshape(-1)
    if axis == 0 and ("linear_attn.in_proj_qkv" in key or "linear_attn.conv1d" in key):
        # [q | k | v] = [nk * 64 | nk * 64 | nv * 64]: each part keeps its old heads first
        (old_k, old_v), (new_k, new_v) = heads
        return torch.cat([torch.arange(old_k * 64), new_k * 64 + torch.arange(old_k * 64),
                          2 * new_k * 64 + torch.arange(old_v * 64)])
    # residual dims, heads (q_proj rows are per head [q ; gate]), DeltaNet value heads, shared
    # expert units: the old ones first, the new ones after
    return torch.arange(old_n)


def place(key, old, fresh, old_w, new_w, heads):
    """The old tensor put into the fresh one's slots; returns (wide tensor, mask of the old slots)."""
    out = fresh.clone()
    idx = tuple(axis_map(key, a, n, fresh.shape[a], old_w, new_w, heads) for a, n in enumerate(old.shape))
    grid = torch.meshgrid(*idx, indexing="ij")
    out[grid] = old
    mask = torch.zeros_like(out, dtype=torch.bool)
    mask[grid] = True
    return out, mask


def widen_part(old_sd, fresh_sd, keep, old_w, new_w, heads):
    """Old weights (one module's names, experts not yet pruned) into a fresh wide state dict."""
    c = math.sqrt(old_w / new_w)
    out = {}
    for k, fresh in fresh_sd.items():
        if k == "lm_head.weight":
            continue
        old = old_sd[k]
        layer = k.split("layers.")[1].split(".")[0] if "layers." in k else None
        rest = k.split(f"layers.{layer}.", 1)[1] if layer is not None else k
        if rest in EXPERT_ROWS:   # keep: by trunk layer number, "mtp" for the block's layer
            old = old[keep[int(layer) if k.startswith("model.") else "mtp"]]
        if rest.endswith(RESIDUAL_NORMS):
            old = c * (1 + old) - 1
            fresh = c * (1 + fresh) - 1
        w, mask = place(k, old, fresh, old_w, new_w, heads)
        if rest in WRITERS or rest in MTP_WRITERS or k == "model.embed_tokens.weight":
            w = torch.where(mask, w, torch.zeros_like(w))
        out[k] = w
    return out


def main():
    p = prepare("widen", "8x32h8", lambda o, n: n[0] == o[0] and n[1] <= o[1] and n[2] >= o[2] and n[3] >= o[3]
                and n[2:] != o[2:], "the heads or the width must grow and neither shrink, the layers stay, "
                "experts can only shrink (train/grow.py deepens)")
    from transformers import Qwen4ExpForCausalLM
    a, trunk, mtp_sd, ids, keep, old, old_layout = p.a, p.trunk, p.mtp_sd, p.ids, p.keep, p.model, p.old_layout
    (_, old_e, old_w, _, _), (_, new_e, new_w, _, _) = p.old, p.new
    ce_old, logits_old = p.ce, p.logits
    if mtp_sd:
        with torch.no_grad():
            mtp_old = fm.mtp_loss(old, p.mtp, ids, depth=1)[0].item()

    cfg = fm.flash_mini_config(layout=a.layout)
    heads = ((old.config.linear_num_key_heads, old.config.linear_num_value_heads),
             (cfg.linear_num_key_heads, cfg.linear_num_value_heads))
    torch.manual_seed(a.seed)
    fresh = Qwen4ExpForCausalLM(cfg)
    wide = widen_part(trunk, fresh.state_dict(), keep, old_w, new_w, heads)
    new = fm.load_trunk(Qwen4ExpForCausalLM(cfg), wide).eval()
    if mtp_sd:
        fresh_mtp = fm.MTPBlock(cfg)
        for m in fresh_mtp.modules():
            fresh._init_weights(m)
        wide_mtp = widen_part(mtp_sd, fresh_mtp.state_dict(), keep, old_w, new_w, heads)
        mtp_new = fm.MTPBlock(cfg)
        mtp_new.load_state_dict(wide_mtp)
        mtp_new.eval()
        with torch.no_grad():
            mtp_wide = fm.mtp_loss(new, mtp_new, ids, depth=1)[0].item()
        print(f"MTP depth-1 CE: {old_layout} {mtp_old:.4f}, {a.layout} {mtp_wide:.4f}")
        wide.update({"mtp." + k: v for k, v in wide_mtp.items()})

    ce_new, logits_new = held_ce(new, ids)
    moved = (logits_new - logits_old).abs().amax(-1)            # (windows, 511) per position
    frac = (moved > 1e-2).float().mean().item()
    print(f"held CE over {ids.numel()} tokens of {os.path.basename(a.data)}: {old_layout} {ce_old:.4f}, "
          f"{a.layout} {ce_new:.4f}; logits moved > 0.01 at {frac:.2%} of the positions "
          f"(median largest change {moved.median().item():.1e})")
    # The norms' eps weighs more once the mean square falls by 256 / N (the embedding's entries
    # are small), and float sums run in another order: the median position moves by 5e-4 at
    # width 384 and 1.1e-3 at 512 (stage 9, 2026-12-06), and a router near a tie can then pick
    # another expert at one position, which the sequence mixers carry on. A slot that is not
    # silent moves every position by far more.
    if new_e == old_e and (moved.median().item() > 1e-2 or abs(ce_new - ce_old) > 2e-3):
        raise SystemExit(f"widen: the wide model is not the narrow one: logits moved at {frac:.1%} "
                         f"of the positions, held CE {ce_old:.4f} -> {ce_new:.4f}")
    n_old = sum(v.numel() for v in trunk.values())
    n_new = sum(v.numel() for k, v in wide.items() if not k.startswith("mtp."))
    print(f"trunk parameters {n_old / 1e6:.2f} M -> {n_new / 1e6:.2f} M")
    write_pack(wide, a.out)


if __name__ == "__main__":
    main()
