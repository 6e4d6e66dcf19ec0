"""Test harness: a real Spark standalone cluster (master + 2 workers on 127.0.0.1, each offering 4
cores and 4 fake GPU addresses from a discovery script) started once per session from pyspark's own
jars, and a local[2] SparkContext for fast tests. Its usual application has one executor of 1 core
and 1 GPU per worker; fixtures of other layouts start their own application on the same workers.

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
# Every JVM the tests start (drivers, executors, the clusters' daemons, the Spark Connect server)
# lives seconds and moves little data: the client compiler only, the serial collector and no
# verification of the jars' classes start it in about half the CPU (a 2-worker cluster in 7.7 s
# instead of 13.5 s on the 2-core machine). Benchmarks do not run this harness and keep the defaults.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+UnlockDiagnosticVMOptions "
                                          "-XX:-BytecodeVerificationRemote")

from gpuprobe import no_gpu_reason  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from tfos_notebook.devcluster import StandaloneCluster  # noqa: E402
from tfos_notebook.runtime.driver.spark import backend_for  # noqa: E402
from tfos_notebook.runtime.host.timeouts import Deadline  # noqa: E402

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
        self.started = False

    def get(self, kind: str, conf: dict[str, str]):
        from pyspark.sql import SparkSession

        if self.kind == kind and self.spark is not None:
            return self.spark
        if not self.started and kind != "local":
            # The process's first SparkContext starts the JVM with its settings as system properties,
            # which every later context inherits: let that be the plain local one, so that no layout's
            # settings (spark.ssl.enabled, an executor environment...) leak into the next application.
            self.get("local", _local_conf(2))
        self.stop()
        self.started = True
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
# The stack tests run inside a Databricks runtime's stand-in (make test-stacks sets TFOS_STACK).
if not os.environ.get("TFOS_STACK"):
    collect_ignore.append("stacks")


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
CLUSTER_FIXTURES = frozenset({"standalone_cluster", "feed_cluster", "gpu_standalone", "real_gpu_cluster"})
SPARK_FIXTURES = frozenset({"local_spark", "module_local_spark", "local_spark4", "local_ssl_spark", "spark_slot", *CLUSTER_FIXTURES})
#: Under ``pytest -n N --dist loadgroup`` (make test, make check) the tests of this process's Spark
#: slot and of the standalone cluster run in one worker, in ``_order``; every other module (no Spark,
#: or Spark of its own: a kernel, a notebook, fake hosts, Spark Connect, a browser's lab) goes whole
#: (its module-scoped fixtures paid once) to whichever worker is free.
SLOT_GROUP = "spark-slot"
#: Applications on the standalone cluster in spark-tensorflow-distributor's layouts (below).
GPU_LAYOUTS = frozenset({"one_gpu_tasks_standalone", "two_gpu_tasks_standalone", "four_gpu_tasks_standalone"})


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the xdist_group marks added here
def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & CLUSTER_FIXTURES and "cluster" not in item.keywords:
            item.add_marker(pytest.mark.cluster)
        slot = names & SPARK_FIXTURES or "cluster" in item.keywords
        # a host-wide leftover scan that kills (the cleanup magic's test, in the slot) would kill a
        # hostwide test's own processes if the two ran at once
        grouped = slot or "hostwide" in item.keywords
        item.add_marker(pytest.mark.xdist_group(SLOT_GROUP if grouped else item.nodeid.split("::")[0]))
        if (slot or "multihost" in item.keywords) and "spark" not in item.keywords:
            item.add_marker(pytest.mark.spark)

    items.sort(key=_order)
    no_gpu = no_gpu_reason()
    if no_gpu:
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=no_gpu))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """Under ``--dist loadgroup`` a grouped test's id ends in ``@group``; without it xdist deals the
    Spark slot's tests to every worker, each starting its own clusters (pytest-xdist#1386)."""
    if node.config.getvalue("dist") == "loadgroup" and ids and not any("@" in i for i in ids):
        raise pytest.UsageError("pytest-xdist's --dist loadgroup ignores the xdist_group marks with this pytest "
                                f"({pytest.__version__}): install the pytest that pyproject.toml's test extra names")


def _order(item) -> tuple[int, int, str]:
    """Tests grouped by the Spark application they need, so that each starts once: local[2] (and
    the tests that start none), local[2] asking for encryption, local[4], the feed cluster's
    application, this process's other applications on the feed cluster, the standalone cluster's
    (drivers of their own first, then the ``standalone`` application, then the others, then each GPU
    layout's), then anything else on a cluster (a real GPU's)."""
    names = set(getattr(item, "fixturenames", ()))
    if "feed_standalone" in names:
        return 3, 0, ""
    if "feed_cluster" in names:
        return 4, 0, ""
    if names & GPU_LAYOUTS:
        return 5, 3, min(names & GPU_LAYOUTS)
    if "standalone_cluster" in names:  # drivers of their own, then this process's applications
        return 5, 0 if not names & {"standalone", "spark_slot"} else 1 if "standalone" in names else 2, ""
    if names & CLUSTER_FIXTURES or "cluster" in item.keywords:
        return 6, 0, ""
    return (2 if "local_spark4" in names else 1 if "local_ssl_spark" in names else 0), 0, ""


