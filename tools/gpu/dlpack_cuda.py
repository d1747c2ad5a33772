# PyTorch CUDA tensors through duet's Python module without a host copy (issue 29), on a real GPU:
# a CUDA tensor made on a PyTorch stream of its own goes in (read in place on cuda:0, after
# PyTorch's work: DLPack's stream exchange), the output comes out as a duet.DeviceTensor that
# torch.from_dlpack takes in place, and goes back in; every answer against float64 NumPy. Then the
# time of a run with device memory in and out beside the same run through host memory.
# Prints "dlpack-cuda: PASS ..." or the failure; run by tools/gpu/run.sh (step pydlpack) with
# PYTHONPATH at the bundle's python/ folder.
import sys
import time

try:
    import numpy as np
    import torch
    import duet
except ImportError as e:  # the module is built for one interpreter (cpXY in its file name)
    print(f"dlpack-cuda: SKIP: cannot import ({e}); python {sys.version.split()[0]}")
    sys.exit(0)

if not torch.cuda.is_available() or "cuda:0" not in [d["id"] for d in duet.devices()]:
    print("dlpack-cuda: SKIP: no CUDA device for both PyTorch and duet; duet's devices:",
          [d["id"] for d in duet.devices()], "backends:", duet.backends())
    sys.exit(0)


def softmax64(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def graph(m, k):
    b = duet.GraphBuilder("mm_softmax")
    x = b.input("x", "f32", [m, k])
    w = b.input("w", "f32", [k, k])
    b.output(b.softmax(b.matmul(x, w, name="xw"), name="y"))
    return b.build()


rng = np.random.default_rng(1)
x = rng.uniform(-1, 1, (64, 256)).astype(np.float32)
w = rng.uniform(-0.1, 0.1, (256, 256)).astype(np.float32)
want = softmax64(x.astype(np.float64) @ w)
with duet.Engine(graph(64, 256), policy="device=cuda;precision=f32") as e:
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # PyTorch's work on a stream of its own, still queued
        xc = torch.from_numpy(x).cuda(non_blocking=True) * 1.0
        wc = torch.from_numpy(w).cuda(non_blocking=True) * 1.0
        y = e.run({"x": xc, "w": wc}, device_outputs=True)["y"]
    assert isinstance(y, duet.DeviceTensor) and y.device == "cuda:0", y
    t = torch.from_dlpack(y)
    assert t.is_cuda and t.data_ptr() == torch.from_dlpack(y).data_ptr()
    err = float(np.abs(t.cpu().numpy() - want).max())
    assert err < 1e-4, f"device output differs from float64 by {err}"
    again = e.run({"x": t, "w": wc})["y"]  # PyTorch's view of duet's memory, back in
    err2 = float(np.abs(again - softmax64(want @ w)).max())
    assert err2 < 1e-4, f"second run differs from float64 by {err2}"
    try:
        e.run({"x": xc.t().contiguous().t(), "w": wc})
        raise AssertionError("a non-contiguous CUDA tensor was taken")
    except duet.BadInputError:
        pass
print(f"dlpack-cuda: PASS (max error {err:.2e}, {err2:.2e}; output at 0x{t.data_ptr():x})")

# The freeing hazard: PyTorch frees duet's output while work it queued on its stream still reads
# it (a spin, then a clone of the tensor); duet's next runs must not write that memory before the
# clone has read it (duet holds it back until an event recorded on PyTorch's stream has passed).
# The clone must match float64; the runs meanwhile should get other memory ("reused while queued:
# False"), and once the stream is done the memory comes back ("back after the stream: True" is
# likely, not required: the allocator may hand out another cached block).
x2c = torch.from_numpy(rng.uniform(-1, 1, (64, 256)).astype(np.float32)).cuda()
with duet.Engine(graph(64, 256), policy="device=cuda;precision=f32") as e:
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = e.run({"x": xc, "w": wc}, device_outputs=True)["y"]
        t = torch.from_dlpack(y)  # duet is handed `side` (__dlpack__(stream=side))
        addr = t.data_ptr()
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(300_000_000)  # about 0.1-0.3 s of spinning on `side`
        else:
            big = torch.ones(4096, 4096, device="cuda")
            for _ in range(40):
                big = big @ big * 1e-4
        late = t.clone()  # queued behind the spin: reads duet's memory late
        del t, y  # DLPack's deleter runs now; the clone has not run yet
    busy = not side.query()
    outs = [e.run({"x": x2c, "w": wc}, device_outputs=True)["y"] for _ in range(3)]
    reused = any(torch.from_dlpack(o).data_ptr() == addr for o in outs)
    side.synchronize()
    err3 = float(np.abs(late.cpu().numpy() - want).max())
    assert err3 < 1e-4, f"PyTorch's late read of a freed duet output differs by {err3}: overwritten"
    del outs
    back = [torch.from_dlpack(e.run({"x": x2c, "w": wc}, device_outputs=True)["y"]).data_ptr()
            for _ in range(2)]
print(f"dlpack-cuda: freeing hazard PASS (late read max error {err3:.2e}; stream busy at free: "
      f"{busy}; reused while queued: {reused if busy else 'n/a'}; "
      f"back after the stream: {addr in back})")

# Time: 4096x1024 f32 in (16 MiB) and out, device memory in and out vs host memory in and out.
m, k = 4096, 1024
xs = rng.uniform(-1, 1, (m, k)).astype(np.float32)
ws = rng.uniform(-0.05, 0.05, (k, k)).astype(np.float32)
xd, wd = torch.from_numpy(xs).cuda(), torch.from_numpy(ws).cuda()
torch.cuda.synchronize()
with duet.Engine(graph(m, k), policy="device=cuda;precision=f32") as e:
    def median(f, n=7):
        f()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        return sorted(ts)[n // 2]
    host = median(lambda: e.run({"x": xs, "w": ws}))
    dev = median(lambda: torch.from_dlpack(e.run({"x": xd, "w": wd}, device_outputs=True)["y"]))
print(f"dlpack-cuda: run {m}x{k} f32: host memory in and out {host * 1e3:.2f} ms, "
      f"CUDA tensors in and out {dev * 1e3:.2f} ms")
