#!/usr/bin/env python3
"""Independent decoder for strata's quant tests: gguf-py (gguf.quants, numpy) as the reference.

Run with $STRATA_PYTHON (the venv with gguf 0.19 + numpy). Subcommands:

  model <file.gguf> <out|->
      Streams every tensor of a GGUF as records (to a file, or stdout with "-"), in row chunks
      of at most CHUNK_VALUES values so nothing tensor-sized is held twice:
        u32 LE header length, header JSON (utf-8), raw block bytes, dequantized f32 LE values.
      Header: {"name", "type", "type_id", "shape" (ggml order), "chunk", "n_chunks",
               "raw_len", "n_values"}. The stream ends with a header {"end": true, "tensors": N}.
  blocks <TYPE> <in.raw> <out.f32>
      Dequantizes a file of raw blocks of ggml type TYPE (e.g. Q4_K) to little-endian f32.
  quantize <TYPE> <in.f32> <out.raw>
      Quantizes little-endian f32 values with gguf-py's quantizer (Q4_0, Q4_1, Q5_0, Q5_1,
      Q8_0, BF16, F16).
"""
import json
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

CHUNK_VALUES = 1 << 22


def write_record(out, header, raw, values):
    h = json.dumps(header).encode()
    out.write(struct.pack("<I", len(h)))
    out.write(h)
    if raw is not None:
        out.write(raw)
        out.write(values)


def dump_model(path, out_path):
    reader = gguf.GGUFReader(path)
    out = sys.stdout.buffer if out_path == "-" else open(out_path, "wb")
    for t in reader.tensors:
        qtype = T(t.tensor_type)
        block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
        data = np.asarray(t.data)
        # rows: (n_rows, row_bytes_or_values) in the reader's own dtype
        rows = data.reshape((-1, data.shape[-1])) if data.ndim > 1 else data.reshape((1, -1))
        row_values = int(t.shape[0])
        rows_per_chunk = max(1, CHUNK_VALUES // max(1, row_values))
        n_chunks = (rows.shape[0] + rows_per_chunk - 1) // rows_per_chunk
        for c in range(n_chunks):
            part = np.ascontiguousarray(rows[c * rows_per_chunk:(c + 1) * rows_per_chunk])
            values = gguf.quants.dequantize(part, qtype).astype("<f4", copy=False)
            raw = part.view(np.uint8).tobytes()
            header = {
                "name": t.name,
                "type": qtype.name,
                "type_id": int(qtype),
                "shape": [int(s) for s in t.shape],
                "chunk": c,
                "n_chunks": n_chunks,
                "raw_len": len(raw),
                "n_values": int(values.size),
            }
            assert len(raw) == values.size // block_elems * block_bytes, t.name
            write_record(out, header, raw, np.ascontiguousarray(values).tobytes())
    write_record(out, {"end": True, "tensors": len(reader.tensors)}, None, None)
    out.flush()


def dequantize_blocks(type_name, in_path, out_path):
    qtype = T[type_name]
    _, block_bytes = GGML_QUANT_SIZES[qtype]
    raw = np.fromfile(in_path, dtype=np.uint8)
    if qtype == T.F32:
        values = raw.view("<f4")
    elif qtype == T.F16:
        values = gguf.quants.dequantize(raw.view("<f2"), qtype)
    else:
        values = gguf.quants.dequantize(raw.reshape((-1, block_bytes)), qtype)
    np.ascontiguousarray(values, dtype="<f4").tofile(out_path)


def quantize_values(type_name, in_path, out_path):
    qtype = T[type_name]
    block_elems, _ = GGML_QUANT_SIZES[qtype]
    x = np.fromfile(in_path, dtype="<f4").reshape((-1, block_elems))
    q = gguf.quants.quantize(x, qtype)
    np.ascontiguousarray(q).view(np.uint8).tofile(out_path)


def main(argv):
    if len(argv) == 4 and argv[1] == "model":
        dump_model(argv[2], argv[3])
    elif len(argv) == 5 and argv[1] == "blocks":
        dequantize_blocks(argv[2], argv[3], argv[4])
    elif len(argv) == 5 and argv[1] == "quantize":
        quantize_values(argv[2], argv[3], argv[4])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
