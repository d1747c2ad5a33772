#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/TARGET/seed-*): small, valid
files of each format that reach the readers' main paths, for libFuzzer to mutate. Files a
campaign found (crashes once fixed, inputs that cover new code) live beside them under other
names and are kept. Run again after changing a format: /usr/bin/python3 fuzz/make_seeds.py
(Debian's Python, which has python3-onnx and python3-numpy)."""
import json
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(os.path.join(d, "seed-" + name), mode) as f:
        f.write(data)


# ---- graph JSON --------------------------------------------------------------------------
def graph(name, inputs, nodes, outputs, constants=()):
    return json.dumps({"format": "duet-graph", "version": 1, "name": name,
                       "inputs": list(inputs), "constants": list(constants),
                       "nodes": list(nodes), "outputs": list(outputs)}, indent=1)


def t(name, dtype, shape, **extra):
    d = {"name": name, "dtype": dtype, "shape": shape}
    d.update(extra)
    return d


def n(name, op, inputs, **attrs):
    d = {"name": name, "op": op, "inputs": inputs}
    if attrs:
        d["attrs"] = attrs
    return d


def graph_seeds():
    for ex in ("attention.json", "block.json"):
        with open(os.path.join(ROOT, "examples", ex)) as f:
            put("graph_json", ex, f.read())
    put("graph_json", "elementwise.json", graph(
        "ew", [t("x", "f32", [2, 3])],
        [n("a", "scale", ["x"], alpha=2), n("r", "relu", ["a"]), n("s", "sub", ["r", "b"]),
         n("g", "gelu", ["s"], gelu_approx="tanh"), n("c", "cast", ["g"], to="f16")],
        ["c"], [t("b", "f32", [3], values=[0.5, "-inf", "nan"])]))
    put("graph_json", "matmul.json", graph(
        "mm", [t("a", "bf16", [4, 8]), t("b", "bf16", [16, 8])],
        [n("m", "matmul", ["a", "b"], transpose_b=True), n("sm", "softmax", ["m"], axis=-1)],
        ["sm"]))
    put("graph_json", "decode.json", graph(
        "decode", [t("q", "f16", [1, 4, 1, 64]), t("k", "f16", [1, 4, 128, 64]),
                   t("v", "f16", [1, 4, 128, 64])],
        [n("rq", "rope", ["q"], rope_offset=127, rope_theta=10000.0, rope_mode="gptj"),
         n("o", "attention", ["rq", "k", "v"], causal=True, scale=0.125)], ["o"]))
    put("graph_json", "shapes.json", graph(
        "shapes", [t("x", "f32", [2, 3, 4])],
        [n("p", "permute", ["x"], perm=[2, 0, 1]), n("r", "reshape", ["p"], shape=[4, 6]),
         n("s", "slice", ["r"], axis=1, start=1, stop=5, step=2),
         n("tr", "transpose", ["s"], dim0=0, dim1=1)], ["tr"]))
    put("graph_json", "embedding.json", graph(
        "emb", [t("ids", "i32", [1, 5])],
        [n("e", "embedding", ["table", "ids"]), n("ln", "layernorm", ["e", "g", "b"], eps=1e-5)],
        ["ln"],
        [t("table", "f32", [10, 4], file="weights.safetensors", key="wte"),
         t("g", "f32", [4], values=[1, 1, 1, 1]), t("b", "f32", [4], values=[0, 0, 0, 0])]))
    put("graph_json", "quantized.json", graph(
        "q", [t("x", "f32", [1, 32])],
        [n("y", "matmul", ["x", "w"], transpose_b=True)], ["y"],
        [t("w", "q8_0", [8, 32], file="w.gguf")]))


# ---- policies ----------------------------------------------------------------------------
def policy_seeds():
    for i, p in enumerate([
            "deny=vulkan", "allow=cpu,vulkan:0;precision=f32",
            "deny=cuda.flash;precision.attention=f16;fallback=off",
            "device=cpu:0;budget=512MiB;budget.vulkan:0=1.5GiB;split=off",
            "precision=bf16;deny=cuda:1,vulkan.subgroup", " allow = cuda ; split = on "]):
        put("policy", "%d.txt" % i, p)


# ---- safetensors -------------------------------------------------------------------------
def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    put("safetensors", "f32.safetensors",
        safetensors([("x", "F32", [2, 3], struct.pack("<6f", 1, -2, 3, 0.25, 4, -0.5))],
                    {"producer": "seed"}))
    put("safetensors", "mixed.safetensors", safetensors([
        ("a", "F16", [4], struct.pack("<4e", 1, 2, -3, 0.5)),
        ("b", "BF16", [2, 2], struct.pack("<4H", 0x3F80, 0x4000, 0xBF80, 0x0000)),
        ("c", "I8", [3], struct.pack("<3b", -1, 0, 127)),
        ("d", "I32", [1, 2], struct.pack("<2i", 7, -7)),
        ("e", "I64", [2], struct.pack("<2q", 1, 2)),
        ("f", "F64", [1], struct.pack("<d", 1.5))]))
    put("safetensors", "empty.safetensors", safetensors([]))


# ---- GGUF --------------------------------------------------------------------------------
def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf(kv, tensors, alignment=32):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, vtype, payload in kv:
        out += gguf_string(key) + struct.pack("<I", vtype) + payload
    data, infos = b"", b""
    for name, ne, ggml_type, raw in tensors:
        data += b"\0" * (-len(data) % alignment)
        infos += gguf_string(name) + struct.pack("<I", len(ne))
        infos += b"".join(struct.pack("<Q", x) for x in ne)
        infos += struct.pack("<IQ", ggml_type, len(data))
        data += raw
    out += infos
    out += b"\0" * (-len(out) % alignment)
    return out + data


def gguf_seeds():
    kv = [("general.architecture", 8, gguf_string("llama")),
          ("general.alignment", 4, struct.pack("<I", 32)),
          ("llama.context_length", 10, struct.pack("<Q", 4096)),
          ("tokenizer.scores", 9, struct.pack("<IQ", 6, 2) + struct.pack("<2f", -1, 0.5)),
          ("tokenizer.tokens", 9, struct.pack("<IQ", 8, 2) + gguf_string("a") + gguf_string("b")),
          ("flag", 7, b"\1"), ("eps", 12, struct.pack("<d", 1e-5))]
    q8_block = struct.pack("<e", 0.5) + bytes(range(32))
    q4_block = struct.pack("<e", 0.25) + bytes(range(16))
    put("gguf", "tensors.gguf", gguf(kv, [
        ("f32", [4, 2], 0, struct.pack("<8f", *range(8))),
        ("f16", [3], 1, struct.pack("<3e", 1, 2, 3)),
        ("q8_0", [32, 2], 8, q8_block * 2),
        ("q4_0", [32], 2, q4_block)]))
    put("gguf", "metadata-only.gguf", gguf(kv, []))


# ---- ONNX --------------------------------------------------------------------------------
def onnx_seeds():
    try:
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        print("make_seeds: python3-onnx missing, ONNX seeds left as they are", file=sys.stderr)
        return
    f = TensorProto.FLOAT

    def model(name, nodes, inputs, outputs, inits=(), opset=17):
        g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        put("onnx", name + ".onnx", m.SerializeToString())

    vi = helper.make_tensor_value_info
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 10, "w")
    model("mlp", [helper.make_node("MatMul", ["x", "w"], ["m"]),
                  helper.make_node("Relu", ["m"], ["r"]),
                  helper.make_node("Softmax", ["r"], ["y"], axis=-1)],
          [vi("x", f, ["batch", 3])], [vi("y", f, ["batch", 4])], [w])
    g = numpy_helper.from_array(np.ones(4, dtype=np.float32), "g")
    b = numpy_helper.from_array(np.zeros(4, dtype=np.float32), "b")
    model("norm", [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1,
                                    epsilon=1e-5)],
          [vi("x", f, [2, 4])], [vi("y", f, [2, 4])], [g, b])
    table = numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(5, 4), "table")
    shape = numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape")
    model("gather", [helper.make_node("Gather", ["table", "ids"], ["e"], axis=0),
                     helper.make_node("Reshape", ["e", "shape"], ["r"]),
                     helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0])],
          [vi("ids", TensorProto.INT64, [3])], [vi("y", f, None)], [table, shape])

    # The patterns the fusion pass finds (onnx/src/fuse.cpp), each as exporters write it, small.
    def scalar(name, v):
        return numpy_helper.from_array(np.array(v, dtype=np.float32), name)

    node = helper.make_node
    x24 = [vi("x", f, [2, 4])]
    y24 = [vi("y", f, [2, 4])]
    model("fuse-gelu-erf", [node("Div", ["x", "sqrt2"], ["t"]), node("Erf", ["t"], ["e"]),
                            node("Add", ["e", "one"], ["a"]), node("Mul", ["x", "a"], ["m"]),
                            node("Mul", ["m", "half"], ["y"])],
          x24, y24, [scalar("sqrt2", 1.4142135), scalar("one", 1.0), scalar("half", 0.5)])
    model("fuse-gelu-tanh",
          [node("Pow", ["x", "three"], ["x3"]), node("Mul", ["x3", "c"], ["cx3"]),
           node("Add", ["x", "cx3"], ["inner"]), node("Mul", ["inner", "k"], ["ki"]),
           node("Tanh", ["ki"], ["th"]), node("Add", ["th", "one"], ["a"]),
           node("Mul", ["x", "a"], ["m"]), node("Mul", ["m", "half"], ["y"])],
          x24, y24, [scalar("three", 3.0), scalar("c", 0.044715), scalar("k", 0.7978846),
                     scalar("one", 1.0), scalar("half", 0.5)])
    model("fuse-silu", [node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["y"])], x24, y24)
    mask = np.triu(np.full((3, 3), -np.inf, dtype=np.float32), 1)
    model("fuse-attention",
          [node("MatMul", ["q", "kt"], ["s"]), node("Mul", ["s", "half"], ["scaled"]),
           node("Add", ["scaled", "mask"], ["masked"]), node("Softmax", ["masked"], ["p"]),
           node("MatMul", ["p", "v"], ["y"])],
          [vi("q", f, [1, 1, 3, 2]), vi("kt", f, [1, 1, 2, 3]), vi("v", f, [1, 1, 3, 2])],
          [vi("y", f, [1, 1, 3, 2])],
          [numpy_helper.from_array(mask, "mask"), scalar("half", 0.5)])
    last = numpy_helper.from_array(np.array([-1], dtype=np.int64), "last")
    w4 = numpy_helper.from_array(np.array([1, 2, 0.5, -1], dtype=np.float32), "w")
    b4 = numpy_helper.from_array(np.array([0, 1, 0, -1], dtype=np.float32), "b")
    model("fuse-layernorm",
          [node("ReduceMean", ["x", "last"], ["mean"]), node("Sub", ["x", "mean"], ["d"]),
           node("Pow", ["d", "two"], ["d2"]), node("ReduceMean", ["d2", "last"], ["var"]),
           node("Add", ["var", "eps"], ["ve"]), node("Sqrt", ["ve"], ["sd"]),
           node("Div", ["d", "sd"], ["n"]), node("Mul", ["n", "w"], ["nw"]),
           node("Add", ["nw", "b"], ["y"])],
          x24, y24, [scalar("two", 2.0), scalar("eps", 1e-5), last, w4, b4], opset=18)
    model("fuse-rmsnorm",
          [node("Pow", ["x", "two"], ["x2"]), node("ReduceMean", ["x2", "last"], ["ms"]),
           node("Add", ["ms", "eps"], ["mse"]), node("Sqrt", ["mse"], ["rms"]),
           node("Div", ["one", "rms"], ["inv"]), node("Mul", ["x", "inv"], ["n"]),
           node("Mul", ["w", "n"], ["y"])],
          x24, y24, [scalar("two", 2.0), scalar("eps", 1e-6), scalar("one", 1.0), last, w4],
          opset=18)


