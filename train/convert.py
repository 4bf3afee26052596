"""Run llama.cpp 11434's own converter (convert_hf_to_gguf.py) on a flash-mini checkpoint.

  python train/convert.py LLAMA_CPP_SRC HFDIR [converter args...]

One adjustment, made here and not in llama.cpp: the converter reads the config through
transformers' AutoConfig, which renames the attention layers' "full_attention" to
"indexed_attention", and then writes QSA compress ratio 0 for them (it keys on
"full_attention"). A file whose MTP layer is QSA but whose trunk attention is not aborts in
llama.cpp's first decode (the QSA key-pool input is built but no trunk layer reads it:
GGML_ASSERT(buffer) in llm_graph_input_kpool::set_input). So the names are put back as the real
checkpoint has them; every attention layer is then QSA, as in the seeds' model.
"""
import sys
from pathlib import Path

src = Path(sys.argv[1]).resolve()
sys.path[:0] = [str(src), str(src / "gguf-py")]
sys.argv = [str(src / "convert_hf_to_gguf.py")] + sys.argv[2:]

import conversion.base as base  # noqa: E402

_orig = base.ModelBase.load_hparams


def _load_hparams(dir_model, is_mistral_format, guess=True):
    hp = _orig(dir_model, is_mistral_format, guess)
    if "layer_types" in hp:
        hp["layer_types"] = ["full_attention" if t == "indexed_attention" else t for t in hp["layer_types"]]
    return hp


base.ModelBase.load_hparams = staticmethod(_load_hparams)

import convert_hf_to_gguf  # noqa: E402

convert_hf_to_gguf.main()
