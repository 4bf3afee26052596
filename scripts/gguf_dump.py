#!/usr/bin/env python3
"""Dump a GGUF file as JSON using the independent `gguf` package's reader (gguf-py).

Output: {"version", "tensor_count", "kv_count", "alignment", "data_offset", "file_size",
"metadata": {key: {"type": [type names...], "value": full value}},
"tensors": [{"name", "type", "type_id", "shape" (ne order), "n_elements", "n_bytes",
"data_offset" (absolute)}]}.
Used by tests/gguf_real.rs to check that strata's reader agrees with it.
Usage: gguf_dump.py FILE
"""
import json
import os
import sys

import gguf


def plain(v):
    """numpy scalars/arrays and bytes -> JSON-friendly Python values."""
    if isinstance(v, list):
        return [plain(x) for x in v]
    if hasattr(v, "tolist"):
        return v.tolist()
    return v


def main():
    path = sys.argv[1]
    r = gguf.GGUFReader(path)
    meta = {}
    header = {}
    for key, field in r.fields.items():
        types = [gguf.GGUFValueType(t).name for t in field.types]
        value = plain(field.contents())
        if key.startswith("GGUF."):
            header[key] = value
            continue
        meta[key] = {"type": types, "value": value}
    tensors = []
    for t in r.tensors:
        tensors.append({
            "name": t.name,
            "type": t.tensor_type.name,
            "type_id": int(t.tensor_type.value),
            "shape": [int(x) for x in t.shape],
            "n_elements": int(t.n_elements),
            "n_bytes": int(t.n_bytes),
            "data_offset": int(t.data_offset),
        })
    out = {
        "version": header.get("GGUF.version"),
        "tensor_count": header.get("GGUF.tensor_count"),
        "kv_count": header.get("GGUF.kv_count"),
        "alignment": int(r.alignment),
        "data_offset": int(r.data_offset),
        "file_size": os.path.getsize(path),
        "metadata": meta,
        "tensors": tensors,
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
