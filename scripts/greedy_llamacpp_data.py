#!/usr/bin/env python3
"""llama.cpp's greedy continuations as test data (issue 28): for each model and prompt,
`llama-completion -p PROMPT -n 48 --temp 0 -t 2 --no-display-prompt -no-cnv` (llama.cpp 11434,
CPU build of scripts/llama-cpp/build.sh, its defaults otherwise: flash attention auto, f16 KV
cache, weight repacking on; BOS per the model's add_bos), its stdout as the continuation.
Writes tests/data/greedy/llamacpp.json, read by tests/model_greedy_llamacpp.rs.
Each model also gets an `f16` entry: the same prompts through the file llama.cpp's own
`llama-quantize --allow-requantize MODEL OUT F16` makes (every quantized matrix widened to F16,
so neither tool rounds a matmul input to 8 bits), with that file's sha256: `strata convert --to
f16` writes the same bytes, which the test checks before it compares.

    set -a; . .strata/env; set +a
    python3 scripts/greedy_llamacpp_data.py
Standard library only.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
N = 48
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n",
    "The water cycle describes how water moves",
    "Here is a list of the planets in the solar system:\n1.",
    "Photosynthesis is the process by which",
    "In 1492, Christopher Columbus",
]
MODELS = ["STRATA_MODEL_SMOLLM2", "STRATA_MODEL_GEMMA3"]
# llama.cpp's two attention paths: its default (flash attention "auto": on for the CPU; prompt
# rows through the f32 tiled kernel, decode rows with Q and the V accumulator rounded to f16) and
# the plain graph (-fa off: Q and the softmax rounded to f16 for the f16 KV products). Each is
# llama.cpp on this file; they disagree with each other as often as Strata does with either.
VARIANTS = {"default": [], "fa_off": ["-fa", "off"]}


def continuation(stdout):
    """llama-completion's stdout less what the tool adds: "\n\n" after the text, and " [end of
    text]\n" before that when the model stopped at an end-of-generation token."""
    text = stdout[:-2] if stdout.endswith("\n\n") else stdout
    eos = text.endswith(" [end of text]\n")
    return (text[: -len(" [end of text]\n")] if eos else text), eos


def greedy(llama, model, p, extra):
    cmd = [llama, "-m", model, "-p", p, "-n", str(N), "--temp", "0", "-t", "2",
           "--no-display-prompt", "-no-cnv"] + extra
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)}: {r.stderr.decode(errors='replace')[-2000:]}")
    text, eos = continuation(r.stdout.decode("utf-8", errors="replace"))
    return {"continuation": text, "eos": eos}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    bindir = os.path.join(
        os.environ.get("STRATA_LLAMA_CPP_DIR", os.path.expanduser("~/.cache/strata/llama.cpp-11434")),
        "build", "bin")
    llama = os.path.join(bindir, "llama-completion")
    if not os.access(llama, os.X_OK):
        sys.exit(f"error: {llama} not found: run scripts/llama-cpp/build.sh")
    out = {"llama_cpp": "b11434 llama-completion", "n_predict": N, "command":
           "llama-completion -m MODEL -p PROMPT -n 48 --temp 0 -t 2 --no-display-prompt -no-cnv",
           "variants": {k: " ".join(v) for k, v in VARIANTS.items()},
           "models": {}}
    for env in MODELS:
        model = os.environ.get(env) or sys.exit(f"error: {env} is not set (source .strata/env)")
        cases = []
        for p in PROMPTS:
            case = {"prompt": p}
            for name, extra in VARIANTS.items():
                case[name] = greedy(llama, model, p, extra)
                print(f"{env} {name} {p!r} -> {case[name]['continuation']!r}", file=sys.stderr)
            cases.append(case)
        out["models"][env] = {"file": os.path.basename(model), "cases": cases}
        with tempfile.TemporaryDirectory() as tmp:
            f16 = os.path.join(tmp, "f16.gguf")
            cmd = [os.path.join(bindir, "llama-quantize"), "--allow-requantize", model, f16, "F16"]
            r = subprocess.run(cmd, capture_output=True)
            if r.returncode != 0:
                sys.exit(f"error: {' '.join(cmd)}: {r.stderr.decode(errors='replace')[-2000:]}")
            f16_cases = []
            for p in PROMPTS:
                c = {"prompt": p, "default": greedy(llama, f16, p, [])}
                print(f"{env} f16 {p!r} -> {c['default']['continuation']!r}", file=sys.stderr)
                f16_cases.append(c)
            out["models"][env]["f16"] = {
                "made_by": "llama-quantize --allow-requantize MODEL OUT F16",
                "sha256": sha256(f16), "cases": f16_cases}
    path = os.path.join(ROOT, "tests", "data", "greedy", "llamacpp.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(path)


if __name__ == "__main__":
    main()
