"""duet.Engine from Python: NumPy in, NumPy out, against the float64 reference; bad input raises
a duet exception naming the input; engines run from several threads."""
import threading

import numpy as np
import pytest

import duet
from conftest import ROOT, random, softmax64


def hello_inputs(seed=0):
    return {"x": random((4, 8), seed), "w": random((8, 8), seed + 1)}


def hello_reference(x, w):
    return softmax64(x.astype(np.float64) @ w.astype(np.float64))


def test_devices_include_the_cpu():
    ids = [d["id"] for d in duet.devices()]
    assert "cpu:0" in ids
    cpu = next(b for b in duet.backends() if b["backend"] == "cpu")
    assert cpu["available"]


def test_numpy_in_numpy_out_matches_the_float64_reference(cpu_engine):
    ins = hello_inputs()
    out = cpu_engine.run(ins)
    assert list(out) == ["y"] and out.dtypes == {"y": "f32"}
    y = out["y"]
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (4, 8)
    # The array is duet's own memory, handed over without a copy.
    assert not y.flags.owndata
    np.testing.assert_allclose(y, hello_reference(**ins), rtol=1e-5, atol=1e-6)


def test_every_device_agrees_with_the_reference(hello):
    ins = hello_inputs(3)
    for d in duet.devices():
        with duet.Engine(hello, devices=[d["id"]]) as e:
            np.testing.assert_allclose(e.run(ins)["y"], hello_reference(**ins), rtol=1e-4,
                                       atol=1e-5, err_msg=d["id"])


def test_strided_and_reversed_arrays_give_the_same_answer(cpu_engine):
    ins = hello_inputs(5)
    want = hello_reference(**ins)
    fortran = {"x": np.asfortranarray(ins["x"]), "w": np.asfortranarray(ins["w"])}
    wide = np.zeros((4, 16), np.float32)
    wide[:, ::2] = ins["x"]
    reversed_w = np.ascontiguousarray(ins["w"][::-1])[::-1]  # negative strides: copied
    raw = np.zeros(4 * 8 * 4 + 1, np.uint8)  # misaligned float32: copied
    raw[1:] = ins["x"].view(np.uint8).ravel()
    misaligned = np.frombuffer(raw.data, np.float32, 32, offset=1).reshape(4, 8)
    for given in (fortran, {"x": wide[:, ::2], "w": reversed_w},
                  {"x": misaligned, "w": ins["w"]}):
        np.testing.assert_allclose(cpu_engine.run(given)["y"], want, rtol=1e-5, atol=1e-6)


def test_f16_in_and_out_is_numpys_float16():
    b = duet.GraphBuilder("half")
    x = b.input("x", "f16", [3, 5])
    b.output(b.silu(x, name="y"))
    with duet.Engine(b.build(), policy="device=cpu") as e:
        x = random((3, 5), 7, np.float16)
        y = e.run({"x": x})["y"]
        assert y.dtype == np.float16
        x64 = x.astype(np.float64)
        np.testing.assert_allclose(y.astype(np.float64), x64 / (1 + np.exp(-x64)), rtol=2e-3,
                                   atol=1e-3)


