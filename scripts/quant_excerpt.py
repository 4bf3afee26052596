#!/usr/bin/env python3
"""Cuts a few rows of one tensor out of a GGUF as raw block bytes (a test excerpt).

Run with $STRATA_PYTHON (gguf 0.19):
    quant_excerpt.py <file.gguf> <tensor name> <first row> <n rows> <out.raw>
Prints the tensor's type, shape (ggml order) and the excerpt's sha256. The rows are the GGUF
bytes unchanged (n rows x row bytes), so a test can decode them with strata and with gguf-py's
`gguf.quants.dequantize` (scripts/quant_dump.py blocks) and compare bit for bit.
"""
import hashlib
import sys

import numpy as np
import gguf


def main(argv):
    if len(argv) != 6:
        sys.stderr.write(__doc__)
        return 2
    path, name, first, n, out = argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5]
    reader = gguf.GGUFReader(path)
    t = next((t for t in reader.tensors if t.name == name), None)
    if t is None:
        sys.stderr.write(f"{path}: no tensor {name}\n")
        return 1
    data = np.asarray(t.data)
    rows = data.reshape((-1, data.shape[-1]))
    if first + n > rows.shape[0]:
        sys.stderr.write(f"{name}: rows {first}..{first + n} of {rows.shape[0]}\n")
        return 1
    raw = np.ascontiguousarray(rows[first:first + n]).view(np.uint8).tobytes()
    with open(out, "wb") as f:
        f.write(raw)
    qtype = gguf.GGMLQuantizationType(t.tensor_type)
    print(f"{name} {qtype.name} shape {[int(s) for s in t.shape]} rows {first}..{first + n}: "
          f"{len(raw)} bytes sha256 {hashlib.sha256(raw).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
