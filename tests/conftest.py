"""Test harness: a real Spark standalone cluster (master + 2 workers on 127.0.0.1, 1 core each,
fake GPU addresses from a discovery script) started once per session from pyspark's own jars, and a
local[2] SparkContext for fast tests.

A Python process holds one SparkContext at a time, so the two fixtures share one slot: asking for
the other kind stops the current context first. Tests are ordered so that local tests run before
cluster tests and the switch happens once.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", __import__("sys").executable)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from hypothesis import HealthCheck, settings  # noqa: E402

from tfos_notebook.devcluster import StandaloneCluster  # noqa: E402
from tfos_notebook.runtime.driver.spark import backend_for  # noqa: E402

# The fuzz tests (marked ``fuzz``) draw the same examples on every run (CI stays stable), keep no
# example database, and time whole tests rather than single examples (servers answer slower on a
# busy 2-core machine). Each test bounds its own ``max_examples``.
settings.register_profile("tfos", derandomize=True, database=None, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.load_profile("tfos")


class _SparkSlot:
    def __init__(self) -> None:
        self.kind: str | None = None
        self.spark = None

    def get(self, kind: str, conf: dict[str, str]):
        from pyspark.sql import SparkSession

        if self.kind == kind and self.spark is not None:
            return self.spark
        self.stop()
        builder = SparkSession.builder.appName(f"tfos-tests-{kind}")
        for k, v in conf.items():
            builder = builder.config(k, v)
        self.spark = builder.getOrCreate()
        self.kind = kind
        return self.spark

    def stop(self) -> None:
        if self.spark is not None:
            self.spark.stop()
        self.spark, self.kind = None, None


_slot = _SparkSlot()

# The Spark Connect tests run in a pytest process of their own, which never holds a classic
# SparkContext (tests/test_spark_connect.py starts it; see tests/connect/conftest.py).
collect_ignore = [] if os.environ.get("TFOS_CONNECT_SUITE") else ["connect"]


@pytest.fixture(autouse=True)
def _ship_test_module_by_value(request):
    """Functions defined in test modules travel to executors by value, as a notebook's would:
    executors cannot import the test files themselves."""
    from pyspark import cloudpickle

    module = request.module
    try:
        cloudpickle.register_pickle_by_value(module)
    except ValueError:
        pass
    yield
    try:
        cloudpickle.unregister_pickle_by_value(module)
    except ValueError:
        pass


# Fixtures that start a Spark application (and every fixture built on them: ``item.fixturenames``
# is the closure of what a test uses): a test that uses one is marked ``spark``, and ``cluster``
# too when it is a standalone cluster. Tests that start Spark by other means (a kernel, a notebook,
# a driver process of their own) carry the mark by hand.
CLUSTER_FIXTURES = frozenset({"standalone_cluster", "feed_cluster", "gpu_standalone"})
SPARK_FIXTURES = frozenset({"local_spark", "local_spark4", "spark_slot", *CLUSTER_FIXTURES})


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & CLUSTER_FIXTURES and "cluster" not in item.keywords:
            item.add_marker(pytest.mark.cluster)
        if (names & SPARK_FIXTURES or "cluster" in item.keywords or "multihost" in item.keywords) \
                and "spark" not in item.keywords:
            item.add_marker(pytest.mark.spark)

    items.sort(key=_order)
    no_gpu = _no_gpu_reason()
    if no_gpu:
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=no_gpu))


def _order(item) -> tuple[int, int]:
    """Tests grouped by the Spark application they need, so that each starts once: local[2] (and
    the tests that start none), local[4], the feed cluster's application, this process's other
    applications on the feed cluster, the standalone cluster's (drivers of their own first, then the
    ``standalone`` application, then the others), then anything else on a cluster (a real GPU's)."""
    names = set(getattr(item, "fixturenames", ()))
    if "feed_standalone" in names:
        return 2, 0
    if "feed_cluster" in names:
        return 3, 0
    if "standalone_cluster" in names:  # drivers of their own, then this process's applications
        return 4, 0 if not names & {"standalone", "spark_slot"} else 1 if "standalone" in names else 2
    if names & CLUSTER_FIXTURES or "cluster" in item.keywords:
        return 5, 0
    return (1 if "local_spark4" in names else 0), 0


def _no_gpu_reason() -> str:
    """Why tests marked ``gpu`` cannot run here ("" when an NVIDIA GPU answers)."""
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no NVIDIA GPU here: nvidia-smi is not installed"
    out = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True)
    if out.returncode or not out.stdout.strip():
        return f"no NVIDIA GPU here: nvidia-smi answered {out.returncode}: {(out.stderr or out.stdout).strip()[:200]}"
    return ""


@pytest.fixture(scope="session")
def spark_slot() -> _SparkSlot:
    """The process's one SparkContext slot, for fixtures of other clusters: ``spark_slot.get(kind, conf)``."""
    return _slot


@pytest.fixture(scope="session")
def standalone_cluster():
    cluster = StandaloneCluster(workers=2, cores=1, gpus_per_worker=2).start()
    yield cluster
    _slot.stop()
    cluster.stop()


@pytest.fixture(scope="session")
def feed_cluster(spark_slot):
    """A standalone cluster of 2 workers x 2 cores, no GPUs: room for two nodes and the Spark tasks
    that feed them (``feed_standalone`` in tests/feed), and for two applications side by side
    (tests/runtime/test_two_applications.py)."""
    cluster = StandaloneCluster(workers=2, cores=2, gpus_per_worker=0).start()
    yield cluster
    spark_slot.stop()
    cluster.stop()


@pytest.fixture
def standalone(standalone_cluster):
    """A SparkSession on the standalone cluster, with both executors registered."""
    spark = _slot.get("standalone", {
        **standalone_cluster.spark_conf(gpus_per_task=1),
        "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
        "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "1",
    })
    _wait_for_executors(spark.sparkContext, standalone_cluster.workers)
    return spark


def _local_conf(cores: int) -> dict[str, str]:
    return {
        "spark.master": f"local[{cores}]",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
    }


@pytest.fixture
def local_spark():
    """A local[2] SparkSession for fast tests."""
    return _slot.get("local", _local_conf(2))


@pytest.fixture
def local_spark4():
    """A local[4] SparkSession, for launches of more than two nodes (ps + chief + worker)."""
    return _slot.get("local4", _local_conf(4))


def _wait_for_executors(sc, n: int, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(backend_for(sc).cluster().executors) >= n:
            return
        time.sleep(0.2)
    raise TimeoutError(f"{n} executors did not register within {timeout}s")


@pytest.fixture
def thread_exceptions():
    """Exceptions that escaped any thread while the test ran (``threading.excepthook``): a test
    that takes this fixture fails if one did."""
    import threading

    caught: list[threading.ExceptHookArgs] = []
    previous = threading.excepthook
    threading.excepthook = caught.append
    yield caught
    threading.excepthook = previous
    assert [f"{a.thread.name if a.thread else '?'}: {a.exc_type.__name__}: {a.exc_value}" for a in caught] == []


def pytest_sessionfinish(session, exitstatus):
    _slot.stop()
