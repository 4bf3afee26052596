#!/usr/bin/env python3
"""The seeds' A/B of the hyper-connection read flags (issue 26), now `strata ab` (issue 29,
docs/ab.md): this script only runs

    strata ab --preset smollm2-hc [-m MODEL] [-r ROUNDS] [-n N] [--nll TEXT] --report FILE

and prints its Markdown. The preset's [ab] section (config/smollm2-hc.toml) names the arms
(default / hc-q8 / gr-fused), the three prompts, greedy with spec 4, and the NLL text through
windows of 5. `strata ab` runs each arm in its own engine process, interleaved over the rounds,
and adds what the by-hand version lacked: token-level divergence (position, both tokens, the
text around), the same prompt tokens checked in every run, the build id, the flag latch lines,
memory per card, and a warning when the arms' draft acceptance makes tok/s not comparable.

Usage: scripts/hc_ab.py [--model PATH] [--rounds 3] [--n 64] [--text assets/nll_sample.txt]
Needs `make build` (target/release/strata) and `.strata/env`.
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--n", type=int)
    ap.add_argument("--text")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "strata"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        report = os.path.join(d, "hc_ab.md")
        cmd = [a.bin, "ab", "--preset", "smollm2-hc", "--report", report]
        for flag, v in (("-m", a.model), ("-r", a.rounds), ("-n", a.n), ("--nll", a.text)):
            if v is not None:
                cmd += [flag, str(v)]
        # the table goes to stderr here: stdout is the Markdown, as before
        r = subprocess.run(cmd, cwd=ROOT, stdout=sys.stderr)
        if r.returncode != 0:
            sys.exit(r.returncode)
        with open(report) as f:
            sys.stdout.write(f.read())


if __name__ == "__main__":
    main()
