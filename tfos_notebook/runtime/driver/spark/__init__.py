"""The one seam between tfos_notebook and Spark (see :mod:`.backend` for the interface), and the
functions that find the backend of a SparkContext or session."""

from __future__ import annotations

from typing import Any

from ...host.versions import require_pyspark

#: The pyspark this process runs (checked here, where the package first needs Spark: a missing or
#: too old pyspark is refused with the fix before anything is launched).
PYSPARK_VERSION = require_pyspark()

from .backend import (  # noqa: E402
    BarrierFn,
    ClusterView,
    DataBarrierFn,
    ExecutorInfo,
    SparkBackend,
    SparkJob,
    is_connect,
)
from .classic import ClassicBackend  # noqa: E402
from .connect import ConnectBackend, DriverUnreachable  # noqa: E402
from .errors import error_summary  # noqa: E402
from .hadoopfs import HadoopFileSystem  # noqa: E402

__all__ = ["BarrierFn", "ClassicBackend", "ClusterView", "ConnectBackend", "DataBarrierFn", "DriverUnreachable",
           "ExecutorInfo", "HadoopFileSystem", "SparkBackend", "SparkJob", "active_backend", "active_session",
           "backend_for", "error_summary", "is_connect"]


def backend_for(spark: Any) -> SparkBackend:
    """The backend of ``spark``: a SparkContext, a classic or Spark Connect SparkSession, or a
    backend already.

    Raises:
        TypeError: ``spark`` is none of these."""
    if isinstance(spark, SparkBackend):
        return spark
    if is_connect(spark):
        return ConnectBackend.of(spark)
    return ClassicBackend.of(spark)


def active_backend() -> SparkBackend | None:
    """The backend of the active SparkSession / SparkContext of this process (a classic one first,
    then a Spark Connect session), or None."""
    return ClassicBackend.active() or ConnectBackend.active()


def active_session() -> Any | None:
    """This process's active SparkSession (classic or Spark Connect), or None. An active
    SparkContext without a session is wrapped in one (that starts nothing new)."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        backend = active_backend()
        if isinstance(backend, ConnectBackend):
            return backend.session
        if backend is not None:
            session = SparkSession.builder.getOrCreate()
    return session
