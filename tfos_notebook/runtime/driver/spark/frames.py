"""A DataFrame as the in-stage feed's barrier stage reads it, made in the JVM: planned so that
its Arrow batches hold at most a feed frame's bytes (``batched_by_bytes``), and, cached, gathered
from its own cache into one partition per node (``gathered_frame``: the column batches Spark SQL
keeps it in, grouped as ``gather.py`` groups an RDD's blocks, read back into rows as the cache's
own scan reads them; no shuffle, and the DataFrame's plan is not run again). These reach Spark
SQL's internal classes: where a Spark has them otherwise, the DataFrame is taken as it is (its
Arrow batches) or dealt by a shuffle (its cache)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .gather import gathered

log = logging.getLogger(__name__)


def arrow_frame(session: Any, table: Any) -> Any:
    """The Arrow ``table`` as a DataFrame of ``session``, moved through Arrow: Spark 4 and Spark
    Connect take the table itself; classic Spark 3.5 takes none, so it goes as a pandas frame with
    Arrow on for pandas, in a copy of the session (the same context and cache; plain Spark 3.5 has
    that setting off, and would convert row by row), the user's session left as it is."""
    from .backend import is_connect

    if is_connect(session) or int(session.version.split(".")[0]) >= 4:
        return session.createDataFrame(table)
    from pyspark.sql.pandas.types import from_arrow_schema

    arrowed = session.newSession()
    arrowed.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    return arrowed.createDataFrame(table.to_pandas(), from_arrow_schema(table.schema))


def batched_by_bytes(df: Any, max_bytes: int) -> Any:
    """``df`` planned in a copy of its session whose Arrow batches for Python hold at most
    ``max_bytes`` (``spark.sql.execution.arrow.maxBytesPerBatch``; a smaller one of the user's is
    kept), so that a barrier ``mapInArrow`` over it hands its tasks batches of the size a node's
    feed sends on, not of 10,000 rows whatever their width (31 MB of 784-float rows, gigabytes
    of images): the first rows reach the node sooner, and a task holds one such batch at a time.
    The user's session and its settings are left as they are; the copy shares its cache. A Spark
    before 4.0 has no such setting (its batches are counted in rows alone): ``df`` as it is."""
    from pyspark.sql import DataFrame

    key = "spark.sql.execution.arrow.maxBytesPerBatch"
    jdf = df._jdf
    jsession = jdf.sparkSession()
    try:
        limit = jsession.sessionState().conf().arrowMaxBytesPerBatch()
    except Exception as e:  # py4j's error for a method this Spark does not have
        log.debug("this Spark has no %s (%s): the barrier stage takes Spark's own batches", key, e)
        return df
    session = jsession.cloneSession()
    session.conf().set(key, str(min(limit, max_bytes)))
    rebound = df.sparkSession._jvm.org.apache.spark.sql.classic.Dataset.ofRows(session, jdf.logicalPlan())
    return DataFrame(rebound, df.sparkSession)


def frame_cache(df: Any) -> Any | None:
    """The cache that holds ``df`` whole (Spark SQL's ``InMemoryRelation``, the one ``df.cache()``
    made), or None: ``df`` is not cached as it is, or this Spark has no such internal API."""
    try:
        cached = df._jdf.sparkSession().sharedState().cacheManager().lookupCachedData(df._jdf)
        return cached.get().cachedRepresentation() if cached.isDefined() else None
    except Exception as e:
        log.debug("cannot look up the DataFrame's cache (%s): its rows are dealt by a shuffle", e)
        return None


def cache_batches(cache: Any) -> Any:
    """A DataFrame cache's column batches (Spark SQL's ``CachedBatch`` blocks), as a JavaRDD."""
    buffers = cache.cacheBuilder().cachedColumnBuffers()
    return buffers.toJavaRDD()


def gathered_frame(sc: Any, as_json: Callable[[Any], Any], df: Any, cache: Any, n: int,
                   task_cpus: int = 1) -> tuple[Any, Any] | None:
    """``df``, held whole by ``cache``, as ``n`` partitions gathered from the cache's own column
    batches (``gathered``): the DataFrame that reads the copy (rows made from its batches as the
    cache's scan makes them), and the copy; None (logged, the copy let go of) where this Spark's
    internal API differs."""
    from pyspark.sql import DataFrame

    copy = gathered(sc, as_json, cache_batches(cache), n, task_cpus)
    try:
        jsession, output = df._jdf.sparkSession(), cache.output()
        rows = cache.cacheBuilder().serializer().convertCachedBatchToInternalRow(
            copy.rdd(), output, output, jsession.sessionState().conf())
        return DataFrame(jsession.internalCreateDataFrame(rows, df._jdf.schema(), False), df.sparkSession), copy
    except Exception as e:
        copy.unpersist(False)
        log.warning("cannot read the cached DataFrame's batches back (%s): its rows are dealt by a shuffle", e)
        return None
