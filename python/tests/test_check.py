"""duet.check and duet.bench from Python: reports as data."""
import numpy as np
import pytest

import duet
from conftest import ROOT, random


def test_check_compares_every_op_on_every_device_with_the_float64_reference(hello):
    r = duet.check(hello)
    assert r.passed and bool(r)
    assert r.inputs == "random inputs, drawn inside each op's domain"
    devices = {run["device"] for run in r.runs}
    assert {d["id"] for d in duet.devices()} == devices
    for run in r.runs:
        assert run["error"] is None and run["first_failure"] is None
        assert [o["node"] for o in run["ops"]] == ["xw", "y"]
        for o in run["ops"]:
            assert o["passed"] and 0 <= o["ratio"] < 1 and o["tolerance"]
    assert r.first_divergence() is None
    assert "within tolerance" in str(r)


def test_check_takes_given_inputs_and_a_model_file():
    r = duet.check(f"{ROOT}/examples/ffn.json", devices=["cpu:0"])
    assert r.passed and r.runs[0]["device"] == "cpu:0"
    b = duet.GraphBuilder("g")
    b.output(b.exp(b.input("x", "f32", [2, 3]), name="y"))
    r = duet.check(b.build(), inputs={"x": random((2, 3), 1)}, devices=["cpu:0"])
    assert r.passed and r.inputs == "inputs given"
    with pytest.raises(duet.BadInputError, match="input 'x'"):
        duet.check(f"{ROOT}/examples/ffn.json", inputs={"x": np.ones((2, 2), np.float64)})


def test_a_policy_nothing_satisfies_is_a_run_that_says_why(hello):
    r = duet.check(hello, devices=["cpu:0"], policy="deny=cpu")
    assert not r.passed
    assert r.runs[0]["error"] and "cpu" in r.runs[0]["error"]


def test_bench_times_whole_runs_and_their_steps(hello):
    r = duet.bench(hello, devices=["cpu:0"], repeats=3, min_seconds=0)
    (run,) = r.runs
    assert run["error"] is None and run["runs"] == 3
    assert 0 < run["min_s"] <= run["median_s"] <= run["max_s"]
    kernels = [s for s in run["steps"] if s["name"] in ("xw", "y")]
    assert len(kernels) == 2 and all(s["seconds"] > 0 for s in kernels)
    assert "median" in str(r)


def test_a_divergence_is_reported_with_the_op_its_error_and_its_tolerance():
    op = {"node": "h", "op": "matmul", "output": "f32[4,8]", "tier": "tiled", "precision": "f16",
          "passed": False, "ratio": 3.5, "nmse": 2e-4, "max_abs": 0.1, "max_rel": 0.05, "nan": 0,
          "mismatches": 0, "reference_nan": 0, "tolerance": "nmse 5e-05, max rel 0.02"}
    ok = dict(op, node="y", op="softmax", passed=True, ratio=0.1)
    report = duet.CheckReport({
        "model": "m", "inputs": "inputs given", "policy": "",
        "runs": [{"device": "cpu:0", "deny": "", "error": None, "first_failure": None,
                  "ops": [dict(op, passed=True, ratio=0.2), ok], "first_failure_alone": None},
                 {"device": "cuda:0", "deny": "", "error": None, "first_failure": "h",
                  "ops": [op, ok],
                  "first_failure_alone": {"passed": False, "nmse": 2e-4, "max_rel": 0.05,
                                          "message": "nmse 2e-4 over 5e-5"}}]})
    assert not report.passed
    run, first = report.first_divergence()
    assert run["device"] == "cuda:0" and first["node"] == "h"
    text = str(report)
    assert ("cuda:0: FIRST DIVERGENCE at matmul 'h' (tiled f16): nmse 0.0002, max rel 0.05; "
            "tolerance nmse 5e-05, max rel 0.02") in text
    assert "fails too: nmse 2e-4 over 5e-5" in text
