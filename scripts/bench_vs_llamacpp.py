#!/usr/bin/env python3
"""Strata vs llama.cpp on this machine, in one run: pp512 / tg128 for both models, and greedy
decode on a fixed prompt with and without Strata's --spec. Prints markdown tables.

Usually started through scripts/bench_vs_llamacpp.sh (builds the release binary, loads
.strata/env). Standard library only. Rounds interleave Strata and llama.cpp, so a change in machine
load hits both; each cell is the median over rounds of each round's mean.

Strata runs with no kernel flag set (they are removed from its environment); `--flag NAME` adds
a second Strata run of every test with NAME=1, in extra columns (e.g. --flag STRATA_VNNI).

Env: STRATA_BIN (default target/release/strata), STRATA_LLAMACPP_VENV
(default ~/.cache/strata/llamacpp-venv), STRATA_MODEL_SMOLLM2, STRATA_MODEL_GEMMA3.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# Prompt-lookup drafting (Strata's n-gram drafter) pays off when the output repeats the prompt;
# this prompt asks for that, so --spec has something to accept on both models.
SPEC_PROMPT = ("Copy the list exactly.\nList: apple, banana, cherry, date, elderberry, fig, grape, "
               "honeydew, kiwi, lemon, mango, nectarine, orange, papaya.\nCopy: apple, banana,")


SETTLE = [0.0]  # seconds to wait before each measured command (--settle)
FLAGS = ("STRATA_HC_Q8", "STRATA_GR_FUSED", "STRATA_MMVQ_KREG", "STRATA_VNNI")


def run(cmd, flag=None):
    # Right after one engine exits the machine is slower for a few seconds (measured: Strata's
    # SmolLM2 tg128 ~102 t/s straight after a llama.cpp run, 139-151 after 10 s): let it settle
    # so neither engine inherits the other's aftermath.
    time.sleep(SETTLE[0])
    # Strata's kernel flags: none unless asked for (`flag`: one NAME run with NAME=1)
    env = {k: v for k, v in os.environ.items() if k not in FLAGS}
    if flag:
        env[flag] = "1"
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    return p


def json_lines(out):
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def strata_bench(bin_, model, p, n, reps, flag=None):
    r = run([bin_, "bench", "-m", model, "-p", str(p), "-n", str(n), "-r", str(reps), "--json"],
            flag)
    return {j["test"]: j["avg_ts"] for j in json_lines(r.stdout)}


def llama_bench(py, model, p, n, reps, threads):
    r = run([py, os.path.join(HERE, "llamacpp_ref.py"), "bench", "-m", model, "-p", str(p),
             "-n", str(n), "-r", str(reps), "-t", str(threads)])
    return {j["test"]: j["avg_ts"] for j in json_lines(r.stdout)}


TURN = re.compile(r"turn: prefill (\d+) tokens .*? decode (\d+) tokens [\d.]+ ms ([\d.]+) tok/s .*?"
                  r"acceptance ([\d.]+)")


def strata_decode(bin_, model, n, spec, flag=None):
    r = run([bin_, "run", "-m", model, "-p", SPEC_PROMPT, "-n", str(n), "--temp", "0", "--spec",
             str(spec), "--stats"], flag)
    m = TURN.search(r.stderr)
    if not m:
        sys.exit(f"error: no turn stats line in `strata run --stats` stderr:\n{r.stderr[-2000:]}")
    return float(m.group(3)), float(m.group(4)), r.stdout


def llama_decode(py, model, n, threads):
    r = run([py, os.path.join(HERE, "llamacpp_ref.py"), "greedy", "-m", model, "-p", SPEC_PROMPT,
             "-n", str(n), "-t", str(threads), "--json"])
    return json_lines(r.stdout)[0]["decode_tps"]


def fmt(x):
    return "—" if x is None else f"{x:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median taken)")
    ap.add_argument("-r", "--reps", type=int, default=3, help="repetitions inside each round")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--spec", type=int, default=4, help="Strata --spec draft length")
    ap.add_argument("--spec-n", type=int, default=64, help="tokens generated in the --spec test")
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--llama-threads", type=int, default=2,
                    help="llama.cpp threads (1 avoids OpenMP barrier stalls on a loaded 2-core box)")
    ap.add_argument("--omp-passive", action="store_true",
                    help="OMP_WAIT_POLICY=passive for llama.cpp (no spinning at barriers)")
    ap.add_argument("--settle", type=float, default=10.0,
                    help="seconds of quiet before each measured command (default 10)")
    ap.add_argument("--flag", choices=FLAGS,
                    help="also run Strata with this kernel flag set to 1 (extra columns)")
    a = ap.parse_args()
    SETTLE[0] = a.settle
    if a.omp_passive:
        os.environ["OMP_WAIT_POLICY"] = "passive"

    bin_ = os.environ.get("STRATA_BIN", os.path.join(ROOT, "target", "release", "strata"))
    if not os.access(bin_, os.X_OK):
        sys.exit(f"error: Strata binary {bin_} not found (cargo build --release, or set STRATA_BIN)")
    venv = os.environ.get("STRATA_LLAMACPP_VENV", os.path.expanduser("~/.cache/strata/llamacpp-venv"))
    py = os.path.join(venv, "bin", "python")
    have_llama = os.access(py, os.X_OK) and subprocess.run(
        [py, "-c", "import llama_cpp"], capture_output=True).returncode == 0
    models = {}
    for key in a.models.split(","):
        env = {"smollm2": "STRATA_MODEL_SMOLLM2", "gemma3": "STRATA_MODEL_GEMMA3"}[key]
        path = os.environ.get(env)
        if not path or not os.path.isfile(path):
            sys.exit(f"error: {env} is unset or names a missing file ({path}); run make setup")
        models[key] = path

    speed = {}   # (model, test) -> {"strata": [...], "llama": [...]}
    dec = {}     # model -> {"off": [...], "spec": [...], "acc": [...], "llama": [...]}
    for rnd in range(a.rounds):
        for key, path in models.items():
            print(f"round {rnd + 1}/{a.rounds}: {key}", file=sys.stderr)
            s = strata_bench(bin_, path, a.p, a.n, a.reps)
            f = strata_bench(bin_, path, a.p, a.n, a.reps, a.flag) if a.flag else {}
            l = llama_bench(py, path, a.p, a.n, a.reps, a.llama_threads) if have_llama else {}
            print(f"  strata {s}  {a.flag or ''} {f}  llama.cpp {l}", file=sys.stderr)
            for test, v in s.items():
                cell = speed.setdefault((key, test), {"strata": [], "flag": [], "llama": []})
                cell["strata"].append(v)
                if test in f:
                    cell["flag"].append(f[test])
                if test in l:
                    cell["llama"].append(l[test])
            d = dec.setdefault(key, {"off": [], "spec": [], "acc": [], "llama": [],
                                     "f_off": [], "f_spec": []})
            off, _, out_off = strata_decode(bin_, path, a.spec_n, 0)
            on, acc, out_on = strata_decode(bin_, path, a.spec_n, a.spec)
            if out_off != out_on:
                print(f"warning: {key}: greedy output differs with --spec {a.spec}", file=sys.stderr)
            print(f"  decode: strata {off:.2f}, --spec {on:.2f} (acceptance {acc:.2f})", file=sys.stderr)
            d["off"].append(off)
            d["spec"].append(on)
            d["acc"].append(acc)
            if a.flag:
                f_off, _, _ = strata_decode(bin_, path, a.spec_n, 0, a.flag)
                f_on, _, _ = strata_decode(bin_, path, a.spec_n, a.spec, a.flag)
                print(f"  decode {a.flag}=1: strata {f_off:.2f}, --spec {f_on:.2f}", file=sys.stderr)
                d["f_off"].append(f_off)
                d["f_spec"].append(f_on)
            if have_llama:
                d["llama"].append(llama_decode(py, path, a.spec_n, a.llama_threads))

    med = lambda v: statistics.median(v) if v else None  # noqa: E731
    load = os.getloadavg()
    print(f"\nStrata vs llama.cpp, {a.rounds} interleaved rounds x {a.reps} repetitions, "
          f"{a.settle:g} s settle before each command, llama.cpp "
          f"{a.llama_threads} thread(s){' OMP_WAIT_POLICY=passive' if a.omp_passive else ''}; "
          f"load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min)\n")
    if not have_llama:
        print(f"llama.cpp is not installed ({py} missing or cannot import llama_cpp): "
              "run scripts/llamacpp_setup.sh. Strata's figures only.\n")
    fl = f" | Strata {a.flag}=1 t/s | {a.flag}=1 / llama.cpp" if a.flag else ""
    print(f"| model | test | Strata t/s | llama.cpp t/s | Strata / llama.cpp{fl} |")
    print("| ----- | ---: | ---------: | ------------: | -----------------: |"
          + (" ---: | ---: |" if a.flag else ""))
    ratio = lambda x, y: f"{x / y:.3f}" if x and y else "—"  # noqa: E731
    for (key, test), c in speed.items():
        s, f, l = med(c["strata"]), med(c["flag"]), med(c["llama"])
        extra = f" | {fmt(f)} | {ratio(f, l)}" if a.flag else ""
        print(f"| {os.path.basename(models[key])} | {test} | {fmt(s)} | {fmt(l)} | {ratio(s, l)}"
              f"{extra} |")
    print(f"\nGreedy decode of {a.spec_n} tokens on a fixed copy-the-list prompt (tok/s; Strata's "
          f"decode_tps from `strata run --stats`):\n")
    fl = f" | {a.flag}=1 | {a.flag}=1 --spec {a.spec}" if a.flag else ""
    print(f"| model | Strata | Strata --spec {a.spec} | acceptance | speed-up | llama.cpp{fl} |")
    print("| ----- | -----: | -----: | ---------: | -------: | --------: |"
          + (" -----: | -----: |" if a.flag else ""))
    for key, d in dec.items():
        off, on = med(d["off"]), med(d["spec"])
        extra = f" | {fmt(med(d['f_off']))} | {fmt(med(d['f_spec']))}" if a.flag else ""
        print(f"| {os.path.basename(models[key])} | {fmt(off)} | {fmt(on)} | {med(d['acc']):.2f} | "
              f"{on / off:.2f}x | {fmt(med(d['llama']))}{extra} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
