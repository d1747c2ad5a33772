"""Device memory in and out without a GPU: the module's test build (ctest python_pytest_emulated_cuda)
opens an emulated CUDA card, "emu-t4:0" (the CUDA backend over a fake driver, kernels on the host
emulator), and counts the fake driver's copies between host and device (duet._emulated_copies()).
Skipped by the plain module. A real GPU runs test_dlpack.py's PyTorch round trip instead."""
import ctypes

import numpy as np
import pytest

import duet
import dlpack_ctypes as dl
from conftest import random

pytestmark = pytest.mark.skipif(not hasattr(duet._duet, "_emulated_copies"),
                                reason="the module's test build has the emulated CUDA card")

EMU = "emu-t4:0"


def copies():
    return duet._duet._emulated_copies()  # (to the device, to the host)


def silu64(x):
    x = x.astype(np.float64)
    return x / (1 + np.exp(-x))


class Foreign:
    """Another library's CUDA tensor, as DLPack before 1.0 shows it: what it was asked for is
    kept."""

    def __init__(self, inner, device=None):
        self.inner, self.device, self.streams = inner, device, []

    def __dlpack_device__(self):
        return self.device or self.inner.__dlpack_device__()

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self.inner.__dlpack__(stream=stream)


class Foreign1(Foreign):
    """The same with DLPack 1.0's signature: it answers with the capsule kind it is asked for."""

    def __init__(self, inner):
        super().__init__(inner)
        self.asked = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        self.asked.append(max_version)
        cap = self.inner.__dlpack__(stream=stream, max_version=max_version)
        self.names = getattr(self, "names", []) + [dl.name(cap)]
        return cap


@pytest.fixture(scope="module")
def emu():
    b = duet.GraphBuilder("silu")
    b.output(b.silu(b.input("x", "f32", [3, 8]), name="y"))
    with duet.Engine(b.build(), devices=[EMU]) as e:
        yield e


def test_an_output_stays_on_the_device_and_goes_back_in_without_a_copy(emu):
    x = random((3, 8), 11)
    up, down = copies()
    y = emu.run({"x": x}, device_outputs=True)["y"]
    assert copies()[1] == down  # not downloaded
    assert isinstance(y, duet.DeviceTensor)
    assert (y.device, y.dtype, y.shape) == (EMU, "f32", (3, 8))
    assert repr(y) == "duet.DeviceTensor(f32[3,8] on emu-t4:0)"
    assert y.__dlpack_device__() == (2, 0)
    up = copies()[0]
    z = emu.run({"x": y})["y"]  # back in as duet's tensor: no upload
    assert copies()[0] == up
    np.testing.assert_allclose(z, silu64(silu64(x)), rtol=1e-5, atol=1e-6)


def test_another_librarys_device_tensor_is_read_in_place_after_its_stream(emu):
    x = random((3, 8), 12)
    y = emu.run({"x": x}, device_outputs=True)["y"]
    theirs = Foreign(y)
    up, down = copies()
    out = emu.run({"x": theirs}, device_outputs=True)["y"]
    assert copies() == (up, down)  # neither uploaded nor downloaded
    # DLPack: duet names its own stream, for the producer to order its work before it.
    assert len(theirs.streams) == 1 and isinstance(theirs.streams[0], int)
    assert theirs.streams[0] not in (None, 0, -1)
    np.testing.assert_allclose(emu.run({"x": out})["y"], silu64(silu64(silu64(x))), rtol=1e-5,
                               atol=1e-6)


def test_a_versioned_producers_device_tensor_is_asked_for_dlpack_1_and_read_in_place(emu):
    x = random((3, 8), 18)
    y = emu.run({"x": x}, device_outputs=True)["y"]
    theirs = Foreign1(y)
    before = duet._duet._dlpack_exports_alive()
    up, down = copies()
    out = emu.run({"x": theirs})["y"]
    assert copies()[0] == up  # read in place
    assert theirs.asked == [(1, 0)] and theirs.names == [dl.VERSIONED]
    assert theirs.streams[0] not in (None, 0, -1)  # duet's stream, as before
    assert duet._duet._dlpack_exports_alive() == before  # its capsule let go after the run
    np.testing.assert_allclose(out, silu64(silu64(x)), rtol=1e-5, atol=1e-6)


def test_dlpack_export_takes_every_stream_dlpack_defines_and_refuses_what_it_cannot(emu):
    y = emu.run({"x": random((3, 8), 13)}, device_outputs=True)["y"]
    # The run has finished: ready on every stream.
    for stream in (None, -1, 1, 2, duet._duet._emulated_stream()):
        assert type(y.__dlpack__(stream=stream)).__name__ == "PyCapsule"
    with pytest.raises(duet.BadInputError, match="stream must be"):
        y.__dlpack__(stream=0)
    with pytest.raises(duet.UnsupportedError, match="emu-t4:0.*\\(2, 0\\).*\\(2, 1\\)"):
        y.__dlpack__(dl_device=(2, 1))
    with pytest.raises(BufferError, match="no device copies"):
        y.__dlpack__(copy=True)
    with pytest.raises(duet.DLPackError, match="needs a copy, and copy=False"):
        y.__dlpack__(dl_device=(1, 0), copy=False)


