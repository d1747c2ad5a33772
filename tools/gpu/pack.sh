#!/usr/bin/env bash
# Packs a duet build for a GPU machine that lacks our Debian libraries (a CUDA image with the
# NVIDIA driver, PyTorch and nothing else): the binaries, the non-base shared libraries `ldd` names
# (spdlog, fmt, onnx, protobuf, z), Debian's Vulkan loader and validation layer, and the GL dispatch
# libraries the NVIDIA Vulkan driver needs, plus this folder's scripts, into one xz tarball; when
# the build has the Python module, pack_python.sh's python.tar.xz beside it (about 8 MB).
# Usage: tools/gpu/pack.sh BUILD_DIR [OUT_DIR]      (OUT_DIR default: gpub/, git-ignored)
# Build first, e.g. for Hopper and Ampere cubins (see docs/performance.md#gpu-runs):
#   cmake --preset default -B build-gpu -DDUET_CUDA_ARCHS="80;90a" -DDUET_CUDA_PTX_ARCH=90a
#   cmake --build build-gpu --target duet duet-llama duet_cuda_gpu_tests duet_cuda_lost_tests duet_python
set -eu
here=$(cd "$(dirname "$0")" && pwd)
b=$(cd "$1" && pwd); dest=${2:-$PWD/gpub}
st=$(mktemp -d); trap 'rm -rf "$st"' EXIT
mkdir -p "$st/bin" "$st/lib" "$st/layers" "$st/gl"
for t in tools/duet examples/llama/duet-llama tools/duet-llama tests/cuda/duet_cuda_gpu_tests \
         tests/cuda/duet_cuda_lost_tests; do
  [ -f "$b/$t" ] && cp "$b/$t" "$st/bin/" || echo "pack: no $t"
done
# Extra binaries named by the caller (benches): PACK_EXTRA="tools/bench/x tools/bench/y"
for t in ${PACK_EXTRA:-}; do [ -f "$b/$t" ] && cp "$b/$t" "$st/bin/" || echo "pack: no $t"; done
# The Python module (duet_python), when built: tools/gpu/dlpack_cuda.py imports it.
if ls "$b"/python/duet/_duet*.so > /dev/null 2>&1; then
  mkdir -p "$st/python/duet" && cp "$b"/python/duet/*.py "$b"/python/duet/_duet*.so "$st/python/duet/"
fi
for f in "$st"/bin/* "$st"/python/duet/_duet*.so; do [ -f "$f" ] && ldd "$f"; done | awk '/=> \//{print $3}' | sort -u | while read -r l; do
  case $(basename "$l") in
    libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*|libpthread*|libdl.so*|librt.so*) ;;
    *) cp -L "$l" "$st/lib/" ;;
  esac
done
cp -L /usr/lib/x86_64-linux-gnu/libvulkan.so.1 "$st/lib/"
cp -L /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so "$st/lib/"
cp /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json "$st/layers/"
# The NVIDIA Vulkan driver (libGLX_nvidia) loads only with the GL dispatch libraries and their X11
# deps on the library path; without them vkCreateInstance answers VK_ERROR_INCOMPATIBLE_DRIVER.
for l in libGLdispatch.so.0 libGLX.so.0 libEGL.so.1 libOpenGL.so.0 libGL.so.1 libX11.so.6 \
         libxcb.so.1 libXau.so.6 libXdmcp.so.6 libbsd.so.0 libmd.so.0; do
  cp -L "/usr/lib/x86_64-linux-gnu/$l" "$st/gl/" 2>/dev/null || cp -L "/lib/x86_64-linux-gnu/$l" "$st/gl/"
done
cp "$here"/*.py "$here"/run.sh "$st/"
git -C "$here" rev-parse --short HEAD > "$st/commit" 2>/dev/null || true
mkdir -p "$dest"; tar -C "$st" -cf - . | xz -T2 -6 > "$dest/bundle.tar.xz"
ls -la "$st/bin"; du -sh "$dest/bundle.tar.xz"
# Beside it, python.tar.xz: the Python module's sources, headers and engine libraries, from which
# run.sh builds the module for the GPU machine's interpreter (pack_python.sh). PACK_PYTHON=0: not.
if [ "${PACK_PYTHON:-1}" = 1 ] && ls "$b"/python/duet/_duet*.so > /dev/null 2>&1; then
  bash "$here/pack_python.sh" "$b" "$dest"
fi
