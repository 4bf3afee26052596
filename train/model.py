"""flash-mini: a small qwen4exp (Qwen3.8-Flash-Next architecture) and its MTP block.

The trunk is transformers' own Qwen4ExpForCausalLM. The MTP block is written here because
transformers 5.23 has no MTP module (it drops `mtp.*` on load); it computes what llama.cpp
11434's `graph_mtp` (src/models/qwen4exp.cpp) computes, and its parameter names are the `mtp.*`
names llama.cpp's converter (conversion/qwen4exp.py + qwen.py's _QwenMtpMixin) maps:

  mtp.pre_fc_norm_embedding  -> blk.L.nextn.enorm      (RMS norm of the next token's embedding)
  mtp.pre_fc_norm_hidden     -> blk.L.nextn.hnorm      (RMS norm per hc stream of the trunk residual)
  mtp.fc_embedding|fc_hidden -> blk.L.nextn.eh_proj    (concatenated: [e ; h_s] -> n, per stream)
  mtp.layers.0.*             -> blk.L.*                (one full-attention layer with its own HC sites)
  mtp.hyper_connection_mixer -> blk.L.nextn.hc_head_*  (head mixer before the shared LM head)
"""
import copy

import torch
from torch import nn
import torch.nn.functional as F
from transformers import Qwen4ExpTextConfig
from transformers.models.qwen4_exp import modeling_qwen4_exp as q4

# SmolLM2's tokenizer: <|endoftext|> 0, <|im_start|> 1, <|im_end|> 2.
VOCAB = 49152
BOS_ID = 1
EOS_ID = 2

# The context llama.cpp is told the model was trained for. The QSA budget is set to it, so the
# indexer always selects every block and attention is exactly full causal attention (see below).
N_CTX = 4096


WIDTH = 256   # the residual width of every layout without a `wN` suffix


TOP_K = 4     # experts per token of every layout without a `kK` suffix


def parse_layout(layout: str) -> tuple[int, int, int, int, int]:
    """`LxE[hH][wN][kK]` (`12x20`, `8x32h8`, `8x32h8k8`): L trunk layers (a multiple of 4, for the
    3:1 pattern) of E experts each; H attention heads and DeltaNet value heads per layer (half as
    many kv / key heads; the shared expert 64 H units; default N / 64); residual width N (default
    256, a multiple of 256: llama.cpp's k-quants need rows of 256, and a narrower row falls back to
    Q5_0 / Q8_0, which made an 8x16w384 file 50 MB); K experts routed per token (default 4; no
    weight holds it, so a pack records it beside its weights: train.write_pack)."""
    spec = layout.lower()
    try:
        spec, top_k = spec.split("k") if "k" in spec else (spec, str(TOP_K))
        spec, width = spec.split("w") if "w" in spec else (spec, str(WIDTH))
        spec, heads = spec.split("h") if "h" in spec else (spec, str(int(width) // 64))
        n_layer, n_expert = (int(v) for v in spec.split("x"))
        width, heads, top_k = int(width), int(heads), int(top_k)
    except ValueError:
        raise ValueError(f"--layout {layout!r}: expected LAYERSxEXPERTS[hHEADS][wWIDTH][kTOPK], e.g. "
                         "12x20 or 8x32h8k8") from None
    if n_layer < 4 or n_layer % 4 or n_expert < 4:
        raise ValueError(f"--layout {layout!r}: layers must be a multiple of 4 (3 DeltaNet : 1 "
                         f"attention), experts at least 4 (top 4)")
    if width < WIDTH or width % 256 or heads < 2 or heads % 2:
        raise ValueError(f"--layout {layout!r}: width must be a multiple of 256, heads even")
    if not 1 <= top_k <= n_expert:
        raise ValueError(f"--layout {layout!r}: experts per token must be 1 to the expert count")
    return n_layer, n_expert, width, heads, top_k


def top_k_of(layout: str) -> int:
    """The experts routed per token of a `--layout` ("" is the default layout's)."""
    return parse_layout(layout)[4] if layout else TOP_K


def layout_name(n_layer: int, n_expert: int, width: int, heads: int, top_k: int = TOP_K) -> str:
    """parse_layout's inverse: the suffixes only where they differ from the defaults."""
    return (f"{n_layer}x{n_expert}" + (f"h{heads}" if heads != width // 64 else "")
            + (f"w{width}" if width != WIDTH else "") + (f"k{top_k}" if top_k != TOP_K else ""))


def layout_of(state_dict, top_k: int = TOP_K) -> str:
    """The layout of trunk weights (a pack, a checkpoint): layers counted, the rest read; the
    experts per token are not in any weight, so the caller passes them (export.pack_top_k)."""
    layers = {int(k.split(".")[2]) for k in state_dict if k.startswith("model.layers.")}
    n_expert, width = state_dict["model.layers.0.mlp.gate.weight"].shape   # (n_expert, n_embd)
    heads = state_dict["model.layers.0.linear_attn.in_proj_z.weight"].shape[0] // 64   # (nv * 64, n_embd)
    return layout_name(max(layers) + 1, n_expert, width, heads, top_k)


def flash_mini_config(tiny: bool = False, gate: str = "sigmoid", layout: str = "") -> Qwen4ExpTextConfig:
    """The seeds' layout at tens of millions of parameters.

    3 Gated DeltaNet : 1 full attention, S = 4 hyper-connection streams, 32 experts top 4 plus a
    gated shared expert, QSA keys on the attention layers, PLE off. `tiny` is the CPU smoke size
    for the PyTorch side only: llama.cpp 11434 crashes (SIGSEGV) loading a tiny file's expert
    tensors, so a llama.cpp check on the CPU uses the full width (a few steps are enough).
    `gate` is the DeltaNet output gate: llama.cpp's qwen4exp hard-codes sigmoid (the seeds'
    model); transformers defaults to hidden_act (silu), which llama.cpp cannot run. The first
    GPU run trained with silu by mistake; stage4 in gpu.sh distils it into sigmoid.
    `layout` (`LxE`) changes the depth and the expert count at the same width: the deeper
    variant the model card weighs (12x20: three attention layers, about the same size). `hH`
    sets the heads (8x32h8: twice the attention and DeltaNet heads and shared expert units) and
    `wN` the residual width (train/widen.py); the base layout is 4 heads at width 256.
    """
    n_layer = 4 if tiny else 8
    n_expert = 8 if tiny else 32
    width, heads, top_k = WIDTH, WIDTH // 64, TOP_K
    if layout:
        n_layer, n_expert, width, heads, top_k = parse_layout(layout)
    return Qwen4ExpTextConfig(
        vocab_size=VOCAB,
        hidden_size=64 if tiny else width,
        num_hidden_layers=n_layer,
        num_attention_heads=4 if tiny else heads,
        num_key_value_heads=2 if tiny else heads // 2,
        head_dim=64,
        linear_conv_kernel_dim=4,
        # llama.cpp's loader takes one head size (ssm.state_size) for both k and v heads
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        linear_num_key_heads=2 if tiny else heads // 2,
        linear_num_value_heads=4 if tiny else heads,
        num_experts=n_expert,
        num_experts_per_tok=2 if tiny else top_k,
        moe_intermediate_size=32 if tiny else 96,
        shared_expert_intermediate_size=64 if tiny else 64 * heads,
        norm_topk_prob=True,
        output_gate_type=gate,
        hc_count=4,
        hc_lowrank=16 if tiny else 64,
        ple_layer_ids=[],
        indexer_n_heads=2,
        indexer_kv_heads=1,
        indexer_head_dim=64,
        indexer_budget=N_CTX,
        indexer_compress_ratio=4,
        max_position_embeddings=N_CTX,
        # 64 rotated dims = 32 pairs = the seeds' sections 11 + 11 + 10, every pair turns
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 1_000_000.0,
            "partial_rotary_factor": 1.0,
            "mrope_section": [11, 11, 10],
            "mrope_interleaved": True,
        },
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        router_aux_loss_coef=0.01,
        output_router_logits=False,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=EOS_ID,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n_layer)],
    )


