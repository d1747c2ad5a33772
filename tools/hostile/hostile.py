#!/usr/bin/python3
"""Writes the hostile-input reproducers of issue 32 into a folder, with a manifest of how the
`duet` command must answer each (tests/tools/hostile_test.cpp runs them; docs/security.md).

    /usr/bin/python3 tools/hostile/hostile.py OUT_DIR

Every file is small or sparse (a file larger than this machine's memory costs no disk), so the
whole set takes well under a second to write. OUT_DIR/cases.json lists the cases: the duet
arguments (paths relative to OUT_DIR), environment, what is piped in, the exit status expected
and a part of the one-line error expected on stderr.

Plain Python: the ONNX models are protobuf written by hand (no onnx package), the GGUF and
safetensors files by struct."""
import json
import os
import struct
import sys


# ---- protobuf, by hand -------------------------------------------------------------------------
def varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def field(num, wire, payload):
    key = varint((num << 3) | wire)
    if wire == 0:
        return key + varint(payload)
    if isinstance(payload, str):
        payload = payload.encode()
    return key + varint(len(payload)) + payload


def tensor(name, dims, data_type, raw=None, external=None):
    t = b"".join(field(1, 0, d) for d in dims) + field(2, 0, data_type) + field(8, 2, name)
    if raw is not None:
        t += field(9, 2, raw)
    if external is not None:
        for k, v in external.items():
            t += field(13, 2, field(1, 2, k) + field(2, 2, v))
        t += field(14, 0, 1)  # data_location = EXTERNAL
    return t


def value_info(name, elem, dims):
    shape = b"".join(field(1, 2, field(1, 0, d)) for d in dims)
    tensor_type = field(1, 0, elem) + field(2, 2, shape)
    return field(1, 2, name) + field(2, 2, field(1, 2, tensor_type))


def node(op, inputs, outputs):
    return (b"".join(field(1, 2, i) for i in inputs) + b"".join(field(2, 2, o) for o in outputs) +
            field(4, 2, op))


def model(nodes, initializers, inputs, outputs, opset=13):
    g = (b"".join(field(1, 2, n) for n in nodes) + field(2, 2, "g") +
         b"".join(field(5, 2, t) for t in initializers) +
         b"".join(field(11, 2, v) for v in inputs) + b"".join(field(12, 2, v) for v in outputs))
    return field(1, 0, 8) + field(8, 2, field(2, 0, opset)) + field(7, 2, g)


FLOAT, INT64 = 1, 7


def int64s(*v):
    return struct.pack("<%dq" % len(v), *v)


