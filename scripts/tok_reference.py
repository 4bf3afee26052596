#!/usr/bin/env python3
"""Reference token ids and chat-template renderings from INDEPENDENT implementations.

Two tokenizer back-ends (`--impl`):
  llamacpp  llama.cpp through llama-cpp-python (`Llama(model_path, vocab_only=True)`), the
            implementation whose GGUF semantics Strata follows (needs a ~1 h source build here).
  hf        Hugging Face `tokenizers` (SmolLM2: BPE + Digits/ByteLevel pre-tokenizer, as in its
            tokenizer.json) and Google `sentencepiece` (Gemma: a ModelProto built from the GGUF
            pieces/scores/types, BPE + byte fallback) — wheels, installs in seconds.
Chat templates: jinja2's ImmutableSandboxedEnvironment with trim_blocks/lstrip_blocks, exactly as
transformers' apply_chat_template renders them.

Not run by CI: its output, tests/fixtures/tokenizer/reference.json, is committed and the Rust
test tests/tokenizer_reference.rs compares against it. To regenerate (in a separate venv):

    python3 -m venv /tmp/tokref
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_OPENMP=OFF" \
        /tmp/tokref/bin/pip install llama-cpp-python==0.3.36 jinja2
    set -a; . .strata/env; set +a
    /tmp/tokref/bin/python scripts/tok_reference.py --impl llamacpp
  or: pip install tokenizers sentencepiece protobuf gguf jinja2; ... --impl hf
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


class LlamaCppRef:
    """llama.cpp's own tokenizer on the GGUF file."""

    def __init__(self, path):
        import llama_cpp
        from llama_cpp import Llama

        self.tool = f"llama-cpp-python {llama_cpp.__version__} (llama.cpp vocab_only)"
        self.llm = Llama(model_path=path, vocab_only=True, verbose=False)
        self.template = self.llm.metadata.get("tokenizer.chat_template")
        self.bos_text = self.text(self.llm.token_bos())
        self.eos_text = self.text(self.llm.token_eos())

    def text(self, tid):
        return self.llm.detokenize([tid], special=True).decode() if tid >= 0 else ""

    def plain(self, s):
        return self.llm.tokenize(s.encode("utf-8"), add_bos=False, special=False)

    def special(self, s):
        return self.llm.tokenize(s.encode("utf-8"), add_bos=True, special=True)

    def detok(self, ids):
        return self.llm.detokenize(ids).decode("utf-8", errors="replace")


def gguf_fields(path):
    from gguf import GGUFReader

    r = GGUFReader(path)
    get = lambda k: r.fields[k].contents() if k in r.fields else None  # noqa: E731
    return {k: get(k) for k in [
        "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
        "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
        "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_space_prefix", "tokenizer.chat_template"]}