def load_trunk(model, weights):
    """Trunk weights (a pack's, a checkpoint's) into a Qwen4ExpForCausalLM: every weight but the
    tied LM head must be there and nothing else; the head is tied to the embedding after."""
    missing, unexpected = model.load_state_dict(weights, strict=False)
    assert set(missing) <= {"lm_head.weight"} and not unexpected, (missing, unexpected)
    model.tie_weights()
    return model


def _all_blocks_indexer(self, hidden_states, position_embeddings, attention_mask, past_key_values):
    """QSA indexer for training: select everything.

    With indexer_budget >= every context the model sees, the library's indexer selects every
    complete block plus the tail, i.e. the whole causal window, so its mask is all-true. The
    library's own loop is O(batch x query) in Python and its top-k gives the indexer no
    gradient, so the indexer weights stay at their init; llama.cpp's QSA with the same budget
    also keeps every block, so the file computes what was trained.
    """
    b, t = hidden_states.shape[:2]
    kv = attention_mask.shape[-1]
    if kv > self.token_budget:
        raise ValueError(f"context {kv} exceeds the QSA budget {self.token_budget}")
    return torch.ones((b, 1, t, kv), dtype=torch.bool, device=hidden_states.device)


def patch_indexer():
    q4.Qwen4ExpTextQSAIndexer.forward = _all_blocks_indexer


def causal_mask(b: int, t: int, device) -> torch.Tensor:
    # (b, 1, t, t) bool, True = attend
    return torch.ones(t, t, dtype=torch.bool, device=device).tril()[None, None].expand(b, 1, t, t)


