#!/usr/bin/env python3
"""llama.cpp's logits teacher-forced on its own greedy continuations, as test data for
tests/model_greedy_llamacpp.rs (issue 28's greedy check, made independent of near-ties).

For each model and each prompt of tests/data/greedy/llamacpp.json:
1. `dump_logits -p PROMPT -n 48 --fa on` (scripts/llama-cpp/dump_logits.cpp; --fa on is the path
   llama-completion's default takes on the CPU): the prompt's ids and llama.cpp's 48 greedy ids;
2. the prompt and the first 47 greedy ids as one batch (`--tokens FILE -n 0`), once with
   `--fa on` ("default") and once with `--fa off` (llama.cpp's plain graph, its own other path);
3. for every row that predicts a greedy token (the prompt's last row onwards): the default row's
   top 8 ids (highest logit first, lowest id on ties) with their logits, and the `-fa off` row's
   logits at the same ids.
Writes tests/data/greedy/llamacpp_forced.json. The test runs Strata on the same ids in one batch
and measures how far its logits at those ids are from the default's, beside how far `-fa off`'s
are: a difference of the logits' shape, which no near-tie turns into a different text.

    set -a; . .strata/env; set +a
    scripts/llama-cpp/build.sh && python3 scripts/forced_llamacpp_data.py
Needs numpy (the project venv has it: .strata/venv/bin/python).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GREEDY = os.path.join(ROOT, "tests", "data", "greedy", "llamacpp.json")
OUT = os.path.join(ROOT, "tests", "data", "greedy", "llamacpp_forced.json")
N = 48
TOP = 8


def dump(tool, model, out, args):
    cmd = [tool, "-m", model, "-o", out, "-t", "2"] + args
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)}: {r.stderr.decode(errors='replace')[-2000:]}")
    with open(out, "rb") as f:
        head = json.loads(f.readline())
        rows = np.frombuffer(f.read(), dtype="<f4").reshape(head["rows"], head["n_vocab"])
    return head, rows


def top(row):
    # highest logit first, lowest id on ties: a stable sort of the ids by -logit
    return np.argsort(-row, kind="stable")[:TOP]


def main():
    tool = os.path.join(
        os.environ.get("STRATA_LLAMA_CPP_DIR", os.path.expanduser("~/.cache/strata/llama.cpp-11434")),
        "build", "bin", "dump_logits")
    if not os.access(tool, os.X_OK):
        sys.exit(f"error: {tool} not found: run scripts/llama-cpp/build.sh")
    greedy = json.load(open(GREEDY))
    out = {"llama_cpp": "b11434 scripts/llama-cpp/dump_logits.cpp, -t 2, f16 KV cache",
           "n_gen": N, "top": TOP,
           "command": "python3 scripts/forced_llamacpp_data.py", "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "rows")
        for env, m in greedy["models"].items():
            model = os.environ.get(env) or sys.exit(f"error: {env} is not set (source .strata/env)")
            cases = []
            for c in m["cases"]:
                head, _ = dump(tool, model, f, ["-p", c["prompt"], "-n", str(N), "--fa", "on"])
                ids = head["tokens"] + head["greedy"]
                n_prompt = head["n_prompt"]
                tokens = os.path.join(tmp, "ids")
                with open(tokens, "w") as t:
                    t.write(" ".join(map(str, ids[:-1])))
                # the ids carry the model's BOS already when it adds one (SmolLM2 adds none)
                bos = ["--no-bos"]
                _, on = dump(tool, model, f, ["--tokens", tokens, "-n", "0", "--fa", "on"] + bos)
                _, off = dump(tool, model, f, ["--tokens", tokens, "-n", "0", "--fa", "off"] + bos)
                rows = []
                for r in range(n_prompt - 1, len(ids) - 1):
                    k = top(on[r])
                    rows.append({"ids": k.tolist(),
                                 "default": [float(on[r][i]) for i in k],
                                 "fa_off": [float(off[r][i]) for i in k]})
                cases.append({"prompt": c["prompt"], "ids": ids, "n_prompt": n_prompt,
                              "rows": rows})
                agree = sum(int(on[r].argmax() == ids[r + 1]) for r in range(n_prompt - 1, len(ids) - 1))
                print(f"{env} {c['prompt']!r}: {len(rows)} rows, the batch's top-1 = the greedy "
                      f"id at {agree}", file=sys.stderr)
            out["models"][env] = {"file": os.path.basename(model), "cases": cases}
    with open(OUT, "w") as o:
        json.dump(out, o, separators=(",", ":"))
        o.write("\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
