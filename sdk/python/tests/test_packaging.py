"""The package builds (the in-tree backend's own builder) with its
py.typed marker, and the backend's metadata agrees with pyproject.toml."""

import base64
import hashlib
import importlib.util
import os
import re
import tempfile
import unittest
import zipfile

import support

import hephaestus


def backend():
    spec = importlib.util.spec_from_file_location("heph_backend", os.path.join(support.SDK, "_build", "backend.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class PackagingTest(unittest.TestCase):
    def test_metadata_agrees_with_pyproject(self):
        b = backend()
        with open(os.path.join(support.SDK, "pyproject.toml"), encoding="utf-8") as f:
            text = f.read()

        def field(name):
            m = re.search(r'^%s\s*=\s*"([^"]*)"' % name, text, re.M)
            return m and m.group(1)

        self.assertEqual(field("name"), b.NAME)
        self.assertEqual(field("version"), b.version())
        self.assertEqual(field("version"), hephaestus.__version__)
        self.assertEqual(field("description"), b.SUMMARY)
        self.assertEqual(field("requires-python"), b.REQUIRES_PYTHON)
        self.assertIn("dependencies = []", text)

    def test_wheel(self):
        b = backend()
        with tempfile.TemporaryDirectory() as d:
            name = b._own_build_wheel(d)
            self.assertEqual(name, "hephaestus_sdk-%s-py3-none-any.whl" % hephaestus.__version__)
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = set(z.namelist())
                for mod in ("__init__", "client", "worker", "errors", "_http", "_operations", "_version"):
                    self.assertIn("hephaestus/%s.py" % mod, names)
                self.assertIn("hephaestus/py.typed", names)
                self.assertFalse([n for n in names if "__pycache__" in n])
                info = "hephaestus_sdk-%s.dist-info/" % hephaestus.__version__
                record = z.read(info + "RECORD").decode().splitlines()
                for line in record:
                    path, digest, size = line.rsplit(",", 2)
                    if path == info + "RECORD":
                        continue
                    data = z.read(path)
                    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual(digest, "sha256=" + want, path)
                    self.assertEqual(int(size), len(data))
                self.assertIn("Requires-Python: >=3.9", z.read(info + "METADATA").decode())

    def test_sdist(self):
        b = backend()
        import tarfile
        with tempfile.TemporaryDirectory() as d:
            name = b._own_build_sdist(d)
            with tarfile.open(os.path.join(d, name)) as t:
                names = set(t.getnames())
            root = name[:-len(".tar.gz")]
            for n in ("pyproject.toml", "PKG-INFO", "_build/backend.py", "hephaestus/py.typed", "hephaestus/client.py"):
                self.assertIn(root + "/" + n, names)


if __name__ == "__main__":
    unittest.main()
