"""`pip install .`'s backend (python/build_backend/duet_build.py): the wheel it assembles from a
built package holds the package and valid metadata, each file's hash in RECORD. (The CMake build
it runs first is what builds this very module; a whole `pip install .` is in docs/python.md.)"""
import base64
import hashlib
import importlib.util
import os
import sys
import zipfile

import duet
from conftest import ROOT


def backend():
    spec = importlib.util.spec_from_file_location(
        "duet_build", os.path.join(ROOT, "python", "build_backend", "duet_build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_wheel_holds_the_built_package_and_its_record(tmp_path):
    b = backend()
    assert b.get_requires_for_build_wheel() == []  # nothing to download
    name = b.assemble_wheel(os.path.dirname(duet.__file__), tmp_path, zipfile.ZIP_STORED)
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert name.startswith(f"duet-{duet.__version__}-{py}-{py}-linux_") and name.endswith(".whl")
    with zipfile.ZipFile(tmp_path / name) as z:
        names = set(z.namelist())
        assert {"duet/__init__.py", "duet/errors.py", "duet/report.py"} <= names
        assert any(n.startswith("duet/_duet.") and n.endswith(".so") for n in names)
        info = f"duet-{duet.__version__}.dist-info"
        assert f"Tag: {py}-{py}-linux_" in z.read(f"{info}/WHEEL").decode()
        record = z.read(f"{info}/RECORD").decode().splitlines()
        assert {line.split(",")[0] for line in record} == names
        for line in record:
            path, digest, size = line.split(",")
            if path.endswith("RECORD"):
                continue
            data = z.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={want}" and int(size) == len(data), path
