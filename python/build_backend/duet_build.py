"""The PEP 517 build backend of `pip install .`: CMake builds the Python module of this project
(the duet_python target) and the wheel is assembled here, with the standard library only, so that
it works offline and needs nothing installed into pip's isolated build environment (Debian 12 has
no scikit-build-core).

The build folder is build-pip/ in the source tree (kept, so a second install is incremental), or
DUET_PIP_BUILD_DIR. CMake options come from the CMAKE_ARGS environment variable or from
--config-settings cmake.args="-DDUET_CUDA=OFF ..."; the module is built for the interpreter that
runs pip (its headers are needed: python3-dev).
"""
import base64
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(duet VERSION ([0-9.]+)", f.read())
    return m.group(1)


def _tag():
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    abi = py + getattr(sys, "abiflags", "")
    plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{py}-{abi}-{plat}"


def _cmake_args(config_settings):
    args = shlex.split(os.environ.get("CMAKE_ARGS", ""))
    if config_settings and config_settings.get("cmake.args"):
        args += shlex.split(config_settings["cmake.args"])
    return args


def _build(config_settings):
    build = os.environ.get("DUET_PIP_BUILD_DIR", os.path.join(ROOT, "build-pip"))
    cmd = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DDUET_PYTHON=ON",
           "-DDUET_BUILD_TESTS=OFF", "-DDUET_BUILD_BENCH=OFF", "-DDUET_BUILD_CUDA_TESTS=OFF",
           f"-DPython_EXECUTABLE={sys.executable}"]
    if shutil.which("ninja") and not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        cmd += ["-G", "Ninja"]
    subprocess.run(cmd + _cmake_args(config_settings), check=True, stdout=sys.stderr)
    subprocess.run(["cmake", "--build", build, "--target", "duet_python"], check=True,
                   stdout=sys.stderr)
    return os.path.join(build, "python", "duet")


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return assemble_wheel(_build(config_settings), wheel_directory)


def assemble_wheel(package, wheel_directory, compression=zipfile.ZIP_DEFLATED):
    """The wheel of a built package folder (the .py files and the compiled _duet module)."""
    version = _version()
    dist_info = f"duet-{version}.dist-info"
    files = {}
    for name in sorted(os.listdir(package)):
        if name.endswith(".py") or (name.startswith("_duet") and name.endswith(".so")):
            with open(os.path.join(package, name), "rb") as f:
                files[f"duet/{name}"] = f.read()
    if not any(n.endswith(".so") for n in files):
        raise RuntimeError(f"the build left no compiled module in {package}")
    files[f"{dist_info}/METADATA"] = (
        "Metadata-Version: 2.1\n"
        "Name: duet\n"
        f"Version: {version}\n"
        "Summary: duet's compute engine from Python: graphs on CUDA, Vulkan and the CPU, "
        "checked against a float64 reference\n"
        "Requires-Python: >=3.9\n"
        "Requires-Dist: numpy\n").encode()
    files[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\n"
        "Generator: duet_build (python/build_backend)\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {_tag()}\n").encode()
    record = [_record_line(n, d) for n, d in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = f"duet-{version}-{_tag()}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", compression) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.compress_type = compression
            z.writestr(info, data)
    return wheel


def build_sdist(sdist_directory, config_settings=None):
    """The tracked files of the git checkout, as git archive packs them."""
    name = f"duet-{_version()}"
    out = os.path.join(sdist_directory, f"{name}.tar.gz")
    subprocess.run(["git", "-C", ROOT, "archive", "--format=tar.gz", f"--prefix={name}/",
                    "-o", out, "HEAD"], check=True)
    return os.path.basename(out)
