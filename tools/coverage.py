#!/usr/bin/python3
"""Line coverage of duet's readers of outside data under their fuzz corpora (docs/reliability.md),
and optionally of the library under the test suite. Needs the coverage preset's build (clang
source-based coverage) and llvm-profdata-14 / llvm-cov-14 (Debian's llvm-14, tools/setup.sh):

    cmake --preset coverage && cmake --build --preset coverage
    tools/coverage.py                      # each fuzz target over fuzz/corpus/TARGET
    tools/coverage.py --corpus /tmp/corpus # ... and over /tmp/corpus/TARGET too (a grown corpus)
    cmake --build build-coverage && tools/coverage.py --tests   # ... and the test suite

Each fuzz target (its replay driver) runs once over every file of its corpus; the report gives
the lines covered of the source files its reader lives in. --tests runs ctest in the build with
every test writing a profile and reports the lines covered of the library's sources (core/src,
backends, api, onnx/src) by the whole suite.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The source files each fuzz target's reader lives in.
READERS = {
    "graph_json": ["core/src/graph_file.cpp"],
    "policy": ["core/src/policy.cpp"],
    "safetensors": ["core/src/safetensors.cpp"],
    "gguf": ["core/src/gguf.cpp"],
    "npy": ["tools/duet/npy.cpp"],
    "onnx": sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "onnx/src/*.cpp"))
                   if not p.endswith("stub.cpp")),
}
LIBRARY = ("core/src/", "backends/", "api/", "onnx/src/")


def tool(name, given):
    for candidate in ([given] if given else []) + [name + "-14", name]:
        if shutil.which(candidate):
            return candidate
    sys.exit(f"coverage: {name}-14 not found (Debian's llvm-14; tools/setup.sh installs it)")


def line_counts(cov, profdata, objects, sources):
    """{source: (covered, total)} of the files in `sources` (paths relative to ROOT)."""
    args = [cov, "export", "-summary-only", "-instr-profile=" + profdata, objects[0]]
    for o in objects[1:]:
        args += ["-object", o]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    counts = {}
    for f in json.loads(out)["data"][0]["files"]:
        rel = os.path.relpath(f["filename"], ROOT)
        if any(rel == s or (s.endswith("/") and rel.startswith(s)) for s in sources):
            lines = f["summary"]["lines"]
            counts[rel] = (lines["covered"], lines["count"])
    return counts


def percent(covered, total):
    return f"{100.0 * covered / total:5.1f}%" if total else "    -"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-coverage"))
    ap.add_argument("--corpus", action="append", default=[],
                    help="a folder with TARGET/ subfolders replayed besides fuzz/corpus")
    ap.add_argument("--targets", help="comma-separated fuzz targets (default: every one built)")
    ap.add_argument("--tests", action="store_true", help="also run ctest and report the library")
    ap.add_argument("--ctest-args",
                    help="ctest arguments (default: leave out what the debug test preset does, "
                    "the tests that compare speeds, which an unoptimised build does not meet)")
    ap.add_argument("--per-file", action="store_true", help="a line per source file")
    ap.add_argument("--llvm-profdata")
    ap.add_argument("--llvm-cov")
    a = ap.parse_args()
    profdata_tool = tool("llvm-profdata", a.llvm_profdata)
    cov = tool("llvm-cov", a.llvm_cov)
    work = tempfile.mkdtemp(prefix="duet-coverage-")
    targets = a.targets.split(",") if a.targets else list(READERS)
    failed = False
    print(f"{'target':<12} {'inputs':>7} {'lines covered':>15} {'of':>7} {'':>7}  files")
    for t in targets:
        exe = os.path.join(a.build, "fuzz", "duet_fuzz_" + t)
        if not os.path.exists(exe):
            print(f"{t:<12} not built ({exe})")
            continue
        folders = [os.path.join(ROOT, "fuzz", "corpus", t)]
        folders += [os.path.join(c, t) for c in a.corpus if os.path.isdir(os.path.join(c, t))]
        inputs = sum(len(files) for f in folders for _, _, files in os.walk(f))
        raw = os.path.join(work, t + ".profraw")
        run = subprocess.run([exe] + folders, env=dict(os.environ, LLVM_PROFILE_FILE=raw),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            failed = True
            print(f"{t:<12} the replay failed (exit {run.returncode}):\n{run.stderr[-2000:]}")
            continue
        merged = os.path.join(work, t + ".profdata")
        subprocess.run([profdata_tool, "merge", "-sparse", raw, "-o", merged], check=True)
        counts = line_counts(cov, merged, [exe], READERS[t])
        covered = sum(c for c, _ in counts.values())
        total = sum(n for _, n in counts.values())
        names = ", ".join(READERS[t]) if len(READERS[t]) == 1 else f"{len(counts)} files in onnx/src"
        print(f"{t:<12} {inputs:>7} {covered:>15} {total:>7} {percent(covered, total)}  {names}")
        if a.per_file and len(counts) > 1:
            for f, (c, n) in sorted(counts.items()):
                print(f"{'':<12} {'':>7} {c:>15} {n:>7} {percent(c, n)}  {f}")
    if a.tests:
        raws = os.path.join(work, "tests")
        os.makedirs(raws)
        env = dict(os.environ, LLVM_PROFILE_FILE=os.path.join(raws, "%p-%m.profraw"))
        if a.ctest_args is None:
            with open(os.path.join(ROOT, "CMakePresets.json")) as f:
                debug = [p for p in json.load(f)["testPresets"] if p["name"] == "debug"][0]
            ctest_args = ["-E", debug["filter"]["exclude"]["name"]]
        else:
            ctest_args = a.ctest_args.split()
        test = subprocess.run(["ctest", "--test-dir", a.build, "-j2"] + ctest_args,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        summary = [l for l in test.stdout.splitlines() if "tests passed" in l]
        print("ctest: " + (summary[0] if summary else test.stdout.strip()[-2000:]))
        failed = failed or test.returncode != 0
        merged = os.path.join(work, "tests.profdata")
        subprocess.run([profdata_tool, "merge", "-sparse", "-o", merged] +
                       glob.glob(os.path.join(raws, "*.profraw")), check=True)
        objects = sorted(p for p in glob.glob(os.path.join(a.build, "tests", "*", "duet_*_tests"))
                         + glob.glob(os.path.join(a.build, "tools", "duet"))
                         + glob.glob(os.path.join(a.build, "lib", "libduet.so"))
                         if os.access(p, os.X_OK))
        counts = line_counts(cov, merged, objects, list(LIBRARY))
        for top in LIBRARY:
            mine = {f: v for f, v in counts.items() if f.startswith(top)}
            c, n = sum(x for x, _ in mine.values()), sum(y for _, y in mine.values())
            print(f"tests        {len(mine):>7} {c:>15} {n:>7} {percent(c, n)}  {top} ({len(mine)} files)")
        c, n = sum(x for x, _ in counts.values()), sum(y for _, y in counts.values())
        print(f"tests        {len(counts):>7} {c:>15} {n:>7} {percent(c, n)}  the library")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
