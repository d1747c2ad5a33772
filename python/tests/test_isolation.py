"""duet's pybind11 internals are its own: a module built with another pybind11 (PyTorch's, in
another layout under the same ABI string) never reads or writes them. Seen on an H200 machine
(2026-11-28): pip's PyTorch 2.11 and our module built with pybind11 3.1 crashed together in either
import order. Checked here through the interpreter's state dict, where pybind11 keeps them, and by
both import orders beside PyTorch where it is installed."""
import builtins
import ctypes
import os
import subprocess
import sys

import pytest

import duet  # noqa: F401  (its internals are made at import)


def internals_keys():
    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    api.PyInterpreterState_GetDict.restype = ctypes.py_object
    api.PyInterpreterState_GetDict.argtypes = [ctypes.c_void_p]
    state = api.PyInterpreterState_GetDict(api.PyInterpreterState_Get())
    # pybind11 2.x keeps them in builtins, 3.x in the interpreter's state dict.
    keys = list(state) + list(vars(builtins))
    return [k for k in keys if isinstance(k, str) and "pybind11" in k]


def test_the_modules_pybind11_internals_are_its_own():
    keys = internals_keys()
    ours = [k for k in keys if "_duet" in k]
    assert ours, f"no pybind11 internals of duet's own kind among {keys}"


@pytest.mark.parametrize("order", ["torch, duet", "duet, torch"])
def test_an_engine_runs_beside_pytorch_in_either_import_order(order):
    pytest.importorskip("torch")
    code = f"""
import numpy as np
import {order}
b = duet.GraphBuilder("iso")
x = b.input("x", "f32", [2, 3])
b.output(b.relu(x, name="y"))
with duet.Engine(b.build(), policy="device=cpu") as e:
    v = np.array([[-1.5, 2.0, -0.25], [0.5, -3.0, 4.0]], np.float32)
    out = e.run({{"x": v}})["y"]
    assert np.array_equal(out, np.maximum(v, 0)), out
t = torch.arange(4, dtype=torch.float32)
assert float(t.sum()) == 6.0
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stderr[-2000:])
