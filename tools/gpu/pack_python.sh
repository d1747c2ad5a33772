#!/usr/bin/env bash
# Packs what a GPU machine needs to build duet's Python module (target duet_python) for its own
# interpreter, whatever its version: the module built here is for Debian's Python (cp311), the GPU
# image's Python is another (3.12 on 2026-11-27).
# The engine is not rebuilt there: the module's link line of BUILD_DIR/build.ninja (the static
# libraries of the engine, CUDA's static runtime, the Debian shared libraries it names) is packed
# as it is, and only the Python-facing translation units (python/src, about 2,000 lines, minus the
# emulator's registry) are compiled there, by build_python.sh, with that machine's compiler, Python
# headers and pybind11 (pip's). The headers those units include, ours and Debian's (spdlog, fmt,
# nlohmann, dlpack, onnx, ...; `c++ -M` lists them), are packed under one folder, so the GPU
# machine needs none of Debian's; only the C and C++ standard headers, Python's and pybind11's
# come from there.
# (Not one libduet_pycore.so instead of the static libraries: the engine's objects are compiled
# with -fvisibility=hidden, so a shared library of them would export nothing the units need.)
# Usage: tools/gpu/pack_python.sh BUILD_DIR [OUT_DIR]   (OUT_DIR default: gpub/, git-ignored)
#   BUILD_DIR: a configured and built tree with duet_python (compile_commands.json on, as in every
#   preset), e.g. `cmake --build build-gpu --target duet_python`.
# Writes OUT_DIR/python.tar.xz (folder pysrc/: build_python.sh, flags, sources, headers, libraries,
# python/duet/*.py). run.sh's pydlpack step unpacks it beside the bundle and builds the module when
# the bundle's does not import.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
b=$(cd "$1" && pwd); dest=${2:-$PWD/gpub}
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$b/CMakeCache.txt")
[ -d "$src" ] || { echo "pack_python: no source folder in $b/CMakeCache.txt"; exit 1; }
ls "$b"/python/duet/_duet*.so > /dev/null 2>&1 || { echo "pack_python: build duet_python in $b first"; exit 1; }
st=$(mktemp -d); trap 'rm -rf "$st"' EXIT
p=$st/pysrc; mkdir -p "$p/lib" "$p/duet"
# The compile flags of the module's units and their sources, the link line, the headers to pack.
/usr/bin/python3 - "$b" "$src" "$p" <<'EOF'
import json, os, re, shlex, subprocess, sys
b, src, p = sys.argv[1:4]
def under(path, root):
    return os.path.commonpath([os.path.abspath(path), root]) == root
# The compile commands of duet_python's targets (objects and module), not the emulated test build
# nor the precompiled header.
units = []  # (source, flags)
for e in json.load(open(f"{b}/compile_commands.json")):
    f = e["file"]
    if "/python/" not in f or "emulated" in f or f.endswith("cmake_pch.hxx.cxx"):
        continue
    args = shlex.split(e["command"])
    flags, i = [], 1
    while i < len(args):
        a = args[i]
        if a in ("-o", "-c", "-include", "-x", "-MF", "-MT"):
            i += 2; continue
        if a in ("-Winvalid-pch",) or a.startswith("-isystem/") and "python3" in a:
            i += 1; continue
        if a == "-isystem" and "python3" in args[i + 1]:  # the interpreter's headers: added there
            i += 2; continue
        flags.append(a); i += 1
    srcs = [f]
    if "/Unity/" in f:
        srcs = re.findall(r'#include "([^"]+)"', open(f).read())
    units += [(s, flags) for s in srcs]
if not units:
    sys.exit("pack_python: no compile command of python/src in compile_commands.json")
# The precompiled header's pybind11 headers, included first as the build does.
pch = ["-include", "pybind11/pybind11.h", "-include", "pybind11/stl.h", "-include", "pybind11/numpy.h"]
import sysconfig
pyinc = sysconfig.get_paths()["include"]
import pybind11
pbinc = pybind11.get_include()
skip = [pyinc, pbinc, os.path.realpath(pbinc), "/usr/include/pybind11"]
deps = set()
for s, flags in units:
    out = subprocess.run(["c++", *flags, *pch, "-isystem", pyinc, "-isystem", pbinc, "-M", s],
                         check=True, capture_output=True, text=True).stdout
    deps.update(t for t in out.replace("\\\n", " ").split()[1:] if t.startswith("/"))
deps = sorted(os.path.normpath(d) for d in deps)
ours = [d for d in deps if under(d, src) or under(d, b)]
other = [d for d in deps if d not in ours and not any(under(d, k) for k in skip)]
# Debian's library headers, not the C and C++ standard library's nor the compiler's (dpkg -S).
owner = {}
for line in subprocess.run(["dpkg", "-S", *other], capture_output=True, text=True).stdout.splitlines():
    pkg, _, path = line.partition(": ")
    owner[path] = pkg
