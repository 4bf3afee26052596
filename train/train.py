"""flash-mini training: teacher data, trunk (CE + KL to the teacher), MTP, packing.

  python train/train.py gen   --teacher DIR/FILE.gguf --tok DIR --out data.u16 --seconds S [--self-questions N]
  python train/train.py trunk --data data.u16 --work DIR --seconds S [--teacher ...]
  python train/train.py mtp   --data data.u16 --work DIR --seconds S
  python train/train.py pack  --work DIR --out DIR        (int8 blocks, <= 16 MiB files)
Checkpoints (model + optimizer + step) go to --work every --ckpt-every seconds; a rerun with
the same --work resumes. See docs/flash-mini.md for the commands that made the shipped file.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as fm  # noqa: E402
import prompts as pr  # noqa: E402


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def load_teacher(path, device, dtype=torch.bfloat16):
    from transformers import AutoModelForCausalLM
    d, f = os.path.split(path)
    t = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    return t.to(device=device, dtype=dtype).eval()


def split_held(d, share):
    """(trained head, held-out tail) of one data file: the tail is its last `share` of tokens.
    held.py and prompt_gain.py read the same tail, so their texts are never trained on."""
    n_hold = int(len(d) * share)
    return d[:len(d) - n_hold], d[len(d) - n_hold:]


def conversation_starts(d, mark):
    """Where each conversation of a flat token stream starts: every place the pair `mark` (the
    stream's first two tokens, `<|im_start|>system`) occurs."""
    return np.flatnonzero((d[:-1] == mark[0]) & (d[1:] == mark[1]))


def sample(teacher, tok, users, dev, max_new, temp):
    """The teacher's sampled replies to user turns: (prompt ids, reply ids without <|im_end|>)."""
    texts = [tok.apply_chat_template([{"role": "user", "content": u}], tokenize=False,
                                     add_generation_prompt=True) for u in users]
    enc = tok(texts, return_tensors="pt", padding=True).to(dev)
    with torch.no_grad():
        g = teacher.generate(**enc, max_new_tokens=max_new, do_sample=True, temperature=temp,
                             top_p=0.95, pad_token_id=fm.EOS_ID, eos_token_id=fm.EOS_ID)
    out = []
    for row, m in zip(g, enc.attention_mask):
        prompt = row[:enc.input_ids.shape[1]][m.bool()].tolist()
        resp = row[enc.input_ids.shape[1]:].tolist()
        if fm.EOS_ID in resp:
            resp = resp[:resp.index(fm.EOS_ID)]
        out.append((prompt, resp))
    return out


def self_questions(a, teacher, tok, dev, t0):
    """Questions the teacher writes itself (prompts.META), cleaned and deduplicated; at most
    --self-questions of them, in at most half of --seconds (the answers need the rest)."""
    metas, qs, seen, j = pr.meta_prompts(a.n_prompts, seed=a.seed), [], set(), 0
    while len(qs) < a.self_questions and j < len(metas) and time.time() - t0 < a.seconds / 2:
        batch = metas[j:j + a.batch]
        j += len(batch)
        for _, resp in sample(teacher, tok, batch, dev, 48, 0.9):
            q = pr.clean_question(tok.decode(resp))
            if q and q.lower() not in seen:
                seen.add(q.lower())
                qs.append(q)
        log(f"questions: {len(qs)} kept of {j} asked")
    with open(a.out + ".questions.txt", "w") as f:
        f.write("\n".join(qs) + "\n")
    return qs[:a.self_questions]


def tokenizer(a):
    """SmolLM2's tokenizer from --tok DIR, else from the teacher GGUF itself (its tokenizer and
    chat template), written to DIR when one is named."""
    from transformers import AutoTokenizer
    d, f = os.path.split(a.teacher)
    if not a.tok:
        return AutoTokenizer.from_pretrained(d, gguf_file=f)
    if not os.path.exists(os.path.join(a.tok, "tokenizer.json")):
        AutoTokenizer.from_pretrained(d, gguf_file=f).save_pretrained(a.tok)
    return AutoTokenizer.from_pretrained(a.tok)   # as written there: what gen has always used


def content_tokens(tok):
    """The ids of the tokens that start a word of 4 letters or more after a space: a question's
    words, for question_share (a word's later pieces, "ation", are left out: they would match
    across unrelated words)."""
    out = set()
    for i, t in enumerate(tok.convert_ids_to_tokens(list(range(len(tok))))):
        w = t[1:] if t and t.startswith("\u0120") else ""   # byte-level BPE's leading space
        if len(w) >= 4 and w.isascii() and w.isalpha():
            out.add(i)
    return frozenset(out)


def cmd_gen(a):
    dev = torch.device(a.device)
    tok = tokenizer(a)
    tok.padding_side = "left"
    teacher = load_teacher(a.teacher, dev)
    t0 = time.time()
    torch.manual_seed(a.seed)
    if a.self_questions:
        ps = self_questions(a, teacher, tok, dev, t0)
        if not ps:
            sys.exit(f"gen: the teacher wrote no usable question (see {a.out}.questions.txt)")
    else:
        ps = pr.prompts(a.n_prompts, seed=a.seed)
    out, n_tok, i = [], 0, 0
    while i < len(ps) and time.time() - t0 < a.seconds:
        batch = ps[i:i + a.batch]
        i += len(batch)
        for prompt, resp in sample(teacher, tok, batch, dev, a.max_new, a.temp):
            # a conversation as the chat template writes it: ... <|im_end|>\n
            conv = prompt + resp + [fm.EOS_ID] + tok("\n").input_ids
            out.append(np.asarray(conv, dtype=np.uint16))
            n_tok += len(conv)
        log(f"gen {i} prompts, {n_tok} tokens, {n_tok / (time.time() - t0):.0f} tok/s")
    np.concatenate(out).tofile(a.out)
    print(tok.decode(out[0].tolist()))
    log(f"wrote {a.out}: {n_tok} tokens from {len(out)} conversations")


class Batches:
    """Random windows of a flat token stream (conversations back to back)."""

    def __init__(self, paths, seq, batch, seed, holdout, align=False):
        # each file keeps its own last `holdout` share out of training, so a file's held tail
        # (train/held.py, the model card's held text) stays unseen when later files join it
        heads, tails = [], []
        for p in paths.split(","):
            head, tail = split_held(np.fromfile(p, dtype=np.uint16), holdout)
            heads.append(head)
            tails.append(tail)
        self.train, self.hold = np.concatenate(heads), np.concatenate(tails)
        self.seq, self.batch = seq, batch
        self.rng = np.random.default_rng(seed)
        self.starts = None
        if align:
            # windows start where a conversation starts (the data's first two tokens,
            # `<|im_start|>system`), so every answer token sees its question; random starts
            # cut the question off for about a third of the answer tokens (docs/flash-mini.md)
            self.starts = {h: self._starts(d, self.train[:2]) for h, d in ((False, self.train), (True, self.hold))}
            for h, s in self.starts.items():
                if len(s) == 0:
                    part = "held-out tail" if h else "training part"
                    sys.exit(f"--align: no conversation start {seq + 1} tokens before the end of the {part} "
                             f"of {paths}")

    def _starts(self, d, mark):
        s = conversation_starts(d, mark)
        return s[s < len(d) - self.seq - 1]

    def get(self, device, hold=False):
        d = self.hold if hold else self.train
        if self.starts is not None:
            idx = self.rng.choice(self.starts[hold], self.batch)
        else:
            idx = self.rng.integers(0, len(d) - self.seq - 1, self.batch)
        x = np.stack([d[i:i + self.seq] for i in idx]).astype(np.int64)
        return torch.from_numpy(x).to(device)


def new_trunk(a, gate="sigmoid"):
    from transformers import Qwen4ExpForCausalLM
    fm.patch_indexer()
    return Qwen4ExpForCausalLM(fm.flash_mini_config(a.tiny, gate, a.layout))


def load_pack(d, prefix=""):
    """Weights from a pack dir (train.py pack), keys under `prefix` with the prefix removed."""
    from export import unpack
    return {k[len(prefix):]: v for k, v in unpack(d).items() if k.startswith(prefix) and
            (prefix or not k.startswith("mtp."))}


# `<|im_start|>assistant\n` in SmolLM2's tokenizer (ids 1, 520, 9531, 198), which the chat
# template writes before every answer in the data; an answer runs to its `<|im_end|>` (2).
ANSWER_HEADER = (fm.BOS_ID, 520, 9531, 198)


def answer_mask(x):
    """(batch, seq) ids -> (batch, seq - 1) bool: label x[:, t + 1] is an answer token (its
    `<|im_end|>` included, the model learns to stop), not the system line, the question, the
    header or a token before the window's first `<|im_start|>` (its role is not known)."""
    b, n = x.shape
    idx = torch.arange(n, device=x.device).expand(b, n)
    last = torch.where(x == fm.BOS_ID, idx, -1).cummax(dim=1).values   # the turn's <|im_start|>
    k = len(ANSWER_HEADER)
    hdr = torch.zeros_like(x, dtype=torch.bool)
    hdr[:, :n - k + 1] = torch.stack([x[:, i:n - k + 1 + i] == t for i, t in enumerate(ANSWER_HEADER)]).all(0)
    at = last.clamp(min=0)
    ends = (x == fm.EOS_ID).cumsum(1)
    ends_before = torch.cat([torch.zeros_like(ends[:, :1]), ends[:, :-1]], 1) - ends.gather(1, at)
    m = (last >= 0) & hdr.gather(1, at) & (idx >= last + k) & (ends_before == 0)
    return m[:, 1:]


def masked_mean(v, m, dim=None):
    """Mean of v (batch, seq - 1) over the positions m marks: all of them, or along `dim`
    (dim=-1: each row's mean, (batch,))."""
    m = m.to(v.dtype)
    if dim is None:
        return (v * m).sum() / m.sum().clamp(min=1)
    return (v * m).sum(dim) / m.sum(dim).clamp(min=1)


def token_nll(ls, x):
    """(batch, seq, vocab) log-probs, (batch, seq) ids -> (batch, seq - 1) NLL of each next token."""
    return -ls[:, :-1].gather(-1, x[:, 1:, None])[..., 0]


def token_kl(ls, tls):
    """(batch, seq, vocab) log-probs, the model's and the teacher's -> (batch, seq - 1)
    KL(teacher || model) of each next-token distribution (the positions token_nll scores)."""
    return F.kl_div(ls[:, :-1], tls[:, :-1], log_target=True, reduction="none").sum(-1)


def masked_losses(model, teacher, ids, mask):
    """One forward on ids (batch, seq), and the teacher's if there is one, scored over the
    positions mask (batch, seq - 1) marks: (out, CE, KL to the teacher or 0, the model's NLL
    per token (batch, seq - 1), the teacher's NLL per token or None). One float log-softmax
    each serves everything, so it costs no more memory than the model's own loss (which upcasts
    the logits too)."""
    out = model(input_ids=ids, output_router_logits=True, use_cache=False)
    ls = F.log_softmax(out.logits.float(), -1)   # (batch, seq, vocab)
    kl, t_nll = torch.zeros((), device=ids.device), None
    if teacher is not None:
        with torch.no_grad():
            tls = F.log_softmax(teacher(input_ids=ids).logits.float(), -1)   # (batch, seq, vocab)
            t_nll = token_nll(tls, ids)                                       # (batch, seq - 1)
        kl = masked_mean(token_kl(ls, tls), mask)
    nll = token_nll(ls, ids)                     # (batch, seq - 1)
    return out, masked_mean(nll, mask), kl, nll, t_nll


def answer_span(m):
    """mask m (b, n - 1) of answer positions -> (start, size), each (b,): the first answer
    token's position in the row and how many the mask marks."""
    return m.float().argmax(-1) + 1, m.sum(-1)


def other_question(x, m):
    """Own-answer rows (ids x (b, n), mask m (b, n - 1) as own_answers returns them) -> the same
    answers after the next row's question instead of their own: (ids (b, n'), mask (b, n' - 1)).
    Rows are right-padded; a causal model never reads the padding from the positions scored."""
    b = len(x)
    start, size = (v.tolist() for v in answer_span(m))   # on the host once, not a sync per row
    n = max(start[(i + 1) % b] + size[i] for i in range(b))
    ids = torch.full((b, n), fm.EOS_ID, dtype=x.dtype, device=x.device)
    mask = torch.zeros((b, n - 1), dtype=torch.bool, device=x.device)
    for i in range(b):
        j = (i + 1) % b                                  # the next row's question
        p, k = start[j], size[i]
        ids[i, :p] = x[j, :p]
        ids[i, p:p + k] = x[i, start[i]:start[i] + k]
        mask[i, p - 1:p - 1 + k] = True
    return ids, mask


@torch.no_grad()
def relevance(teacher, x, m, own_nll):
    """The judge's measure (train/judge.py) of each own answer, by the teacher: its NLL per token
    after another row's question minus after its own (own_nll (b, n - 1): the teacher's NLL per
    token of x, which masked_losses already has), (b,) nats per token; higher = the answer
    depends more on its own question."""
    ids, mask = other_question(x, m)
    other = masked_mean(token_nll(F.log_softmax(teacher(input_ids=ids).logits.float(), -1), ids), mask, -1)
    return other - masked_mean(own_nll, m, -1)


SHORT = 16   # answer tokens, end token included: judge.py counts answers under it apart


def copied_share(x, m, n=3):
    """Own-answer rows (ids x (b, len), mask m (b, len - 1) as own_answers returns them) -> (b,):
    the share of each answer's token n-grams that occur before it in its row (the question, the
    system line), 0 for an answer shorter than n."""
    out = []
    for row, p, k in zip(x.tolist(), *(v.tolist() for v in answer_span(m))):   # one copy to the host
        seen = {tuple(row[j:j + n]) for j in range(p - n + 1)}
        grams = [tuple(row[j:j + n]) for j in range(p, p + k - n + 1)]
        out.append(sum(g in seen for g in grams) / len(grams) if grams else 0.0)
    return torch.tensor(out, device=x.device)


def question_share(x, m, content):
    """Own-answer rows (ids x (b, len), mask m (b, len - 1) as own_answers returns them),
    content (content_tokens' ids) -> (b,): the share of each answer's content tokens
    that occur in its question (the user turn before its answer header), 0 for an answer
    without one. The judge's relevance pays for the question's words in an answer (stage 11's
    answers carry 2.4 times the teacher's share of them: docs/flash-mini.md, "The reward,
    guarded"), whether or not the answer uses the question."""
    out = []
    for row, p, k in zip(x.tolist(), *(v.tolist() for v in answer_span(m))):   # one copy to the host
        head = p - len(ANSWER_HEADER)                                  # the answer header's start
        q0 = max((j for j in range(head) if row[j] == fm.BOS_ID), default=0) + 2   # after `<|im_start|>user`
        question = content.intersection(row[q0:head])
        answer = [t for t in row[p:p + k] if t in content]
        out.append(sum(t in question for t in answer) / len(answer) if answer else 0.0)
    return torch.tensor(out, device=x.device)


def guarded_reward(rel, size, copied, min_len, cap, max_copy, qshare=None, max_qshare=0.0):
    """The relevance reward an echo cannot win: rel (b,) nats per token (relevance), size (b,)
    answer tokens, copied (b,) copied_share -> (b,). The unguarded reward taught the model to echo
    a piece of its question and stop (2-5 nats a token, where real answers score 0.1-0.5:
    docs/flash-mini.md, "A reward for using the question"). An answer under min_len tokens, or
    with more than max_copy of its 3-grams taken from its own row, earns 0, what an answer that
    ignores its question earns; none earns more than cap. An answer whose question_share
    (qshare (b,)) is over max_qshare earns 0 too. 0 turns a guard off."""
    r = rel
    if cap > 0:
        r = r.clamp(max=cap)
    bad = torch.zeros_like(r, dtype=torch.bool)
    if min_len > 0:
        bad |= size < min_len
    if max_copy > 0:
        bad |= copied > max_copy
    if max_qshare > 0:
        bad |= qshare > max_qshare
    return torch.where(bad, torch.zeros_like(r), r)


@torch.no_grad()
def own_answers(model, x, max_new, temp, gen, cache=False):
    """On-policy windows: each window's first question answered by the model itself.

    x (batch, seq) aligned windows -> (ids (b', n), mask (b', n - 1)): the window up to its first
    answer, then the model's own sample (temperature `temp`, up to `max_new` tokens, stopping after
    `<|im_end|>`); mask marks the positions whose next token is the model's. Rows without an answer
    header, or with too little room after it, are left out. Sampled without a cache (full_decode),
    or through the model's cache with cache=True (`--op-cache`: cached_decode, checked by
    cache_check).
    """
    m = answer_mask(x)                                   # (batch, seq - 1)
    start, _ = answer_span(m)                            # first answer token's position
    keep = m.any(-1) & (start + max_new <= x.shape[1])
    buf, start = x[keep].clone(), start[keep]            # (b', seq), (b',)
    pick = lambda k, logits: torch.multinomial(F.softmax(logits / temp, -1), 1, generator=gen)[:, 0]   # (b', vocab) float -> (b',)
    was = model.training
    model.eval()
    cur = (cached_decode if cache else full_decode)(model, buf, start, max_new, pick) if len(buf) else start
    model.train(was)
    return answer_rows(buf, start, cur)


def write_token(buf, cur, done, tok):
    """Each row's sampled token tok (b,) into buf (b, seq) at cur (b,), for the rows not done
    -> (cur, done) after it: a row is done after its `<|im_end|>`."""
    live = ~done
    rows = torch.arange(len(buf), device=buf.device)
    buf[rows[live], cur[live]] = tok[live]
    return cur + live.long(), done | (live & (tok == fm.EOS_ID))


def full_decode(model, buf, start, max_new, pick):
    """own_answers' loop without cache: every token reruns the whole prefix (left-padded batches
    through the DeltaNet cache are a risk this avoids), and a row's later positions never reach
    its earlier ones, so rows of different lengths share the buffer as they are. pick(k, logits
    (b, vocab) float) -> (b,) ids is the k-th token of every row. Writes the tokens into buf
    (b, seq) in place and returns cur (b,): each answer's end."""
    rows = torch.arange(len(buf), device=buf.device)
    cur, done = start.clone(), torch.zeros(len(buf), dtype=torch.bool, device=buf.device)
    for k in range(max_new):
        n, keep_n = int(cur.max()), int(cur.max() - cur.min()) + 1   # the logits any row reads
        logits = model(input_ids=buf[:, :n], use_cache=False, logits_to_keep=keep_n).logits   # (b, keep_n, vocab)
        cur, done = write_token(buf, cur, done, pick(k, logits[rows, cur - 1 - (n - keep_n)].float()))
        if done.all():
            break
    return cur


def answer_rows(buf, start, cur):
    """Sampled rows buf (b, seq), each answer from start to cur (b,) -> own_answers' (ids, mask)."""
    n = int(cur.max()) if len(buf) else 0
    pos = torch.arange(max(n - 1, 0), device=buf.device)[None]
    return buf[:, :n], (pos >= start[:, None] - 1) & (pos < cur[:, None] - 1)


def cached_decode(model, buf, start, max_new, pick):
    """full_decode through the model's cache: each row's prefix buf[i, :start[i]] right-aligned in
    one left-padded prefill (attention mask 0 and positions counted from the prefix's first
    token, so a row computes what it computes alone), then one token a forward. pick, buf and
    the returned cur as full_decode's.

    A forward costs one new token a row instead of the whole prefix, so a sampling run's time
    no longer grows with its rows' length, and many more rows fit one run (--op-batches). The
    padding is what the no-cache loop avoided: transformers zeroes a padded position's input to
    a DeltaNet layer (its state then stays at zero) and masks it out of attention; cache_check
    compares the two paths' log-probabilities on the same tokens, and the run stops if they differ."""
    b, L = len(buf), int(start.max())
    col = torch.arange(L, device=buf.device)[None]
    shift = (L - start)[:, None]                                          # (b, 1) padding per row
    ids = torch.where(col < shift, fm.EOS_ID, buf.gather(1, (col - shift).clamp(min=0)))   # (b, L)
    att = (col >= shift).long()                                           # (b, L) 1 on the prefix
    pos = (att.cumsum(-1) - 1).clamp(min=0)                               # (b, L) from 0 per row
    out = model(input_ids=ids, attention_mask=att, position_ids=pos, use_cache=True, logits_to_keep=1)
    cur, done = start.clone(), torch.zeros(b, dtype=torch.bool, device=buf.device)
    last = start - 1                                                      # (b,) position of the last token fed
    for k in range(max_new):
        tok = pick(k, out.logits[:, -1].float())
        cur, done = write_token(buf, cur, done, tok)
        if done.all() or k == max_new - 1:
            break
        att = torch.cat([att, att.new_ones((b, 1))], 1)
        last = last + 1
        out = model(input_ids=tok[:, None], attention_mask=att, position_ids=last[:, None],
                    past_key_values=out.past_key_values, use_cache=True)
    return cur


# cache_check's limit on a row's mean KL between the two paths, nats a token. Measured on the CPU
# with stage 11's weights over 8 rows (docs/flash-mini.md, "Sampling through the cache"): float32
# 2e-8, bf16 1.6e-3 (bf16 against float32 in one full forward is that size too); the cache path
# without its attention mask 1.9e-2
CACHE_KL_MAX = 5e-3


def cache_check(model, ids, mask, n=8):
    """own_answers' rows (ids (b, len), mask (b, len - 1)) -> (max |difference|, the worst row's
    mean KL, nats a token) between the log-probabilities of the first n rows' answer tokens
    through cached_decode (fed the same tokens) and through one full forward without cache: zero
    up to rounding when the cache path computes what the loop without it does."""
    ids, mask = ids[:n], mask[:n]
    start, size = answer_span(mask)                                       # (n,), (n,)
    steps = int(size.max())
    k = torch.arange(steps, device=ids.device)[None]
    forced = ids.gather(1, (start[:, None] + k).clamp(max=ids.shape[1] - 1))   # (n, steps) the answers' tokens
    got = []
    def pick(j, logits):
        got.append(F.log_softmax(logits, -1))
        return forced[:, j]
    was = model.training
    model.eval()
    with torch.no_grad():
        cached_decode(model, ids.clone(), start, steps, pick)
        full = F.log_softmax(model(input_ids=ids, use_cache=False).logits.float(), -1)   # (n, len, vocab)
    model.train(was)
    got = torch.stack(got, 1)                                             # (n, steps, vocab)
    at = (start[:, None] - 1 + k).clamp(max=ids.shape[1] - 1)             # (n, steps) positions predicting them
    ref = full.gather(1, at[..., None].expand(-1, -1, full.shape[-1]))    # (n, steps, vocab)
    live = k < size[:, None]                                              # (n, steps) answer steps
    diff = ((got - ref).abs() * live[..., None]).amax().item()
    kl = F.kl_div(got, ref, log_target=True, reduction="none").sum(-1)   # (n, steps) KL(full || cached), as token_kl
    return diff, masked_mean(kl, live, dim=-1).max().item()


def cmd_cache_check(a):
    """The cached sampler against the loop without cache, on this machine: the same windows
    (--batch x --op-batches rows) answered both ways, timed, in the training runs' precision (bf16
    autocast on a GPU, float32 on the CPU); then cache_check on the cached answers in float32
    and under bf16 autocast. One JSON line."""
    dev = torch.device(a.device)
    model = new_trunk(a).to(dev)
    if a.init_pack:
        fm.load_trunk(model, load_pack(a.init_pack))
    data = Batches(a.data, a.seq, a.batch, a.seed, a.holdout, align=True)
    x = torch.cat([data.get(dev) for _ in range(a.op_batches)])
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    res, answers = {"device": dev.type, "rows": len(x), "op_new": a.op_new}, []
    for name, cache in (("full", False), ("cached", True)):
        with amp:
            own_answers(model, x[:2], 4, a.op_temp, torch.Generator(device=dev).manual_seed(0), cache)   # warm-up
            if dev.type == "cuda":
                torch.cuda.synchronize()
            gen = torch.Generator(device=dev).manual_seed(a.seed)
            t = time.time()
            ids, mask = own_answers(model, x, a.op_new, a.op_temp, gen, cache)
            if dev.type == "cuda":
                torch.cuda.synchronize()
        res[f"{name}_s"] = round(time.time() - t, 2)
        res[f"{name}_tokens"] = int(mask.sum())
        answers.append([r[1:][m].tolist() for r, m in zip(ids, mask)])
    # the same generator draws the same tokens where the two paths' probabilities agree
    res["same_answers"] = sum(p == q for p, q in zip(*answers)) / max(1, len(answers[0]))
    for name, on in (("f32", False), ("bf16", True)):
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=on):
            diff, kl = cache_check(model, ids, mask)
        res[f"{name}_max_dlogp"], res[f"{name}_kl"] = round(diff, 5), kl
    print(json.dumps(res))