class HfRef:
    """HF `tokenizers` (gpt2 family) or Google `sentencepiece` (llama family), built from the GGUF
    metadata read by the `gguf` package."""

    def __init__(self, path):
        f = gguf_fields(path)
        self.f = f
        self.tokens = f["tokenizer.ggml.tokens"]
        self.types = f["tokenizer.ggml.token_type"]
        self.template = f["tokenizer.chat_template"]
        self.bos = f["tokenizer.ggml.bos_token_id"]
        self.eos = f["tokenizer.ggml.eos_token_id"]
        self.add_bos = bool(f["tokenizer.ggml.add_bos_token"])
        self.bos_text = self.tokens[self.bos] if self.bos is not None else ""
        self.eos_text = self.tokens[self.eos] if self.eos is not None else ""
        # Control/unknown token texts (split out only with parse_special) and user-defined ones
        # (always split out on the raw text, as HF's AddedVocabulary and llama.cpp do; sentencepiece
        # itself would match them only after escaping spaces to U+2581, so never for Gemma's space
        # runs), longest first.
        self.control = sorted({self.tokens[i] for i, t in enumerate(self.types) if t in (2, 3)}, key=len, reverse=True)
        self.user = sorted({self.tokens[i] for i, t in enumerate(self.types) if t == 4}, key=len, reverse=True)
        self.ids = {}
        for i, t in enumerate(self.tokens):
            self.ids[t] = i
        if f["tokenizer.ggml.model"] == "gpt2":
            self._init_bpe()
        else:
            self._init_spm()

    def _init_bpe(self):
        import tokenizers
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

        assert self.f["tokenizer.ggml.pre"] == "smollm", self.f["tokenizer.ggml.pre"]
        vocab = {t: i for i, t in enumerate(self.tokens)}
        merges = [tuple(m.split(" ", 1)) for m in self.f["tokenizer.ggml.merges"]]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
        tok.decoder = decoders.ByteLevel()
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in self.control])
        self.hf = tok
        self.tool_name = f"tokenizers {tokenizers.__version__}"

    def _init_spm(self):
        import sentencepiece as spm
        from sentencepiece import sentencepiece_model_pb2 as pb

        m = pb.ModelProto()
        unk = self.f["tokenizer.ggml.unknown_token_id"]
        for i, (t, sc, ty) in enumerate(zip(self.tokens, self.f["tokenizer.ggml.scores"], self.types)):
            p = m.pieces.add()
            p.piece = t
            p.score = float(sc)
            # sentencepiece needs its unk piece typed UNKNOWN (Gemma's GGUF types it control).
            p.type = 2 if i == unk else {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6}.get(int(ty), 1)
        m.trainer_spec.model_type = pb.TrainerSpec.BPE
        m.trainer_spec.byte_fallback = True
        m.trainer_spec.unk_id = unk
        m.trainer_spec.bos_id = self.bos
        m.trainer_spec.eos_id = self.eos
        m.trainer_spec.pad_id = self.f["tokenizer.ggml.padding_token_id"]
        m.normalizer_spec.name = "identity"
        m.normalizer_spec.add_dummy_prefix = bool(self.f["tokenizer.ggml.add_space_prefix"])
        m.normalizer_spec.remove_extra_whitespaces = False
        m.normalizer_spec.escape_whitespaces = True
        self.sp = spm.SentencePieceProcessor(model_proto=m.SerializeToString())
        self.tool_name = f"sentencepiece {spm.__version__}"

    @property
    def tool(self):
        return self.tool_name + " (model built from GGUF metadata)"

    def _raw(self, s):
        if hasattr(self, "hf"):
            return self.hf.encode(s, add_special_tokens=False).ids
        return self.sp.encode(s) if s else []

    def _split(self, s, texts):
        """Leftmost match of an alternation ordered longest first; text between goes to the model."""
        import re

        if not texts:
            return self._raw(s)
        pat = re.compile("|".join(re.escape(t) for t in texts))
        out = []
        pos = 0
        for mt in pat.finditer(s):
            if mt.start() > pos:
                out += self._raw(s[pos:mt.start()])
            out.append(self.ids[mt.group(0)])
            pos = mt.end()
        if pos < len(s):
            out += self._raw(s[pos:])
        return out

    def plain(self, s):
        if hasattr(self, "hf"):
            self.hf.encode_special_tokens = True
            ids = self.hf.encode(s, add_special_tokens=False).ids
            self.hf.encode_special_tokens = False
            return ids
        return self._split(s, self.user)

    def special(self, s):
        out = [self.bos] if self.add_bos else []
        if hasattr(self, "hf"):
            return out + self.hf.encode(s, add_special_tokens=False).ids
        return out + self._split(s, sorted(self.control + self.user, key=len, reverse=True))

    def detok(self, ids):
        if hasattr(self, "hf"):
            return self.hf.decode(ids, skip_special_tokens=True)
        return self.sp.decode(ids)


def main() -> int:
    import argparse

    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["llamacpp", "hf"], default="llamacpp")
    args = ap.parse_args()
    Ref = LlamaCppRef if args.impl == "llamacpp" else HfRef

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
    out = {"tool": None, "strings": strings, "models": {}}
    tools = set()
    for name, path in models.items():
        ref = Ref(path)
        tools.add(ref.tool)
        cases = []
        for s in strings:
            plain = [int(i) for i in ref.plain(s)]
            full = [int(i) for i in ref.special(s)]
            cases.append({"plain": plain, "special": full, "detok_plain": ref.detok(plain)})
        entry = {"file": os.path.basename(path), "tool": ref.tool, "cases": cases}
        tmpl = ref.template
        if tmpl:
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

            def raise_exception(msg):
                raise jinja2.exceptions.TemplateError(msg)

            env.globals["raise_exception"] = raise_exception
            t = env.from_string(tmpl)
            bos, eos = ref.bos_text, ref.eos_text
            entry["chat"] = [
                {
                    "messages": msgs,
                    "add_generation_prompt": agp,
                    "rendered": t.render(messages=msgs, add_generation_prompt=agp, bos_token=bos, eos_token=eos),
                }
                for msgs, agp in [(conv, True), (conv[1:], True), (conv[:3], False)]
            ]
        out["models"][name] = entry
        del ref
    out["tool"] = " + ".join(sorted(tools)) + f" + jinja2 {jinja2.__version__}"
    path = os.path.join(FIX, "reference.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(strings)} strings x {len(models)} models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