class MTPBlock(nn.Module):
    """llama.cpp's qwen4exp MTP graph in PyTorch.

    Inputs: h (b, t, S*n), the trunk residual after the last layer (before the head mixer) at
    position p, and e (b, t, n), the embedding of the token at p+1. Output: the block's own
    residual (b, t, S*n) (the next draft step's h) and the head-mixed (b, t, n) for the LM head,
    which predicts the token at p+2.
    """

    def __init__(self, cfg: Qwen4ExpTextConfig):
        super().__init__()
        n, s = cfg.hidden_size, cfg.hc_count
        self.n, self.s = n, s
        mcfg = copy.deepcopy(cfg)
        mcfg.num_hidden_layers = cfg.num_hidden_layers + 1
        mcfg.layer_types = list(cfg.layer_types) + ["indexed_attention"]
        self.layers = nn.ModuleList([q4.Qwen4ExpTextDecoderLayer(mcfg, cfg.num_hidden_layers)])
        self.pre_fc_norm_embedding = q4.Qwen4ExpTextRMSNorm(n, eps=cfg.rms_norm_eps)
        self.pre_fc_norm_hidden = q4.Qwen4ExpTextRMSNorm(s * n, group_size=n, eps=cfg.rms_norm_eps)
        self.fc_embedding = nn.Linear(n, n, bias=False)
        self.fc_hidden = nn.Linear(n, n, bias=False)
        self.hyper_connection_mixer = q4.Qwen4ExpTextGatedResidual(cfg, use_combine=False)

    def forward(self, h, e, position_embeddings, mask):
        b, t, _ = h.shape
        en = self.pre_fc_norm_embedding(e)                                   # (b, t, n)
        hn = self.pre_fc_norm_hidden(h).unflatten(-1, (self.s, self.n))      # (b, t, S, n)
        x = self.fc_embedding(en).unsqueeze(-2) + self.fc_hidden(hn)         # (b, t, S, n)
        x = x.flatten(-2)                                                    # (b, t, S*n)
        x = self.layers[0](x, position_embeddings, attention_mask=mask, conv_mask=None)
        return x, self.hyper_connection_mixer(x)


def init_mtp(mtp: MTPBlock, trunk, std: float):
    """Same init rules as the trunk (transformers' _init_weights), then copy the trunk's last
    attention layer into the block's layer: a warm start that trains faster than random."""
    for m in mtp.modules():
        trunk._init_weights(m)
    last_attn = max(i for i, k in enumerate(trunk.config.layer_types) if k != "linear_attention")
    src = trunk.model.layers[last_attn].state_dict()
    mtp.layers[0].load_state_dict(src)
    nn.init.normal_(mtp.fc_embedding.weight, std=std)
    nn.init.normal_(mtp.fc_hidden.weight, std=std)
    mtp.hyper_connection_mixer.load_state_dict(trunk.model.hyper_connection_mixer.state_dict())


def trunk_hidden(trunk, input_ids):
    """Run the trunk; return (logits, h) with h (b, t, S*n) the residual after the last layer."""
    store = {}
    hook = trunk.model.layers[-1].register_forward_hook(lambda m, i, o: store.__setitem__("h", o))
    try:
        out = trunk(input_ids=input_ids, use_cache=False)
    finally:
        hook.remove()
    return out.logits, store["h"]


def mtp_loss(trunk, mtp, input_ids, depth: int, self_kl: float = 0.0):
    """MTP loss on the frozen trunk's hidden streams, chained `depth` steps as llama.cpp drafts.

    Step k (1-based) at position p reads h_{k-1}[p] (h_0 = trunk residual) and the embedding of
    token p+k, and predicts token p+k+1. With `self_kl` > 0 the loss mixes in the KL divergence
    to the trunk's own distribution at p+k (which also predicts p+k+1): greedy speculative
    decoding accepts a draft when it equals the trunk's argmax, so the trunk, not the data's
    sampled token, is what a draft has to match. Returns (total loss, per-step losses, per-step
    top-1 agreement with the trunk, mean accepted run length of the `depth` chained drafts).
    """
    b, t = input_ids.shape
    with torch.no_grad():
        tl, h = trunk_hidden(trunk, input_ids)
        emb = trunk.model.embed_tokens(input_ids)
    pos = torch.arange(t, device=input_ids.device)[None].expand(b, -1)
    cos_sin = trunk.model.rotary_emb(emb, pos[None].expand(3, -1, -1))
    losses, agree, run = [], [], None
    tt_min = t - depth - 1
    for k in range(1, depth + 1):
        tt = t - k - 1                                    # positions with a target
        hk = h[:, :tt]
        ek = emb[:, k:k + tt]
        pe = tuple(x[:, :tt] for x in cos_sin)
        hk, mixed = mtp(hk, ek, pe, causal_mask(b, tt, input_ids.device))
        logits = trunk.lm_head(mixed).float()
        tgt = input_ids[:, k + 1:k + 1 + tt]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
        with torch.no_grad():
            tk = tl[:, k:k + tt].float()                  # trunk rows p+k: predict p+k+1
            hit = (logits.argmax(-1) == tk.argmax(-1))[:, :tt_min]
            run = hit.float() if run is None else run * hit.float()
            agree.append(hit.float().mean().item())
            run_sum = run if k == 1 else run_sum + run
        if self_kl > 0:
            kl = F.kl_div(F.log_softmax(logits, -1), F.log_softmax(tk, -1), log_target=True,
                          reduction="none").sum(-1).mean()
            loss = self_kl * kl + (1 - self_kl) * loss
        losses.append(loss)
        h = hk
    return sum(losses) / len(losses), [x.item() for x in losses], agree, run_sum.mean().item()
