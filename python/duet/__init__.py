"""duet: one compute graph, run on whatever the machine has (CUDA, Vulkan, the CPU), every op
checked against a float64 reference.

    import numpy as np, duet
    engine = duet.Engine(duet.load("model.onnx"))
    out = engine.run({"x": np.ones((1, 8), np.float32)})

See docs/python.md.
"""

from . import _duet
from .errors import (  # noqa: F401
    BadInputError,
    DeviceLostError,
    DLPackError,
    EngineClosedError,
    Error,
    FileError,
    InternalError,
    NotFoundError,
    OutOfMemoryError,
    ParseError,
    UnsupportedError,
)
from ._duet import DeviceTensor, Graph, GraphBuilder, Tensor, Value, load  # noqa: F401
from .report import BenchReport, CheckReport

__version__ = _duet.__version__

__all__ = [
    "BadInputError", "BenchReport", "CheckReport", "DeviceLostError", "DeviceTensor",
    "DLPackError", "Engine",
    "EngineClosedError", "Error", "FileError", "Graph", "GraphBuilder", "InternalError",
    "NotFoundError", "OutOfMemoryError", "ParseError", "Tensor", "UnsupportedError", "Value",
    "backends", "bench", "check", "devices", "from_dlpack", "load",
]


def devices():
    """This machine's devices, as dicts of their capabilities ("id", "backend", "name", ...)."""
    return _duet._devices_json()["devices"]


def backends():
    """Every backend of this build: whether it opened, and why not when it did not."""
    return _duet._devices_json()["backends"]


def from_dlpack(x, /, *, device=None, copy=None):
    """A duet.Tensor over the host memory of ``x`` (an object with ``__dlpack__``), no copy.

    Memory on a GPU is refused with the reason (UnsupportedError): engine.run takes CUDA tensors
    as they are, a duet.Tensor is host memory. NumPy arrays and other buffers are copied.
    The keywords are the array API standard's: ``device`` None, "cpu" or DLPack's (1, 0) (a
    duet.Tensor lives on the host; any other device raises DLPackError); ``copy`` None as above,
    True for a copy of its own whatever ``x`` is, False to share or fail: NumPy arrays are then
    shared through their ``__dlpack__``, and what has none raises DLPackError.
    """
    if device is not None and device not in ("cpu", "cpu:0"):
        try:
            host = tuple(device) == (1, 0)
        except TypeError:
            host = False
        if not host:
            raise DLPackError(
                f"from_dlpack: a duet.Tensor is host memory (device 'cpu' or (1, 0)); "
                f"device={device!r} is not")
    return _duet._tensor_from(x, copy)


class Outputs(dict):
    """An engine's outputs by name, in the graph's order. ``dtypes`` names each output's duet
    dtype: a bf16 output comes as uint16 bit patterns where ml_dtypes is not installed, and
    ``dtypes`` says it is bf16."""

    def __init__(self, values, dtypes):
        super().__init__(values)
        self.dtypes = dtypes


class Engine:
    """A graph planned for this machine's devices, ready to run many times.

    ``graph`` is a duet.Graph or the path of a model file. ``policy`` is an override string in
    DUET_POLICY's syntax ("device=cpu", "deny=cuda.flash;precision=f32"); None reads DUET_POLICY
    (no overrides when unset); a string given here wins over it, even "". ``devices`` limits the
    engine to these device ids (["cpu:0"]).

    Runs may come from several threads: runs of one engine take turns; the GIL is released
    while they run, so engines of other threads run at the same time.
    """

    def __init__(self, graph, policy=None, devices=None):
        self._e = _duet._Engine(graph, policy, devices)
        self._dtypes = {o["name"]: o["dtype"] for o in self._e.graph.outputs}

    def run(self, inputs, *, numpy=True, device_outputs=False):
        """Runs the graph on ``inputs`` (a dict of input name -> array).

        Arrays are NumPy arrays (or anything with the buffer protocol or ``__dlpack__`` in host
        memory), of the dtype the graph declares: float32, float16, bfloat16 (ml_dtypes, or its
        bit patterns as uint16), int8, int32 (int64 ids are narrowed where every value fits).
        They are read in place when their strides allow it. New shapes re-plan once. Contiguous
        tensors in a CUDA device's memory (a PyTorch CUDA tensor, a duet.DeviceTensor) are read
        in place on that device, where the plan reads them.

        Returns the outputs by name as NumPy arrays over duet's memory (no copy), or as
        duet.Tensor (``numpy=False``: for DLPack consumers such as torch.from_dlpack). With
        ``device_outputs=True``, outputs a kernel wrote on a CUDA device stay there, as
        duet.DeviceTensor (torch.from_dlpack takes them without a copy).
        """
        return Outputs(self._e.run(inputs, numpy, device_outputs), self._dtypes)

    __call__ = run

    def explain(self):
        """The plan in words: per op the device, precision and kernel tier, and why."""
        return self._e.explain()

    def plan(self):
        """The plan as data (what `duet plan --json` prints)."""
        return self._e.plan()

    @property
    def graph(self):
        return self._e.graph

    @property
    def policy(self):
        """The policy the engine was planned under, as text ("" for none)."""
        return self._e.policy()

    @property
    def plans_made(self):
        return self._e.plans_made()

    def read_state(self, name):
        return self._e.read_state(name)

    def write_state(self, name, value):
        self._e.write_state(name, value)

    def reset_states(self):
        self._e.reset_states()

    def close(self):
        """Releases the engine's device memory. Later calls raise EngineClosedError."""
        self._e.close()

    @property
    def closed(self):
        return self._e.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return f"duet.Engine(graph '{self.graph.name}', {state})"


def check(model, inputs=None, devices=None, policy=None):
    """Runs ``model`` (a duet.Graph or a model file) on each device, and each kernel tier it can
    use, comparing every value a kernel computes with the float64 reference: `duet check MODEL`
    as data. ``inputs``: a dict of arrays, or None for deterministic random inputs inside each
    op's domain. Returns a CheckReport (``passed``, ``runs``, ``first_divergence()``)."""
    return CheckReport(_duet._check(model, inputs, devices, policy))


def bench(model, inputs=None, devices=None, policy=None, repeats=10, min_seconds=0.2):
    """Times whole runs of ``model`` on each device (an engine per device), and each step of one
    timed run. Returns a BenchReport (``runs``: device, median_s, min_s, max_s, steps)."""
    return BenchReport(_duet._bench(model, inputs, devices, policy, repeats, min_seconds))
