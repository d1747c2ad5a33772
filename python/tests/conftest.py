"""Shared pieces of the Python module's tests: run by ctest (python_pytest) with
PYTHONPATH=build/python, or by hand: PYTHONPATH=build/python /usr/bin/python3 -m pytest python/tests
"""
import os

# The planner's rates from the devices' peaks, not a measured calibration: fast and the same on
# every machine (as the docs samples run).
os.environ.setdefault("DUET_CALIBRATION", "off")
os.environ.pop("DUET_POLICY", None)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import duet  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def random(shape, seed, dtype=np.float32):
    """Values in +-[0.05, 1], never zeros (as duet's checks draw them)."""
    r = np.random.default_rng(seed)
    v = r.uniform(0.05, 1.0, size=shape) * r.choice([-1.0, 1.0], size=shape)
    return v.astype(dtype)


def softmax64(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="session")
def hello():
    """x[4,8] @ w[8,8] -> softmax, the README's graph."""
    b = duet.GraphBuilder("hello")
    x = b.input("x", "f32", [4, 8])
    w = b.input("w", "f32", [8, 8])
    b.output(b.softmax(b.matmul(x, w, name="xw"), name="y"))
    return b.build()


@pytest.fixture(scope="session")
def cpu_engine(hello):
    e = duet.Engine(hello, policy="device=cpu")
    yield e
    e.close()