base = re.compile(r"^(libc6-dev|linux-libc-dev|libstdc\+\+-\d+-dev|libgcc-\d+-dev|gcc-\d+|libpython3|python3)")
sysh = []
for d in other:
    pkg = owner.get(d) or owner.get(os.path.realpath(d), "")
    if base.match(pkg.split(",")[0].split(":")[0]) or not d.startswith("/usr/include/"):
        continue
    sysh.append(d)
def dest(d):
    if under(d, b): return "build/" + os.path.relpath(d, b)
    if under(d, src): return "src/" + os.path.relpath(d, src)
    return "sys/" + os.path.relpath(d, "/usr/include")
with open(f"{p}/files.txt", "w") as fl:
    for d in ours + sysh + [s for s, _ in units]:
        fl.write(f"{d}\t{dest(d)}\n")
def rewrite(flags):
    out = []
    for a in flags:
        if a.startswith("-I"):
            if not (under(a[2:], src) or under(a[2:], b)):
                print("pack_python: include folder left out:", a); continue
            a = "-I@P@/" + dest(a[2:]).rstrip("/.")
        out.append(a)
    # Debian's headers after ours, before the machine's own /usr/include.
    return out + ["-isystem", "@P@/sys"] + pch
with open(f"{p}/units.txt", "w") as fu:  # one line a unit: source, then its flags
    for s, flags in units:
        fu.write(shlex.join([dest(s), *rewrite(flags)]) + "\n")
# The link line of duet_python: static libraries into lib/, shared ones under their soname.
nin = open(f"{b}/build.ninja").read()
m = re.search(r"^build python/duet/_duet[^:]*: CXX_MODULE_LIBRARY_LINKER.*?\n((?:  .*\n)+)", nin, re.M)
vars_ = dict(re.findall(r"^  (\w+) = (.*)$", m.group(1), re.M))
link, copies = [], []
for a in shlex.split(vars_["LINK_LIBRARIES"]):
    if a.startswith("-"):
        link.append(a); continue
    path = a if a.startswith("/") else f"{b}/{a}"
    name = os.path.basename(path)
    if name in ("librt.a", "libdl.a", "libpthread.a"):  # glibc's: the machine's own
        link.append("-l" + name[3:-2]); continue
    if ".so" in name:
        soname = re.search(r"SONAME\s+(\S+)", subprocess.run(["objdump", "-p", path],
                           capture_output=True, text=True).stdout)
        name = soname.group(1) if soname else name
    copies.append((path, name))
    link.append(f"@P@/lib/{name}")
for a in shlex.split(vars_.get("LINK_PATH", "")):  # -L/usr/local/cuda/...: libcudadevrt.a
    d = a[2:]
    for l in ("libcudadevrt.a",):
        if os.path.exists(f"{d}/{l}"): copies.append((f"{d}/{l}", l))
with open(f"{p}/link.txt", "w") as f:
    f.write(shlex.join(link) + "\n")
with open(f"{p}/libs.txt", "w") as f:
    for path, name in dict((n, (pa, n)) for pa, n in copies).values():
        f.write(f"{path}\t{name}\n")
print(f"pack_python: {len(units)} units, {len(ours)} of our headers, {len(sysh)} of Debian's, "
      f"{len(copies)} libraries")
EOF
while IFS=$'\t' read -r from to; do mkdir -p "$p/$(dirname "$to")"; cp -L "$from" "$p/$to"; done < "$p/files.txt"
while IFS=$'\t' read -r from to; do cp -L "$from" "$p/lib/$to"; done < "$p/libs.txt"
cp "$b"/python/duet/*.py "$p/duet/"
# Python's own headers of the other versions found here (pyenv's builds), in case the GPU machine's
# interpreter comes without its development headers: build_python.sh falls back to them when
# the major.minor matches (the module's ABI is one per minor version). PACK_PY_INCLUDES="DIR ...".
for d in ${PACK_PY_INCLUDES:-$(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.1[0-9]*/include/python3.1[0-9] 2>/dev/null)}; do
  v=$(basename "$d"); [ -f "$d/Python.h" ] && [ ! -d "$p/pyinc/$v" ] && mkdir -p "$p/pyinc" && cp -r "$d" "$p/pyinc/$v"
done
cp "$here/build_python.sh" "$p/"
(cd "$src" && git rev-parse --short HEAD 2>/dev/null; git -C "$src" status --porcelain -uno 2>/dev/null | head -3) > "$p/commit" || true
mkdir -p "$dest"; tar -C "$st" -cf - pysrc | xz -T2 -6 > "$dest/python.tar.xz"
du -sh "$p" "$dest/python.tar.xz"
