"""The SparkSession a notebook trains on: the active one, or a local one started and announced."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..runtime.launch import ConfigError


def notebook_spark(min_slots: int, say: Callable[[str], None] = print):
    """The notebook's active SparkSession; with none, a ``local[N]`` one (N = max(``min_slots``,
    CPU count)), announced through ``say``.

    Raises:
        ConfigError: the active session is a Spark Connect session, which cannot run barrier jobs.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None and SparkContext._active_spark_context is not None:
        session = SparkSession.builder.getOrCreate()  # the context exists: this only wraps it
    if session is not None:
        try:
            session.sparkContext  # noqa: B018  (Spark Connect sessions raise here)
        except Exception as e:
            raise ConfigError("the active SparkSession is a Spark Connect session, which cannot run the barrier "
                              "jobs training needs: use a classic (single-user) cluster or a local session "
                              f"({type(e).__name__})") from None
        return session
    slots = max(min_slots, os.cpu_count() or 1)
    session = (SparkSession.builder.master(f"local[{slots}]").appName("tfos_notebook")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.showConsoleProgress", "false")  # the monitor shows progress
               .getOrCreate())
    say(f"[tfos] no active SparkSession: started a local one (local[{slots}]). To train on a cluster, "
        "create a SparkSession for it before %%tfos_train.")
    return session