def test_a_device_tensor_exports_both_capsule_kinds_and_a_host_copy_when_asked(emu):
    x = random((3, 8), 17)
    y = emu.run({"x": x}, device_outputs=True)["y"]
    before = duet._duet._dlpack_exports_alive()
    for max_version in [(1, 0), None]:
        cap = y.__dlpack__(stream=-1, max_version=max_version, dl_device=(2, 0), copy=False)
        taken = dl.Taken(cap)
        assert dl.name(cap) == (dl.VERSIONED_USED if max_version else dl.LEGACY_USED)
        assert taken.device == (2, 0) and taken.shape == (3, 8)
        if max_version:
            assert taken.version == (1, 0) and taken.flags == 0
        taken.free()
        assert duet._duet._dlpack_exports_alive() == before
    cap = y.__dlpack__(max_version=(1, 0))
    del cap  # never taken: freed by the capsule, once
    assert duet._duet._dlpack_exports_alive() == before
    # On the host, as the array API's from_dlpack(y, device="cpu") asks: one download, flagged
    # as a copy.
    down = copies()[1]
    taken = dl.Taken(y.__dlpack__(max_version=(1, 0), dl_device=(1, 0)))
    assert copies()[1] == down + 1
    assert taken.device == (1, 0) and taken.flags == dl.IS_COPIED
    seen = np.ctypeslib.as_array(ctypes.cast(taken.data, ctypes.POINTER(ctypes.c_float)),
                                 shape=(3, 8)).copy()
    taken.free()
    np.testing.assert_allclose(seen, silu64(x), rtol=1e-5, atol=1e-6)
    assert duet._duet._dlpack_exports_alive() == before


def test_device_tensors_the_plan_cannot_read_there_are_refused_naming_the_input(emu):
    y = emu.run({"x": random((3, 8), 14)}, device_outputs=True)["y"]
    b = duet.GraphBuilder("silu_cpu")
    b.output(b.silu(b.input("x", "f32", [3, 8]), name="y"))
    with duet.Engine(b.build(), devices=["cpu:0"]) as cpu:
        with pytest.raises(duet.BadInputError, match="'x'.*host memory, or cpu:0.*emu-t4:0"):
            cpu.run({"x": y})
        # Outputs of a CPU plan are host memory, device_outputs or not.
        assert isinstance(cpu.run({"x": random((3, 8), 1)}, device_outputs=True)["y"],
                          np.ndarray)
    with pytest.raises(duet.UnsupportedError, match="input 'x'.*CUDA device 3.*tensor.cpu"):
        emu.run({"x": Foreign(y, device=(2, 3))})
    b = duet.GraphBuilder("silu16")
    b.output(b.silu(b.input("x", "f16", [3, 8]), name="y"))
    with duet.Engine(b.build(), devices=[EMU]) as e16:
        with pytest.raises(duet.BadInputError, match="input 'x'.*expected dtype f16.*f32"):
            e16.run({"x": y})
        with pytest.raises(duet.BadInputError, match="input 'x'.*expected dtype f16, got f32"):
            e16.run({"x": Foreign(y)})


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_memory_a_consumer_frees_is_not_reused_before_its_stream_is_done(max_version):
    # A shape of its own (16000 bytes): no other cached block of its size to hand out instead.
    b = duet.GraphBuilder("silu_big")
    b.output(b.silu(b.input("x", "f32", [40, 100]), name="y"))
    x = random((40, 100), 15)
    with duet.Engine(b.build(), devices=[EMU]) as e:
        want = e.run({"x": x})["y"]
        y = e.run({"x": x}, device_outputs=True)["y"]
        stream = duet._duet._emulated_stream()
        # Another library takes y on its stream, queues a read of it there, and frees it before
        # the read has run (PyTorch: the deleter runs when the tensor is freed, not when its
        # stream is done with it).
        theirs = duet._duet._EmulatedConsumer(
            y.__dlpack__(stream=stream, max_version=max_version), stream)
        assert theirs.versioned == (max_version is not None)
        del y
        theirs.free()
        # duet's next output gets other memory: the read, once it runs, sees y as it was.
        later = duet._duet._EmulatedConsumer(
            e.run({"x": random((40, 100), 16)}, device_outputs=True)["y"].__dlpack__(
                stream=stream), stream)
        assert later.address != theirs.address
        seen = np.frombuffer(theirs.result(), np.float32).reshape(40, 100)
        np.testing.assert_allclose(seen, want, rtol=1e-6, atol=1e-7)
