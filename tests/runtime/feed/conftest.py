"""An application on the session's feed cluster (``feed_cluster`` in tests/conftest.py: 2 workers
x 2 cores), so that two nodes and the Spark tasks feeding them run at once (the session's
``standalone`` cluster has one core per worker, all of which two nodes hold)."""

from __future__ import annotations

import time

import pytest

from tfos_notebook.runtime.driver.spark import backend_for

SLOTS = 4


@pytest.fixture
def feed_standalone(feed_cluster, spark_slot):
    """A SparkSession on the feed cluster with both executors (4 task slots) registered."""
    spark = spark_slot.get("feed", {**feed_cluster.spark_conf(gpus_per_task=0),
                                    "spark.ui.showConsoleProgress": "false"})
    deadline = time.monotonic() + 60
    while backend_for(spark).cluster().total_slots < SLOTS:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the feed cluster did not offer {SLOTS} task slots within 60s")
        time.sleep(0.2)
    return spark
