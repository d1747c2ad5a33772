"""DLPack 1.0's versioned capsules on the host (the array API standard's __dlpack__ keywords):
duet.Tensor exports "dltensor_versioned" to a consumer offering max_version >= (1, 0) and
"dltensor" to one that does not; duet consumes both, asking for the versioned one first; the
deleter runs exactly once whoever frees; READ_ONLY is kept. Without PyTorch: a ctypes producer
and consumer stand for other libraries (dlpack_ctypes.py)."""
import gc

import numpy as np
import pytest

import duet
import dlpack_ctypes as dl
from conftest import random


def alive():
    return duet._duet._dlpack_exports_alive()


@pytest.fixture
def tensor(cpu_engine):
    x, w = random((4, 8), 1), random((8, 8), 2)
    return cpu_engine.run({"x": x, "w": w}, numpy=False)["y"]


def test_a_versioned_consumer_gets_a_versioned_capsule_and_an_old_one_the_old_kind(tensor):
    before = alive()
    for max_version, want in [((1, 0), dl.VERSIONED), ((1, 3), dl.VERSIONED),
                              ((2, 0), dl.VERSIONED), ((0, 8), dl.LEGACY), (None, dl.LEGACY)]:
        cap = tensor.__dlpack__(max_version=max_version)
        assert dl.name(cap) == want, max_version
        assert alive() == before + 1
        del cap  # never taken: the capsule's destructor frees it, once
        assert alive() == before
    assert dl.name(tensor.__dlpack__()) == dl.LEGACY  # NumPy 1.24, PyTorch 1.13


def test_a_consumer_that_takes_the_capsule_renames_it_and_calls_the_deleter_once(tensor):
    before = alive()
    expected = tensor.numpy().ctypes.data
    for max_version in [(1, 0), None]:
        cap = tensor.__dlpack__(max_version=max_version)
        taken = dl.Taken(cap)
        assert dl.name(cap) == (dl.VERSIONED_USED if max_version else dl.LEGACY_USED)
        assert taken.device == (1, 0) and taken.shape == (4, 8) and taken.data == expected
        if max_version:
            assert taken.version == (1, 0)
            assert taken.flags == 0  # duet's own memory, lent as it is: writeable
        assert alive() == before + 1
        taken.free()
        assert alive() == before
        del cap  # renamed: its destructor leaves the tensor alone (no second delete)
        gc.collect()
        assert alive() == before


def test_copy_true_hands_over_a_copy_flagged_as_one_and_copy_false_the_memory(tensor):
    own = tensor.numpy().ctypes.data
    taken = dl.Taken(tensor.__dlpack__(max_version=(1, 0), copy=True))
    assert taken.flags == dl.IS_COPIED and taken.data != own
    taken.free()
    taken = dl.Taken(tensor.__dlpack__(max_version=(1, 0), copy=False, dl_device=(1, 0)))
    assert taken.flags == 0 and taken.data == own
    taken.free()
    with pytest.raises(BufferError, match="host memory.*\\(2, 0\\)"):
        tensor.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    with pytest.raises(duet.DLPackError):
        tensor.__dlpack__(dl_device=(2, 0))
    with pytest.raises(duet.BadInputError, match="max_version must be"):
        tensor.__dlpack__(max_version=1)
    with pytest.raises(duet.BadInputError, match="copy must be"):
        tensor.__dlpack__(copy="yes")


def test_duet_round_trips_its_own_tensors_through_both_capsule_kinds(tensor):
    before = alive()
    again = duet.from_dlpack(tensor)  # asks for the versioned capsule
    assert alive() == before + 1
    np.testing.assert_array_equal(again.numpy(), tensor.numpy())
    assert again.numpy().ctypes.data == tensor.numpy().ctypes.data  # no copy
    assert not again.read_only and again.numpy().flags.writeable
    del again
    assert alive() == before

    class OldProducer:  # only the signature of DLPack before 1.0
        def __init__(self, inner):
            self.inner = inner

        def __dlpack__(self, stream=None):
            return self.inner.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.inner.__dlpack_device__()

    again = duet.from_dlpack(OldProducer(tensor))
    assert again.numpy().ctypes.data == tensor.numpy().ctypes.data
    del again
    assert alive() == before


def test_a_versioned_producer_is_asked_first_and_its_deleter_runs_once():
    x = random((4, 8), 3)
    p = dl.Producer(x)
    t = duet.from_dlpack(p)
    assert p.calls == [{"stream": None, "max_version": (1, 0), "dl_device": None, "copy": None}]
    assert t.numpy().ctypes.data == p.array.ctypes.data  # read in place
    assert p.deleted == 0
    del t
    assert p.deleted == 1

    old = dl.Producer(x, legacy_only=True)
    t = duet.from_dlpack(old)
    assert old.calls == [{"stream": None}]  # asked again the old way after its TypeError
    np.testing.assert_array_equal(t.numpy(), x)
    del t
    assert old.deleted == 1

    # A capsule nobody takes is freed by its own destructor, once.
    cap = p.__dlpack__(max_version=(1, 0))
    del cap
    assert p.deleted == 2


def test_a_versioned_producers_tensor_is_an_engine_input(cpu_engine):
    x, w = random((4, 8), 4), random((8, 8), 5)
    px, pw = dl.Producer(x, read_only=True), dl.Producer(w)
    out = cpu_engine.run({"x": px, "w": pw})["y"]
    want = cpu_engine.run({"x": x, "w": w})["y"]
    np.testing.assert_array_equal(out, want)
    assert px.calls[0]["max_version"] == (1, 0)
    assert (px.deleted, pw.deleted) == (1, 1)  # let go when the run is over


def test_read_only_memory_stays_read_only_in_every_view_duet_gives():
    x = random((3, 5), 6)
    p = dl.Producer(x, read_only=True)
    t = duet.from_dlpack(p)
    assert t.read_only
    a = t.numpy()
    assert a.ctypes.data == p.array.ctypes.data and not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0] = 1.0
    assert memoryview(t).readonly
    assert not np.asarray(t).flags.writeable
    # Passed on: flagged READ_ONLY for a versioned consumer; a copy is the consumer's own.
    taken = dl.Taken(t.__dlpack__(max_version=(1, 0)))
    assert taken.flags == dl.READ_ONLY and taken.data == p.array.ctypes.data
    taken.free()
    taken = dl.Taken(t.__dlpack__(max_version=(1, 0), copy=True))
    assert taken.flags == dl.IS_COPIED
    taken.free()
    again = duet.from_dlpack(t)
    assert again.read_only
    del t, a, again
    gc.collect()
    assert p.deleted == 1


def test_a_capsule_of_another_major_version_is_refused_and_handed_back():
    p = dl.Producer(random((2, 2), 7), version=(2, 0))
    with pytest.raises(duet.UnsupportedError, match="DLPack 2.0 capsule.*1.x"):
        duet.from_dlpack(p)
    assert p.deleted == 1


def test_numpy_takes_duet_tensors_as_before(tensor):
    a = np.from_dlpack(tensor)  # NumPy 1.24: the old signature, the old capsule
    assert a.ctypes.data == tensor.numpy().ctypes.data
    t = duet.from_dlpack(random((2, 3), 8))  # an array: copied, as before
    assert t.shape == (2, 3)
