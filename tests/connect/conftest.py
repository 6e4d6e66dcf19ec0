"""A Spark Connect server as a separate process (from pip pyspark's own jars, ``local[3]`` on
127.0.0.1), one per session, and a Connect session on it.

These tests run in a pytest process of their own (``tests/test_spark_connect.py`` starts it;
``TFOS_CONNECT_SUITE=1 pytest tests/connect`` runs them by hand): the rest of the suite holds
classic SparkContexts, and a process that ever started one keeps its JVM gateway, so "no
SparkContext here" could only be asserted honestly in a process that never had one. Every test
asserts it.
"""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "notebook"))  # nbhelpers


@pytest.fixture(scope="session")
def connect_server():
    """The server; its Python workers import this checkout's code (its PYTHONPATH comes first)."""
    from tfos_notebook.devcluster import ConnectServer

    pythonpath = os.pathsep.join([ROOT, *(p for p in sys.path if p and p != ROOT)])
    server = ConnectServer(cores=3, pythonpath=pythonpath).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def connect_spark(connect_server):
    """A Spark Connect session on the server (the notebook's ``spark``)."""
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote(connect_server.url).getOrCreate()
    yield session
    session.stop()  # the client's session only: the server goes on until the fixture above ends


@pytest.fixture(autouse=True)
def _no_classic_spark_context():
    """No classic SparkContext (nor a JVM gateway) exists in this process, before or after a test."""
    from pyspark import SparkContext

    assert SparkContext._active_spark_context is None and SparkContext._gateway is None
    yield
    assert SparkContext._active_spark_context is None and SparkContext._gateway is None


@pytest.fixture(scope="session")
def ip():
    """The test IPython shell with ``%load_ext tfos_notebook`` done."""
    from IPython.testing import globalipapp

    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "tfos_notebook")
    return shell


@pytest.fixture(autouse=True)
def _own_tensorboards(tmp_path, monkeypatch):
    """Each test keeps its TensorBoard registry and mirrors in a state directory of its own; the
    TensorBoards it started are stopped after it."""
    monkeypatch.setenv("TFOS_NOTEBOOK_STATE_DIR", str(tmp_path / "state"))
    yield
    from tfos_notebook.tensorboard import process

    process.stop_owned()
