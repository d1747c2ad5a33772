#!/usr/bin/env bash
# Installs every Debian 12 package duet needs to build, test and benchmark. Nothing is
# downloaded at build time; CUDA is optional and found at /usr/local/cuda when present.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang-format
  # libraries
  libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
  # Vulkan: headers and loader, shader compiler and validator, lavapipe (a CPU Vulkan device),
  # validation layers for the tests, vulkaninfo. glslang-tools too: the build links glslang's
  # libraries, but glslang-dev's CMake package refuses to load without glslangValidator
  libvulkan-dev libvulkan-volk-dev glslang-dev glslang-tools spirv-tools mesa-vulkan-drivers
  vulkan-validationlayers vulkan-tools
  # ONNX import (protobuf through Debian's ONNX build), ONNX's node test suite as an outside
  # conformance test, and the Python that regenerates the exported test models in tools/onnx
  libonnx-dev libprotobuf-dev libonnx-testdata python3-onnx python3-torch
  # what llama.cpp's converter imports beside torch, for tools/make_llamacpp_fixture.py
  python3-sentencepiece python3-tqdm
  # the Python module (python/): pybind11, DLPack's header, and pytest for its tests
  pybind11-dev python3-pybind11 libdlpack-dev python3-dev python3-numpy python3-pytest
  # the reference pre-tokenizers of tools/make_tokenizer_fixtures.py (tests/llm/data)
  python3-regex
  # `duet bench --plot`
  gnuplot-nox
  # distributed runs over MPI (docs/distributed.md): Open MPI's library, headers and mpirun
  libopenmpi-dev openmpi-bin
  # the sanitizer presets CI runs (debug-cpu-vulkan, tsan) and the fuzz preset: clang with its
  # sanitizer runtimes and libFuzzer, and lld, which links their instrumented binaries several
  # times faster than the default linker
  clang libclang-rt-14-dev lld
  # the coverage preset's reports (tools/coverage.py): llvm-profdata-14 and llvm-cov-14
  llvm-14
)

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

# --arm64: the 64-bit ARM cross build (the arm64 preset): Debian's cross compiler, qemu-user to
# run its tests, and the arm64 libraries it links, from a multiarch install (libc6:arm64 puts
# the arm64 loader at /lib, where qemu-aarch64 finds it without -L).
if [ "${1:-}" = "--arm64" ]; then
  packages+=(g++-aarch64-linux-gnu qemu-user
    libc6:arm64 libspdlog-dev:arm64 libfmt-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64)
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64
  fi
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
