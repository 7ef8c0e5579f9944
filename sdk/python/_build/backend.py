"""The package's PEP 517 build backend: setuptools where it can build a
wheel, else a standard-library builder.

setuptools before 70.1 builds wheels only with the `wheel` package
installed; where it is missing (pip install --no-build-isolation on a
machine without it, and no package index to fetch it from) this module
builds the same pure-Python wheel itself: the package's files, a
.dist-info with METADATA, WHEEL and RECORD. The metadata is the
[project] table of pyproject.toml (tests/test_packaging.py checks that
the two agree).
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "hephaestus"
NAME = "hephaestus-sdk"
SUMMARY = "Python SDK of Hephaestus for Go: a client of heph server's HTTP API and a worker of its worker protocol"
REQUIRES_PYTHON = ">=3.9"


def _setuptools_can_build_wheels():
    try:
        import setuptools.build_meta  # noqa: F401
    except ImportError:
        return False
    try:
        import wheel.bdist_wheel  # noqa: F401
        return True
    except ImportError:
        pass
    try:
        import setuptools.command.bdist_wheel  # noqa: F401  (setuptools >= 70.1)
        return True
    except ImportError:
        return False


def version():
    with open(os.path.join(ROOT, PACKAGE, "_version.py"), encoding="utf-8") as f:
        m = re.search(r'__version__\s*=\s*"([^"]+)"', f.read())
    if not m:
        raise RuntimeError("no __version__ in %s/_version.py" % PACKAGE)
    return m.group(1)


def _dist():
    return "%s-%s" % (NAME.replace("-", "_"), version())


def _metadata():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n"
            "Classifier: Programming Language :: Python :: 3\nClassifier: Typing :: Typed\n"
            "Description-Content-Type: text/markdown\n\n%s" % (NAME, version(), SUMMARY, REQUIRES_PYTHON, readme))


_WHEEL = "Wheel-Version: 1.0\nGenerator: hephaestus _build/backend.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _package_files():
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith((".py", ".typed")):
                full = os.path.join(dirpath, fn)
                out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    return out


def _write_wheel(wheel_directory, entries):
    """entries: (archive name, bytes); adds the dist-info and RECORD."""
    dist = _dist()
    info = dist + ".dist-info"
    entries = list(entries) + [(info + "/METADATA", _metadata().encode("utf-8")),
                               (info + "/WHEEL", _WHEEL.encode()),
                               (info + "/top_level.txt", (PACKAGE + "\n").encode())]
    record = []
    name = dist + "-py3-none-any.whl"
    path = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            zi = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
        record.append(info + "/RECORD,,")
        zi = zipfile.ZipInfo(info + "/RECORD", date_time=(2020, 1, 1, 0, 0, 0))
        zi.external_attr = 0o644 << 16
        z.writestr(zi, "\n".join(record) + "\n")
    return name


def _own_build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = []
    for arc, full in _package_files():
        with open(full, "rb") as f:
            entries.append((arc, f.read()))
    return _write_wheel(wheel_directory, entries)


def _own_build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(NAME.replace("-", "_") + ".pth", (ROOT + "\n").encode())])


def _own_build_sdist(sdist_directory, config_settings=None):
    dist = _dist()
    name = dist + ".tar.gz"
    files = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
             ("README.md", os.path.join(ROOT, "README.md")),
             ("_build/backend.py", os.path.join(ROOT, "_build", "backend.py"))] + _package_files()
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        def add(arc, data):
            ti = tarfile.TarInfo(dist + "/" + arc)
            ti.size, ti.mtime, ti.mode = len(data), int(time.time()), 0o644
            tar.addfile(ti, io.BytesIO(data))
        for arc, full in files:
            with open(full, "rb") as f:
                add(arc, f.read())
        add("PKG-INFO", _metadata().encode("utf-8"))
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


if _setuptools_can_build_wheels():
    from setuptools import build_meta as _st

    def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
        return _st.build_wheel(wheel_directory, config_settings, metadata_directory)

    def build_sdist(sdist_directory, config_settings=None):
        return _st.build_sdist(sdist_directory, config_settings)

    def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
        return _st.build_editable(wheel_directory, config_settings, metadata_directory)
else:
    build_wheel = _own_build_wheel
    build_sdist = _own_build_sdist
    build_editable = _own_build_editable