# ---- the reproducers ---------------------------------------------------------------------------
def memory_bytes():
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def main(out):
    os.makedirs(out, exist_ok=True)
    cases = []

    def put(name, data):
        path = os.path.join(out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return name

    def sparse(name, size, head=b""):
        path = os.path.join(out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(head)
            f.truncate(size)
        return name

    def fifo(name):
        path = os.path.join(out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.exists(path):
            os.mkfifo(path)
        return name

    def link(name, target):
        path = os.path.join(out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path):
            os.remove(path)
        os.symlink(target, path)
        return name

    def case(name, args, expect, status=2, env=None, stdin=None, onnx=False, extra=None):
        c = {"name": name, "args": args, "status": status, "stderr": expect, "env": env or {},
             "stdin": stdin, "onnx": onnx}
        if extra:
            c.update(extra)
        cases.append(c)

    graph = {"format": "duet-graph", "version": 1, "name": "g",
             "inputs": [{"name": "x", "dtype": "f32", "shape": [4]}],
             "nodes": [{"name": "y", "op": "relu", "inputs": ["x"]}], "outputs": ["y"]}
    put("good.json", json.dumps(graph))

    # 1. Crashes on deep nesting: a safetensors header and a graph file nested far past the cap.
    header = ('{"t":{"dtype":"F32","shape":' + "[" * 100000 + "]" * 100000 +
              ',"data_offsets":[0,0]}}').encode()
    header += b" " * (-len(header) % 8)
    put("deep.safetensors", struct.pack("<Q", len(header)) + header)
    case("deep-safetensors", ["convert", "deep.safetensors", "deep-out"],
         "JSON nested deeper than 64 levels")
    put("deep.json", '{"format": "duet-graph", "version": 1, "name": ' + "[" * 60000 +
        "]" * 60000 + "}")
    case("deep-graph", ["plan", "deep.json"], "JSON nested deeper than 64 levels")

    # 2. Files outside the model through its external data: a link to a file outside the
    #    model's folder, a link to a folder outside, a second hard link, a NUL in the location.
    put("secret.bin", b"\x00\x00\x80\x3f" * 4)  # 1.0f x 4: what a leak would print
    os.makedirs(os.path.join(out, "elsewhere"), exist_ok=True)
    put("elsewhere/w.bin", b"\x00\x00\x80\x3f" * 4)

    def external_model(folder, location, dims=(4,)):
        w = tensor("w", list(dims), FLOAT, external={"location": location})
        m = model([node("Add", ["x", "w"], ["y"])], [w], [value_info("x", FLOAT, list(dims))],
                  [value_info("y", FLOAT, list(dims))])
        return put(folder + "/model.onnx", m)

    link("link/w.bin", "../secret.bin")
    case("external-data-symlink", ["plan", external_model("link", "w.bin")],
         "expected a file inside the model's folder", onnx=True)
    link("dirlink/d", "../elsewhere")
    case("external-data-folder-symlink", ["plan", external_model("dirlink", "d/w.bin")],
         "expected a file inside the model's folder", onnx=True)
    hard = os.path.join(out, "hard", "w.bin")
    os.makedirs(os.path.dirname(hard), exist_ok=True)
    if os.path.exists(hard):
        os.remove(hard)
    os.link(os.path.join(out, "secret.bin"), hard)
    case("external-data-hard-link", ["plan", external_model("hard", "w.bin")], "hard links",
         onnx=True)
    put("nul/w.bin", b"\x00" * 16)
    case("external-data-nul-in-location", ["plan", external_model("nul", "w.bin\x00/../x")],
         "w.bin\\x00", onnx=True)

    # 3. Hangs: a fifo wherever a file is read, a stream that never ends, a stream read twice.
    case("fifo-model", ["plan", fifo("fifo.json")], "graph file", status=2)
    fifo("fifo-data/w.bin")
    case("fifo-external-data", ["plan", external_model("fifo-data", "w.bin")],
         "expected a regular file, got a fifo", onnx=True)
    fifo("fifo-constant/w.safetensors")
    put("fifo-constant/g.json", json.dumps(dict(graph, constants=[
        {"name": "w", "dtype": "f32", "shape": [4], "file": "w.safetensors"}],
        nodes=[{"name": "y", "op": "add", "inputs": ["x", "w"]}])))
    case("fifo-constant-file", ["run", "fifo-constant/g.json"], "got a fifo")
    case("fifo-npy-input", ["run", "good.json", "--inputs", fifo("x.npy")], "got a fifo")
    case("fifo-profile", ["plan", "good.json", "--profile", fifo("profile.json")], "got a fifo")
    case("fifo-calibration", ["run", "good.json"], "", status=0,
         env={"DUET_CALIBRATION": fifo("calibration.json")})
    case("fifo-gguf", ["gguf", fifo("model.gguf")], "got a fifo")
    case("stream-of-blanks", ["plan", "/dev/stdin"],
         "at most 256 MiB (the most read), got more (a stream that did not end)",
         stdin="blanks")
    case("stream-read-once", ["plan", "/dev/stdin"], "", status=0, stdin="good.json")

    # 4. Memory from tiny files.
    shape = tensor("shape", [1], INT64, raw=int64s(1 << 28))
    put("constant-of-shape.onnx", model(
        [node("ConstantOfShape", ["shape"], ["c"]), node("ReduceSum", ["c"], ["y"])], [shape], [],
        [value_info("y", FLOAT, [1])]))
    # Under a budget of 256 MiB (DUET_IMPORT_MEMORY), so that the first fold past it is refused
    # before it allocates; the default of 1 GiB refuses the same models one fold later.
    small = {"DUET_IMPORT_MEMORY": str(256 << 20)}
    case("constant-of-shape-2^28", ["plan", "constant-of-shape.onnx"],
         "more than the import's memory budget", onnx=True, env=small)
    scalar = lambda name, v: tensor(name, [], FLOAT, raw=struct.pack("<f", v))
    put("range.onnx", model(
        [node("Range", ["a", "b", "d"], ["r"]), node("ReduceSum", ["r"], ["y"])],
        [scalar("a", 0.0), scalar("b", float(1 << 28)), scalar("d", 1.0)], [],
        [value_info("y", FLOAT, [1])]))
    case("range-2^28", ["plan", "range.onnx"], "more than the import's memory budget", onnx=True,
         env=small)
    adds = [node("ConstantOfShape", ["shape"], ["a0"])]
    adds += [node("Add", ["a%d" % i, "a%d" % i], ["a%d" % (i + 1)]) for i in range(8)]
    put("adds.onnx", model(adds, [shape], [], [value_info("a8", FLOAT, [1 << 28])]))
    case("chained-adds-2^28", ["plan", "adds.onnx"], "more than the import's memory budget",
         onnx=True, env=small)
    link("zero.npy", "/dev/zero")
    case("npy-linked-to-dev-zero", ["run", "good.json", "--inputs", "zero.npy"],
         "got a character device")
    # A graph file with an unknown field holding a large array: refused at its key, before the
    # array is parsed (1 MB here; the same at 250 MB).
    put("unknown-array.json", '{"format": "duet-graph", "junk": [' + "0," * (1 << 19) + "0]}")
    case("unknown-array-field", ["plan", "unknown-array.json"], "got 'junk'")
    big = 64 << 30
    sparse("big-data/w.bin", big)
    case("external-data-64GiB-sparse", ["plan", external_model("big-data", "w.bin",
                                                               (big // 4,))],
         "at most this machine's memory", onnx=True)

    # 7. A GGUF larger than memory opens (mapped read-only, read on demand).
    size = memory_bytes() + (8 << 30)
    row = 1 << 20  # f32 elements: 4 MiB a row
    rows = -(-size // (row * 4))
    name = b"huge"
    info = (struct.pack("<Q", len(name)) + name + struct.pack("<I", 2) +
            struct.pack("<qq", row, rows) + struct.pack("<I", 0) + struct.pack("<Q", 0))
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + info
    head += b"\x00" * (-len(head) % 32)
    sparse("huge.gguf", len(head) + rows * row * 4, head)
    case("gguf-larger-than-memory", ["gguf", "huge.gguf"], "", status=0,
         extra={"stdout": "huge"})

    # 8. Messages: values clipped, NUL bytes shown.
    dims = ",".join(["2"] * 200000)
    header = ('{"t":{"dtype":"F32","shape":[' + dims + '],"data_offsets":[0,8]}}').encode()
    header += b" " * (-len(header) % 8)
    put("long-shape.safetensors", struct.pack("<Q", len(header)) + header)
    case("long-shape-message", ["convert", "long-shape.safetensors", "long-out"], "...",
         extra={"max_stderr": 2048})
    case("long-policy-term", ["plan", "good.json", "--policy", "device=" + "x" * 100000],
         "device=", extra={"max_stderr": 2048})

    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: hostile.py OUT_DIR")
    main(sys.argv[1])
