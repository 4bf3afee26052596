"""A trained flash-mini pack grown deeper (and its experts pruned) so the deeper layout starts
from what the shallow one learned instead of from random weights.

  python train/grow.py PACK DATA.u16 OUT_PACK [--layout 12x20] [--windows 16]

New layers come in whole DDDQ groups. Each is a copy of the old group it is put in front of, with
every projection that writes into the residual streams zeroed (DeltaNet out_proj, attention o_proj,
the experts' and the shared expert's down_proj). A hyper-connection layer adds its block's output
to the streams (hyper_input + injection), so a zero output makes the new layer exactly the
identity: the grown model computes what the old one did, and training then opens the new layers
up from a working model (the copied insides give them useful features from the first step).
Experts are pruned per layer to the ones that carry the most routed weight over DATA's held tail
(the same tail train.py never trains on); the MTP block's layer likewise, measured on its own
router while it drafts depth 1. The router rows go with their experts.

It prints the held CE of the old and the grown model on the same windows; with as many experts
as before (pure growth) the two models' logits must agree, and it stops if they do not.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as fm  # noqa: E402
from export import unpack  # noqa: E402
from train import Batches, write_pack  # noqa: E402

# the projections that write a layer's output into the residual streams: zero in a new layer
WRITERS = ("linear_attn.out_proj.weight", "self_attn.o_proj.weight", "mlp.experts.down_proj",
           "mlp.shared_expert.down_proj.weight")
EXPERT_ROWS = ("mlp.gate.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj")   # dim 0 = expert


def held_windows(path, n, seq=512):
    """n windows of the data file's held tail (the 1% train.py never trains on), spread evenly over
    the conversation starts there that train.py --align would use."""
    b = Batches(path, seq, n, 0, 0.01, align=True)
    s = b.starts[True]
    if len(s) < n:
        raise SystemExit(f"grow: {path}: only {len(s)} conversation starts in the held tail, need {n}")
    idx = s[np.linspace(0, len(s) - 1, n).astype(int)]
    return torch.from_numpy(np.stack([b.hold[i:i + seq] for i in idx]).astype(np.int64))


def build(trunk_sd):
    from transformers import Qwen4ExpForCausalLM
    return fm.load_trunk(Qwen4ExpForCausalLM(fm.flash_mini_config(layout=fm.layout_of(trunk_sd))),
                         trunk_sd).eval()


def routed_mass(gates, run):
    """Per router module: the routed weight each expert took over `run()` (softmax, top-k, renorm)."""
    mass, hooks = {}, []
    for name, g in gates.items():
        mass[name] = torch.zeros(g.weight.shape[0], dtype=torch.float64)

        def hook(m, i, o, name=name):
            _, scores, idx = o                                   # (tokens, k) each
            mass[name].index_add_(0, idx.reshape(-1), scores.reshape(-1).double())
        hooks.append(g.register_forward_hook(hook))
    try:
        with torch.no_grad():
            run()
    finally:
        for h in hooks:
            h.remove()
    return mass


def held_ce(model, ids):
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits[:, :-1].float()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)).item(), logits


def placement(old_groups, new_groups):
    """(kind, old group) for every group of the grown trunk in order: a "new" group is a copy of the
    old group after it; new groups are spread evenly between the old ones, never in front of the
    first (it reads the embedding)."""
    before = {round((i + 1) * old_groups / (new_groups + 1)) for i in range(new_groups)}
    if len(before) < new_groups or 0 in before:
        raise SystemExit(f"grow: cannot spread {new_groups} new groups between {old_groups} old ones")
    order = []
    for g in range(old_groups):
        if g in before:
            order.append(("new", g))
        order.append(("old", g))
    return order


def cli(layout):
    """The command line grow.py and widen.py share: (args, trunk weights, `mtp.*` weights unprefixed)."""
    p = argparse.ArgumentParser()
    p.add_argument("pack")
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("--layout", default=layout)
    p.add_argument("--windows", type=int, default=16, help="held windows of 512 tokens for usage and CE")
    p.add_argument("--seed", type=int, default=0, help="widen.py: the fresh init's seed")
    a = p.parse_args()
    sd = unpack(a.pack)
    trunk = {k: v for k, v in sd.items() if not k.startswith("mtp.")}
    return a, trunk, {k[4:]: v for k, v in sd.items() if k.startswith("mtp.")}


def experts_kept(old, mtp, ids, n_keep):
    """Per router (trunk layer i, and "mtp": the MTP block's one layer, if there is a block,
    measured while it drafts depth 1), the n_keep experts that carry the most routed weight over
    ids, in id order; printed."""
    mass = routed_mass({i: layer.mlp.gate for i, layer in enumerate(old.model.layers)},
                       lambda: old(input_ids=ids, use_cache=False))
    if mtp is not None:
        mass["mtp"] = routed_mass({"mtp": mtp.layers[0].mlp.gate},
                                  lambda: fm.mtp_loss(old, mtp, ids, depth=1))["mtp"]
    keep = {k: torch.sort(torch.topk(m, n_keep).indices).values for k, m in mass.items()}
    for k, m in mass.items():
        print(f"layer {k}: keeps {n_keep} of {len(m)} experts, {m[keep[k]].sum() / m.sum():.1%} of the routed weight")
    return keep


def prepare(tool, default, ok, why):
    """What grow.py and widen.py do first: the command line; the layout check (ok(old, new) on
    parse_layout's tuples, else stop with `why`); the held windows; the old model and MTP block,
    the experts each router keeps and the held CE. Returns them in a namespace."""
    a, trunk, mtp_sd = cli(default)
    old_layout = fm.layout_of(trunk)
    old, new = fm.parse_layout(old_layout), fm.parse_layout(a.layout)
    if not ok(old, new):
        raise SystemExit(f"{tool}: {a.layout} from {old_layout}: {why}")
    ids = held_windows(a.data, a.windows)
    model = build(trunk)
    mtp = None
    if mtp_sd:
        mtp = fm.MTPBlock(model.config)
        mtp.load_state_dict(mtp_sd)
        mtp.eval()
    keep = experts_kept(model, mtp, ids, new[1])
    ce, logits = held_ce(model, ids)
    return argparse.Namespace(a=a, trunk=trunk, mtp_sd=mtp_sd, mtp=mtp, old_layout=old_layout, old=old,
                              new=new, ids=ids, model=model, keep=keep, ce=ce, logits=logits)


def main():
    p = prepare("grow", "12x20", lambda o, n: n[0] >= o[0] and n[1] <= o[1] and n[2:] == o[2:],
                "layers can only grow, experts only shrink, the width and heads stay (train/widen.py widens)")
    a, trunk, mtp_sd, ids, keep = p.a, p.trunk, p.mtp_sd, p.ids, p.keep
    (old_l, old_e, _, _, _), (new_l, new_e, _, _, _) = p.old, p.new
    ce_old, logits_old = p.ce, p.logits

    def layer_weights(src, prefix_from, prefix_to, kept, zero):
        out = {}
        for k, v in src.items():
            if not k.startswith(prefix_from):
                continue
            rest = k[len(prefix_from):]
            if rest in EXPERT_ROWS:
                v = v[kept]
            if zero and rest in WRITERS:
                v = torch.zeros_like(v)
            out[prefix_to + rest] = v.clone()
        return out

    grown = {k: v.clone() for k, v in trunk.items() if not k.startswith("model.layers.")}
    j = 0
    for kind, g in placement(old_l // 4, (new_l - old_l) // 4):
        for i in range(4 * g, 4 * g + 4):
            grown.update(layer_weights(trunk, f"model.layers.{i}.", f"model.layers.{j}.", keep[i], kind == "new"))
            j += 1
        print(f"layers {j - 4}-{j - 1}: {'new, a zero-output copy of' if kind == 'new' else 'old'} layers {4 * g}-{4 * g + 3}")
    if mtp_sd:   # the block's one layer loses the same kind of rows; the rest is copied
        grown.update({"mtp." + k: v.clone() for k, v in mtp_sd.items() if not k.startswith("layers.0.")})
        grown.update(layer_weights(mtp_sd, "layers.0.", "mtp.layers.0.", keep["mtp"], False))

    new = build({k: v for k, v in grown.items() if not k.startswith("mtp.")})
    ce_new, logits_new = held_ce(new, ids)
    diff = (logits_new - logits_old).abs().max().item()
    print(f"held CE over {ids.numel()} tokens of {os.path.basename(a.data)}: {old_l}x{old_e} {ce_old:.4f}, "
          f"grown {new_l}x{new_e} {ce_new:.4f} (largest logit change {diff:.2e})")
    if new_e == old_e and diff > 1e-3:
        raise SystemExit(f"grow: the grown model's logits differ from the old one's by {diff:.2e}: "
                         "a new layer is not the identity")
    write_pack(grown, a.out)


if __name__ == "__main__":
    main()
