"""The reports of duet.check() and duet.bench(): plain data (dicts and lists) with a summary."""


def _error_text(op):
    if op["nan"]:
        return f"{op['nan']} NaN outputs"
    if op["mismatches"]:
        return f"{op['mismatches']} elements differ, exact expected"
    return (f"nmse {op['nmse']:.3g}, max rel {op['max_rel']:.3g}; tolerance {op['tolerance']}")


class CheckReport:
    """`duet check MODEL` as data.

    ``runs``: one dict per run (a device, and the kernel tiers denied to reach it): ``device``,
    ``deny``, ``error`` (None when it ran), ``first_failure`` (the first op whose error leaves its
    tolerance, or None), ``ops`` (per op: node, op, output, tier, precision, passed, ratio =
    error / tolerance, nmse, max_abs, max_rel, nan, mismatches, reference_nan, tolerance) and
    ``first_failure_alone`` (that op alone on its kernel, fed the reference's inputs).
    """

    def __init__(self, data):
        self.data = data
        self.model = data["model"]
        self.inputs = data["inputs"]
        self.policy = data["policy"]
        self.runs = data["runs"]

    @property
    def passed(self):
        """True when at least one run ran and every run that ran stayed within tolerance."""
        ran = [r for r in self.runs if r["error"] is None]
        return bool(ran) and all(r["first_failure"] is None for r in ran)

    def first_divergence(self):
        """(run, op) of the first run with an op out of tolerance, or None."""
        for r in self.runs:
            if r["error"] is None and r["first_failure"] is not None:
                op = next(o for o in r["ops"] if o["node"] == r["first_failure"])
                return r, op
        return None

    def __bool__(self):
        return self.passed

    def __str__(self):
        lines = [f"model '{self.model}': {self.inputs}; reference float64"]
        for r in self.runs:
            label = r["device"] + (f" deny={r['deny']}" if r["deny"] else "")
            if r["error"] is not None:
                lines.append(f"  {label}: not run: {r['error']}")
            elif r["first_failure"] is None:
                worst = max((o["ratio"] or 0.0 for o in r["ops"]), default=0.0)
                lines.append(f"  {label}: {len(r['ops'])} ops within tolerance "
                             f"(worst {worst:.2g} of its bound)")
            else:
                op = next(o for o in r["ops"] if o["node"] == r["first_failure"])
                lines.append(f"  {label}: FIRST DIVERGENCE at {op['op']} '{op['node']}' "
                             f"({op['tier']} {op['precision']}): {_error_text(op)}")
                alone = r.get("first_failure_alone")
                if alone is not None:
                    lines.append("    alone on the same kernel, fed the reference's inputs, it " +
                                 ("passes: the error came in with its inputs" if alone["passed"]
                                  else f"fails too: {alone['message']}"))
        return "\n".join(lines)

    __repr__ = __str__


class BenchReport:
    """duet.bench() as data. ``runs``: per device ``device``, ``error``, ``runs``, ``median_s``,
    ``min_s``, ``max_s`` (whole runs, inputs to outputs) and ``steps`` (name, what, device,
    seconds of each step of one timed run, each waited for)."""

    def __init__(self, data):
        self.data = data
        self.model = data["model"]
        self.runs = data["runs"]

    def __str__(self):
        lines = [f"model '{self.model}':"]
        for r in self.runs:
            if r["error"] is not None:
                lines.append(f"  {r['device']}: not run: {r['error']}")
            else:
                lines.append(f"  {r['device']}: median {r['median_s'] * 1e3:.3f} ms "
                             f"(min {r['min_s'] * 1e3:.3f}, max {r['max_s'] * 1e3:.3f}) "
                             f"over {r['runs']} runs")
        return "\n".join(lines)

    __repr__ = __str__
