#!/usr/bin/env python3
"""Reference token ids and chat-template renderings from an INDEPENDENT implementation.

Tokenizer: llama.cpp through llama-cpp-python (`Llama(model_path, vocab_only=True)`), the
implementation whose GGUF semantics Strata follows. Chat templates: jinja2's
ImmutableSandboxedEnvironment with trim_blocks/lstrip_blocks, exactly as transformers'
apply_chat_template renders them.

Not run by CI: its output, tests/fixtures/tokenizer/reference.json, is committed and the Rust
test tests/tokenizer_reference.rs compares against it. To regenerate (in a separate venv):

    python3 -m venv /tmp/tokref
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_OPENMP=OFF" \
        /tmp/tokref/bin/pip install llama-cpp-python==0.3.36 jinja2
    set -a; . .strata/env; set +a
    /tmp/tokref/bin/python scripts/tok_reference.py
"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "tests", "fixtures", "tokenizer")


def long_random_text(seed: int, n_chars: int) -> str:
    """Mixed-script text with odd spacing: stresses merges, byte fallback and splitting."""
    rng = random.Random(seed)
    words = ["the", "tokenizer", "Über", "naïve", "日本", "語", "😀", "👍🏽", "x1", "2024", "don't",
             "{", "}", "()", "\t", "\n", "  ", "   ", "é", "ß", "Привет", "λ", "->", "==", "...",
             "<|im_start|>", "<start_of_turn>", "abc" * 7, "ZWJ👨‍👩‍👧", "\r\n", "#", "—"]
    out = []
    size = 0
    while size < n_chars:
        w = rng.choice(words)
        sep = rng.choice([" ", " ", " ", "", "  ", "\n"])
        out.append(w + sep)
        size += len(w) + len(sep)
    return "".join(out)


def main() -> int:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    import llama_cpp
    from llama_cpp import Llama

    strings = json.load(open(os.path.join(FIX, "strings.json"), encoding="utf-8"))
    strings = strings + [long_random_text(1234, 6000)]
    models = {
        "smollm2": os.environ["STRATA_MODEL_SMOLLM2"],
        "gemma3": os.environ["STRATA_MODEL_GEMMA3"],
    }
    conv = [
        {"role": "system", "content": "You are a terse assistant.\nAnswer in one line."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4."},
        {"role": "user", "content": "And  3*3?  Ünïcode 😀"},
    ]
    out = {
        "tool": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp vocab_only) + jinja2 {jinja2.__version__}",
        "strings": strings,
        "models": {},
    }
    for name, path in models.items():
        llm = Llama(model_path=path, vocab_only=True, verbose=False)
        cases = []
        for s in strings:
            b = s.encode("utf-8")
            plain = llm.tokenize(b, add_bos=False, special=False)
            full = llm.tokenize(b, add_bos=True, special=True)
            detok = llm.detokenize(plain).decode("utf-8", errors="replace")
            cases.append({"plain": plain, "special": full, "detok_plain": detok})
        entry = {"file": os.path.basename(path), "cases": cases}
        tmpl = llm.metadata.get("tokenizer.chat_template")
        if tmpl:
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

            def raise_exception(msg):
                raise jinja2.exceptions.TemplateError(msg)

            env.globals["raise_exception"] = raise_exception
            t = env.from_string(tmpl)
            bos = llm.detokenize([llm.token_bos()], special=True).decode() if llm.token_bos() >= 0 else ""
            eos = llm.detokenize([llm.token_eos()], special=True).decode() if llm.token_eos() >= 0 else ""
            entry["chat"] = [
                {
                    "messages": msgs,
                    "add_generation_prompt": agp,
                    "rendered": t.render(messages=msgs, add_generation_prompt=agp, bos_token=bos, eos_token=eos),
                }
                for msgs, agp in [(conv, True), (conv[1:], True), (conv[:3], False)]
            ]
        out["models"][name] = entry
        del llm
    path = os.path.join(FIX, "reference.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(strings)} strings x {len(models)} models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
