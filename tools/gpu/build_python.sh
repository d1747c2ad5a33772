#!/usr/bin/env bash
# Builds duet's Python module for this machine's interpreter from the folder pack_python.sh made
# (this script lies in it): compiles the Python-facing units (python/src) with this machine's C++
# compiler, Python headers and pybind11, links them with the packed engine libraries, and puts
# the module beside duet/*.py in OUT_DIR/duet. Then imports it once.
# Usage: [PYTHON=python3] [CXX=g++] build_python.sh OUT_DIR
# Prints "python-build: OK ..." or "python-build: FAIL: <why>" (exit 1); the compiler's errors
# are in OUT_DIR/build.log.
set -u
P=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build_python.sh OUT_DIR}
PY=${PYTHON:-python3}
fail() { echo "python-build: FAIL: $*"; exit 1; }
rm -rf "$out/obj"; mkdir -p "$out/duet" "$out/obj" || fail "cannot write $out"
out=$(cd "$out" && pwd); log=$out/build.log; : > "$log"
t0=$SECONDS
command -v "$PY" > /dev/null || fail "no $PY"
cxx=${CXX:-}
if [ -z "$cxx" ]; then
  for c in g++ c++ clang++; do command -v $c > /dev/null && { cxx=$c; break; }; done
fi
[ -n "$cxx" ] || fail "no C++ compiler (g++, c++, clang++)"
pyinc=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])" 2>>"$log") ||
  fail "$PY cannot say where its headers are"
if [ ! -f "$pyinc/Python.h" ]; then
  v=$("$PY" -c "import sys; print('python%d.%d' % sys.version_info[:2])")
  [ -f "$P/pyinc/$v/Python.h" ] ||
    fail "no Python.h in $pyinc (the interpreter's development headers) nor $v's in the pack"
  echo "python-build: note: no Python.h in $pyinc: the pack's headers of $v"
  pyinc=$P/pyinc/$v
fi
ext=$("$PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))" 2>>"$log")
[ -n "$ext" ] && [ "$ext" != None ] || fail "$PY gives no EXT_SUFFIX"
pbinc=$("$PY" -c "import pybind11; print(pybind11.get_include())" 2>>"$log")
[ -n "$pbinc" ] && [ -f "$pbinc/pybind11/pybind11.h" ] ||
  fail "no pybind11 for $PY (pip install pybind11)"
pbver=$("$PY" -c "import pybind11; print(pybind11.__version__)" 2>/dev/null)
"$PY" -c "import numpy" 2>>"$log" || echo "python-build: note: no NumPy for $PY (the module needs it at run time)"
echo "python-build: $($PY -c 'import sys; print(sys.version.split()[0])') ($PY), pybind11 $pbver," \
  "$($cxx --version | head -1), $(nproc) cores, pack of $(head -1 "$P/commit" 2>/dev/null)"
# The units in parallel, one job a core.
n=0; pids=()
while IFS= read -r line; do
  eval "set -- $line"
  s=$1; shift
  o=$out/obj/$n.o; n=$((n + 1))
  flags=()
  for a in "$@"; do flags+=("${a//@P@/$P}"); done
  ( "$cxx" "${flags[@]}" -isystem "$pyinc" -isystem "$pbinc" -c "$P/$s" -o "$o" \
      > "$o.log" 2>&1 || { echo "compile of $s failed:" >> "$o.log"; exit 1; } ) &
  pids+=($!)
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do sleep 0.2; done
done < "$P/units.txt"
bad=0
for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
cat "$out"/obj/*.log >> "$log" 2>/dev/null
if [ $bad -gt 0 ]; then
  grep -E "error|failed" "$log" | head -15
  fail "$bad of $n units did not compile (pybind11 $pbver; $log)"
fi
t1=$SECONDS
# The module's link line from the build here, paths into the pack.
eval "set -- $(cat "$P/link.txt")"
libs=()
for a in "$@"; do libs+=("${a//@P@/$P}"); done
mod=$out/duet/_duet$ext
"$cxx" -fPIC -O3 -shared -o "$mod" "$out"/obj/*.o -L"$P/lib" "${libs[@]}" \
  -Wl,-rpath,"$P/lib" -Wl,-rpath-link,"$P/lib" >> "$log" 2>&1 ||
  { tail -15 "$log"; fail "link failed ($log)"; }
cp "$P"/duet/*.py "$out/duet/"
t2=$SECONDS
v=$(cd "$(mktemp -d)" && PYTHONPATH=$out "$PY" -c "import duet; print(duet.__version__)" 2>&1) ||
  { echo "$v" | tail -5; fail "the module built but does not import"; }
echo "python-build: OK: $mod (duet $v; $n units compiled in $((t1 - t0)) s, linked in $((t2 - t1)) s)"
