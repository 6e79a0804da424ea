#!/usr/bin/env python3
"""NumPy's own .npy reader and writer against tapeless'.

  read_npy_check.py check FILE JSON   numpy.load(FILE) must match JSON {"dtype": "<f4",
                                      "shape": [...], "bits": ["3f800000", ...]} (exit 0, else 1)
  read_npy_check.py write DIR         writes .npy files with numpy and DIR/expect.json
                                      describing each one (its bits, or why tapeless must
                                      reject it) for the C++ side to compare against

Exit code 77 (skipped) when numpy cannot be imported.
"""
import json
import os
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not importable by", sys.executable, "(pip install numpy)")
    sys.exit(77)

UNSIGNED = {"<f4": ("<u4", 8), "<f8": ("<u8", 16)}


def bits(values):
    as_int, digits = UNSIGNED[values.dtype.str]
    return [format(int(v), f"0{digits}x") for v in np.ascontiguousarray(values).reshape(-1).view(as_int)]


def check(path, expect_path):
    expected = json.load(open(expect_path))
    values = np.load(path, allow_pickle=False)
    problems = []
    if values.dtype.str != expected["dtype"]:
        problems.append(f"dtype {values.dtype.str} != {expected['dtype']}")
    elif list(values.shape) != expected["shape"]:
        problems.append(f"shape {list(values.shape)} != {expected['shape']}")
    elif bits(values) != expected["bits"]:
        problems.append("values differ")
    for p in problems:
        print("MISMATCH:", path, p)
    if not problems:
        print(f"ok: {path} {values.dtype.str} {list(values.shape)}")
    return 1 if problems else 0


def write(directory):
    special32 = np.array([-0.0, np.finfo(np.float32).smallest_subnormal, np.finfo(np.float32).max, 1 / 3], np.float32)
    m32 = np.concatenate([special32, np.arange(8, dtype=np.float32) / np.float32(7)]).reshape(3, 4)
    v64 = np.array([0.1, -2.5, np.finfo(np.float64).smallest_subnormal, 1e300, -0.0], np.float64)
    m64 = (np.arange(6, dtype=np.float64) * np.pi).reshape(2, 3)
    # float16: the extremes, a subnormal, signed zero, 1/3; its expected bits are numpy's
    # own widening to float32 (exact), which tapeless must reproduce.
    m16 = np.array([[-0.0, np.finfo(np.float16).smallest_subnormal, np.finfo(np.float16).max],
                    [1 / 3, -2.5, np.finfo(np.float16).tiny]], np.float16)
    with open(os.path.join(directory, "np_f16_2d.npy"), "wb") as f:
        np.lib.format.write_array(f, m16)
    expect = {"np_f16_2d.npy": {"dtype": "<f2", "shape": list(m16.shape), "bits": bits(m16.astype(np.float32))}}
    accepted = {"np_f32_2d.npy": (m32, None), "np_f64_1d.npy": (v64, None), "np_f64_v2.npy": (m64, (2, 0)),
                "np_f32_v3.npy": (m32[:2], (3, 0)), "np_f32_1x1.npy": (np.array([[5.5]], np.float32), None),
                "np_f64_0x3.npy": (np.zeros((0, 3)), None)}
    for name, (values, version) in accepted.items():
        with open(os.path.join(directory, name), "wb") as f:
            np.lib.format.write_array(f, values, version=version)
        expect[name] = {"dtype": values.dtype.str, "shape": list(values.shape), "bits": bits(values)}
    rejected = {"np_fortran.npy": (np.asfortranarray(m64), "Fortran order"),
                "np_big_endian.npy": (m32.astype(">f4"), "big-endian"),
                "np_int32.npy": (np.arange(4, dtype="<i4"), "dtype '<i4' is not supported"),
                "np_3d.npy": (np.zeros((2, 2, 2), np.float32), "3 dimensions")}
    for name, (values, reason) in rejected.items():
        np.save(os.path.join(directory, name), values)
        expect[name] = {"reject": reason}
    json.dump(expect, open(os.path.join(directory, "expect.json"), "w"), indent=1)
    print(f"wrote {len(expect)} files to {directory}")
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        return check(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 3 and sys.argv[1] == "write":
        return write(sys.argv[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
