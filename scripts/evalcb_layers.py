#!/usr/bin/env python3
"""Per-layer states of llama.cpp on one prompt, as test data (issue 28): runs
`llama-eval-callback -m MODEL -p PROMPT -n 1 -t 2 [variant flags]` for llama.cpp's default, -fa off
and -nr (no weight repacking), and keeps, for the residual-stream tensors (inp_scaled,
attn_norm-N, sa_out-N, ffn_norm-N, l_out-N, result_norm), the printed rows (first and last 3
values of each token's row, 4 decimals) and sum (6 decimals). llama.cpp keeps only the last
token's row in the last layer (its output-row selection), so `rows` says how many trailing
tokens a tensor covers. Writes tests/data/layers/<name>.json for tests/reference_layers_llamacpp.rs.

    set -a; . .strata/env; set +a
    python3 scripts/evalcb_layers.py [--model-env STRATA_MODEL_GEMMA3] [--prompt TEXT] [--name gemma3_capital]
Standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VARIANTS = {"default": [], "fa_off": ["-fa", "off"], "no_repack": ["-nr"]}
KEEP = re.compile(r"^(inp_scaled|attn_norm-\d+|sa_out-\d+|ffn_norm-\d+|l_out-\d+|result_norm)$")
HEAD = re.compile(r"common_debug_cb_eval:\s+(.+?) = \(f32\)\s+\w+\(.*\) = \{(\d+), (\d+), 1, 1\}")


def parse(text):
    out, cur = {}, None
    for line in text.splitlines():
        m = HEAD.match(line)
        if m:
            name = m.group(1).strip()
            cur = None
            if KEEP.match(name) and name not in out:
                cur = out[name] = {"n": int(m.group(2)), "rows": int(m.group(3)), "values": []}
            continue
        if cur is None:
            continue
        s = line.strip()
        if s.startswith("sum = "):
            cur["sum"] = float(s[6:])
            cur = None
        elif s.startswith("[") and "..." in s:
            nums = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e[-+]?\d+)?", s)]
            cur["values"].append(nums)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-env", default="STRATA_MODEL_GEMMA3")
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--name", default="gemma3_capital")
    a = ap.parse_args()
    model = os.environ.get(a.model_env) or sys.exit(f"error: {a.model_env} is not set")
    tool = os.path.join(os.environ.get("STRATA_LLAMA_CPP_DIR", os.path.expanduser(
        "~/.cache/strata/llama.cpp-11434")), "build", "bin", "llama-eval-callback")
    data = {"model": os.path.basename(model), "model_env": a.model_env, "prompt": a.prompt,
            "command": "llama-eval-callback -m MODEL -p PROMPT -n 1 -t 2 [variant]",
            "variants": {}}
    for name, extra in VARIANTS.items():
        cmd = [tool, "-m", model, "-p", a.prompt, "-n", "1", "-t", "2"] + extra
        r = subprocess.run(cmd, capture_output=True)
        if r.returncode != 0:
            sys.exit(f"error: {' '.join(cmd)}: {r.stderr.decode(errors='replace')[-2000:]}")
        data["variants"][name] = {"flags": " ".join(extra), "tensors": parse(
            r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace"))}
    path = os.path.join(ROOT, "tests", "data", "layers", a.name + ".json")
    with open(path, "w") as f:
        json.dump(data, f, separators=(",", ":"))
        f.write("\n")
    print(path, {k: len(v["tensors"]) for k, v in data["variants"].items()})


if __name__ == "__main__":
    main()
