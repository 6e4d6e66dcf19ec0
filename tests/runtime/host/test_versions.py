"""The versions a node reports when it registers (``runtime/host/versions.py``): TensorFlow's is
read from the distribution that holds the package an import would load, never from a stray one
elsewhere on ``sys.path``; run in fresh interpreters, as a node's Python worker is."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

from tfos_notebook.runtime.host.versions import TENSORFLOW_DISTRIBUTIONS


def _versions(extra_path: str = "") -> dict:
    code = textwrap.dedent(f"""
        import json, sys
        if {extra_path!r}:
            sys.path.insert(0, {extra_path!r})
        from tfos_notebook.runtime.host.versions import installed_versions
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


def test_each_release_below_the_floor_is_named_with_the_floor():
    from tfos_notebook.runtime.host.versions import tensorflow_too_old, too_old

    assert too_old("pyspark", "3.4.1") == "pyspark 3.4.1 is older than 3.5, the oldest tfos_notebook supports"
    assert too_old("pyspark", "3.5.0") == too_old("pyspark", "4.0.0+databricks") == ""
    assert too_old("tensorflow", "2.9.3") != "" and too_old("tensorflow", "2.14.1") == ""
    assert tensorflow_too_old("2.13.1").endswith("install tensorflow>=2.14 (and tf-keras of the same release) on "
                                                 "the executors")
    assert tensorflow_too_old("") == ""  # no TensorFlow: its own finding (tensorflow_missing) says so


def _import_spark_seam(prelude: str) -> subprocess.CompletedProcess:
    code = prelude + "\nimport tfos_notebook.runtime.driver.spark"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_a_pyspark_older_than_35_is_refused_where_the_package_first_needs_spark():
    done = _import_spark_seam("import pyspark; pyspark.__version__ = '3.4.1'")
    assert done.returncode != 0
    assert ("UnsupportedVersion: pyspark 3.4.1 is older than 3.5, the oldest tfos_notebook supports: use Spark 3.5 "
            "or newer (on Databricks, Runtime 14.3 LTS or later)") in done.stderr


def test_without_pyspark_the_package_says_where_spark_comes_from():
    done = _import_spark_seam("import sys; sys.modules['pyspark'] = None")
    assert done.returncode != 0
    assert "tfos_notebook needs pyspark, which this Python cannot import" in done.stderr
    assert "pip install 'tfos_notebook[spark]'" in done.stderr
    plain = subprocess.run([sys.executable, "-c", "import sys; sys.modules['pyspark'] = None; import tfos_notebook; "
                            "import tfos_notebook.runtime.host.versions"], capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0, plain.stderr  # the package itself imports without Spark (a node's child does)


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def test_which_keras_tf_keras_is_says_the_package_and_its_version():
    """tf-keras where it is installed and asked for (Databricks 15.4+), else the ``keras`` package:
    Keras 3, or Keras 2 where TensorFlow before 2.16 ships it as tf.keras (14.3)."""
    from tfos_notebook.runtime.host.versions import keras_in_use

    keras, tf_keras = _installed("keras"), _installed("tf-keras")
    assert keras_in_use(True) == (f"tf-keras {tf_keras}" if tf_keras else f"keras {keras}")
    assert keras_in_use(False) == f"keras {keras}"


def test_which_keras_a_node_runs_is_the_runs_env_then_its_setting_then_the_executors_env_then_tf_keras():
    from tfos_notebook.runtime.host.versions import tf_keras_installed, uses_legacy_keras

    on, off = {"TF_USE_LEGACY_KERAS": "1"}, {"TF_USE_LEGACY_KERAS": "0"}
    assert uses_legacy_keras(False, on, {}) and not uses_legacy_keras(True, off, on)  # Run(env=...) first
    assert not uses_legacy_keras(False, {}, on)  # --keras3 wins over an executor's inherited setting
    assert uses_legacy_keras(None, {}, on) and not uses_legacy_keras(None, {}, off)
    assert uses_legacy_keras(None, {}, {}) == tf_keras_installed()
