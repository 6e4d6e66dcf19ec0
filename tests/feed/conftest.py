"""An application with room to feed on the session's standalone cluster: 2 executors x 2 cores, so
that two nodes and the Spark tasks feeding them run at once (the usual ``standalone`` application
has one core per executor, all of which two nodes hold)."""

from __future__ import annotations

import time

import pytest

from tfos_notebook.runtime.driver.spark import backend_for

SLOTS = 4


@pytest.fixture
def feed_standalone(standalone_cluster, spark_slot):
    """A SparkSession on the session's cluster with both executors (4 task slots, no GPUs) registered."""
    spark = spark_slot.get("feed", {**standalone_cluster.spark_conf(gpus_per_task=0, executor_cores=SLOTS // 2),
                                    "spark.ui.showConsoleProgress": "false"})
    deadline = time.monotonic() + 60
    while backend_for(spark).cluster().total_slots < SLOTS:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the feed application did not offer {SLOTS} task slots within 60s")
        time.sleep(0.2)
    return spark
