#!/usr/bin/env python3
"""llama.cpp (through llama-cpp-python) as the independent reference beside Strata.

Run with the venv made by scripts/llamacpp_setup.sh:
    PY=~/.cache/strata/llamacpp-venv/bin/python
    $PY scripts/llamacpp_ref.py bench  -m MODEL [-p 512] [-n 128] [-r 5] [-t 2]
    $PY scripts/llamacpp_ref.py nll    -m MODEL -f FILE [--ctx 512] [--half]
    $PY scripts/llamacpp_ref.py greedy -m MODEL -p PROMPT [-n 32] [--json]

Each subcommand mirrors the Strata command it is compared with:
  bench   `strata bench`: ppN = one N-token forward from an empty cache (logits for the last row
          only), tgN = N single-token steps; random token ids (as llama-bench); one warm-up run;
          r repetitions; mean ± sd t/s, one JSON line per test.
  nll     `strata nll` (app/cmd/nll.rs), exactly: the whole file tokenized once with no special
          handling and no BOS; consecutive non-overlapping chunks of (ctx - 1) tokens when the
          model adds BOS (ctx otherwise), BOS prepended, each chunk from an empty cache; row r
          predicts token r + 1; all rows, or with --half rows from len/2 on. Log-softmax in numpy
          float64. (llama-perplexity itself differs slightly: it overwrites the chunk's first
          token with BOS instead of prepending it, so its chunks hold one text token fewer.)
  greedy  `strata run --temp 0`: prompt tokenized with add_special (BOS only when the model's
          GGUF says so) and no special-token parsing; argmax each step (lowest id on ties, as
          Strata's sampler); stops at n tokens or an end-of-generation token.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np


def load(path, n_ctx, threads, logits_all=False):
    import llama_cpp
    from llama_cpp import Llama

    if not os.path.isfile(path):
        sys.exit(f"error: model file {path} not found")
    llm = Llama(
        model_path=path,
        n_ctx=n_ctx,
        n_batch=n_ctx,
        n_ubatch=min(n_ctx, 512),
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=logits_all,
        verbose=False,
    )
    return llama_cpp, llm


def mean_sd(v):
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return m, sd


def cmd_bench(a):
    import llama_cpp as lc

    _, llm = load(a.model, a.n_prompt + a.n_gen + 16, a.threads)
    rng = np.random.default_rng(42)
    n_vocab = llm.n_vocab()
    name = os.path.basename(a.model)
    rows = []
    if a.n_prompt > 0:
        toks = [int(t) for t in rng.integers(0, n_vocab, a.n_prompt)]
        ts = []
        for i in range(a.reps + 1):  # the first run is the warm-up
            llm.reset()
            t = time.perf_counter()
            llm.eval(toks)
            dt = time.perf_counter() - t
            if i > 0:
                ts.append(a.n_prompt / dt)
        rows.append((f"pp{a.n_prompt}", ts))
    if a.n_gen > 0:
        toks = [int(t) for t in rng.integers(0, n_vocab, a.n_gen)]
        ts = []
        for i in range(a.reps + 1):
            llm.reset()
            t = time.perf_counter()
            for tk in toks:
                llm.eval([tk])
            dt = time.perf_counter() - t
            if i > 0:
                ts.append(a.n_gen / dt)
        rows.append((f"tg{a.n_gen}", ts))
    for test, ts in rows:
        m, sd = mean_sd(ts)
        print(json.dumps({
            "model": name, "backend": "llama.cpp CPU", "impl": f"llama-cpp-python {lc.__version__}",
            "threads": a.threads, "test": test, "avg_ts": m, "stddev_ts": sd, "samples_ts": ts,
            "repetitions": a.reps,
        }))
    return 0


def log_softmax_nll(logits_row, target):
    x = logits_row.astype(np.float64)
    mx = x.max()
    return float(math.log(np.exp(x - mx).sum()) + mx - x[target])


def cmd_nll(a):
    lc, llm = load(a.model, a.ctx, a.threads, logits_all=True)
    text = open(a.file, encoding="utf-8").read()
    ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    add_bos = llm._model.add_bos_token()
    bos = [llm.token_bos()] if add_bos else []
    per_chunk = a.ctx - len(bos)
    if len(ids) < per_chunk:
        sys.exit(f"error: {a.file} has {len(ids)} tokens; one chunk of --ctx {a.ctx} needs {per_chunk}")
    n_chunks = len(ids) // per_chunk
    total, count = 0.0, 0
    t0 = time.perf_counter()
    for ci in range(n_chunks):
        inp = bos + ids[ci * per_chunk:(ci + 1) * per_chunk]
        llm.reset()
        llm.eval(inp)
        first = len(inp) // 2 if a.half else 0
        csum = 0.0
        for r in range(first, len(inp) - 1):
            csum += log_softmax_nll(llm.scores[r], inp[r + 1])
        n = len(inp) - 1 - first
        total += csum
        count += n
        print(f"chunk {ci}: mean NLL {csum / n:.4f} over {n} tokens", file=sys.stderr)
    mean = total / count
    res = {
        "model": os.path.basename(a.model), "file": a.file, "ctx": a.ctx, "half": a.half,
        "add_bos": bool(add_bos), "text_tokens": len(ids), "chunks": n_chunks, "scored": count,
        "mean_nll": mean, "ppl": math.exp(mean), "seconds": time.perf_counter() - t0,
        "impl": f"llama-cpp-python {lc.__version__}",
    }
    if a.json:
        print(json.dumps(res))
    else:
        print(f"{a.file}: {count} tokens scored in {n_chunks} chunks of {a.ctx}"
              f"{' (second halves)' if a.half else ''}: mean NLL {mean:.4f}, perplexity {math.exp(mean):.4f}")
    return 0


def cmd_greedy(a):
    lc, llm = load(a.model, a.ctx, a.threads)
    ids = llm.tokenize(a.prompt.encode("utf-8"), add_bos=True, special=False)
    n_vocab = llm.n_vocab()
    vocab = llm._model.vocab
    margins = []  # top-1 minus top-2 logit at each step: small = a near-tie

    def argmax():
        logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(n_vocab,))
        best = int(np.argmax(logits))  # first maximum = lowest id on ties
        top2 = np.partition(logits, -2)[-2:]
        margins.append(float(top2[1] - top2[0]))
        return best

    # As Strata's TurnStats: the first token comes from the prefill; decode t/s counts the
    # tokens produced by single-token steps after it.
    out = []
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    nxt = argmax()
    t1 = time.perf_counter()
    while len(out) < a.n and not lc.llama_vocab_is_eog(vocab, nxt):
        out.append(nxt)
        if len(out) == a.n:
            break
        llm.eval([nxt])
        nxt = argmax()
    t2 = time.perf_counter()
    text = llm.detokenize(out).decode("utf-8", errors="replace")
    if a.json:
        pieces = [llm.detokenize([t]).hex() for t in out]  # raw bytes: pieces may split UTF-8
        print(json.dumps({"prompt": a.prompt, "prompt_ids": ids, "ids": out, "text": text,
                          "pieces_hex": pieces, "margins": margins[:len(out)],
                          "prefill_tps": len(ids) / (t1 - t0),
                          "decode_tps": (len(out) - 1) / (t2 - t1) if len(out) > 1 else 0.0}))
    else:
        print(text)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench")
    b.add_argument("-p", "--n-prompt", type=int, default=512)
    b.add_argument("-n", "--n-gen", type=int, default=128)
    b.add_argument("-r", "--repetitions", dest="reps", type=int, default=5)
    n = sub.add_parser("nll")
    n.add_argument("-f", "--file", required=True)
    n.add_argument("--ctx", type=int, default=512)
    n.add_argument("--half", action="store_true")
    n.add_argument("--json", action="store_true")
    g = sub.add_parser("greedy")
    g.add_argument("-p", "--prompt", required=True)
    g.add_argument("-n", type=int, default=32)
    g.add_argument("--ctx", type=int, default=512)
    g.add_argument("--json", action="store_true")
    for p in (b, n, g):
        p.add_argument("-m", "--model", required=True)
        p.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    return {"bench": cmd_bench, "nll": cmd_nll, "greedy": cmd_greedy}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
