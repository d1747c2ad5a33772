#!/usr/bin/env python3
"""Writes the .npy files that tests/tools check `duet convert` against, with NumPy itself.

    python3 tools/make_npy_samples.py tests/tools/npy

The test suite runs this script into a scratch folder when python3 has NumPy, and reads the
checked-in copies otherwise. Each array's values are a function of its index, so the test knows
them without NumPy: element i (row-major) is i - 5 for signed types, i for unsigned ones, i % 2 == 1
for bool, and (i - 5) / 4 for floats.
"""
import os
import sys

import numpy as np


def values(dtype, shape):
    n = int(np.prod(shape))
    i = np.arange(n)
    if dtype == np.bool_:
        v = i % 2 == 1
    elif np.issubdtype(dtype, np.unsignedinteger):
        v = i
    elif np.issubdtype(dtype, np.integer):
        v = i - 5
    else:
        v = (i - 5) / 4
    return v.astype(dtype).reshape(shape)


SAMPLES = {
    "f32": ("<f4", (2, 3, 4)),
    "f16": ("<f2", (3, 5)),
    "f64": ("<f8", (7,)),
    "i8": ("|i1", (2, 6)),
    "u8": ("|u1", (9,)),
    "i32": ("<i4", (4, 2)),
    "i64": ("<i8", (3, 4)),
    "bool": ("|b1", (2, 5)),
    "f32_big_endian": (">f4", (2, 3)),
    "f64_scalar": ("<f8", ()),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    for name, (dtype, shape) in SAMPLES.items():
        np.save(os.path.join(out, name + ".npy"), values(np.dtype(dtype), shape))


if __name__ == "__main__":
    main()
