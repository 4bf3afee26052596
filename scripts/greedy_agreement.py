#!/usr/bin/env python3
"""Greedy agreement, Strata vs llama.cpp: for each prompt and model, how many of the first N
generated tokens agree (length of the common prefix; after the first difference the two
continuations are on different contexts, so later matches mean nothing).

Strata's side is `strata run --temp 0 -n N` (its stdout, the generated text); llama.cpp's is
`scripts/llamacpp_ref.py greedy --json` (token ids and each token's bytes). The count is the
largest k such that the bytes of llama.cpp's first k tokens are a prefix of Strata's output;
the next token is then shown from both sides.

    set -a; . .strata/env; set +a
    python3 scripts/greedy_agreement.py [-n 32] [--prompts FILE.json]
Env: STRATA_BIN (default target/release/strata), STRATA_LLAMACPP_VENV. Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n",
    "The main difference between a virus and a bacterium is",
    "Here is a list of the planets in the solar system:\n1.",
]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True)
    if p.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr.decode(errors='replace')[-2000:]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--prompts", help="JSON list of prompts (default: the five built in)")
    ap.add_argument("--json", action="store_true", help="also print one JSON line per case")
    a = ap.parse_args()
    prompts = json.load(open(a.prompts, encoding="utf-8")) if a.prompts else PROMPTS
    bin_ = os.environ.get("STRATA_BIN", os.path.join(ROOT, "target", "release", "strata"))
    venv = os.environ.get("STRATA_LLAMACPP_VENV", os.path.expanduser("~/.cache/strata/llamacpp-venv"))
    py = os.path.join(venv, "bin", "python")
    if not os.access(py, os.X_OK):
        sys.exit(f"error: {py} not found: run scripts/llamacpp_setup.sh")
    print("| model | prompt | agreeing tokens | llama.cpp tokens | next (Strata / llama.cpp) | llama.cpp top-1 − top-2 logit there |")
    print("| ----- | ------ | --------------: | ---------------: | ------------------------- | ---: |")
    totals = {}
    for key, env in [("smollm2", "STRATA_MODEL_SMOLLM2"), ("gemma3", "STRATA_MODEL_GEMMA3")]:
        model = os.environ.get(env)
        if not model or not os.path.isfile(model):
            sys.exit(f"error: {env} is unset or names a missing file ({model}); run make setup")
        for prompt in prompts:
            s = run([bin_, "run", "-m", model, "-p", prompt, "-n", str(a.n), "--temp", "0"])
            s = s[:-1] if s.endswith(b"\n") else s  # `strata run` ends with one newline of its own
            ref = json.loads(run([py, os.path.join(HERE, "llamacpp_ref.py"), "greedy", "-m", model,
                                  "-p", prompt, "-n", str(a.n), "--json"]))
            pieces = [bytes.fromhex(h) for h in ref["pieces_hex"]]
            k, pos = 0, 0
            while k < len(pieces) and s[pos:pos + len(pieces[k])] == pieces[k]:
                pos += len(pieces[k])
                k += 1
            margin = ""
            if k == len(pieces) and pos == len(s):
                nxt = "(identical)"
            else:
                sn = s[pos:pos + 12].decode(errors="replace")
                ln = pieces[k].decode(errors="replace") if k < len(pieces) else "(end)"
                nxt = f"{sn!r}… / {ln!r}"
                if k < len(ref["margins"]):
                    margin = f"{ref['margins'][k]:.3f}"
            t = totals.setdefault(key, [0, 0])
            t[0] += k
            t[1] += len(pieces)
            print(f"| {os.path.basename(model)} | {prompt!r} | {k} | {len(pieces)} | {nxt} | {margin} |")
            if a.json:
                print(json.dumps({"model": key, "prompt": prompt, "agree": k, "llama_tokens": len(pieces),
                                  "strata_text": s.decode(errors="replace"), "llama_text": ref["text"]}))
    for key, (k, n) in totals.items():
        print(f"\n{key}: {k} of {n} tokens agree ({k / n:.1%})" if n else f"\n{key}: no tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
