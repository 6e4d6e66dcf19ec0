"""An IPython shell with ``%load_ext tfos_notebook`` done, and the Spark session in its namespace."""

from __future__ import annotations

import os
import sys

import pytest

# the TensorBoard tests' helpers (event records, polling TensorBoard's HTTP API) serve these tests too
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tensorboard"))


@pytest.fixture(scope="session")
def ip():
    """The test IPython shell with ``%load_ext tfos_notebook`` done."""
    from IPython.testing import globalipapp

    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "tfos_notebook")
    return shell


@pytest.fixture
def spark_ns(ip, local_spark):
    """``ip`` with the local SparkSession bound as ``spark_for_test`` in the notebook namespace."""
    ip.user_ns["spark_for_test"] = local_spark
    return ip


@pytest.fixture(autouse=True)
def _own_tensorboards(tmp_path, monkeypatch):
    """Each test keeps its TensorBoard registry and mirrors in a state directory of its own, and
    the TensorBoards it started (runs keep theirs until the kernel exits) are stopped after it."""
    monkeypatch.setenv("TFOS_NOTEBOOK_STATE_DIR", str(tmp_path / "state"))
    yield
    from tfos_notebook.tensorboard import process

    process.stop_owned()