def lr_at(step, total, peak, warm):
    if step < warm:
        return peak * (step + 1) / warm
    p = min(1.0, (step - warm) / max(1, total - warm))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def save_ckpt(path, obj):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def cmd_trunk(a):
    dev = torch.device(a.device)
    torch.manual_seed(a.seed)
    os.makedirs(a.work, exist_ok=True)
    model = new_trunk(a).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1, fused=dev.type == "cuda")
    ck = os.path.join(a.work, "trunk.pt")
    step, hist = 0, []
    if os.path.exists(ck):
        st = torch.load(ck, map_location=dev)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, hist = st["step"], st["hist"]
        log(f"resumed at step {step}")
    elif a.init_pack:
        fm.load_trunk(model, load_pack(a.init_pack))
        log(f"init from {a.init_pack}")
    n_par = sum(p.numel() for p in model.parameters())
    log(f"trunk params {n_par / 1e6:.2f} M")
    if a.teacher and not os.path.exists(a.teacher):
        # a missing teacher must not quietly turn a KL run into a CE-only one
        sys.exit(f"--teacher {a.teacher}: no such file")
    teacher = load_teacher(a.teacher, dev) if a.teacher else None
    if a.teacher_gate:
        # the same weights with another DeltaNet output gate as the teacher (stage4)
        teacher = fm.load_trunk(new_trunk(a, a.teacher_gate), load_pack(a.init_pack))
        teacher = teacher.to(device=dev, dtype=torch.bfloat16).eval()
    log("teacher:", "on (KL)" if teacher is not None else "off (CE only)")
    data = Batches(a.data, a.seq, a.batch, a.seed + step, a.holdout, a.align)
    if a.answer_only and not answer_mask(torch.from_numpy(data.train[None, :1 << 20].astype(np.int64))).any():
        sys.exit(f"--answer-only: no `<|im_start|>assistant\\n` {ANSWER_HEADER} in the first 1 M "
                 f"tokens of {a.data}: not SmolLM2-tokenized chat data?")
    if a.on_policy and teacher is None:
        sys.exit("--on-policy: the teacher's KL is the only loss on the model's own answers; pass --teacher")
    if a.op_reward is not None and not a.on_policy:
        sys.exit("--op-reward: the reward scores the model's own answers, which only --on-policy N makes")
    content = None   # the question_share guard's word tokens (--on-policy made sure of a teacher)
    if a.op_max_qwords > 0:
        if a.op_reward is None:
            sys.exit("--op-max-qwords: a guard on the relevance reward, which only --op-reward makes")
        content = content_tokens(tokenizer(a))
        log(f"question-word guard: {len(content)} content tokens, an answer over "
            f"{a.op_max_qwords:.0%} of them from its question earns 0")
    gen = torch.Generator(device=dev).manual_seed(a.seed + 7919 + step)   # the on-policy samples'
    cache_checked = False   # --op-cache: cache_check passed on the first sampling run
    op, queue = {}, []   # the last on-policy step's figures (logged with the next history line); own answers not yet trained on
    ce = kl = torch.zeros(())   # the last off-policy step's, likewise
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    t0, last_ck = time.time(), time.time()
    model.train()
    while step < a.total_steps and time.time() - t0 < a.seconds:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.total_steps, a.lr, a.warmup)
        x = data.get(dev)
        xs, gm = None, None
        if a.on_policy and step % a.on_policy == a.on_policy - 1:
            if not queue:
                # one sampling run answers op_batches batches at once: each sampled token costs a
                # forward pass whose time is mostly fixed overhead at this size, so a bigger batch
                # is nearly free; the next on-policy steps take its chunks in turn
                xb = torch.cat([x] + [data.get(dev) for _ in range(a.op_batches - 1)])
                with amp:
                    xb, mb = own_answers(model, xb, a.op_new, a.op_temp, gen, a.op_cache)
                    if a.op_cache and not cache_checked:
                        # the cache path is checked on this machine, in this precision, before
                        # any step trains on what it samples
                        ck_diff, ck_kl = cache_check(model, xb, mb)
                        log(f"cache check: max |d log p| {ck_diff:.4f}, worst row's mean KL {ck_kl:.2e} (limit {CACHE_KL_MAX:g})")
                        if not ck_kl <= CACHE_KL_MAX:
                            sys.exit(f"--op-cache: the cached sampler's log-probabilities differ from the "
                                     f"full forward's (a row's mean KL {ck_kl:.2e} > {CACHE_KL_MAX:g}); run without it")
                        cache_checked = True
                queue = [(xb[i:i + a.batch], mb[i:i + a.batch]) for i in range(0, len(xb), a.batch)]
            if queue:
                xs, gm = queue.pop(0)
        if gm is not None and gm.any():
            # the model's own answers (their drift is what the chat shows), scored token by
            # token by the teacher, which reads the same question: KL alone, no CE on samples
            with amp:
                out, op_nll, kl_op, nll, t_nll = masked_losses(model, teacher, xs, gm)
                # 1.0 * kl_op is kl_op exactly: the default trains as before the weight existed
                loss = a.op_kl_w * kl_op + model.config.router_aux_loss_coef * out.aux_loss
                # another row's question needs two rows
                rel = relevance(teacher, xs, gm, t_nll) if a.op_reward is not None and len(xs) > 1 else None   # (b,)
                if rel is not None:
                    # the judge's relevance of each answer as its reward (REINFORCE, the batch's
                    # mean as baseline, normalised): the answers that use their question more are
                    # made likelier, the others less; --op-reward 0 only measures it
                    size = gm.sum(-1)                 # (b,) answer tokens
                    copied = copied_share(xs, gm)     # (b,)
                    qshare = question_share(xs, gm, content) if content is not None else None   # (b,)
                    r = guarded_reward(rel, size, copied, a.op_min_len, a.op_rel_cap, a.op_max_copy,
                                       qshare, a.op_max_qwords)
                    adv = (r - r.mean()) / (r.std() + 1e-6)
                    loss = loss + a.op_reward * (adv * masked_mean(nll, gm, -1)).mean()
            op = {"kl_op": kl_op.item(), "op_len": gm.sum().item() / len(xs), "op_nll": op_nll.item()}
            if rel is not None:
                op["op_rel"] = rel.mean().item()
                # the echo's signs: answers under SHORT tokens (judge.py's count), 3-grams copied
                op["op_short"] = (size < SHORT).float().mean().item()
                op["op_copied"] = copied.mean().item()
                op["op_r"] = r.mean().item()   # the guarded reward, as trained on
                if qshare is not None:
                    op["op_qwords"] = qshare.mean().item()
        else:
            with amp:
                if a.answer_only:
                    # CE and KL on the answers alone: the questions and the system line are what
                    # the user writes, not what the model must (docs/flash-mini.md, "Limits")
                    out, ce, kl, _, _ = masked_losses(model, teacher, x, answer_mask(x))
                    loss = ce + model.config.router_aux_loss_coef * out.aux_loss
                else:
                    out = model(input_ids=x, labels=x, output_router_logits=True, use_cache=False)
                    loss = out.loss   # CE + router_aux_loss_coef * load balancing
                    ce = loss - model.config.router_aux_loss_coef * out.aux_loss
                    kl = torch.zeros((), device=dev)
                    if teacher is not None:
                        with torch.no_grad():
                            tl = teacher(input_ids=x).logits.float()
                        sl = out.logits.float()
                        kl = F.kl_div(F.log_softmax(sl, -1), F.log_softmax(tl, -1), log_target=True,
                                      reduction="none").sum(-1).mean()
                if teacher is not None:
                    loss = a.kl_w * kl + (1 - a.kl_w) * loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % a.log_every == 0:
            with torch.no_grad(), amp:
                hx = data.get(dev, hold=True)
                nll = token_nll(F.log_softmax(model(input_ids=hx, use_cache=False).logits.float(), -1), hx)
                hce = nll.mean().item()
                hans = masked_mean(nll, answer_mask(hx)).item()   # the part --answer-only trains
            hist.append({"step": step, "t": time.time() - t0, "ce": ce.item(), "kl": kl.item(),
                         "aux": out.aux_loss.item(), "held_ce": hce, "held_answer_ce": hans,
                         "tokens": step * a.batch * a.seq, **op})
            log(json.dumps(hist[-1]))
        if time.time() - last_ck > a.ckpt_every:
            save_ckpt(ck, {"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "hist": hist})
            last_ck = time.time()
    save_ckpt(ck, {"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "hist": hist})
    json.dump(hist, open(os.path.join(a.work, "trunk_hist.json"), "w"))
    log(f"trunk done at step {step}")


def cmd_mtp(a):
    dev = torch.device(a.device)
    torch.manual_seed(a.seed)
    model = new_trunk(a).to(dev)
    tp = os.path.join(a.work, "trunk.pt")
    if os.path.exists(tp):
        model.load_state_dict(torch.load(tp, map_location=dev)["model"])
    else:
        # the shipped trunk itself (stage5: the MTP block refit on it, the trunk unchanged)
        fm.load_trunk(model, load_pack(a.init_pack))
    model.eval().requires_grad_(False)
    mtp = fm.MTPBlock(model.config).to(dev)
    ck = os.path.join(a.work, "mtp.pt")
    opt = torch.optim.AdamW(mtp.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    step, hist = 0, []
    if os.path.exists(ck):
        st = torch.load(ck, map_location=dev)
        mtp.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, hist = st["step"], st["hist"]
        log(f"resumed mtp at step {step}")
    elif a.init_pack:
        mtp.load_state_dict(load_pack(a.init_pack, "mtp."))
        log(f"mtp init from {a.init_pack}")
    else:
        fm.init_mtp(mtp, model, model.config.initializer_range)
    data = Batches(a.data, a.seq, a.batch, a.seed + 17 + step, a.holdout)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    t0 = time.time()
    while step < a.total_steps and time.time() - t0 < a.seconds:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.total_steps, a.lr, a.warmup)
        with amp:
            loss, parts, agree, accepted = fm.mtp_loss(model, mtp, data.get(dev), a.depth, a.self_kl)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(mtp.parameters(), 1.0)
        opt.step()
        step += 1
        if step % a.log_every == 0:
            with torch.no_grad(), amp:
                _, hparts, hagree, hacc = fm.mtp_loss(model, mtp, data.get(dev, hold=True), a.depth, a.self_kl)
            hist.append({"step": step, "t": time.time() - t0, "loss": loss.item(), "per_depth": parts,
                         "top1_vs_trunk": agree, "accepted": accepted, "held_top1": hagree,
                         "held_accepted": hacc})
            log(json.dumps(hist[-1]))
    save_ckpt(ck, {"model": mtp.state_dict(), "opt": opt.state_dict(), "step": step, "hist": hist})
    json.dump(hist, open(os.path.join(a.work, "mtp_hist.json"), "w"))
    log(f"mtp done at step {step}")


# ---- packing: the state dicts as Q8_0-style int8 blocks so they fit the 16 MiB return files ----

def _is_hc(name):
    return "hyper_connection" in name


def cmd_pack(a):
    sd = {} if a.only_mtp else dict(torch.load(os.path.join(a.work, "trunk.pt"), map_location="cpu")["model"])
    mp = os.path.join(a.work, "mtp.pt")
    if os.path.exists(mp):
        for k, v in torch.load(mp, map_location="cpu")["model"].items():
            sd["mtp." + k] = v
    write_pack(sd, a.out, a.only_mtp, fm.top_k_of(a.layout))


def write_pack(sd, out_dir, only_mtp=False, top_k=fm.TOP_K):
    """State dict (trunk keys and `mtp.*` keys) -> pack-N.safetensors files in out_dir. Every
    file records the experts routed per token (`top_k`), which no weight holds
    (export.pack_top_k reads it back)."""
    sd = dict(sd)
    sd.pop("lm_head.weight", None)   # tied to model.embed_tokens.weight
    out = {}
    for k, v in sd.items():
        v = v.float()
        if v.ndim >= 2 and not _is_hc(k) and v.numel() % 32 == 0 and v.shape[-1] % 32 == 0:
            # Q8_0 blocks along the last (input) dim: d = amax/127 as fp16, q = round(x/d)
            b = v.reshape(-1, 32)
            d = (b.abs().amax(-1, keepdim=True) / 127).half()
            q = torch.where(d.float() > 0, (b / d.float()).round(), torch.zeros_like(b)).clamp(-127, 127).to(torch.int8)
            out[k + ".q8"] = q.reshape(v.shape)
            out[k + ".d"] = d.reshape(*v.shape[:-1], v.shape[-1] // 32)
        elif v.ndim >= 2:
            out[k + ".bf16"] = v.bfloat16()
        else:
            out[k + ".f32"] = v
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    meta = {"experts_per_tok": str(top_k)}
    shard, size, i = {}, 0, 0
    for k in sorted(out):
        nb = out[k].numel() * out[k].element_size()
        if shard and size + nb > 15 * 2**20:
            save_file(shard, os.path.join(out_dir, f"pack-{i}.safetensors"), meta); i += 1
            shard, size = {}, 0
        shard[k] = out[k].contiguous()
        size += nb
    # an MTP-only pack sorts after the trunk's pack-N files, so unpack() lets it replace their mtp.*
    save_file(shard, os.path.join(out_dir, "pack-mtp.safetensors" if only_mtp else f"pack-{i}.safetensors"), meta)
    log(f"packed {len(sd)} tensors into {i + 1} files")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["gen", "trunk", "mtp", "pack", "cache-check"])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="CPU smoke-test geometry")
    p.add_argument("--layout", default="", help="LAYERSxEXPERTS[hHEADS][wWIDTH][kTOPK] (model.parse_layout); export.py reads it off the pack")
    p.add_argument("--teacher", default="")
    p.add_argument("--tok", default="")
    p.add_argument("--data", default="")
    p.add_argument("--work", default="")
    p.add_argument("--out", default="")
    p.add_argument("--init-pack", default="", help="start from packed weights (fresh optimizer)")
    p.add_argument("--teacher-gate", default="", help="teacher = --init-pack weights with this DeltaNet gate")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--seed", type=int, default=0)
    # gen
    p.add_argument("--n-prompts", type=int, default=200000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--max-new", type=int, default=320)
    p.add_argument("--temp", type=float, default=0.8)
    p.add_argument("--self-questions", type=int, default=0,
                   help="gen: the teacher writes up to this many questions itself (prompts.META)")
    # trunk / mtp
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--total-steps", type=int, default=3000)
    p.add_argument("--kl-w", type=float, default=0.7)
    p.add_argument("--holdout", type=float, default=0.01)
    p.add_argument("--align", action="store_true", help="windows start at conversation starts")
    p.add_argument("--answer-only", action="store_true",
                   help="trunk: CE and KL on answer tokens only (train.answer_mask)")
    p.add_argument("--on-policy", type=int, default=0,
                   help="trunk: every Nth step on the model's own answers, with the teacher's KL alone (own_answers)")
    p.add_argument("--op-new", type=int, default=192, help="on-policy: tokens sampled per answer at most")
    p.add_argument("--op-temp", type=float, default=0.7, help="on-policy: sampling temperature (the card's chat)")
    p.add_argument("--op-batches", type=int, default=1,
                   help="on-policy: batches answered per sampling run (their chunks feed the next on-policy steps)")
    p.add_argument("--op-cache", action="store_true",
                   help="on-policy: sample through the model's cache (cached_decode; checked on the first run)")
    p.add_argument("--op-reward", type=float, default=None,
                   help="on-policy: weight of the relevance reward (train.relevance; 0 logs it as op_rel only)")
    p.add_argument("--op-min-len", type=int, default=0,
                   help="on-policy reward: an answer under this many tokens earns 0 (guarded_reward; 0 = off)")
    p.add_argument("--op-rel-cap", type=float, default=0.0,
                   help="on-policy reward: the relevance counted at most (guarded_reward; 0 = off)")
    p.add_argument("--op-max-copy", type=float, default=0.0,
                   help="on-policy reward: an answer with more of its 3-grams copied from its row earns 0 (0 = off)")
    p.add_argument("--op-max-qwords", type=float, default=0.0,
                   help="on-policy reward: an answer with more of its content tokens from its question earns 0 "
                        "(question_share; needs the tokenizer: --tok, else the teacher's; 0 = off)")
    p.add_argument("--op-kl-w", type=float, default=1.0,
                   help="on-policy: weight of the teacher's KL on the model's own answers (holds them to the teacher's text)")
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--ckpt-every", type=float, default=120)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--only-mtp", action="store_true", help="pack: the MTP block alone")
    p.add_argument("--self-kl", type=float, default=0.0,
                   help="MTP: weight of the KL to the trunk's own next-token distribution")
    a = p.parse_args()
    if a.layout:
        try:
            fm.parse_layout(a.layout)
        except ValueError as e:
            sys.exit(str(e))
    {"gen": cmd_gen, "trunk": cmd_trunk, "mtp": cmd_mtp, "pack": cmd_pack, "cache-check": cmd_cache_check}[a.cmd](a)


if __name__ == "__main__":
    main()