# ---- .npy --------------------------------------------------------------------------------
def npy_header(text, data, version=1):
    """A .npy file from its header's dict literal, written by hand so that malformed ones can be
    made too: padded with spaces and a newline so that the data starts on a 64-byte boundary."""
    prefix = 10 if version == 1 else 12
    text += " " * (-(prefix + len(text) + 1) % 64) + "\n"
    length = struct.pack("<H" if version == 1 else "<I", len(text))
    return b"\x93NUMPY" + bytes([version, 0]) + length + text.encode("latin-1") + data


def npy(descr, fortran, shape, data, version=1):
    return npy_header("{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape),
                      data, version)


def npy_seeds():
    try:
        import io
        import numpy as np
    except ImportError:
        print("make_seeds: python3-numpy missing, .npy seeds left as they are", file=sys.stderr)
        return

    def save(name, a):
        b = io.BytesIO()
        np.save(b, a)
        put("npy", name + ".npy", b.getvalue())

    i = np.arange(24)
    save("f32", ((i - 5) / 4).astype("<f4").reshape(2, 3, 4))
    save("f16", ((i[:15] - 5) / 4).astype("<f2").reshape(3, 5))
    save("f64-scalar", np.array(2.5, dtype="<f8"))  # 0-d: shape ()
    save("i8", (i[:12] - 5).astype("i1").reshape(2, 6))
    save("u8", i[:9].astype("u1"))
    save("i16", (i[:6] - 5).astype("<i2"))
    save("u16", i[:4].astype("<u2").reshape(1, 4))
    save("i32", (i[:8] - 5).astype("<i4").reshape(4, 2))
    save("u32", i[:3].astype("<u4"))
    save("i64", (i[:12] - 5).astype("<i8").reshape(3, 4))
    save("u64", i[:2].astype("<u8"))
    save("bool", (i[:10] % 2 == 1).reshape(2, 5))
    save("f32-big-endian", ((i[:6] - 5) / 4).astype(">f4").reshape(2, 3))
    save("empty", np.zeros((0, 3), dtype="<f4"))
    # Fortran order: read when at most one dimension has more than one element, refused otherwise.
    put("npy", "fortran-row.npy", npy("'<f4'", True, "(1, 3)", struct.pack("<3f", 1, 2, 3)))
    save("fortran-matrix", np.asfortranarray(i[:6].astype("<f4").reshape(2, 3)))
    put("npy", "version-2.npy", npy("'<i4'", False, "(3,)", struct.pack("<3i", 1, 2, 3), 2))
    put("npy", "version-3.npy", npy("'<f4'", False, "(2,)", struct.pack("<2f", 1, 2), 3))
    put("npy", "python2-long.npy", npy("'<f4'", False, "(2L, 1L)", struct.pack("<2f", 1, 2)))
    # The malformed files of tests/tools/data_test.cpp (MalformedNpyFiles...).
    good = npy("'<f4'", False, "(2, 3)", b"\1" * 24)
    put("npy", "bad-truncated-header.npy", good[:40])
    put("npy", "bad-not-npy.npy", b"PK\3\4 this is a zip")
    put("npy", "bad-complex.npy", npy("'<c8'", False, "(3,)", b"\1" * 24))
    put("npy", "bad-overflow.npy", npy("'<f4'", False, "(4294967296, 4294967296)", b"\1" * 24))
    put("npy", "bad-huge-dim.npy", npy("'<f4'", False, "(99999999999999999999,)", b"\1" * 24))
    put("npy", "bad-short-data.npy", good[:-4])
    put("npy", "bad-no-shape.npy",
        npy_header("{'descr': '<f4', 'fortran_order': False, }", b"\1" * 24))
    put("npy", "bad-structured.npy", npy("[('a', '<f4')]", False, "(6,)", b"\1" * 24))
    put("npy", "bad-bool-byte.npy", npy("'|b1'", False, "(2,)", b"\0\2"))