def bf16_bits(x):
    """float32 -> bf16 bit patterns, rounded to nearest even (as duet rounds)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def test_bf16_comes_out_as_named_uint16_bits_without_ml_dtypes():
    b = duet.GraphBuilder("bf16")
    x = b.input("x", "f32", [2, 6])
    b.output(b.cast(x, "bf16", name="y"))
    with duet.Engine(b.build(), policy="device=cpu") as e:
        x = random((2, 6), 11)
        out = e.run({"x": x})
        assert out.dtypes["y"] == "bf16"
        y = out["y"]
        if y.dtype == np.uint16:  # Debian 12 has no ml_dtypes
            np.testing.assert_array_equal(y, bf16_bits(x))
        else:
            assert y.dtype.name == "bfloat16"
            np.testing.assert_array_equal(y.view(np.uint16), bf16_bits(x))


def test_bf16_input_as_uint16_bits():
    b = duet.GraphBuilder("bf16in")
    x = b.input("x", "bf16", [2, 4])
    b.output(b.cast(x, "f32", name="y"))
    with duet.Engine(b.build(), policy="device=cpu") as e:
        bits = bf16_bits(random((2, 4), 13))
        y = e.run({"x": bits})["y"]
        np.testing.assert_array_equal(y.view(np.uint32), bits.astype(np.uint32) << 16)
        with pytest.raises(duet.BadInputError, match="input 'x'.*bf16"):
            e.run({"x": np.zeros((2, 4), np.float32) + 1})


def embedding_graph():
    b = duet.GraphBuilder("embed")
    table = b.constant("table", random((10, 4), 17))
    ids = b.input("ids", "i32", [3])
    b.output(b.embedding(table, ids, name="y"))
    return b.build()


def test_int64_ids_are_narrowed_and_overflow_is_refused():
    with duet.Engine(embedding_graph(), policy="device=cpu") as e:
        y = e.run({"ids": np.array([1, 9, 0], np.int64)})["y"]
        np.testing.assert_array_equal(y, random((10, 4), 17)[[1, 9, 0]])
        with pytest.raises(duet.BadInputError, match="input 'ids'.*2147483648.*i32"):
            e.run({"ids": np.array([1, 2**31, 0], np.int64)})


def test_bad_input_raises_an_exception_naming_the_input(cpu_engine):
    ins = hello_inputs()
    with pytest.raises(duet.BadInputError, match="input 'x'.*float64.*f32") as e:
        cpu_engine.run({**ins, "x": ins["x"].astype(np.float64)})
    assert e.value.kind == "invalid_argument" and isinstance(e.value, ValueError)
    with pytest.raises(duet.BadInputError, match="input 'w' is missing"):
        cpu_engine.run({"x": ins["x"]})
    with pytest.raises(duet.NotFoundError, match="input 'z'.*takes x"):
        cpu_engine.run({**ins, "z": ins["x"]})
    with pytest.raises(duet.BadInputError, match="input 'x'.*got str"):
        cpu_engine.run({**ins, "x": "not an array"})
    with pytest.raises(duet.BadInputError, match="input 'x'.*no elements"):
        cpu_engine.run({**ins, "x": np.zeros((0, 8), np.float32)})
    with pytest.raises(duet.BadInputError, match="input 'x'.*5 dimensions"):
        cpu_engine.run({**ins, "x": np.ones((1, 1, 1, 4, 8), np.float32)})
    # A shape the graph's ops cannot take: the error names the op and the tensor.
    with pytest.raises(duet.Error, match="xw"):
        cpu_engine.run({**ins, "x": random((4, 7), 1)})
    # The engine is still usable after bad input.
    np.testing.assert_allclose(cpu_engine.run(ins)["y"], hello_reference(**ins), rtol=1e-5,
                               atol=1e-6)


def test_new_shapes_replan_once(hello):
    with duet.Engine(hello, policy="device=cpu") as e:
        x = random((6, 8), 21)
        w = random((8, 8), 22)
        np.testing.assert_allclose(e.run({"x": x, "w": w})["y"], hello_reference(x, w),
                                   rtol=1e-5, atol=1e-6)
        assert e.plans_made == 2


def test_a_closed_engine_raises(hello):
    e = duet.Engine(hello, policy="device=cpu")
    with e:
        e.run(hello_inputs())
    assert e.closed
    with pytest.raises(duet.EngineClosedError, match="closed"):
        e.run(hello_inputs())
    with pytest.raises(duet.EngineClosedError):
        e.explain()


def test_policies_and_devices_are_checked(hello):
    with pytest.raises(duet.BadInputError, match="policy"):
        duet.Engine(hello, policy="frobnicate=1")
    with pytest.raises(duet.NotFoundError, match="device 'cuda:7'.*cpu:0"):
        duet.Engine(hello, devices=["cuda:7"])
    with duet.Engine(hello, policy="device=cpu;precision=f32") as e:
        assert "precision=f32" in e.policy
        assert "cpu:0" in e.explain()
        steps = [s for s in e.plan()["steps"] if s["kind"] == "kernel"]
        assert {s["device"] for s in steps} == {"cpu:0"}


def test_several_threads_share_one_engine_and_run_their_own(hello, cpu_engine):
    errors = []

    def work(engine, seed):
        try:
            for i in range(5):
                ins = hello_inputs(seed * 10 + i)
                np.testing.assert_allclose(engine.run(ins)["y"], hello_reference(**ins),
                                           rtol=1e-5, atol=1e-6)
        except Exception as e:  # noqa: BLE001: reported below
            errors.append(e)

    own = [duet.Engine(hello, policy="device=cpu") for _ in range(2)]
    threads = [threading.Thread(target=work, args=(cpu_engine, s)) for s in range(4)]
    threads += [threading.Thread(target=work, args=(e, 10 + s)) for s, e in enumerate(own)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in own:
        e.close()
    assert not errors, errors


def test_load_reads_graph_files_and_names_a_missing_one():
    g = duet.load(f"{ROOT}/examples/ffn.json")
    assert g.inputs and g.outputs
    with pytest.raises(duet.NotFoundError, match="nowhere.json"):
        duet.load(f"{ROOT}/nowhere.json")


def test_graph_builder_raises_where_the_graph_is_wrong():
    b = duet.GraphBuilder("bad")
    x = b.input("x", "f32", [4, 8])
    w = b.input("w", "f32", [7, 8])
    with pytest.raises(duet.BadInputError, match="matmul"):
        b.matmul(x, w)
    b2 = duet.GraphBuilder("attrs")
    y = b2.input("y", "f32", [2, 3])
    v = b2.op("reduce_sum", [y], axes=[1], name="s")
    assert v.shape == (2, 1) and v.dtype == "f32"
    with pytest.raises(duet.Error, match="frobnicate"):
        b2.op("softmax", [y], frobnicate=True)
    with pytest.raises(duet.BadInputError, match="another GraphBuilder"):
        b2.relu(x)


def test_every_duet_error_code_has_its_exception_class():
    import duet.errors as errors
    for kind in duet._duet._codes():
        cls = errors.error_class(kind)
        assert cls is not duet.Error and cls.kind == kind, kind
        assert issubclass(cls, duet.Error)
    assert issubclass(duet.OutOfMemoryError, MemoryError)
    assert issubclass(duet.NotFoundError, LookupError)


def test_a_gguf_backed_graph_runs_as_the_graph_it_was_saved_from(tmp_path):
    # A q8_0 weight quantized from floats, saved: the graph file references it in a .gguf file,
    # memory-mapped when loaded back.
    b = duet.GraphBuilder("q")
    x = b.input("x", "f32", [3, 64])
    w = b.constant("w", random((16, 64), 31), dtype="q8_0")
    assert w.dtype == "q8_0"
    b.output(b.matmul(x, w, transpose_b=True, name="y"))
    g = b.build()
    g.save(tmp_path / "q.json")
    assert (tmp_path / "q.gguf").exists()
    loaded = duet.load(tmp_path / "q.json")
    assert loaded.constants == [{"name": "w", "dtype": "q8_0", "shape": (16, 64)}]
    xs = random((3, 64), 32)
    with duet.Engine(g, policy="device=cpu") as a, duet.Engine(loaded, policy="device=cpu") as c:
        want = a.run({"x": xs})["y"]
        np.testing.assert_array_equal(c.run({"x": xs})["y"], want)
    # Within q8_0's error of the float weights.
    ref = xs.astype(np.float64) @ random((16, 64), 31).astype(np.float64).T
    assert np.abs(want - ref).max() < 0.02 * np.abs(ref).max()


def test_a_graph_over_the_memory_budget_is_an_out_of_memory_error():
    b = duet.GraphBuilder("big")
    x = b.input("x", "f32", [256, 256])
    b.output(b.matmul(x, x, name="y"))
    with pytest.raises(duet.OutOfMemoryError, match="(?s)matmul 'y'.*cpu:0.*budget") as e:
        duet.Engine(b.build(), policy="device=cpu;budget=1000")
    assert e.value.kind == "out_of_memory" and isinstance(e.value, MemoryError)
