"""The SparkSession a notebook trains on: the active one, or a local one started and announced."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..runtime.driver.spark import active_session


def notebook_spark(min_slots: int, say: Callable[[str], None] = print):
    """The notebook's active SparkSession (classic or Spark Connect); with none, a ``local[N]`` one
    (N = max(``min_slots``, CPU count)), announced through ``say``."""
    from pyspark.sql import SparkSession

    session = active_session()
    if session is not None:
        return session
    slots = max(min_slots, os.cpu_count() or 1)
    session = (SparkSession.builder.master(f"local[{slots}]").appName("tfos_notebook")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.showConsoleProgress", "false")  # the monitor shows progress
               .getOrCreate())
    say(f"[tfos] no active SparkSession: started a local one (local[{slots}]). To train on a cluster, "
        "create a SparkSession for it before %%tfos_train.")
    return session
