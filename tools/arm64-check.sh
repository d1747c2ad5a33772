#!/usr/bin/env bash
# The 64-bit ARM check: cross-compiles the core, the CPU backend (its NEON kernels) and their
# tests with Debian's aarch64 cross compiler, and runs the core and CPU tests under qemu-user
# (docs/cpu-backend.md#64-bit-arm). Not part of .ci/run (a cross build of the CPU backend and the
# tests it links is minutes of compile time); run it when CPU kernels or core change.
#   tools/arm64-check.sh            setup (apt, multiarch arm64), build, test
#   tools/arm64-check.sh -R neon    extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
bash tools/setup.sh --arm64
cmake --preset arm64 >/dev/null
cmake --build --preset arm64
echo "arm64-check: build: $((SECONDS - t0)) s"
t1=$SECONDS
ctest --preset arm64 "$@"
echo "arm64-check: tests under qemu-aarch64: $((SECONDS - t1)) s"
