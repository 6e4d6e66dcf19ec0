"""The versions a node reports when it registers (``runtime/wire/versions.py``): TensorFlow's is
read from the distribution that holds the package an import would load, never from a stray one
elsewhere on ``sys.path``; run in fresh interpreters, as a node's Python worker is."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

from tfos_notebook.runtime.wire.versions import TENSORFLOW_DISTRIBUTIONS


def _versions(extra_path: str = "") -> dict:
    code = textwrap.dedent(f"""
        import json, sys
        if {extra_path!r}:
            sys.path.insert(0, {extra_path!r})
        from tfos_notebook.runtime.wire.versions import installed_versions
        print(json.dumps(installed_versions()))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def _installed_tensorflow() -> str:
    for dist in TENSORFLOW_DISTRIBUTIONS:  # searched the whole path, as the node no longer does
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    pytest.fail("no TensorFlow distribution is installed in the test environment")


def test_reports_this_python_and_the_installed_tensorflow():
    versions = _versions()
    assert versions["python"] == ".".join(map(str, sys.version_info[:3]))
    assert versions["tensorflow"] == _installed_tensorflow() != ""


def test_a_stray_tensorflow_metadata_folder_elsewhere_on_the_path_is_not_taken(tmp_path):
    # A dist-info of "tensorflow" 0.0.1 with no package beside it, first on sys.path: a search of
    # the whole path by distribution name (tensorflow first) would report it.
    info = tmp_path / "tensorflow-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorflow\nVersion: 0.0.1\n")
    assert _versions(str(tmp_path))["tensorflow"] == _installed_tensorflow()
