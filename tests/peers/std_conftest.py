"""The fixtures that spark-tensorflow-distributor's integration tests ask for (``num_workers``,
``num_gpus_per_worker``, ``extra_spark_configs``, ``spark_session``), on tfos_notebook's standalone
dev cluster instead of the original's docker-compose cluster.

test_std_integration.py copies this file as ``conftest.py`` beside the original test file. Each
group of tests gets a cluster of ``num_workers`` workers advertising ``num_gpus_per_worker`` fake
GPUs (4 cores each), and a session configured from the original's own ``spark-base.conf`` (read
from ``STD_SOURCE_TREE``; its master and discovery scripts replaced by this cluster's) with the
group's extra settings on top, as the original's harness does.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tfos_notebook.devcluster import StandaloneCluster, gpu_discovery_script

CORES_PER_WORKER = 4  # the original's largest layout: one executor of 4 cores per worker


def _param(request, name: str):
    if not hasattr(request, "param"):
        raise pytest.UsageError(f"{request.node.name} does not set {name}, which every test here must")
    return request.param


@pytest.fixture(scope="session", autouse=True)
def num_workers(request) -> int:
    return _param(request, "num_workers")


@pytest.fixture(scope="session", autouse=True)
def num_gpus_per_worker(request) -> int:
    return _param(request, "num_gpus_per_worker")


@pytest.fixture(scope="session")
def extra_spark_configs(request) -> dict:
    return getattr(request, "param", {})


class Clusters:
    """One cluster at a time, started again only when the number of workers or GPUs changes."""

    def __init__(self) -> None:
        self.cluster: StandaloneCluster | None = None
        self.shape: tuple[int, int] | None = None

    def get(self, workers: int, gpus: int) -> StandaloneCluster:
        if self.shape != (workers, gpus):
            self.stop()
            self.cluster = StandaloneCluster(workers=workers, cores=CORES_PER_WORKER, gpus_per_worker=gpus).start()
            self.shape = (workers, gpus)
        return self.cluster

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        self.cluster = self.shape = None


@pytest.fixture(scope="session")
def clusters():
    # The process's first SparkContext starts the JVM with its settings as system properties, which
    # every later one inherits: a plain one first, so that no group's settings leak into the next.
    SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate().stop()
    held = Clusters()
    yield held
    held.stop()


def base_conf(cluster: StandaloneCluster, gpus: int) -> dict[str, str]:
    """The original's spark-base.conf, pointed at ``cluster`` (its master, its discovery script)."""
    script = str(gpu_discovery_script(cluster.root, gpus))
    conf = {}
    path = Path(os.environ["STD_SOURCE_TREE"]) / "tests" / "integration" / "spark_conf" / "spark-base.conf"
    for line in path.read_text().splitlines():
        if line.strip():
            key, value = line.split(None, 1)
            conf[key] = script if key.endswith(".discoveryScript") else value.strip()
    conf["spark.master"] = cluster.master_url
    return conf


@pytest.fixture(scope="session", autouse=True)
def spark_session(clusters, num_workers, num_gpus_per_worker, extra_spark_configs):
    cluster = clusters.get(num_workers, num_gpus_per_worker)
    conf = {**cluster.spark_conf(gpus_per_task=0), **base_conf(cluster, num_gpus_per_worker),
            **{k: str(v) for k, v in extra_spark_configs.items()}}
    builder = SparkSession.builder.appName("spark-tensorflow-distributor integration tests")
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    yield session
    session.stop()
