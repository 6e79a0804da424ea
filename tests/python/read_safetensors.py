#!/usr/bin/env python3
"""Reads a safetensors file by hand (struct, json, numpy.frombuffer; no safetensors
package), so tapeless' writer is checked against an independent reading of the format.

  read_safetensors.py FILE                 prints every tensor and the metadata
  read_safetensors.py FILE --expect JSON   compares with JSON: {"metadata": {...},
      "tensors": {name: {"dtype": "F32", "shape": [...], "bits": ["3f800000", ...]}}}
      (bits: each value's IEEE bit pattern in hex, in C order); exit 0 when equal, 1 not

Exit code 77 (skipped) when numpy cannot be imported.
"""
import json
import struct
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not importable by", sys.executable, "(pip install numpy)")
    sys.exit(77)

DTYPES = {"F32": (np.dtype("<f4"), np.dtype("<u4"), 8), "F64": (np.dtype("<f8"), np.dtype("<u8"), 16)}


def reject_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError(f"duplicate keys in the header: {keys}")
    return dict(pairs)


def read(path):
    data = open(path, "rb").read()
    if len(data) < 8:
        raise ValueError("shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"header length {n} runs past the end of the file")
    header = json.loads(data[8:8 + n].decode("utf-8"), object_pairs_hook=reject_duplicates)
    buffer = data[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors, regions = {}, []
    for name, info in header.items():
        if set(info) != {"dtype", "shape", "data_offsets"}:
            raise ValueError(f"{name}: unexpected keys {sorted(info)}")
        dtype = DTYPES[info["dtype"]][0]
        shape = tuple(info["shape"])
        count = 1
        for d in shape:
            count *= d
        begin, end = info["data_offsets"]
        if end - begin != count * dtype.itemsize or end > len(buffer):
            raise ValueError(f"{name}: offsets {begin}, {end} do not fit shape {shape}")
        values = np.frombuffer(buffer[begin:end], dtype=dtype) if count else np.empty(0, dtype)
        tensors[name] = (info["dtype"], values.reshape(shape))
        regions.append((begin, end))
    covered = 0
    for begin, end in sorted(regions):
        if begin != covered:
            raise ValueError(f"data regions leave a gap or overlap at byte {covered}")
        covered = end
    if covered != len(buffer):
        raise ValueError(f"{len(buffer) - covered} bytes of trailing data")
    return tensors, metadata


def bits(dtype_name, values):
    _, as_int, digits = DTYPES[dtype_name]
    return [format(int(v), f"0{digits}x") for v in values.reshape(-1).view(as_int)]


def compare(tensors, metadata, expected):
    problems = []
    if metadata != expected["metadata"]:
        problems.append(f"metadata {metadata!r} != {expected['metadata']!r}")
    if sorted(tensors) != sorted(expected["tensors"]):
        problems.append(f"names {sorted(tensors)} != {sorted(expected['tensors'])}")
    for name, want in expected["tensors"].items():
        if name not in tensors:
            continue
        dtype_name, values = tensors[name]
        if dtype_name != want["dtype"]:
            problems.append(f"{name}: dtype {dtype_name} != {want['dtype']}")
        elif list(values.shape) != want["shape"]:
            problems.append(f"{name}: shape {list(values.shape)} != {want['shape']}")
        elif bits(dtype_name, values) != want["bits"]:
            problems.append(f"{name}: values differ")
    return problems


def main():
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != "--expect"):
        print(__doc__)
        return 2
    tensors, metadata = read(sys.argv[1])
    if len(sys.argv) == 2:
        print("metadata:", metadata)
        for name, (dtype_name, values) in tensors.items():
            print(f"{name}: {dtype_name} {list(values.shape)}\n{values}")
        return 0
    expected = json.load(open(sys.argv[3], encoding="utf-8"))
    problems = compare(tensors, metadata, expected)
    for p in problems:
        print("MISMATCH:", p)
    if not problems:
        print(f"ok: {len(tensors)} tensors and {len(metadata)} metadata entries match")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
