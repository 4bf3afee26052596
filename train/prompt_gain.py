"""How much a model's answers depend on the question: the prompt gain on held-out conversations.

  python train/prompt_gain.py DATA.u16 TOKDIR N MODEL [MODEL ...]
      MODEL: an HF checkpoint dir (train/export.py) or a .gguf that transformers reads (the teacher);
      with several models, each one after the first is also compared with the first, paired

For N teacher conversations from DATA's held-out tail (train.py's last 1%, never trained on),
each answer is scored twice under the chat template: after its own question, and after the
question of another held conversation (a fixed derangement). The prompt gain is the mean of
NLL(answer | other question) - NLL(answer | own question), in nats per answer token. A model that
ignores the question gains 0; the teacher wrote these answers to their questions, so its gain is
the yardstick. Perplexity alone cannot show this: fluent off-topic text scores well.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as fm  # noqa: E402
from train import load_teacher, split_held  # noqa: E402


def held_conversations(data, tok, n):
    _, hold = split_held(np.fromfile(data, dtype=np.uint16), 0.01)
    text = tok.decode(hold.tolist())
    out = []
    for c in text.split("<|im_start|>user\n")[1:]:
        if "<|im_start|>assistant\n" not in c:
            continue
        q, rest = c.split("<|im_end|>", 1)
        a = rest.split("<|im_start|>assistant\n", 1)[1].split("<|im_end|>")[0]
        if a.strip():
            out.append((q, a))
    return out[1:n + 1]   # the first may have lost its start


def load(path):
    fm.patch_indexer()
    if path.endswith(".gguf"):
        return load_teacher(path, "cpu", torch.float32)
    from transformers import Qwen4ExpForCausalLM
    return Qwen4ExpForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def answer_ids(tok, a):
    """The answer's tokens as answer_nll scores them: its text and the `<|im_end|>` that ends it."""
    return tok(a + "<|im_end|>", add_special_tokens=False).input_ids


def answer_nll(m, tok, q, a):
    p = tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
    pi = tok(p, add_special_tokens=False).input_ids
    ai = answer_ids(tok, a)
    x = torch.tensor([pi + ai])
    with torch.no_grad():
        logits = m(input_ids=x, use_cache=False).logits[0, len(pi) - 1:-1].float()
    return F.cross_entropy(logits, torch.tensor(ai), reduction="none").numpy()   # (answer tokens,)


def main():
    data, tok_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tok_dir)
    conv = held_conversations(data, tok, n)
    wrong = [(i + 1 + i % 7) % len(conv) for i in range(len(conv))]   # never i itself
    print(f"{len(conv)} held conversations from {data}")
    gains = {}
    for path in sys.argv[4:]:
        m = load(path)
        own = [answer_nll(m, tok, q, a) for q, a in conv]
        oth = [answer_nll(m, tok, conv[j][0], a) for (q, a), j in zip(conv, wrong)]
        g = np.array([(b - a).mean() for a, b in zip(own, oth)])   # per answer
        gains[path] = g
        print(f"{path}: NLL own {np.mean([a.mean() for a in own]):.3f}, other question "
              f"{np.mean([b.mean() for b in oth]):.3f}, prompt gain {g.mean():.3f} ± "
              f"{g.std(ddof=1) / np.sqrt(len(g)):.3f} nats/token, positive for {(g > 0).mean() * 100:.0f}%")
        # where in the answer the question helps: the opening tokens name the subject
        for lo, hi in ((0, 16), (16, 64), (64, 10**6)):
            d = np.concatenate([(b - a)[lo:hi] for a, b in zip(own, oth)])
            print(f"    answer tokens {lo}..{min(hi, 10**6) if hi < 10**6 else 'end'}: gain {d.mean():.3f} "
                  f"over {len(d)} tokens")
    # the same answers under every model, so a difference between two models is paired: its
    # standard error is far smaller than either model's own spread over the answers
    first = sys.argv[4]
    for path in sys.argv[5:]:
        d = gains[path] - gains[first]
        print(f"{path} - {first}: gain {d.mean():+.3f} ± {d.std(ddof=1) / np.sqrt(len(d)):.3f} "
              f"(paired), higher for {(d > 0).mean() * 100:.0f}% of the answers")


if __name__ == "__main__":
    main()
