"""ONNX models exported by PyTorch (tests/onnx/models, written by tools/onnx/export_test_models.py
with PyTorch's own outputs beside them) run from Python on every device, NumPy in and out, within
tolerance of PyTorch's outputs; int64 token ids go in as PyTorch gives them. On the CPU: the
C++ suite (tests/onnx) runs them on every device; here the Python path is what is tested."""
import json
import struct

import numpy as np
import pytest

import duet
from conftest import ROOT

MODELS = f"{ROOT}/tests/onnx/models"
pytestmark = pytest.mark.skipif(
    not any(b["backend"] == "cpu" for b in duet.backends()), reason="no CPU backend")


def read_safetensors(path):
    """The tensors of a .safetensors file as NumPy arrays (Debian has no Python safetensors)."""
    kinds = {"F32": np.float32, "I64": np.int64}
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + a:8 + n + b], kinds[h["dtype"]]).reshape(h["shape"])
    return out


@pytest.mark.parametrize("model", ["gpt2_block", "bert_layer"])
def test_an_onnx_model_exported_by_pytorch_matches_pytorchs_outputs(model):
    inputs = read_safetensors(f"{MODELS}/{model}.inputs.safetensors")
    want = read_safetensors(f"{MODELS}/{model}.outputs.safetensors")["y"].astype(np.float64)
    try:
        graph = duet.load(f"{MODELS}/{model}.onnx",
                          input_shapes={k: list(v.shape) for k, v in inputs.items()})
    except duet.UnsupportedError as e:
        pytest.skip(str(e))  # a build without the ONNX importer
    with duet.Engine(graph, devices=["cpu:0"]) as e:
        got = e.run(inputs)["y"].astype(np.float64)
    err = got - want
    nmse = (err ** 2).mean() / (want ** 2).mean()
    max_rel = np.abs(err).max() / np.sqrt((want ** 2).mean())
    assert nmse < 1e-10 and max_rel < 1e-4, (nmse, max_rel)
