#!/usr/bin/env python3
"""The seeds' A/B of the hyper-connection read flags on one model (issue 26), by hand until
`strata ab` exists: the same binary, the same prompts, arms default / STRATA_HC_Q8=1 /
STRATA_GR_FUSED=1, interleaved A B C A B C ... for R rounds so drift hits every arm.

Per arm: the verify-window ms (median over every window of every run, and of the t = 5 windows
alone), decode tok/s (median of the runs), drafts accepted / proposed, the greedy text of each
prompt against the default arm's (identical, or the first differing byte), and the teacher-forced
NLL of a text through the decode windows (`strata nll --windows 5`: the same targets).

Usage: scripts/hc_ab.py [--model PATH] [--rounds 3] [--n 64] [--text assets/nll_sample.txt]
Prints Markdown. Needs `make build` (target/release/strata) and `.strata/env`.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARMS = [("default", {}), ("HC_Q8", {"STRATA_HC_Q8": "1"}), ("GR_FUSED", {"STRATA_GR_FUSED": "1"})]
PROMPTS = [
    "Give me three tips for staying healthy.",
    "Why is the sky blue?",
    "Write a short poem about the sea.",
]
WINDOW = re.compile(r"window\s+\d+:\s+([\d.]+) ms\s+t (\d+)")
TURN = re.compile(r"decode \d+ tokens [\d.]+ ms ([\d.]+) tok/s.*drafts (\d+) proposed (\d+) accepted")
NLL = re.compile(r"mean NLL ([\d.]+)")


def env_for(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_HC_Q8") and not k.startswith("STRATA_GR_FUSED")}
    env.update(extra)
    return env


def run(binary, model, prompt, n, extra):
    args = [binary, "run", "-m", model, "-p", prompt, "-n", str(n), "--temp", "0", "--chat",
            "--spec", "4", "--stats"]
    p = subprocess.run(args, capture_output=True, text=True, env=env_for(extra), check=True)
    windows = [(float(ms), int(t)) for ms, t in WINDOW.findall(p.stderr)]
    m = TURN.search(p.stderr)
    tps, proposed, accepted = (float(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (0.0, 0, 0)
    return p.stdout, windows, tps, proposed, accepted


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.environ.get("STRATA_MODEL_SMOLLM2_HC"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--text", default=os.path.join(ROOT, "assets", "nll_sample.txt"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "strata"))
    a = ap.parse_args()
    if not a.model:
        sys.exit("no model: pass --model or source .strata/env (STRATA_MODEL_SMOLLM2_HC)")
    stats = {name: {"win": [], "win5": [], "tps": [], "prop": 0, "acc": 0, "text": {}} for name, _ in ARMS}
    for r in range(a.rounds):
        for name, extra in ARMS:
            for prompt in PROMPTS:
                out, windows, tps, prop, acc = run(a.bin, a.model, prompt, a.n, extra)
                s = stats[name]
                s["win"] += [ms for ms, _ in windows]
                s["win5"] += [ms for ms, t in windows if t == 5]
                s["tps"].append(tps)
                s["prop"] += prop
                s["acc"] += acc
                s["text"].setdefault(prompt, out)
            print(f"round {r + 1}: {name} done", file=sys.stderr)
    nll = {}
    for name, extra in ARMS:
        p = subprocess.run([a.bin, "nll", "-m", a.model, "-f", a.text, "--ctx", "512", "--windows", "5"],
                           capture_output=True, text=True, env=env_for(extra), check=True)
        nll[name] = float(NLL.findall(p.stdout)[-1])
    base = stats["default"]
    print(f"model `{os.path.basename(a.model)}`, {a.rounds} rounds x {len(PROMPTS)} prompts, "
          f"-n {a.n} --temp 0 --chat --spec 4; NLL: `strata nll --ctx 512 --windows 5` on "
          f"`{os.path.relpath(a.text, ROOT)}`\n")
    print("| arm | window ms (median, all) | window ms (median, t=5) | ratio to default | decode tok/s (median) "
          "| drafts accepted/proposed | NLL through windows | greedy text vs default |")
    print("|---|---|---|---|---|---|---|---|")
    b_med = statistics.median(base["win"])
    for name, _ in ARMS:
        s = stats[name]
        med = statistics.median(s["win"])
        med5 = statistics.median(s["win5"]) if s["win5"] else float("nan")
        same = []
        for prompt in PROMPTS:
            x, y = s["text"][prompt], base["text"][prompt]
            if x == y:
                same.append("identical")
            else:
                i = next((k for k, (c, d) in enumerate(zip(x, y)) if c != d), min(len(x), len(y)))
                same.append(f"differs at byte {i}")
        print(f"| {name} | {med:.2f} | {med5:.2f} | {med / b_med:.3f} | {statistics.median(s['tps']):.1f} "
              f"| {s['acc']}/{s['prop']} | {nll[name]:.4f} | {'; '.join(same)} |")


if __name__ == "__main__":
    main()