@pytest.fixture(scope="session")
def spark_slot() -> _SparkSlot:
    """The process's one SparkContext slot, for fixtures of other clusters: ``spark_slot.get(kind, conf)``."""
    return _slot


@pytest.fixture(scope="session")
def standalone_cluster():
    cluster = StandaloneCluster(workers=2, cores=4, gpus_per_worker=4).start()
    yield cluster
    _slot.stop()
    cluster.stop()


@pytest.fixture(scope="session")
def feed_cluster(spark_slot):
    """A standalone cluster of 2 workers x 2 cores, no GPUs: room for two nodes and the Spark tasks
    that feed them (``feed_standalone`` in tests/runtime/feed), and for two applications side by side
    (tests/runtime/driver/run/test_two_applications.py)."""
    cluster = StandaloneCluster(workers=2, cores=2, gpus_per_worker=0).start()
    yield cluster
    spark_slot.stop()
    cluster.stop()


@pytest.fixture(scope="session")
def real_gpu_cluster():
    """One standalone worker offering this machine's real GPUs (addresses 0..N-1, the real indices)
    and a core per GPU (tests marked ``gpu`` only: they are skipped where no GPU answers)."""
    import subprocess

    out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                         text=True, check=True).stdout
    count = len([line for line in out.splitlines() if line.strip()])
    cluster = StandaloneCluster(workers=1, cores=count, gpus_per_worker=count).start()
    yield cluster
    _slot.stop()
    cluster.stop()


@pytest.fixture
def standalone(standalone_cluster):
    """A SparkSession on the standalone cluster, with both executors registered."""
    spark = _slot.get("standalone", {
        **standalone_cluster.spark_conf(gpus_per_task=1, executor_cores=1),
        "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
        "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "1",
    })
    _wait_for_executors(spark.sparkContext, standalone_cluster.workers)
    return spark


def _gpu_layout(cluster: StandaloneCluster, gpus_per_task: int, **conf: str):
    """An application with one executor of ``4 // gpus_per_task`` cores and 4 GPUs per worker (and
    4 GPUs for the driver), as in spark-tensorflow-distributor's own tests, every slot registered."""
    cores = 4 // gpus_per_task
    spark = _slot.get(f"std-{gpus_per_task}gpu", {
        **cluster.spark_conf(gpus_per_task, executor_cores=cores, driver_gpus=4),
        "spark.ui.showConsoleProgress": "false", **conf})
    slots = cores * cluster.workers
    if not Deadline(60).wait_until(lambda: backend_for(spark).cluster().total_slots >= slots, interval=0.2):
        raise TimeoutError(f"the executors did not offer {slots} slots within 60s")
    return spark


@pytest.fixture
def one_gpu_tasks_standalone(standalone_cluster):
    """Tasks of 1 GPU, 8 slots; the executors' environment lists the machine's usable GPUs."""
    return _gpu_layout(standalone_cluster, 1, **{"spark.executorEnv.CUDA_VISIBLE_DEVICES": "10,11,12,13"})


@pytest.fixture
def two_gpu_tasks_standalone(standalone_cluster):
    """Tasks of 2 GPUs, 4 slots."""
    return _gpu_layout(standalone_cluster, 2)


@pytest.fixture
def four_gpu_tasks_standalone(standalone_cluster):
    """Tasks of 4 GPUs, 2 slots, on a cluster that asks for encryption, with spark-tensorflow-
    distributor's override that accepts TensorFlow's own unencrypted traffic between tasks."""
    return _gpu_layout(standalone_cluster, 4, **{
        "spark.ssl.enabled": "true", "tensorflow.spark.distributor.ignoreSsl": "true"})


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


@pytest.fixture(scope="module")
def module_local_spark():
    """``local_spark`` for a module whose tests share one run (made by a module-scoped fixture)."""
    return _slot.get("local", _local_conf(2))


@pytest.fixture
def local_ssl_spark():
    """A local[2] SparkSession of a cluster that asks for encrypted traffic (``spark.ssl.enabled``)."""
    return _slot.get("local-ssl", {**_local_conf(2), "spark.ssl.enabled": "true"})


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


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """A real MLflow tracking server over HTTP, with basic auth (see mlflowserver.py), started once
    for the module that uses it and stopped after it, not kept running beside the rest of the session."""
    from mlflowserver import MlflowServer

    server = MlflowServer(str(tmp_path_factory.mktemp("mlflow-server"))).start()
    yield server
    server.stop()


@pytest.fixture
def sqlite_tracking(tmp_path, monkeypatch) -> str:
    """MLflow in this process logs to a local ``sqlite:`` store of the test's own."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


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