# ---- hostile inputs (issue 32) -----------------------------------------------------------
# Nesting at and past the JSON depth cap (64), lengths and counts far past the file, values that
# would be printed whole in a message, folds that ask for much memory. The campaigns ran with
# -max_len large enough to grow them (docs/reliability.md).
def hostile_seeds():
    head = '{"format": "duet-graph", "version": 1, "name": "g", '
    for depth in (63, 64, 65, 2000):
        put("graph_json", "hostile-deep-%d.json" % depth,
            head + '"inputs": ' + "[" * depth + "]" * depth + "}")
    put("graph_json", "hostile-unknown-array.json",
        '{"format": "duet-graph", "junk": [' + "0," * 2000 + "0]}")
    put("graph_json", "hostile-long-shape.json",
        head + '"inputs": [{"name": "x", "dtype": "f32", "shape": [' + ",".join(["2"] * 2000) +
        ']}], "nodes": [], "outputs": []}')
    put("graph_json", "hostile-many-values.json",
        head + '"inputs": [], "constants": [{"name": "w", "dtype": "f32", "shape": [4096], '
        '"values": [' + ",".join(["0.5"] * 4096) + ']}], "nodes": [], "outputs": []}')

    def st(header, data=b""):
        h = header.encode()
        h += b" " * (-len(h) % 8)
        return struct.pack("<Q", len(h)) + h + data

    for depth in (63, 65, 2000):
        put("safetensors", "hostile-deep-%d.safetensors" % depth,
            st('{"t":{"dtype":"F32","shape":' + "[" * depth + "]" * depth +
               ',"data_offsets":[0,0]}}'))
    put("safetensors", "hostile-long-shape.safetensors",
        st('{"t":{"dtype":"F32","shape":[' + ",".join(["2"] * 2000) + '],"data_offsets":[0,8]}}',
           b"\0" * 8))
    put("safetensors", "hostile-header-length-2^40.safetensors", struct.pack("<Q", 1 << 40) + b"{}")
    put("safetensors", "hostile-duplicate-key.safetensors",
        st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
           '"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4))

    one_key = b"GGUF" + struct.pack("<IQQ", 3, 0, 1)
    put("gguf", "hostile-string-length-2^40.gguf",
        one_key + gguf_string("k") + struct.pack("<IQ", 8, 1 << 40) + b"x" * 16)
    put("gguf", "hostile-array-count-2^40.gguf",
        one_key + gguf_string("k") + struct.pack("<IIQ", 9, 0, 1 << 40) + b"\0" * 16)
    put("gguf", "hostile-key-length-2^40.gguf", one_key + struct.pack("<Q", 1 << 40) + b"k" * 16)
    put("gguf", "hostile-u8-array.gguf",
        one_key + gguf_string("k") + struct.pack("<IIQ", 9, 0, 4096) + b"\1" * 4096)
    put("gguf", "hostile-tensor-count-2^40.gguf",
        b"GGUF" + struct.pack("<IQQ", 3, 1 << 40, 0) + b"\0" * 64)

    try:
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        print("make_seeds: no python3-onnx; the hostile ONNX seeds are not written")
        return

    def save(name, nodes, inits, outputs):
        g = helper.make_graph(nodes, "g", [], outputs, inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        put("onnx", "hostile-" + name + ".onnx", m.SerializeToString())

    big = numpy_helper.from_array(np.array([1 << 28], dtype=np.int64), "shape")
    y = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]
    save("constant-of-shape-2^28", [helper.make_node("ConstantOfShape", ["shape"], ["c"]),
                                    helper.make_node("ReduceSum", ["c"], ["y"])], [big], y)
    scalars = [numpy_helper.from_array(np.array(v, dtype=np.float32), n)
               for n, v in (("a", 0), ("b", 1 << 28), ("d", 1))]
    save("range-2^28", [helper.make_node("Range", ["a", "b", "d"], ["r"]),
                        helper.make_node("ReduceSum", ["r"], ["y"])], scalars, y)
    adds = [helper.make_node("ConstantOfShape", ["shape"], ["a0"])]
    adds += [helper.make_node("Add", ["a%d" % i, "a%d" % i], ["a%d" % (i + 1)]) for i in range(8)]
    save("chained-adds-2^28", adds, [big],
         [helper.make_tensor_value_info("a8", TensorProto.FLOAT, [1 << 28])])
    square = numpy_helper.from_array(np.array([1 << 14, 1 << 14], dtype=np.int64), "shape")
    one = numpy_helper.from_array(np.array([1.5], dtype=np.float32), "one")
    save("expand-2^28", [helper.make_node("Expand", ["one", "shape"], ["e"]),
                         helper.make_node("ReduceSum", ["e"], ["y"])], [one, square], y)


if __name__ == "__main__":
    graph_seeds()
    policy_seeds()
    safetensors_seeds()
    gguf_seeds()
    onnx_seeds()
    npy_seeds()
    hostile_seeds()
