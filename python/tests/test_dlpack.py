"""DLPack: PyTorch's CPU tensors in without a copy, duet.Tensor out to PyTorch and NumPy without a
copy (bf16 included), memory on a GPU refused with the reason."""
import numpy as np
import pytest

import duet
from conftest import random, softmax64

torch = pytest.importorskip("torch")


class FakeCudaTensor:
    """What a CUDA tensor shows a consumer before any memory is read: its DLPack device (one
    duet has not opened, on any machine)."""

    def __dlpack_device__(self):
        return (2, 7)

    def __dlpack__(self, stream=None):
        raise AssertionError("duet must refuse before asking for the memory (and a stream)")


def test_torch_cpu_tensors_go_in_and_outputs_come_out_as_dlpack(cpu_engine):
    x, w = random((4, 8), 1), random((8, 8), 2)
    out = cpu_engine.run({"x": torch.from_numpy(x), "w": torch.from_numpy(w).t().contiguous().t()},
                         numpy=False)
    y = out["y"]
    assert isinstance(y, duet.Tensor) and y.dtype == "f32" and y.shape == (4, 8)
    t = torch.from_dlpack(y)
    a = np.from_dlpack(y)
    # One memory, three views of it.
    assert t.data_ptr() == a.ctypes.data == y.numpy().ctypes.data
    np.testing.assert_allclose(t.numpy(), softmax64(x.astype(np.float64) @ w), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(memoryview(y), a)


def test_bf16_goes_to_torch_as_bfloat16():
    b = duet.GraphBuilder("bf16")
    x = b.input("x", "f32", [3, 4])
    b.output(b.cast(x, "bf16", name="y"))
    with duet.Engine(b.build(), policy="device=cpu") as e:
        x = random((3, 4), 5)
        t = torch.from_dlpack(e.run({"x": x}, numpy=False)["y"])
        assert t.dtype == torch.bfloat16
        assert torch.equal(t, torch.from_numpy(x).to(torch.bfloat16))
        # And back in: a bf16 torch tensor as a bf16 input.
        b2 = duet.GraphBuilder("bf16in")
        b2.output(b2.cast(b2.input("x", "bf16", [3, 4]), "f32", name="y"))
        with duet.Engine(b2.build(), policy="device=cpu") as e2:
            y = e2.run({"x": t})["y"]
            np.testing.assert_array_equal(y, t.float().numpy())


def test_from_dlpack_shares_host_memory_and_refuses_device_memory():
    src = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = duet.from_dlpack(src)
    assert t.shape == (2, 3) and t.dtype == "f32"
    src[0, 0] = 42.0
    assert t.numpy()[0, 0] == 42.0  # the same memory
    with pytest.raises(duet.UnsupportedError, match="CUDA device memory.*host memory"):
        duet.from_dlpack(FakeCudaTensor())
    # A consumer asking for the tensor on a GPU, or with a stream, is told why not.
    with pytest.raises(duet.UnsupportedError, match="host memory.*device \\(2, 0\\)"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(duet.BadInputError, match="stream must be None"):
        t.__dlpack__(stream=1)


def test_a_tensor_on_another_device_is_refused_naming_the_input(cpu_engine):
    with pytest.raises(duet.UnsupportedError, match="input 'x'.*CUDA device 7.*tensor.cpu()"):
        cpu_engine.run({"x": FakeCudaTensor(), "w": random((8, 8), 2)})
    with pytest.raises(duet.BadInputError, match="input 'x'.*float64"):
        cpu_engine.run({"x": torch.ones(4, 8, dtype=torch.float64), "w": random((8, 8), 2)})


def cuda_device():
    """duet's id of CUDA device 0 where PyTorch and duet both have it, else None."""
    if not torch.cuda.is_available():
        return None
    ids = [d["id"] for d in duet.devices() if d["id"] == "cuda:0"]
    return ids[0] if ids else None


@pytest.mark.skipif(cuda_device() is None, reason="needs a CUDA GPU that PyTorch and duet see")
def test_torch_cuda_tensors_go_in_and_come_out_without_a_host_copy(hello):
    """On a GPU (tools/gpu/run.sh): a CUDA tensor in, read in place on duet's stream after
    PyTorch's work on it, and the output out to PyTorch in the memory duet's kernel wrote."""
    x, w = random((4, 8), 1), random((8, 8), 2)
    with duet.Engine(hello, policy="device=cuda") as e:
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):  # produced on a stream of PyTorch's own
            xc = torch.from_numpy(x).cuda(non_blocking=True) * 1.0
            wc = torch.from_numpy(w).cuda(non_blocking=True) * 1.0
            out = e.run({"x": xc, "w": wc}, device_outputs=True)
        y = out["y"]
        assert isinstance(y, duet.DeviceTensor) and y.device == "cuda:0"
        assert y.__dlpack_device__() == (2, 0)
        t = torch.from_dlpack(y)
        assert t.is_cuda and t.shape == (4, 8)
        assert t.data_ptr() == torch.from_dlpack(y).data_ptr()  # the same memory each time
        want = softmax64(x.astype(np.float64) @ w)
        np.testing.assert_allclose(t.cpu().numpy(), want, rtol=1e-4, atol=1e-5)
        # Back in, as PyTorch's tensor and as duet's: no host copy either way.
        again = e.run({"x": t, "w": wc})["y"]
        again2 = e.run({"x": y, "w": wc})["y"]
        np.testing.assert_allclose(again, softmax64(want @ w), rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(again, again2)
        with pytest.raises(duet.BadInputError, match="input 'x'.*non-contiguous"):
            e.run({"x": torch.from_numpy(x.T.copy()).cuda().t(), "w": wc})


def test_from_dlpack_takes_the_array_apis_device_and_copy():
    src = torch.arange(1, 7, dtype=torch.float32).reshape(2, 3)
    arr = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    # device: the host only, by name or DLPack's pair.
    for dev in (None, "cpu", (1, 0)):
        assert duet.from_dlpack(src, device=dev).shape == (2, 3)
    for dev in ("cuda:0", (2, 0), 7):
        with pytest.raises(duet.DLPackError, match="host memory"):
            duet.from_dlpack(src, device=dev)
    # copy=True: a copy of its own, whatever the source.
    for x in (src, arr):
        t = duet.from_dlpack(x, copy=True)
        x[0, 0] = 42.0
        assert t.numpy()[0, 0] == 1.0 and not t.read_only
        x[0, 0] = 1.0
    # copy=False: shared, NumPy arrays too (through their __dlpack__).
    for x in (src, arr):
        t = duet.from_dlpack(x, copy=False)
        x[1, 2] = -5.0
        assert t.numpy()[1, 2] == -5.0
    # ...and refused where only a copy can be made.
    with pytest.raises(duet.DLPackError, match="copy=False.*no __dlpack__"):
        duet.from_dlpack(memoryview(arr.tobytes()), copy=False)
    # copy=None keeps the old rule: arrays copied, DLPack memory shared.
    t = duet.from_dlpack(arr)
    arr[0, 1] = 9.0
    assert t.numpy()[0, 1] == 2.0
